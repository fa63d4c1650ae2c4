package dofns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/api/googleapi"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sensorpipe/sensorpipe/internal/bqadmin"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	register.DoFn3x1[context.Context, schemas.BQRow, func(schemas.DeadLetter), error](&BigQueryWriteFn{})
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
)

// Defaults of BigQueryWriteFn's settings.
const (
	// DefaultBQRequestBytes keeps an AppendRows request under BigQuery's
	// 10 MB limit with room for the request's own fields.
	DefaultBQRequestBytes = 9 << 20
	// DefaultInsertAllRows is the rows per insertAll request BigQuery
	// recommends.
	DefaultInsertAllRows = 500
	// DefaultBQInflight is how many AppendRows requests a bundle keeps in
	// flight before it waits for the oldest.
	DefaultBQInflight = 8
)

// BigQueryWriteFn writes BigQuery rows, without any GroupByKey: each DoFn
// instance opens its own writer in Setup.
//
// With WriteStorageWrite it encodes rows as protobuf messages of the
// descriptor derived from the spec (schemas.BQEncoder), batches them into
// AppendRows requests of at most MaxRequestBytes on the table's default
// stream, and in FinishBundle waits for every append. With WriteInsertAll it
// sends batches of MaxInsertRows rows with tabledata.insertAll.
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
// pipelines.WriteBigQuery puts it there.
type BigQueryWriteFn struct {
	Project string
	Dataset string
	Table   string
	// Sink names the sink in dead letters and the ledger:
	// schemas.SinkBigQuery (default) or schemas.SinkBigQueryRollups.
	Sink string
	// WriteMethod is WriteStorageWrite (default), WriteUpsert or
	// WriteInsertAll.
	WriteMethod string
	// Schema gives the table's columns; BQRow.Values follow them.
	Schema *schemas.BigQuerySpec
	// Retry is the retry policy's settings (zero: a 2-minute deadline).
	Retry RetrySettings
	// MaxRequestBytes caps one request's encoded rows (default 9 MB).
	MaxRequestBytes int
	// MaxInsertRows caps one insertAll request's rows (default 500).
	MaxInsertRows int
	// MaxInflight caps the AppendRows requests in flight (default 8).
	MaxInflight int

	enc      *schemas.BQEncoder
	ref      string // project:dataset.table, for messages
	idCol    int    // the column holding the insertId, or -1
	mw       *managedwriter.Client
	stream   *managedwriter.ManagedStream
	bq       *bigquery.Client
	inserter *bigquery.Inserter

	scratch  []byte
	batch    bqBatch
	inflight []*bqAppend
	ctrs     counters
	// down opens when a request exhausts its deadline, and closes when
	// one lands: while BigQuery is down, requests get one attempt each.
	down *retry.Breaker
}

// bqBatch is the request being filled.
type bqBatch struct {
	arena   []byte   // encoded rows back to back; data slices into it
	data    [][]byte // storage_write: one encoded row each
	rows    []schemas.BQRow
	origins []schemas.Origin
	bytes   int
}

// bqAppend is one AppendRows request and its outcome.
type bqAppend struct {
	data    [][]byte
	origins []schemas.Origin
	// bo paces the request's attempts; its deadline runs from the first.
	bo  *retry.Backoff
	res *managedwriter.AppendResult
	err error // AppendRows' own error: the request was not sent
}

// NewBigQueryWriteFn returns a writer of spec's rows to project:dataset.table.
func NewBigQueryWriteFn(project, dataset, table, method string, schema *schemas.BigQuerySpec) *BigQueryWriteFn {
	return &BigQueryWriteFn{Project: project, Dataset: dataset, Table: table, WriteMethod: method, Schema: schema}
}

