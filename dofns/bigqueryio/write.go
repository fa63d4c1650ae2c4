package bigqueryio

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/api/googleapi"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/bqschema"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	dofnreg.DoFn(&writeFn{}, register.Function3x1[context.Context, hours.BQRow, func(deadletter.DeadLetter), error])
	dofnreg.DoFn(&markedWriteFn{}, register.Function4x1[context.Context, hours.BQRow, func(deadletter.DeadLetter), func(hours.RowMutation), error])
	register.Emitter1[hours.RowMutation]()
}

// BigQuery write methods.
const (
	// WriteStorageWrite appends protobuf rows to the table's default stream
	// with the Storage Write API: committed on append, at least once.
	WriteStorageWrite = "storage_write"
	// WriteInsertAll streams rows with tabledata.insertAll, each with its
	// reading_id as insertId so BigQuery drops retried duplicates (best
	// effort).
	WriteInsertAll = "insert_all"
	// WriteUpsert is WriteStorageWrite with BigQuery's change data
	// capture: each row carries _CHANGE_TYPE=UPSERT and its
	// _CHANGE_SEQUENCE_NUMBER (BQRow.Seq), so it replaces the row with its
	// primary key unless that one is newer. The table needs the spec's
	// primary key.
	WriteUpsert = "upsert"

	// DefaultWriteMethod is the write method of a Config or writeFn that
	// names none, and the launcher's --bigquery_write_method default:
	// one row per reading however often it is written.
	DefaultWriteMethod = WriteUpsert
)

// Defaults of writeFn's settings.
const (
	// DefaultBQRequestBytes keeps an AppendRows request under BigQuery's
	// 10 MB limit with room for the request's own fields.
	DefaultBQRequestBytes = 9 << 20
	// DefaultInsertAllRows is the rows per insertAll request BigQuery
	// recommends.
	DefaultInsertAllRows = 500
	// defaultBQInflight is how many AppendRows requests a bundle keeps in
	// flight before it waits for the oldest.
	defaultBQInflight = 8
	// DefaultBQBufferedBytes is the memory a Storage Write writer gives
	// to the rows BigQuery has not yet answered for.
	DefaultBQBufferedBytes = 32 << 20
)

// writeFn writes BigQuery rows, without any GroupByKey: each DoFn
// instance opens its own writer in Setup.
//
// It encodes each row as a protobuf message of the descriptor derived from
// the spec (bqschema.BQEncoder), which checks its values, and hands it to the
// write method's bqWriter: storageWriter (storage.go) for WriteUpsert and
// WriteStorageWrite, insertAllWriter (insertall.go) for WriteInsertAll.
//
// Transient errors are retried under the retry policy (internal/retry: a
// timeout per attempt, so an answer that never comes cannot hang the
// bundle, backoff with jitter, and a total deadline). Rows the server
// rejects go to the dead letter as write_failed with the server's message
// (sink Sink), and the other rows of their request are sent again, so the
// rest of the bundle lands; rows still failing at the deadline go there
// too. Each row is counted in the run's ledger (routed, written, failed).
//
// It emits dead letters from FinishBundle, which Beam Go does in the
// global window, so its input must be in the global window:
// Write puts it there.
type writeFn struct {
	Project string
	Dataset string
	Table   string
	// Sink names the sink in dead letters and the ledger:
	// deadletter.SinkBigQuery (default) or deadletter.SinkBigQueryRollups.
	Sink string
	// WriteMethod is WriteUpsert (DefaultWriteMethod), WriteStorageWrite or
	// WriteInsertAll.
	WriteMethod string
	// Schema gives the table's columns; BQRow.Values follow them.
	Schema *schemas.BigQuerySpec
	// Retry is the retry policy's settings (zero: a 2-minute deadline).
	Retry retry.Settings
	// MaxRequestBytes caps one request's encoded rows (default 9 MB).
	MaxRequestBytes int
	// MaxInsertRows caps one insertAll request's rows (default 500).
	MaxInsertRows int
	// MaxInflight caps the AppendRows requests in flight (default 8).
	MaxInflight int
	// MaxBufferedBytes caps the memory of the AppendRows requests in
	// flight and the one being filled, or of the insertAll batch: the
	// rows' encodings and the payloads kept for their dead letters
	// (default 32 MB). Requests are cut smaller than MaxRequestBytes (and
	// insertAll batches than MaxInsertRows) to fit.
	MaxBufferedBytes int

	enc     *bqschema.BQEncoder
	ref     string // project:dataset.table, for messages
	w       bqWriter
	scratch []byte
	ctrs    ledger.Recorder
	// down opens when a request exhausts its deadline, and closes when
	// one lands: while BigQuery is down, requests get one attempt each.
	down *retry.Breaker
	// latency is the worker's latencies of this write method's calls,
	// which set the attempts' timeouts (retry.Latency).
	latency *retry.Latency
	// marks counts the bundle's rows by the mark they carry; failed says
	// a row of the bundle was dead-lettered.
	marks  map[markKey]*markCount
	failed bool
}

