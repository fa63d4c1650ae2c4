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
	n := f.Streams
	if n <= 0 {
		n = defaultReadStreams
	}
	req := &storagepb.CreateReadSessionRequest{
		Parent: "projects/" + f.Project,
		ReadSession: &storagepb.ReadSession{
			Table:      fmt.Sprintf("projects/%s/datasets/%s/tables/%s", f.Project, f.Dataset, f.Table),
			DataFormat: storagepb.DataFormat_ARROW,
			ReadOptions: &storagepb.ReadSession_TableReadOptions{
				SelectedFields: plan.Columns(),
				RowRestriction: plan.RowRestriction(f.FromMs, f.ToMs),
			},
		},
		MaxStreamCount:          int32(n),
		PreferredMinStreamCount: int32(n),
	}
	var sess *storagepb.ReadSession
	err = retry.Do(ctx, f.Retry.Policy(), func(ctx context.Context) error {
		var err error
		sess, err = c.CreateReadSession(ctx, req)
		return err
	})
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
	var offset int64
	b := f.Retry.Policy().Start()
	for {
		rows, err := f.client.ReadRows(ctx, &storagepb.ReadRowsRequest{ReadStream: stream, Offset: offset},
			gax.WithGRPCOptions(grpc.MaxCallRecvMsgSize(readMaxRecvBytes)))
		for err == nil {
			var resp *storagepb.ReadRowsResponse
			if resp, err = rows.Recv(); err != nil {
				break
			}
			batch := resp.GetArrowRecordBatch().GetSerializedRecordBatch()
			if len(batch) == 0 {
				continue
			}
			n, derr := f.emitBatch(ctx, schema, batch, source, emit, dead)
			if derr != nil {
				return fmt.Errorf("bigquery read: stream %s at row %d: %w", stream, offset, derr)
			}
			offset += n
			b = f.Retry.Policy().Start() // an answer: the next failure has a whole deadline
		}
		if errors.Is(err, io.EOF) {
			return f.ctrs.Commit(ctx)
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

// emitBatch decodes one Arrow record batch (the session's schema message,
// then the batch's) and emits its rows; it returns the rows it read.
func (f *readStreamFn) emitBatch(ctx context.Context, schema, batch []byte, source string, emit func(string, string), dead func(deadletter.DeadLetter)) (int64, error) {
	r, err := ipc.NewReader(io.MultiReader(bytes.NewReader(schema), bytes.NewReader(batch)), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return 0, fmt.Errorf("decode the arrow schema: %w", err)
	}
	defer r.Release()
	cols := f.plan.Columns()
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
		for row := 0; row < int(rec.NumRows()); row++ {
			n++
			var rowErr error
			for i, c := range idx {
				if vals[i], err = arrowValue(rec.Column(c), row); err != nil {
					rowErr = fmt.Errorf("column %s: %w", cols[i], err)
				}
			}
			var line string
			if rowErr == nil {
				line, rowErr = f.plan.Line(vals)
			}
			if rowErr != nil {
				f.ctrs.Inc(ctx, ledger.InputRecords, 1)
				f.ctrs.Inc(ctx, ledger.InputRejected, 1)
				dead(deadletter.NewDeadLetter(deadletter.SinkParse, rowPayload(cols, vals), source,
					fmt.Errorf("%w: %w", schemas.ErrInvalidField, rowErr), time.Now()))
				continue
			}
			emit(source, line)
		}
	}
	if err := r.Err(); err != nil {
		return n, fmt.Errorf("decode an arrow record batch: %w", err)
	}
	return n, nil
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