// Setup compiles the row encoder and opens the writer: a managed stream on
// the table's default stream, or an insertAll client. Both honour the
// emulator variables (see bqadmin.ClientOptions and bqadmin.WriterOptions).
func (f *BigQueryWriteFn) Setup(ctx context.Context) error {
	if f.Sink == "" {
		f.Sink = schemas.SinkBigQuery
	}
	f.down = &retry.Breaker{}
	if f.MaxRequestBytes <= 0 {
		f.MaxRequestBytes = DefaultBQRequestBytes
	}
	if f.MaxInsertRows <= 0 {
		f.MaxInsertRows = DefaultInsertAllRows
	}
	if f.MaxInflight <= 0 {
		f.MaxInflight = DefaultBQInflight
	}
	if f.WriteMethod == "" {
		f.WriteMethod = WriteStorageWrite
	}
	if f.Schema == nil {
		return fmt.Errorf("bigquery write: no table schema")
	}
	enc, err := schemas.NewBQEncoder(f.Schema)
	if err != nil {
		return fmt.Errorf("bigquery write: %w", err)
	}
	f.enc = enc
	f.ref = fmt.Sprintf("%s:%s.%s", f.Project, f.Dataset, f.Table)
	f.idCol = insertIDColumn(f.Schema)
	switch f.WriteMethod {
	case WriteUpsert:
		if len(f.Schema.PrimaryKey) == 0 {
			return fmt.Errorf("bigquery write to %s: the %s method needs a primary key: add primary_key to the spec's bigquery section, or use %s", f.ref, WriteUpsert, WriteStorageWrite)
		}
		fallthrough
	case WriteStorageWrite:
		// The client and stream retain their context for background
		// connection management; the bundle's must not cancel them.
		f.mw, err = managedwriter.NewClient(context.Background(), f.Project, bqadmin.WriterOptions()...)
		if err != nil {
			return fmt.Errorf("bigquery storage write client for %s: %w", bqadmin.WriterEndpoint(), err)
		}
		return f.openStream(ctx)
	case WriteInsertAll:
		f.bq, err = bigquery.NewClient(ctx, f.Project, bqadmin.ClientOptions()...)
		if err != nil {
			return fmt.Errorf("bigquery client for %s: %w", bqadmin.Endpoint(), err)
		}
		f.inserter = f.bq.Dataset(f.Dataset).Table(f.Table).Inserter()
		// Bad rows are reported one by one and the others land.
		f.inserter.SkipInvalidRows = true
		return nil
	}
	return fmt.Errorf("bigquery write: unknown write method %q: use %s, %s or %s", f.WriteMethod, WriteUpsert, WriteStorageWrite, WriteInsertAll)
}

// StartBundle registers the table's ledger counters before the first
// write (see counters.register). Beam wants StartBundle to take
// ProcessElement's emitters.
func (f *BigQueryWriteFn) StartBundle(ctx context.Context, _ func(schemas.DeadLetter)) {
	f.ctrs.register(ctx, ledger.RowsKey(f.Sink, f.Table))
}

// openStream opens a managed stream on the table's default stream. It first
// looks the stream up with a deadline, so an unreachable endpoint or a
// missing table fails Setup promptly with a clear message.
func (f *BigQueryWriteFn) openStream(ctx context.Context) error {
	parent := managedwriter.TableParentFromParts(f.Project, f.Dataset, f.Table)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := f.mw.GetWriteStream(cctx, &storagepb.GetWriteStreamRequest{Name: parent + "/streams/_default"}); err != nil {
		return fmt.Errorf("bigquery table %s via %s: %w", f.ref, bqadmin.WriterEndpoint(), err)
	}
	desc := f.enc.Descriptor()
	if f.WriteMethod == WriteUpsert {
		desc = f.enc.ChangeDescriptor()
	}
	ms, err := f.mw.NewManagedStream(context.Background(),
		managedwriter.WithDestinationTable(parent),
		managedwriter.WithType(managedwriter.DefaultStream),
		managedwriter.WithSchemaDescriptor(proto.CloneOf(desc)),
		managedwriter.EnableWriteRetries(true),
	)
	if err != nil {
		return fmt.Errorf("bigquery default stream of %s via %s: %w", f.ref, bqadmin.WriterEndpoint(), err)
	}
	f.stream = ms
	return nil
}

// insertIDColumn is the column whose value is the reading id: the one
// bound to $reading_id, else one named reading_id, else -1.
func insertIDColumn(bq *schemas.BigQuerySpec) int {
	for i, c := range bq.Columns {
		if c.Value == schemas.ValueReadingID {
			return i
		}
	}
	for i, c := range bq.Columns {
		if c.Name == "reading_id" {
			return i
		}
	}
	return -1
}

