package bqemu

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	bq "google.golang.org/api/bigquery/v2"
)

// dataset is one BigQuery dataset and its tables.
type dataset struct {
	meta   *bq.Dataset
	tables map[string]*table
}

// table is one BigQuery table: its metadata and its rows, grouped by
// partition.
type table struct {
	project, dataset, id string

	meta          *bq.Table // schema normalized; numRows etc. filled on read
	schemaVersion int
	etagSeq       int64

	partitions map[string]*partition
	numRows    int64
	numBytes   int64
	seq        int64
	insertIDs  map[string]struct{}
	deleted    bool

	// pk holds the primary key's column indexes (nil: no primary key) and
	// keys the index of its values (see cdc.go).
	pk   []int
	keys map[string]*keyEntry
}

// partition holds the rows of one partition in insertion order.
type partition struct {
	rows []storedRow
}

// storedRow is one row. values is aligned with the table schema at the time
// the row was written; columns added later read as NULL.
type storedRow struct {
	seq    int64
	values []any
}

func datasetKey(project, ds string) string { return project + "/" + ds }

func tableName(project, ds, tbl string) string {
	return fmt.Sprintf("%s:%s.%s", project, ds, tbl)
}

func tableParent(project, ds, tbl string) string {
	return fmt.Sprintf("projects/%s/datasets/%s/tables/%s", project, ds, tbl)
}

// lookupTableLocked returns the table or nil.
func (s *Server) lookupTableLocked(project, ds, tbl string) *table {
	d := s.datasets[datasetKey(project, ds)]
	if d == nil {
		return nil
	}
	return d.tables[tbl]
}

// fields returns the table's top-level schema fields.
func (t *table) fields() []*bq.TableFieldSchema {
	if t.meta.Schema == nil {
		return nil
	}
	return t.meta.Schema.Fields
}

func (t *table) etag() string {
	return fmt.Sprintf("\"%s-%d\"", t.id, t.etagSeq)
}

// addRowsLocked stores rows that have already been validated against the
// table schema, as plain inserts. partIDs[i] is the partition of rows[i].
func (t *table) addRowsLocked(rows [][]any, partIDs []string) {
	t.applyLocked(rows, partIDs, nil)
}

// allRowsLocked returns all rows ordered by partition ID, then insertion
// order within a partition.
func (t *table) allRowsLocked() []storedRow {
	ids := make([]string, 0, len(t.partitions))
	for id := range t.partitions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]storedRow, 0, t.numRows)
	for _, id := range ids {
		out = append(out, t.partitions[id].rows...)
	}
	return out
}

func estimateSize(vals []any) int {
	n := 0
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
		case string:
			n += len(x) + 2
		case []byte:
			n += len(x)
		case []any:
			n += estimateSize(x)
		case bool:
			n++
		default:
			n += 8
		}
	}
	return n
}

// Partitioning.

const (
	nullPartition          = "__NULL__"
	unpartitionedPartition = "__UNPARTITIONED__"
	// streamingPastLimit and streamingFutureLimit bound the values of the
	// partitioning column for streamed rows.
	streamingPastDays   = 3650
	streamingFutureDays = 365
)

// partitionOf computes the partition ID of a validated row and checks the
// streaming time window. The returned error message is BigQuery's.
func partitionOf(meta *bq.Table, row []any, now time.Time) (string, error) {
	tp := meta.TimePartitioning
	if tp == nil {
		return unpartitionedPartition, nil
	}
	typ := tp.Type
	if typ == "" {
		typ = "DAY"
	}
	var ts time.Time
	if tp.Field == "" {
		ts = now.UTC() // ingestion-time partitioning
	} else {
		fields := meta.Schema.Fields
		idx := fieldIndex(fields, tp.Field)
		if idx < 0 || idx >= len(row) || row[idx] == nil {
			return nullPartition, nil
		}
		f := fields[idx]
		var err error
		ts, err = valueTime(f.Type, row[idx])
		if err != nil {
			return "", err
		}
		lo := now.AddDate(0, 0, -streamingPastDays)
		hi := now.AddDate(0, 0, streamingFutureDays)
		if ts.Before(lo) || ts.After(hi) {
			return "", fmt.Errorf("value %s for field %s of the destination table %s is outside the allowed bounds. You can only stream to date range within %d days in the past and %d days in the future relative to the current date",
				formatScalarForMessage(f.Type, row[idx]), f.Name, meta.Id, streamingPastDays, streamingFutureDays)
		}
	}
	ts = ts.UTC()
	switch typ {
	case "HOUR":
		return ts.Format("2006010215"), nil
	case "MONTH":
		return ts.Format("200601"), nil
	case "YEAR":
		return ts.Format("2006"), nil
	default:
		return ts.Format("20060102"), nil
	}
}

