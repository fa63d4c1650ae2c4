package bigqueryio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	storage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	gax "github.com/googleapis/gax-go/v2"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/bqschema"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// defaultReadStreams is how many streams Read asks a read session for
// when Config.Streams is 0: BigQuery may give fewer (a small table gets
// one), never more.
const defaultReadStreams = 16

// readMaxRecvBytes is the largest ReadRows response the client takes:
// BigQuery's largest row batch, with a MiB of room for the message around
// it (gRPC's 4 MiB default would refuse a large batch).
const readMaxRecvBytes = 129 << 20

// Read reads the readings of cfg's table back with the BigQuery Storage
// Read API: one read session, created when the pipeline runs, in several
// streams read in parallel (one element per stream, spread over the
// workers by a Reshuffle). Each row becomes its reading's JSON payload
// (bqschema.ReadPlan: each column maps back to its field through the
// spec's bigquery.columns, imputed values left out) as KV<source,
// payload>, which the spec's JSON parser reads as it reads an input line.
// A row that cannot be read back is a dead letter (sink parse, reason
// invalid_field) with the row as its payload, counted as a record read.
//
// cfg.Spec is required; cfg.FromMs and cfg.ToMs bound the event times
// read, [FromMs, ToMs), as a row restriction on the event-time column
// (0: unbounded).
func Read(s beam.Scope, cfg Config) (lines, dead beam.PCollection) {
	s = s.Scope("bigquery.Read")
	streams := beam.ParDo(s, &createSessionFn{Project: cfg.Project, Dataset: cfg.Dataset, Table: cfg.Table, Spec: cfg.Spec,
		FromMs: cfg.FromMs, ToMs: cfg.ToMs, Streams: cfg.Streams, Retry: cfg.Retry}, beam.Impulse(s))
	streams = beam.Reshuffle(s, streams)
	return beam.ParDo2(s, &readStreamFn{Project: cfg.Project, Dataset: cfg.Dataset, Table: cfg.Table, Spec: cfg.Spec, Retry: cfg.Retry}, streams)
}

func init() {
	dofnreg.DoFn(&createSessionFn{}, register.Function3x1[context.Context, []byte, func(string, []byte), error])
	dofnreg.DoFn(&readStreamFn{}, register.Function5x1[context.Context, string, []byte, func(string, string), func(deadletter.DeadLetter), error])
	register.Emitter2[string, []byte]()
	register.Emitter2[string, string]()
	register.Emitter1[deadletter.DeadLetter]()
}

// sourceName is the source of the readings Read reads from a table: what their
// dead letters name.
func sourceName(project, dataset, table string) string {
	return fmt.Sprintf("bigquery:%s:%s.%s", project, dataset, table)
}

// newReadClient opens a Storage Read client (the emulator's with
// BIGQUERY_STORAGE_EMULATOR_HOST set).
func newReadClient(ctx context.Context) (*storage.BigQueryReadClient, error) {
	c, err := storage.NewBigQueryReadClient(ctx, writerOptions()...)
	if err != nil {
		return nil, fmt.Errorf("bigquery storage read client: %w", err)
	}
	return c, nil
}

// createSessionFn creates the read session and emits each of its streams
// as KV<stream name, serialized Arrow schema>.
type createSessionFn struct {
	Project, Dataset, Table string
	Spec                    *hours.Compiled
	FromMs, ToMs            int64
	Streams                 int
	Retry                   retry.Settings
}

// ProcessElement creates the session, retrying transient errors within
// the retry policy's deadline.
func (f *createSessionFn) ProcessElement(ctx context.Context, _ []byte, emit func(string, []byte)) error {
	if f.Spec == nil {
		return errors.New("bigquery read: no compiled spec")
	}
	plan, err := bqschema.NewReadPlan(f.Spec.Spec)
	if err != nil {
		return fmt.Errorf("bigquery read: %w", err)
	}
	c, err := newReadClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sess, err := createReadSession(ctx, c, f.Retry.Policy(), f.Project, f.Dataset, f.Table, plan.Columns(), plan.RowRestriction(f.FromMs, f.ToMs), f.Streams)
	if err != nil {
		return fmt.Errorf("bigquery read: create a read session of %s.%s.%s (check the table and its columns against the spec's bigquery section): %w", f.Project, f.Dataset, f.Table, err)
	}
	schema := sess.GetArrowSchema().GetSerializedSchema()
	for _, st := range sess.GetStreams() {
		emit(st.GetName(), schema)
	}
	return nil
}