// Teardown closes the writer.
func (f *BigQueryWriteFn) Teardown() error {
	var errs []error
	if f.stream != nil {
		if err := f.stream.Close(); err != nil && !errors.Is(err, io.EOF) {
			errs = append(errs, err)
		}
	}
	if f.mw != nil {
		errs = append(errs, f.mw.Close())
	}
	if f.bq != nil {
		errs = append(errs, f.bq.Close())
	}
	return errors.Join(errs...)
}

// ProcessElement adds row to the current request and sends the request when
// it is full.
func (f *BigQueryWriteFn) ProcessElement(ctx context.Context, row schemas.BQRow, dead func(schemas.DeadLetter)) (err error) {
	defer f.resetOnError(&err)
	f.ctrs.sink(ctx, f.Sink, f.Table, row.Origin.Kind, ledger.Routed, 1)
	if perr := guard(func() { f.scratch, err = f.enc.Append(f.scratch[:0], row.Values) }); perr != nil {
		err = perr
	}
	if err != nil {
		f.reject(ctx, row.Origin, err, dead)
		return nil
	}
	if f.WriteMethod == WriteUpsert {
		f.scratch = f.enc.AppendChange(f.scratch, schemas.ChangeUpsert, row.Seq)
	}
	size := len(f.scratch) + 1 + protowire.SizeVarint(uint64(len(f.scratch)))
	if f.WriteMethod == WriteInsertAll {
		// JSON is about twice the protobuf size.
		f.batch.rows = append(f.batch.rows, row)
		f.batch.origins = append(f.batch.origins, row.Origin)
		f.batch.bytes += 2*size + 64
		if len(f.batch.rows) >= f.MaxInsertRows || f.batch.bytes >= f.MaxRequestBytes {
			return f.flushInsert(ctx, dead)
		}
		return nil
	}
	if len(f.batch.data) > 0 && f.batch.bytes+size > f.MaxRequestBytes {
		if err := f.sendBatch(ctx, dead); err != nil {
			return err
		}
	}
	b := &f.batch
	if b.arena == nil {
		b.arena = make([]byte, 0, min(64<<10, f.MaxRequestBytes))
	}
	start := len(b.arena)
	b.arena = append(b.arena, f.scratch...)
	// A full slice expression: a reallocated arena leaves earlier rows in
	// the old array, which nothing writes to again.
	b.data = append(b.data, b.arena[start:len(b.arena):len(b.arena)])
	b.origins = append(b.origins, row.Origin)
	b.bytes += size
	return nil
}

// FinishBundle sends what is left and waits for every append, so the bundle
// commits only once each row has landed or been dead-lettered.
func (f *BigQueryWriteFn) FinishBundle(ctx context.Context, dead func(schemas.DeadLetter)) (err error) {
	defer f.resetOnError(&err)
	if f.WriteMethod == WriteInsertAll {
		return f.flushInsert(ctx, dead)
	}
	if len(f.batch.data) > 0 {
		f.send(ctx, &bqAppend{data: f.batch.data, origins: f.batch.origins})
		f.batch = bqBatch{}
	}
	return f.drain(ctx, 0, dead)
}

// policy is the retry policy of one request.
func (f *BigQueryWriteFn) policy() retry.Policy { return f.down.Policy(f.Retry.policy()) }

// resetOnError drops the bundle's pending and in-flight rows when it fails:
// the runner retries the whole bundle, so this instance must not settle
// them again in its next bundle.
func (f *BigQueryWriteFn) resetOnError(err *error) {
	if *err != nil {
		f.batch = bqBatch{}
		f.inflight = nil
	}
}

// sendBatch sends the current request, then waits until at most
// MaxInflight requests are in flight.
func (f *BigQueryWriteFn) sendBatch(ctx context.Context, dead func(schemas.DeadLetter)) error {
	f.send(ctx, &bqAppend{data: f.batch.data, origins: f.batch.origins})
	f.batch = bqBatch{}
	return f.drain(ctx, f.MaxInflight, dead)
}

