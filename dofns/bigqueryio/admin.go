// BigQuery's set-up. This file prepares BigQuery before a run and builds client options
// that honour the emulator environment variables.
//
// EnsureTable runs once at launch: it creates the dataset and the table of
// the spec's bigquery section when they are missing, adds NULLABLE columns
// the spec has and the table lacks, and fails with an error naming the
// table, the column and the fix when the table cannot take the spec's rows,
// so a mismatch stops the launch instead of dead-lettering every row of the
// job.

package bigqueryio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// Environment variables naming BigQuery emulators, as host:port.
const (
	// EmulatorHostEnv points the REST API (datasets, tables, insertAll) at
	// an emulator, e.g. 127.0.0.1:9050.
	EmulatorHostEnv = "BIGQUERY_EMULATOR_HOST"
	// StorageEmulatorHostEnv points the Storage Write and Storage Read
	// gRPC APIs at an emulator, e.g. 127.0.0.1:9060.
	StorageEmulatorHostEnv = "BIGQUERY_STORAGE_EMULATOR_HOST"
)

// timeout bounds how long EnsureTable waits for BigQuery to answer.
const timeout = 10 * time.Second

// errUnreachable means BigQuery did not answer in time.
var errUnreachable = errors.New("bigquery unreachable")

// ClientOptions returns the options for cloud.google.com/go/bigquery.NewClient:
// with BIGQUERY_EMULATOR_HOST set, the emulator's REST endpoint without
// authentication; otherwise none (Cloud BigQuery with default credentials).
func ClientOptions() []option.ClientOption {
	h := os.Getenv(EmulatorHostEnv)
	if h == "" {
		return nil
	}
	if !strings.Contains(h, "://") {
		h = "http://" + h
	}
	return []option.ClientOption{option.WithEndpoint(h), option.WithoutAuthentication()}
}