// readStreamFn reads one stream of a read session to its end, emitting
// each row's reading payload as KV<source, payload>.
type readStreamFn struct {
	Project, Dataset, Table string
	Spec                    *hours.Compiled
	Retry                   retry.Settings

	client *storage.BigQueryReadClient
	plan   *bqschema.ReadPlan
	ctrs   ledger.Recorder
}

// Setup opens the Storage Read client and plans the rows' read-back.
func (f *readStreamFn) Setup(ctx context.Context) error {
	if f.Spec == nil {
		return errors.New("bigquery read: no compiled spec")
	}
	var err error
	if f.plan, err = bqschema.NewReadPlan(f.Spec.Spec); err != nil {
		return fmt.Errorf("bigquery read: %w", err)
	}
	f.client, err = newReadClient(ctx)
	return err
}

// Teardown closes the client.
func (f *readStreamFn) Teardown() {
	if f.client != nil {
		f.client.Close()
	}
}

// ProcessElement reads the stream from its start. A failed ReadRows is
// resumed at the offset reached, for as long as the retry policy allows
// between two answers; an error it cannot retry fails the bundle.
func (f *readStreamFn) ProcessElement(ctx context.Context, stream string, schema []byte, emit func(string, string), dead func(deadletter.DeadLetter)) error {
	source := sourceName(f.Project, f.Dataset, f.Table)
	err := readStream(ctx, f.client, f.Retry.Policy(), stream, func(batch []byte) (int64, error) {
		return f.emitBatch(ctx, schema, batch, source, emit, dead)
	})
	if err != nil {
		return err
	}
	return f.ctrs.Commit(ctx)
}

// emitBatch decodes one Arrow record batch (the session's schema message,
// then the batch's) and emits its rows; it returns the rows it read.
func (f *readStreamFn) emitBatch(ctx context.Context, schema, batch []byte, source string, emit func(string, string), dead func(deadletter.DeadLetter)) (int64, error) {
	cols := f.plan.Columns()
	return decodeRows(schema, batch, cols, func(vals []any, rowErr error) {
		var line string
		if rowErr == nil {
			line, rowErr = f.plan.Line(vals)
		}
		if rowErr != nil {
			f.ctrs.Inc(ctx, ledger.InputRecords, 1)
			f.ctrs.Inc(ctx, ledger.InputRejected, 1)
			dead(deadletter.NewDeadLetter(deadletter.SinkParse, rowPayload(cols, vals), source,
				fmt.Errorf("%w: %w", schemas.ErrInvalidField, rowErr), time.Now()))
			return
		}
		emit(source, line)
	})
}

// createReadSession creates a Storage Read session of project's
// dataset.table that selects cols and keeps the rows restriction keeps
// ("": all), in Arrow, asking for streams streams (0:
// defaultReadStreams); transient errors are retried within policy.
func createReadSession(ctx context.Context, c *storage.BigQueryReadClient, policy retry.Policy, project, dataset, table string, cols []string, restriction string, streams int) (*storagepb.ReadSession, error) {
	if streams <= 0 {
		streams = defaultReadStreams
	}
	req := &storagepb.CreateReadSessionRequest{
		Parent: "projects/" + project,
		ReadSession: &storagepb.ReadSession{
			Table:      fmt.Sprintf("projects/%s/datasets/%s/tables/%s", project, dataset, table),
			DataFormat: storagepb.DataFormat_ARROW,
			ReadOptions: &storagepb.ReadSession_TableReadOptions{
				SelectedFields: cols,
				RowRestriction: restriction,
			},
		},
		MaxStreamCount:          int32(streams),
		PreferredMinStreamCount: int32(streams),
	}
	var sess *storagepb.ReadSession
	err := retry.Do(ctx, policy, func(ctx context.Context) error {
		var err error
		sess, err = c.CreateReadSession(ctx, req)
		return err
	})
	return sess, err
}