// markKey names one mark: its row and qualifier.
type markKey struct{ table, row, qualifier string }

// markCount is a mark and the rows of the bundle that carried it.
type markCount struct {
	mark hours.BQMark
	n    int64
}

// bqWriter is one write method: it takes a bundle's rows and reports each
// one's outcome through the DoFn's landed and reject.
type bqWriter interface {
	// add takes one row and its protobuf encoding, and may send a request.
	add(ctx context.Context, row hours.BQRow, encoded []byte, dead func(deadletter.DeadLetter)) error
	// flush sends what is left and waits until every row has landed or
	// been dead-lettered. Only a cancelled context is an error.
	flush(ctx context.Context, dead func(deadletter.DeadLetter)) error
	// reset drops the rows of a failed bundle: the runner retries it.
	reset()
	close() error
}

// newWriteFn returns a writer of spec's rows to project:dataset.table.
func newWriteFn(project, dataset, table, method string, schema *schemas.BigQuerySpec) *writeFn {
	return &writeFn{Project: project, Dataset: dataset, Table: table, WriteMethod: method, Schema: schema}
}

// Setup compiles the row encoder and opens the write method's writer. Both
// writers honour the emulator variables (see ClientOptions and
// WriterOptions).
func (f *writeFn) Setup(ctx context.Context) error {
	if f.Sink == "" {
		f.Sink = deadletter.SinkBigQuery
	}
	if f.WriteMethod == "" {
		f.WriteMethod = DefaultWriteMethod
	}
	f.down = &retry.Breaker{}
	f.latency = retry.LatencyOf("bigquery " + f.WriteMethod + " " + f.Project)
	if f.MaxRequestBytes <= 0 {
		f.MaxRequestBytes = DefaultBQRequestBytes
	}
	if f.MaxInsertRows <= 0 {
		f.MaxInsertRows = DefaultInsertAllRows
	}
	if f.MaxInflight <= 0 {
		f.MaxInflight = defaultBQInflight
	}
	if f.MaxBufferedBytes <= 0 {
		f.MaxBufferedBytes = DefaultBQBufferedBytes
	}
	if f.Schema == nil {
		return fmt.Errorf("bigquery write: no table schema")
	}
	enc, err := bqschema.NewBQEncoder(f.Schema)
	if err != nil {
		return fmt.Errorf("bigquery write: %w", err)
	}
	f.enc = enc
	f.ref = fmt.Sprintf("%s:%s.%s", f.Project, f.Dataset, f.Table)
	switch f.WriteMethod {
	case WriteUpsert:
		if len(f.Schema.PrimaryKey) == 0 {
			return fmt.Errorf("bigquery write to %s: the %s method needs a primary key: add primary_key to the spec's bigquery section, or use %s", f.ref, WriteUpsert, WriteStorageWrite)
		}
		return f.open(openStorageWriter(ctx, f, true))
	case WriteStorageWrite:
		return f.open(openStorageWriter(ctx, f, false))
	case WriteInsertAll:
		return f.open(openInsertAllWriter(ctx, f))
	}
	return fmt.Errorf("bigquery write: unknown write method %q: use %s, %s or %s", f.WriteMethod, WriteUpsert, WriteStorageWrite, WriteInsertAll)
}

// open keeps w, the writer Setup opened, unless opening it failed.
func (f *writeFn) open(w bqWriter, err error) error {
	if err != nil {
		return err
	}
	f.w = w
	return nil
}

// StartBundle registers the table's ledger counters before the first
// write (see ledger.Recorder.Register). Beam wants StartBundle to take
// ProcessElement's emitters.
func (f *writeFn) StartBundle(ctx context.Context, _ func(deadletter.DeadLetter)) {
	f.ctrs.Register(ctx, ledger.RowsKey(f.Sink, f.Table))
	f.dropMarks()
}

// markedWriteFn is writeFn that also writes the BigQuery marks its rows
// carry (hours.BQMark), as Bigtable mutations of the marks table: each
// row is counted against its mark, and when a bundle ends with every row
// it took landed, each mark all of whose rows came in the bundle is
// emitted. A mark whose rows came in more than one bundle, or in a bundle
// with a failed row, is not emitted, and the next batch sends its hour's
// rows again. The marks, like the dead letters, are emitted in the global
// window.
type markedWriteFn struct {
	writeFn
}

// StartBundle is writeFn's; Beam wants it to take ProcessElement's
// emitters.
func (f *markedWriteFn) StartBundle(ctx context.Context, dead func(deadletter.DeadLetter), _ func(hours.RowMutation)) {
	f.writeFn.StartBundle(ctx, dead)
}

// ProcessElement is writeFn's.
func (f *markedWriteFn) ProcessElement(ctx context.Context, row hours.BQRow, dead func(deadletter.DeadLetter), _ func(hours.RowMutation)) error {
	return f.writeFn.ProcessElement(ctx, row, dead)
}