// WriterOptions returns the options for the Storage Write and Read clients: with
// BIGQUERY_STORAGE_EMULATOR_HOST set, the emulator's gRPC endpoint without
// authentication over an insecure connection; otherwise none.
func writerOptions() []option.ClientOption {
	h := os.Getenv(StorageEmulatorHostEnv)
	if h == "" {
		return nil
	}
	return []option.ClientOption{
		option.WithEndpoint(h),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// Endpoint names the REST endpoint ClientOptions points at, for messages.
func endpoint() string {
	if h := os.Getenv(EmulatorHostEnv); h != "" {
		return "the BigQuery emulator at " + h + " (" + EmulatorHostEnv + ")"
	}
	return "BigQuery (https://bigquery.googleapis.com)"
}

// WriterEndpoint names the gRPC endpoint WriterOptions points at, for
// messages.
func WriterEndpoint() string {
	if h := os.Getenv(StorageEmulatorHostEnv); h != "" {
		return "the BigQuery Storage emulator at " + h + " (" + StorageEmulatorHostEnv + ")"
	}
	return "the BigQuery Storage Write API (bigquerystorage.googleapis.com:443)"
}

// FieldType maps a spec column type (STRING, FLOAT64, INT64, BOOL,
// TIMESTAMP, BYTES) to the client's field type.
func fieldType(t string) bigquery.FieldType {
	switch t {
	case "FLOAT64":
		return bigquery.FloatFieldType
	case "INT64":
		return bigquery.IntegerFieldType
	case "BOOL":
		return bigquery.BooleanFieldType
	}
	return bigquery.FieldType(t)
}

// canonical maps standard SQL type names to the legacy names the REST API
// reports, so types compare equal however they were written.
func canonical(t bigquery.FieldType) bigquery.FieldType {
	switch strings.ToUpper(string(t)) {
	case "FLOAT64", "FLOAT":
		return bigquery.FloatFieldType
	case "INT64", "INTEGER":
		return bigquery.IntegerFieldType
	case "BOOL", "BOOLEAN":
		return bigquery.BooleanFieldType
	case "STRUCT", "RECORD":
		return bigquery.RecordFieldType
	}
	return bigquery.FieldType(strings.ToUpper(string(t)))
}

// Schema is the table schema of bq's columns.
func schema(bq *schemas.BigQuerySpec) bigquery.Schema {
	var s bigquery.Schema
	for _, c := range bq.Columns {
		s = append(s, &bigquery.FieldSchema{Name: c.Name, Type: fieldType(c.Type), Required: c.Mode == "REQUIRED"})
	}
	return s
}

// TableMetadata is the metadata a new table gets: the spec's schema, time
// partitioning, clustering, and primary key (NOT ENFORCED) with its
// max_staleness.
func tableMetadata(bq *schemas.BigQuerySpec) *bigquery.TableMetadata {
	md := &bigquery.TableMetadata{Schema: schema(bq)}
	if len(bq.PrimaryKey) > 0 {
		md.TableConstraints = &bigquery.TableConstraints{PrimaryKey: &bigquery.PrimaryKey{Columns: append([]string(nil), bq.PrimaryKey...)}}
		md.MaxStaleness = bigquery.IntervalValueFromDuration(bq.Staleness())
	}
	if p := bq.TimePartitioning; p != nil {
		md.TimePartitioning = &bigquery.TimePartitioning{Type: bigquery.TimePartitioningType(p.Type), Field: p.Field}
	}
	if len(bq.Clustering) > 0 {
		md.Clustering = &bigquery.Clustering{Fields: append([]string(nil), bq.Clustering...)}
	}
	return md
}

// EnsureTable creates the dataset and table of spec's BigQuery section when
// missing (with DAY partitioning and clustering from the spec), adds
// NULLABLE columns the spec has and the table lacks, and fails with a clear
// error when the table cannot take the spec's rows. With create false,
// nothing is created or changed and anything missing is an error. It gives
// up when BigQuery does not answer before ctx's deadline (or timeout).
//
// bq describes the table: a spec's BigQuery section, or another table the
// pipeline writes (the hourly rollups). Every call is retried on transient
// errors until ctx's deadline, or timeout without one.
func EnsureTable(ctx context.Context, project, dataset, table string, bq *schemas.BigQuerySpec, create bool) error {
	_, err := EnsureTableNotes(ctx, project, dataset, table, bq, create)
	return err
}

// EnsureTableNotes is EnsureTable, also returning one warning line for
// each column of an existing table that the spec does not write
// (UnwrittenColumns).
func EnsureTableNotes(ctx context.Context, project, dataset, table string, bq *schemas.BigQuerySpec, create bool) (notes []string, err error) {
	if bq == nil {
		return nil, fmt.Errorf("bigquery: no table description (the spec has no bigquery section)")
	}
	ref := fmt.Sprintf("%s:%s.%s", project, dataset, table)
	err = ensureTable(ctx, project, dataset, table, bq, create, func(have bigquery.Schema) {
		notes = unwrittenColumns(ref, have, bq)
	})
	return notes, err
}

// UnwrittenColumns is a warning line for each column of table ref (its
// schema have) that the spec's bq does not write: the rows a run writes,
// new or rewritten (an upsert replaces a whole row), have it NULL.
func unwrittenColumns(ref string, have bigquery.Schema, bq *schemas.BigQuerySpec) []string {
	written := map[string]bool{}
	for _, c := range bq.Columns {
		written[strings.ToLower(c.Name)] = true
	}
	var out []string
	for _, f := range have {
		if !written[strings.ToLower(f.Name)] && !f.Required {
			out = append(out, fmt.Sprintf("warning: bigquery table %s has column %s, which the spec no longer writes: rows this run writes or rewrites will have it NULL (keep it in the spec's bigquery columns, or drop it: ALTER TABLE %s DROP COLUMN %s)",
				ref, f.Name, sqlRef(ref), f.Name))
		}
	}
	return out
}

func ensureTable(ctx context.Context, project, dataset, table string, bq *schemas.BigQuerySpec, create bool, seen func(bigquery.Schema)) error {
	if project == "" || dataset == "" || table == "" {
		return fmt.Errorf("bigquery: project, dataset and table are required (got %q, %q, %q)", project, dataset, table)
	}
	ref := fmt.Sprintf("%s:%s.%s", project, dataset, table)
	c, err := bigquery.NewClient(ctx, project, ClientOptions()...)
	if err != nil {
		return fmt.Errorf("bigquery client for %s: %w", endpoint(), err)
	}
	defer c.Close()
	limit := timeout
	if dl, ok := ctx.Deadline(); ok {
		// The caller's deadline: the launcher's --startup_timeout.
		limit = time.Until(dl).Round(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	wrap := func(op string, err error) error { return describe(ctx, op, limit, err) }
	// Every call is retried on transient errors within the limit.
	call := func(fn func(context.Context) error) error {
		return retry.Do(ctx, retry.Policy{Deadline: limit, AttemptTimeout: limit}, fn)
	}

	ds := c.Dataset(dataset)
	if err := call(func(ctx context.Context) error { _, err := ds.Metadata(ctx); return err }); err != nil {
		switch {
		case !notFound(err):
			return wrap(fmt.Sprintf("bigquery dataset %s:%s", project, dataset), err)
		case !create:
			return fmt.Errorf("bigquery dataset %s:%s does not exist: create it (bq mk --dataset %s:%s) or run with --create_tables=true", project, dataset, project, dataset)
		}
		if err := call(func(ctx context.Context) error { return ds.Create(ctx, &bigquery.DatasetMetadata{}) }); err != nil && !alreadyExists(err) {
			return wrap(fmt.Sprintf("create bigquery dataset %s:%s", project, dataset), err)
		}
	}
	t := ds.Table(table)
	var md *bigquery.TableMetadata
	err = call(func(ctx context.Context) (err error) { md, err = t.Metadata(ctx); return err })
	if err != nil {
		switch {
		case !notFound(err):
			return wrap("bigquery table "+ref, err)
		case !create:
			return fmt.Errorf("bigquery table %s does not exist: create it (bq mk --table with the columns of table %s in the spec) or run with --create_tables=true", ref, bq.Table)
		}
		err = call(func(ctx context.Context) error { return t.Create(ctx, tableMetadata(bq)) })
		if err == nil {
			return nil
		}
		if !alreadyExists(err) {
			return wrap("create bigquery table "+ref, err)
		}
		// Created concurrently: check what is there.
		if err := call(func(ctx context.Context) (err error) { md, err = t.Metadata(ctx); return err }); err != nil {
			return wrap("bigquery table "+ref, err)
		}
	}
	seen(md.Schema)
	// A schema update needs the table's current ETag; a concurrent change
	// fails the precondition, so re-read and try again.
	for attempt := 0; ; attempt++ {
		add, err := checkSchema(ref, md.Schema, bq, create)
		if err != nil || len(add) == 0 {
			return err
		}
		schema := append(append(bigquery.Schema(nil), md.Schema...), add...)
		_, err = t.Update(ctx, bigquery.TableMetadataToUpdate{Schema: schema}, md.ETag)
		if err == nil {
			return nil
		}
		if !hasCode(err, http.StatusPreconditionFailed) || attempt == 2 {
			return wrap(fmt.Sprintf("add columns %s to bigquery table %s", names(add), ref), err)
		}
		if err := call(func(ctx context.Context) (err error) { md, err = t.Metadata(ctx); return err }); err != nil {
			return wrap("bigquery table "+ref, err)
		}
	}
}

// CheckSchema compares an existing table's schema with spec's columns. It
// returns the NULLABLE columns the table lacks (to be added: BigQuery allows
// that), or an error naming the table (ref), the column and the fix when
// rows written by spec would be rejected: a missing REQUIRED column, a type
// or mode mismatch, or a REQUIRED table column the spec does not write.
// With add false, a missing NULLABLE column is an error too.
func checkSchema(ref string, have bigquery.Schema, bq *schemas.BigQuerySpec, add bool) (bigquery.Schema, error) {
	byName := make(map[string]*bigquery.FieldSchema, len(have))
	for _, f := range have {
		byName[strings.ToLower(f.Name)] = f
	}
	var (
		missing  bigquery.Schema
		problems []string
		written  = map[string]bool{}
	)
	for _, c := range bq.Columns {
		written[strings.ToLower(c.Name)] = true
		want := fieldType(c.Type)
		required := c.Mode == "REQUIRED"
		f := byName[strings.ToLower(c.Name)]
		switch {
		case f == nil && required:
			problems = append(problems, fmt.Sprintf("column %s (%s REQUIRED) is missing, and BigQuery cannot add a REQUIRED column to an existing table: make it NULLABLE in the spec so it can be added, or recreate the table (or write to a new one with --bigquery_table)", c.Name, c.Type))
		case f == nil && !add:
			problems = append(problems, fmt.Sprintf("column %s (%s NULLABLE) is missing: add it (ALTER TABLE %s ADD COLUMN %s %s) or run with --create_tables=true", c.Name, c.Type, sqlRef(ref), c.Name, c.Type))
		case f == nil:
			missing = append(missing, &bigquery.FieldSchema{Name: c.Name, Type: want})
		case f.Repeated || canonical(f.Type) != canonical(want):
			mode := ""
			if f.Repeated {
				mode = " REPEATED"
			}
			problems = append(problems, fmt.Sprintf("column %s is %s%s in the table but %s in the spec: change the spec's type to match, or write to a new table with --bigquery_table", c.Name, f.Type, mode, c.Type))
		case f.Required && !required:
			problems = append(problems, fmt.Sprintf("column %s is REQUIRED in the table but NULLABLE in the spec, so rows without it would be rejected: make it REQUIRED in the spec, or relax it (ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL)", c.Name, sqlRef(ref), c.Name))
		}
	}
	for _, f := range have {
		if f.Required && !written[strings.ToLower(f.Name)] {
			problems = append(problems, fmt.Sprintf("column %s is REQUIRED in the table but the spec does not write it, so every row would be rejected: add it to the spec's bigquery columns, or relax it (ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL)", f.Name, sqlRef(ref), f.Name))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("bigquery table %s cannot take the rows of the spec's table %s: %s", ref, bq.Table, strings.Join(problems, "; "))
	}
	return missing, nil
}

// EnsurePrimaryKey fails, with CheckPrimaryKey's error, when the table
// does not have the primary key of spec's table, which the upsert write
// method needs. It gives up after timeout when BigQuery does not answer.
func EnsurePrimaryKey(ctx context.Context, project, dataset, table string, bq *schemas.BigQuerySpec) error {
	ref := fmt.Sprintf("%s:%s.%s", project, dataset, table)
	c, err := bigquery.NewClient(ctx, project, ClientOptions()...)
	if err != nil {
		return fmt.Errorf("bigquery client for %s: %w", endpoint(), err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	md, err := c.Dataset(dataset).Table(table).Metadata(ctx)
	if err != nil {
		return describe(ctx, "bigquery table "+ref, timeout, err)
	}
	return checkPrimaryKey(ref, md, bq)
}

// CheckPrimaryKey compares an existing table's primary key with spec's
// table's. A table without one gets an error naming the ALTER TABLE that
// adds it; a table with another key, one saying why it cannot be used.
func checkPrimaryKey(ref string, md *bigquery.TableMetadata, bq *schemas.BigQuerySpec) error {
	want := strings.Join(bq.PrimaryKey, ", ")
	if len(bq.PrimaryKey) == 0 {
		return fmt.Errorf("bigquery table %s: the spec's table %s has no primary_key, which the upsert write method needs: add primary_key to the spec's bigquery section, or use --bigquery_write_method=storage_write", ref, bq.Table)
	}
	var have []string
	if tc := md.TableConstraints; tc != nil && tc.PrimaryKey != nil {
		have = tc.PrimaryKey.Columns
	}
	if len(have) == 0 {
		return fmt.Errorf("bigquery table %s has no primary key, which --bigquery_write_method=upsert needs: run ALTER TABLE %s ADD PRIMARY KEY (%s) NOT ENFORCED, or write with --bigquery_write_method=storage_write", ref, sqlRef(ref), want)
	}
	if !strings.EqualFold(strings.Join(have, ", "), want) {
		return fmt.Errorf("bigquery table %s has primary key (%s) but the spec's is (%s), so upserts would replace the wrong rows: write to a new table with --bigquery_table, or recreate this one", ref, strings.Join(have, ", "), want)
	}
	return nil
}

// sqlRef turns project:dataset.table into `project.dataset.table`.
func sqlRef(ref string) string { return "`" + strings.Replace(ref, ":", ".", 1) + "`" }

func names(s bigquery.Schema) string {
	var out []string
	for _, f := range s {
		out = append(out, f.Name)
	}
	return strings.Join(out, ", ")
}

func notFound(err error) bool { return hasCode(err, http.StatusNotFound) }

func alreadyExists(err error) bool { return hasCode(err, http.StatusConflict) }

func hasCode(err error, code int) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == code
}

// describe wraps an error of op, telling an unanswered request (the
// endpoint is down or unreachable) from an answer BigQuery gave.
func describe(ctx context.Context, op string, limit time.Duration, err error) error {
	var (
		ge *googleapi.Error
		ue *url.Error
		ne net.Error
	)
	switch {
	case errors.As(err, &ge):
		return fmt.Errorf("%s: %w", op, err)
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ue) || errors.As(err, &ne):
		return fmt.Errorf("%s: %w: no answer from %s within %v: %w", op, errUnreachable, endpoint(), limit, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