// readStream reads one stream of a read session from its start, handing
// each Arrow record batch to batch, which returns the rows it held. A
// failed ReadRows is resumed at the offset reached, for as long as policy
// allows between two answers; an error it cannot retry, or batch's, ends
// the read.
func readStream(ctx context.Context, c *storage.BigQueryReadClient, policy retry.Policy, stream string, batch func([]byte) (int64, error)) error {
	var offset int64
	b := policy.Start()
	for {
		rows, err := c.ReadRows(ctx, &storagepb.ReadRowsRequest{ReadStream: stream, Offset: offset},
			gax.WithGRPCOptions(grpc.MaxCallRecvMsgSize(readMaxRecvBytes)))
		for err == nil {
			var resp *storagepb.ReadRowsResponse
			if resp, err = rows.Recv(); err != nil {
				break
			}
			data := resp.GetArrowRecordBatch().GetSerializedRecordBatch()
			if len(data) == 0 {
				continue
			}
			n, derr := batch(data)
			if derr != nil {
				return fmt.Errorf("bigquery read: stream %s at row %d: %w", stream, offset, derr)
			}
			offset += n
			b = policy.Start() // an answer: the next failure has a whole deadline
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("bigquery read: stream %s: %w (last error: %w)", stream, ctx.Err(), err)
		}
		d, stop := b.Next(err)
		if stop != nil {
			return fmt.Errorf("bigquery read: stream %s at row %d: %w", stream, offset, stop)
		}
		if err := retry.Wait(ctx, d); err != nil {
			return err
		}
	}
}

// decodeRows decodes one Arrow record batch of a session (the session's
// schema message, then the batch's) and calls row with each row's values
// of cols (see arrowValue), or with the error that made one unreadable; it
// returns the rows the batch held.
func decodeRows(schema, batch []byte, cols []string, row func(vals []any, err error)) (int64, error) {
	r, err := ipc.NewReader(io.MultiReader(bytes.NewReader(schema), bytes.NewReader(batch)), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return 0, fmt.Errorf("decode the arrow schema: %w", err)
	}
	defer r.Release()
	idx := make([]int, len(cols))
	for i, name := range cols {
		found := r.Schema().FieldIndices(name)
		if len(found) != 1 {
			return 0, fmt.Errorf("the session has no column %s: check the table against the spec's bigquery.columns", name)
		}
		idx[i] = found[0]
	}
	var n int64
	vals := make([]any, len(cols))
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			n++
			var rowErr error
			for j, c := range idx {
				var err error
				if vals[j], err = arrowValue(rec.Column(c), i); err != nil {
					rowErr = fmt.Errorf("column %s: %w", cols[j], err)
				}
			}
			row(vals, rowErr)
		}
	}
	if err := r.Err(); err != nil {
		return n, fmt.Errorf("decode an arrow record batch: %w", err)
	}
	return n, nil
}

// ScanTable reads every row of project's dataset.table that restriction
// keeps ("": all) with the Storage Read API, outside a pipeline: one read
// session, its streams read side by side. row gets each row's values of
// cols (nil, string, []byte, int64, float64, bool or time.Time) and must be
// safe for concurrent use; an unreadable value, a missing table or column,
// or row's error ends the scan. keys compare reads BigQuery with it.
func ScanTable(ctx context.Context, project, dataset, table string, cols []string, restriction string, row func(vals []any) error) error {
	c, err := newReadClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	policy := retry.Policy{AttemptTimeout: time.Minute, Deadline: 3 * time.Minute, MaxAttempts: 4}
	sess, err := createReadSession(ctx, c, policy, project, dataset, table, cols, restriction, 0)
	if err != nil {
		return fmt.Errorf("bigquery read: create a read session of %s.%s.%s: %w", project, dataset, table, err)
	}
	schema := sess.GetArrowSchema().GetSerializedSchema()
	g, ctx := errgroup.WithContext(ctx)
	for _, st := range sess.GetStreams() {
		g.Go(func() error {
			return readStream(ctx, c, policy, st.GetName(), func(batch []byte) (int64, error) {
				var rowErr error
				n, err := decodeRows(schema, batch, cols, func(vals []any, err error) {
					if rowErr != nil {
						return
					}
					if rowErr = err; rowErr == nil {
						rowErr = row(vals)
					}
				})
				if err == nil {
					err = rowErr
				}
				return n, err
			})
		})
	}
	return g.Wait()
}