// Schema handling.

var (
	fieldNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,299}$`)
	datasetNameRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	tableNameRE   = regexp.MustCompile(`^[\p{L}\p{M}\p{N}\p{Pc}\p{Pd}\p{Zs}]+$`)
)

// canonicalType maps standard SQL type names to the legacy names BigQuery
// reports in table schemas.
func canonicalType(t string) (string, bool) {
	switch strings.ToUpper(t) {
	case "STRING":
		return "STRING", true
	case "BYTES":
		return "BYTES", true
	case "INTEGER", "INT64":
		return "INTEGER", true
	case "FLOAT", "FLOAT64":
		return "FLOAT", true
	case "NUMERIC", "DECIMAL":
		return "NUMERIC", true
	case "BIGNUMERIC", "BIGDECIMAL":
		return "BIGNUMERIC", true
	case "BOOLEAN", "BOOL":
		return "BOOLEAN", true
	case "TIMESTAMP":
		return "TIMESTAMP", true
	case "DATE":
		return "DATE", true
	case "TIME":
		return "TIME", true
	case "DATETIME":
		return "DATETIME", true
	case "GEOGRAPHY":
		return "GEOGRAPHY", true
	case "JSON":
		return "JSON", true
	case "INTERVAL":
		return "INTERVAL", true
	case "RECORD", "STRUCT":
		return "RECORD", true
	case "RANGE":
		return "RANGE", true
	}
	return "", false
}

// normalizeSchema validates fields and normalizes types and modes in place.
func normalizeSchema(fields []*bq.TableFieldSchema, path string, depth int) error {
	if depth > 15 {
		return fmt.Errorf("field %s: schema nesting exceeds 15 levels", path)
	}
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if f == nil {
			return fmt.Errorf("empty field in schema")
		}
		full := joinPath(path, f.Name)
		if !fieldNameRE.MatchString(f.Name) {
			return fmt.Errorf("invalid field name %q. Fields must contain only letters, numbers, and underscores, start with a letter or underscore, and be at most 300 characters long", f.Name)
		}
		if prefix, ok := reservedColumnName(f.Name); ok && depth == 0 {
			return fmt.Errorf("invalid field name %q. Field names cannot start with the reserved prefix %s", f.Name, prefix)
		}
		low := strings.ToLower(f.Name)
		if seen[low] {
			return fmt.Errorf("field %s already exists in schema", full)
		}
		seen[low] = true
		typ, ok := canonicalType(f.Type)
		if !ok {
			return fmt.Errorf("invalid value for type: %s is not a valid value (field %s)", f.Type, full)
		}
		f.Type = typ
		switch strings.ToUpper(f.Mode) {
		case "", "NULLABLE":
			f.Mode = "NULLABLE"
		case "REQUIRED", "REPEATED":
			f.Mode = strings.ToUpper(f.Mode)
		default:
			return fmt.Errorf("invalid value for mode: %s is not a valid value (field %s)", f.Mode, full)
		}
		if typ == "RECORD" {
			if len(f.Fields) == 0 {
				return fmt.Errorf("field %s is type RECORD but has no schema", full)
			}
			if err := normalizeSchema(f.Fields, full, depth+1); err != nil {
				return err
			}
		} else if len(f.Fields) > 0 {
			return fmt.Errorf("field %s is type %s but has subfields; only RECORD fields may have a schema", full, typ)
		}
	}
	return nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// fieldIndex returns the index of the field named name (case-insensitive),
// or -1.
func fieldIndex(fields []*bq.TableFieldSchema, name string) int {
	for i, f := range fields {
		if strings.EqualFold(f.Name, name) {
			return i
		}
	}
	return -1
}

// validatePartitioning checks timePartitioning and clustering against the
// (normalized) schema.
func validatePartitioning(t *bq.Table) error {
	fields := t.Schema.Fields
	if tp := t.TimePartitioning; tp != nil {
		typ := tp.Type
		switch typ {
		case "DAY", "HOUR", "MONTH", "YEAR":
		case "":
			return fmt.Errorf("the field timePartitioning.type must be specified (one of DAY, HOUR, MONTH, YEAR)")
		default:
			return fmt.Errorf("invalid value for timePartitioning.type: %s is not a valid value", typ)
		}
		if tp.Field != "" {
			i := fieldIndex(fields, tp.Field)
			if i < 0 {
				return fmt.Errorf("the field specified for partitioning cannot be found in the schema: %s", tp.Field)
			}
			f := fields[i]
			switch f.Type {
			case "TIMESTAMP", "DATE", "DATETIME":
			default:
				return fmt.Errorf("partitioning field %s has type %s; the field specified for time partitioning can only be of type TIMESTAMP, DATE or DATETIME", f.Name, f.Type)
			}
			if f.Mode == "REPEATED" {
				return fmt.Errorf("partitioning field %s cannot be REPEATED", f.Name)
			}
			if f.Type == "DATE" && typ == "HOUR" {
				return fmt.Errorf("partitioning field %s has type DATE which does not support HOUR partitioning", f.Name)
			}
		}
		if tp.ExpirationMs < 0 {
			return fmt.Errorf("timePartitioning.expirationMs must not be negative")
		}
	}
	if t.TimePartitioning != nil && t.RangePartitioning != nil {
		return fmt.Errorf("cannot specify both timePartitioning and rangePartitioning")
	}
	if rp := t.RangePartitioning; rp != nil {
		i := fieldIndex(fields, rp.Field)
		if i < 0 {
			return fmt.Errorf("the field specified for partitioning cannot be found in the schema: %s", rp.Field)
		}
		if fields[i].Type != "INTEGER" || fields[i].Mode == "REPEATED" {
			return fmt.Errorf("range partitioning field %s must be a non-repeated INTEGER", rp.Field)
		}
	}
	if c := t.Clustering; c != nil {
		if len(c.Fields) > 4 {
			return fmt.Errorf("too many clustering fields: %d, only up to 4 are allowed", len(c.Fields))
		}
		seen := map[string]bool{}
		for _, name := range c.Fields {
			i := fieldIndex(fields, name)
			if i < 0 {
				return fmt.Errorf("the field specified for clustering cannot be found in the schema: %s", name)
			}
			f := fields[i]
			if seen[strings.ToLower(name)] {
				return fmt.Errorf("duplicate clustering field %s", name)
			}
			seen[strings.ToLower(name)] = true
			if f.Mode == "REPEATED" {
				return fmt.Errorf("clustering field %s cannot be REPEATED", name)
			}
			switch f.Type {
			case "STRING", "INTEGER", "NUMERIC", "BIGNUMERIC", "BOOLEAN", "DATE", "DATETIME", "TIMESTAMP", "GEOGRAPHY", "RANGE":
			default:
				return fmt.Errorf("clustering field %s has type %s, which is not supported for clustering", name, f.Type)
			}
		}
	}
	return nil
}

// checkSchemaUpdate verifies that next only appends NULLABLE (or REPEATED)
// columns to prev, at the top level or inside RECORDs, and otherwise leaves
// names, types and modes unchanged.
func checkSchemaUpdate(prev, next []*bq.TableFieldSchema, path string) error {
	if len(next) < len(prev) {
		for _, p := range prev {
			if fieldIndex(next, p.Name) < 0 {
				return fmt.Errorf("provided schema does not match table: field %s is missing in new schema", joinPath(path, p.Name))
			}
		}
		return fmt.Errorf("provided schema does not match table: fields are missing in new schema")
	}
	for i, p := range prev {
		n := next[i]
		full := joinPath(path, p.Name)
		if !strings.EqualFold(p.Name, n.Name) {
			j := fieldIndex(next, p.Name)
			if j < 0 {
				return fmt.Errorf("provided schema does not match table: field %s is missing in new schema", full)
			}
			return fmt.Errorf("provided schema does not match table: field %s has changed position; new columns may only be appended", full)
		}
		if p.Type != n.Type {
			return fmt.Errorf("provided schema does not match table: field %s has changed type from %s to %s", full, p.Type, n.Type)
		}
		if p.Mode != n.Mode {
			return fmt.Errorf("provided schema does not match table: field %s has changed mode from %s to %s", full, p.Mode, n.Mode)
		}
		if p.Type == "RECORD" {
			if err := checkSchemaUpdate(p.Fields, n.Fields, full); err != nil {
				return err
			}
		}
	}
	for _, n := range next[len(prev):] {
		if n.Mode == "REQUIRED" {
			return fmt.Errorf("provided schema does not match table: cannot add required field %s to an existing schema; added fields must be NULLABLE", joinPath(path, n.Name))
		}
	}
	return nil
}