// FinishBundle is writeFn's, which emits the marks whose rows all landed.
func (f *markedWriteFn) FinishBundle(ctx context.Context, dead func(deadletter.DeadLetter), marks func(hours.RowMutation)) error {
	return f.finish(ctx, dead, marks)
}

// dropMarks forgets the bundle's marks.
func (f *writeFn) dropMarks() {
	clear(f.marks)
	f.failed = false
}

// count counts a row against the mark it carries.
func (f *writeFn) count(m hours.BQMark) {
	if m.Rows <= 0 {
		return
	}
	k := markKey{m.Table, m.RowKey, m.Qualifier}
	c := f.marks[k]
	if c == nil {
		if f.marks == nil {
			f.marks = map[markKey]*markCount{}
		}
		c = &markCount{mark: m}
		f.marks[k] = c
	}
	c.n++
}

// emitMarks emits the marks all of whose rows landed in this bundle.
func (f *writeFn) emitMarks(emit func(hours.RowMutation)) {
	if !f.failed {
		for _, c := range f.marks {
			if c.n == c.mark.Rows {
				emit(c.mark.Mutation())
			}
		}
	}
	f.dropMarks()
}

// Teardown closes the writer.
func (f *writeFn) Teardown() error {
	if f.w == nil {
		return nil
	}
	err := f.w.close()
	f.w = nil
	return err
}

// ProcessElement encodes row and hands it to the writer. A row whose values
// the table cannot hold is dead-lettered.
func (f *writeFn) ProcessElement(ctx context.Context, row hours.BQRow, dead func(deadletter.DeadLetter)) (err error) {
	defer f.resetOnError(&err)
	f.ctrs.Sink(ctx, f.Sink, f.Table, row.Origin.Kind, ledger.Routed, 1)
	f.count(row.Mark)
	if perr := ledger.Guard(func() { f.scratch, err = f.enc.Append(f.scratch[:0], row.Values) }); perr != nil {
		err = perr
	}
	if err != nil {
		f.reject(ctx, row.Origin, err, dead)
		return nil
	}
	return f.w.add(ctx, row, f.scratch, dead)
}

// FinishBundle sends what is left and waits for every write, so the bundle
// commits only once each row has landed or been dead-lettered; then its
// counts go to the run's ledger record.
func (f *writeFn) FinishBundle(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	return f.finish(ctx, dead, nil)
}

// finish is FinishBundle, which also emits the marks whose rows all
// landed to marks (nil: none).
func (f *writeFn) finish(ctx context.Context, dead func(deadletter.DeadLetter), marks func(hours.RowMutation)) (err error) {
	defer f.resetOnError(&err)
	if err := f.w.flush(ctx, dead); err != nil {
		return err
	}
	if marks != nil {
		f.emitMarks(marks)
	}
	return f.ctrs.Commit(ctx)
}

// policy is the retry policy of one request.
func (f *writeFn) policy() retry.Policy {
	p := f.Retry.Policy()
	p.Latency = f.latency
	return f.down.Policy(p)
}

// resetOnError drops the bundle's pending and in-flight rows when it fails:
// the runner retries the whole bundle, so this instance must not settle
// them again in its next bundle.
func (f *writeFn) resetOnError(err *error) {
	if *err != nil {
		f.w.reset()
		f.dropMarks()
	}
}

// landed counts the rows of origins as written.
func (f *writeFn) landed(ctx context.Context, origins []hours.Origin) {
	f.down.Record(nil)
	for _, o := range origins {
		f.ctrs.Sink(ctx, f.Sink, f.Table, o.Kind, ledger.Written, 1)
	}
	f.ctrs.Inc(ctx, ledger.RowsKey(f.Sink, f.Table), int64(len(origins)))
}

// reject dead-letters one row as write_failed (internal when the row could
// not be handled) with the server's message.
func (f *writeFn) reject(ctx context.Context, o hours.Origin, cause error, dead func(deadletter.DeadLetter)) {
	f.failed = true
	f.ctrs.Sink(ctx, f.Sink, f.Table, o.Kind, ledger.Failed, 1)
	if errors.Is(cause, retry.ErrExhausted) {
		f.down.Record(cause)
		f.ctrs.Sink(ctx, f.Sink, f.Table, o.Kind, ledger.Unavailable, 1)
	}
	err := cause
	if !errors.Is(err, schemas.ErrInternal) {
		err = fmt.Errorf("%w: bigquery table %s: %w", schemas.ErrWriteFailed, f.ref, cause)
	}
	dead(deadletter.NewDeadLetter(f.Sink, o.Raw, o.Source, err, time.Now()))
}

// tooLarge reports whether a request was rejected for its size, so that
// smaller requests may pass.
func tooLarge(err error) bool {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusRequestEntityTooLarge {
		return true
	}
	m := strings.ToLower(err.Error())
	return strings.Contains(m, "too large") || strings.Contains(m, "larger than")
}