// arrowValue is the value of row in col as ReadPlan.Record takes it: nil,
// string, []byte, int64, float64, bool or time.Time. The columns a spec
// declares (STRING, BYTES, INT64, FLOAT64, BOOL, TIMESTAMP) read as their
// Storage Read Arrow types; any other is an error.
func arrowValue(col arrow.Array, row int) (any, error) {
	if col.IsNull(row) {
		return nil, nil
	}
	switch c := col.(type) {
	case *array.String:
		return c.Value(row), nil
	case *array.Binary:
		return append([]byte(nil), c.Value(row)...), nil
	case *array.Int64:
		return c.Value(row), nil
	case *array.Float64:
		return c.Value(row), nil
	case *array.Boolean:
		return c.Value(row), nil
	case *array.Timestamp:
		unit := arrow.Microsecond
		if tt, ok := c.DataType().(*arrow.TimestampType); ok {
			unit = tt.Unit
		}
		return c.Value(row).ToTime(unit).UTC(), nil
	}
	return nil, fmt.Errorf("arrow type %s is not a column type a spec declares", col.DataType())
}

// rowPayload renders a row that could not be read back as a JSON object of
// its columns, the payload of its dead letter.
func rowPayload(cols []string, vals []any) string {
	m := make(map[string]any, len(cols))
	for i, c := range cols {
		v := vals[i]
		switch x := v.(type) {
		case time.Time:
			v = x.Format(time.RFC3339Nano)
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				v = fmt.Sprint(x)
			}
		}
		m[c] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Sprint(vals)
	}
	return string(b)
}

// CheckSource checks, before a job, that Read can read cfg's table as
// readings of spec: the table exists and has each column the spec's
// bigquery.columns reads back, of the column's type. Transient errors are
// retried until ctx's deadline (the launcher's --startup_timeout).
func CheckSource(ctx context.Context, cfg Config, spec *schemas.Spec) error {
	plan, err := bqschema.NewReadPlan(spec)
	if err != nil {
		return err
	}
	ref := fmt.Sprintf("%s:%s.%s", cfg.Project, cfg.Dataset, cfg.Table)
	c, err := bigquery.NewClient(ctx, cfg.Project, ClientOptions()...)
	if err != nil {
		return fmt.Errorf("bigquery client for %s: %w", endpoint(), err)
	}
	defer c.Close()
	limit := timeout
	if dl, ok := ctx.Deadline(); ok {
		limit = time.Until(dl).Round(time.Millisecond)
	}
	var md *bigquery.TableMetadata
	err = retry.Do(ctx, retry.Policy{Deadline: limit, AttemptTimeout: limit}, func(ctx context.Context) (err error) {
		md, err = c.Dataset(cfg.Dataset).Table(cfg.Table).Metadata(ctx)
		return err
	})
	switch {
	case notFound(err):
		return fmt.Errorf("bigquery table %s does not exist: give the table the spec's bigquery section wrote", ref)
	case err != nil:
		return describe(ctx, "bigquery table "+ref, limit, err)
	}
	types := map[string]bigquery.FieldType{}
	for _, f := range md.Schema {
		types[strings.ToLower(f.Name)] = canonical(f.Type)
	}
	want := map[string]string{}
	for _, col := range spec.BigQuery.Columns {
		want[strings.ToLower(col.Name)] = col.Type
	}
	for _, name := range plan.Columns() {
		have, ok := types[strings.ToLower(name)]
		if !ok {
			return fmt.Errorf("bigquery table %s has no column %s, which spec %s reads back into a field: give the table the spec wrote, or the spec that wrote it", ref, name, spec.Name)
		}
		if w := canonical(fieldType(want[strings.ToLower(name)])); have != w {
			return fmt.Errorf("bigquery table %s: column %s is %s, but spec %s declares it %s: give the table the spec wrote, or the spec that wrote it", ref, name, have, spec.Name, w)
		}
	}
	return nil
}