// send appends req's rows to the stream without waiting for the result.
func (f *BigQueryWriteFn) send(ctx context.Context, req *bqAppend) {
	if req.bo == nil {
		req.bo = f.policy().Start()
	}
	req.res, req.err = f.stream.AppendRows(ctx, req.data)
	f.inflight = append(f.inflight, req)
}

// drain settles the oldest requests until at most keep are in flight.
// Settling may send requests again (retries, the good rows of a rejected
// request); they join the queue.
func (f *BigQueryWriteFn) drain(ctx context.Context, keep int, dead func(schemas.DeadLetter)) error {
	for len(f.inflight) > keep {
		req := f.inflight[0]
		f.inflight[0] = nil
		f.inflight = f.inflight[1:]
		if err := f.settle(ctx, req, dead); err != nil {
			return err
		}
	}
	return nil
}

// settle waits for req's result, no longer than one attempt's timeout.
// Landed rows are counted; rows the server rejected are dead-lettered and
// the others sent again; a transient failure is retried with backoff until
// the request's deadline; a request too large is split; anything else
// dead-letters the request's rows. Only a cancelled context is returned as
// an error.
func (f *BigQueryWriteFn) settle(ctx context.Context, req *bqAppend, dead func(schemas.DeadLetter)) error {
	err := req.err
	var resp *storagepb.AppendRowsResponse
	if err == nil {
		actx, cancel := req.bo.AttemptContext(ctx)
		resp, err = req.res.FullResponse(actx)
		cancel()
	}
	if err == nil {
		f.landed(ctx, req.origins)
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("bigquery append to %s: %w", f.ref, ctx.Err())
	}
	if bad := rowErrors(resp, len(req.data)); len(bad) > 0 {
		// BigQuery appended none of the request's rows: dead-letter the
		// rejected ones and send the others again.
		good := &bqAppend{bo: req.bo}
		for i := range req.data {
			if msg, ok := bad[i]; ok {
				f.reject(ctx, req.origins[i], errors.New(msg), dead)
				continue
			}
			good.data = append(good.data, req.data[i])
			good.origins = append(good.origins, req.origins[i])
		}
		if len(good.data) > 0 {
			f.send(ctx, good)
		}
		return nil
	}
	if tooLarge(err) && len(req.data) > 1 {
		h := len(req.data) / 2
		f.send(ctx, &bqAppend{data: req.data[:h], origins: req.origins[:h], bo: req.bo})
		f.send(ctx, &bqAppend{data: req.data[h:], origins: req.origins[h:], bo: req.bo})
		return nil
	}
	delay, stop := req.bo.Next(err)
	if stop != nil {
		for _, o := range req.origins {
			f.reject(ctx, o, stop, dead)
		}
		return nil
	}
	log.Warnf(ctx, "bigquery: append of %d rows to %s failed (attempt %d), retrying in %v (until %s): %v",
		len(req.data), f.ref, req.bo.Attempts(), delay.Round(time.Millisecond), req.bo.Deadline().Format(time.TimeOnly), err)
	if err := retry.Wait(ctx, delay); err != nil {
		return fmt.Errorf("bigquery append to %s: %w", f.ref, err)
	}
	if req.err != nil || errors.Is(err, context.DeadlineExceeded) {
		// The stream failed, or no answer came within the attempt's
		// timeout: a fresh stream, so a wedged connection cannot take the
		// retry down with it.
		if err := f.reopen(ctx); err != nil {
			log.Warnf(ctx, "bigquery: %v", err)
		}
	}
	f.send(ctx, req)
	return nil
}

// reopen replaces a failed managed stream.
func (f *BigQueryWriteFn) reopen(ctx context.Context) error {
	if f.stream != nil {
		_ = f.stream.Close()
	}
	return f.openStream(ctx)
}

// rowErrors maps the indexes of the rows an append response rejects to the
// server's message for each.
func rowErrors(resp *storagepb.AppendRowsResponse, n int) map[int]string {
	var bad map[int]string
	for _, re := range resp.GetRowErrors() {
		i := int(re.GetIndex())
		if i < 0 || i >= n {
			continue
		}
		if bad == nil {
			bad = map[int]string{}
		}
		msg := re.GetMessage()
		if msg == "" {
			msg = re.GetCode().String()
		}
		bad[i] = msg
	}
	return bad
}

// flushInsert sends the current insertAll batch.
func (f *BigQueryWriteFn) flushInsert(ctx context.Context, dead func(schemas.DeadLetter)) error {
	if len(f.batch.rows) == 0 {
		return nil
	}
	rows := f.batch.rows
	f.batch = bqBatch{}
	return f.insert(ctx, rows, f.policy().Start(), dead)
}

// insert writes rows with tabledata.insertAll. Rows BigQuery rejects are
// dead-lettered; rows it did not try because of them ("stopped") are sent
// again; transient failures are retried until bo's deadline, and a request
// too large is split.
func (f *BigQueryWriteFn) insert(ctx context.Context, rows []schemas.BQRow, bo *retry.Backoff, dead func(schemas.DeadLetter)) error {
	savers := make([]bigquery.ValueSaver, 0, len(rows))
	sent := make([]schemas.BQRow, 0, len(rows))
	for _, r := range rows {
		s, err := f.saver(r)
		if err != nil {
			f.reject(ctx, r.Origin, err, dead)
			continue
		}
		savers = append(savers, s)
		sent = append(sent, r)
	}
	if len(savers) == 0 {
		return nil
	}
	pctx, cancel := bo.AttemptContext(ctx)
	err := f.inserter.Put(pctx, savers)
	cancel()
	if err == nil {
		f.landedRows(ctx, sent)
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("bigquery insertAll to %s: %w", f.ref, ctx.Err())
	}
	var pme bigquery.PutMultiError
	if errors.As(err, &pme) {
		failed := map[int]bool{}
		var again, landed []schemas.BQRow
		for _, re := range pme {
			i := re.RowIndex
			if i < 0 || i >= len(sent) || failed[i] {
				continue
			}
			failed[i] = true
			msg, stopped := insertMessage(re.Errors)
			if stopped {
				again = append(again, sent[i])
				continue
			}
			f.reject(ctx, sent[i].Origin, errors.New(msg), dead)
		}
		for i, r := range sent {
			if !failed[i] {
				landed = append(landed, r)
			}
		}
		f.landedRows(ctx, landed)
		if len(again) > 0 {
			return f.insert(ctx, again, bo, dead)
		}
		return nil
	}
	if tooLarge(err) && len(sent) > 1 {
		h := len(sent) / 2
		if err := f.insert(ctx, sent[:h], bo, dead); err != nil {
			return err
		}
		return f.insert(ctx, sent[h:], bo, dead)
	}
	delay, stop := bo.Next(err)
	if stop != nil {
		for _, r := range sent {
			f.reject(ctx, r.Origin, stop, dead)
		}
		return nil
	}
	log.Warnf(ctx, "bigquery: insertAll of %d rows to %s failed (attempt %d), retrying in %v (until %s): %v",
		len(sent), f.ref, bo.Attempts(), delay.Round(time.Millisecond), bo.Deadline().Format(time.TimeOnly), err)
	if err := retry.Wait(ctx, delay); err != nil {
		return fmt.Errorf("bigquery insertAll to %s: %w", f.ref, err)
	}
	return f.insert(ctx, sent, bo, dead)
}

// insertMessage joins the messages of one row's insert errors, and reports
// whether they only say the row was stopped because of another row.
func insertMessage(errs bigquery.MultiError) (string, bool) {
	var msgs []string
	stopped := len(errs) > 0
	for _, e := range errs {
		var be *bigquery.Error
		if !errors.As(e, &be) {
			msgs = append(msgs, e.Error())
			stopped = false
			continue
		}
		if be.Reason != "stopped" {
			stopped = false
		}
		m := be.Message
		if m == "" {
			m = be.Reason
		}
		if be.Location != "" && !strings.Contains(m, be.Location) {
			m += " (field " + be.Location + ")"
		}
		msgs = append(msgs, m)
	}
	return strings.Join(msgs, "; "), stopped
}

// bqSaver is one insertAll row.
type bqSaver struct {
	row map[string]bigquery.Value
	id  string
}

// Save implements bigquery.ValueSaver.
func (s bqSaver) Save() (map[string]bigquery.Value, string, error) { return s.row, s.id, nil }

// saver converts r to an insertAll row: null values are left out, the
// reading id is the insertId.
func (f *BigQueryWriteFn) saver(r schemas.BQRow) (bqSaver, error) {
	cols := f.Schema.Columns
	if len(r.Values) != len(cols) {
		return bqSaver{}, fmt.Errorf("%w: row has %d values for %d columns", schemas.ErrBQValue, len(r.Values), len(cols))
	}
	s := bqSaver{row: make(map[string]bigquery.Value, len(cols))}
	for i, c := range cols {
		v := r.Values[i]
		if v.Null() {
			continue
		}
		x, err := jsonValue(c, v)
		if err != nil {
			return bqSaver{}, err
		}
		s.row[c.Name] = x
	}
	if f.idCol >= 0 && !r.Values[f.idCol].Null() {
		s.id = string(schemas.AppendText(nil, r.Values[f.idCol]))
	}
	return s, nil
}

// jsonValue converts v to the JSON value insertAll takes for column c.
func jsonValue(c schemas.BQColumnSpec, v schemas.Value) (bigquery.Value, error) {
	switch c.Type {
	case "STRING":
		if v.Kind != schemas.KindTags {
			return string(schemas.AppendText(nil, v)), nil
		}
	case "BYTES":
		if v.Kind == schemas.KindString || v.Kind == schemas.KindBytes {
			return []byte(v.Str), nil // encoding/json sends base64, as BYTES wants
		}
	case "FLOAT64":
		if v.Kind == schemas.KindFloat || v.Kind == schemas.KindInt {
			x := v.Float()
			switch {
			case math.IsNaN(x):
				return "NaN", nil
			case math.IsInf(x, 1):
				return "Infinity", nil
			case math.IsInf(x, -1):
				return "-Infinity", nil
			}
			return x, nil
		}
	case "INT64":
		switch v.Kind {
		case schemas.KindInt, schemas.KindTime:
			return v.Int, nil
		case schemas.KindFloat:
			if v.Num == math.Trunc(v.Num) && math.Abs(v.Num) < 1<<63 {
				return int64(v.Num), nil
			}
		}
	case "BOOL":
		if v.Kind == schemas.KindBool {
			return v.Bool, nil
		}
	case "TIMESTAMP":
		if v.Kind == schemas.KindTime {
			return time.UnixMilli(v.Int).UTC(), nil
		}
	}
	return nil, fmt.Errorf("%w: column %s (%s) cannot hold %q", schemas.ErrBQValue, c.Name, c.Type, schemas.AppendText(nil, v))
}

// landed counts the rows of origins as written.
func (f *BigQueryWriteFn) landed(ctx context.Context, origins []schemas.Origin) {
	f.down.Record(nil)
	for _, o := range origins {
		f.ctrs.sink(ctx, f.Sink, f.Table, o.Kind, ledger.Written, 1)
	}
	f.ctrs.inc(ctx, ledger.RowsKey(f.Sink, f.Table), int64(len(origins)))
}

// landedRows counts rows as written.
func (f *BigQueryWriteFn) landedRows(ctx context.Context, rows []schemas.BQRow) {
	f.down.Record(nil)
	for _, r := range rows {
		f.ctrs.sink(ctx, f.Sink, f.Table, r.Origin.Kind, ledger.Written, 1)
	}
	f.ctrs.inc(ctx, ledger.RowsKey(f.Sink, f.Table), int64(len(rows)))
}

// reject dead-letters one row as write_failed (internal when the row could
// not be handled) with the server's message.
func (f *BigQueryWriteFn) reject(ctx context.Context, o schemas.Origin, cause error, dead func(schemas.DeadLetter)) {
	f.ctrs.sink(ctx, f.Sink, f.Table, o.Kind, ledger.Failed, 1)
	if errors.Is(cause, retry.ErrExhausted) {
		f.down.Record(cause)
		f.ctrs.sink(ctx, f.Sink, f.Table, o.Kind, ledger.Unavailable, 1)
	}
	err := cause
	if !errors.Is(err, schemas.ErrInternal) {
		err = fmt.Errorf("%w: bigquery table %s: %w", schemas.ErrWriteFailed, f.ref, cause)
	}
	dead(deadLetter(f.Sink, o.Raw, o.Source, err))
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
