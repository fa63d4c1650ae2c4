package bigqueryio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/bqschema"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// InsertAll sends rows with tabledata.insertAll: requests of at most
// maxRows rows; rows BigQuery rejects are reported to reject, rows it did
// not try because of them ("stopped") sent again, transient failures
// retried with bo until its deadline, and a request too large split in
// halves. The sinks' writer and the dead-letter table share it.
type InsertAll struct {
	ins     *bigquery.Inserter
	ref     string // project:dataset.table, for messages
	maxRows int
}

// NewInsertAll returns the InsertAll writer of t. Bad rows are reported one
// by one and the others land.
func NewInsertAll(t *bigquery.Table, ref string, maxRows int) InsertAll {
	ins := t.Inserter()
	ins.SkipInvalidRows = true
	return InsertAll{ins: ins, ref: ref, maxRows: maxRows}
}

// Put sends rows, maxRows at a time. landed and reject are called with
// indexes into rows; every row ends in one of them (rows still failing at
// bo's deadline are rejected with its error), unless ctx is cancelled,
// which is Put's only error.
func (w InsertAll) Put(ctx context.Context, rows []bigquery.ValueSaver, bo *retry.Backoff, landed func([]int), reject func(int, error)) error {
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	for start := 0; start < len(idx); start += w.maxRows {
		if err := w.send(ctx, rows, idx[start:min(start+w.maxRows, len(idx))], bo, landed, reject); err != nil {
			return err
		}
	}
	return nil
}

// send is one request of the rows at idx.
func (w InsertAll) send(ctx context.Context, rows []bigquery.ValueSaver, idx []int, bo *retry.Backoff, landed func([]int), reject func(int, error)) error {
	if len(idx) == 0 {
		return nil
	}
	req := make([]bigquery.ValueSaver, len(idx))
	for i, j := range idx {
		req[i] = rows[j]
	}
	pctx, cancel := bo.AttemptContext(ctx)
	err := w.ins.Put(pctx, req)
	cancel()
	if err == nil {
		bo.Answered()
		landed(idx)
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("bigquery InsertAll to %s: %w", w.ref, ctx.Err())
	}
	var pme bigquery.PutMultiError
	if errors.As(err, &pme) {
		failed := map[int]bool{}
		var again, ok []int
		for _, re := range pme {
			i := re.RowIndex
			if i < 0 || i >= len(idx) || failed[i] {
				continue
			}
			failed[i] = true
			msg, stopped := insertMessage(re.Errors)
			if stopped {
				again = append(again, idx[i])
				continue
			}
			reject(idx[i], errors.New(msg))
		}
		for i, j := range idx {
			if !failed[i] {
				ok = append(ok, j)
			}
		}
		if len(ok) > 0 {
			landed(ok)
		}
		return w.send(ctx, rows, again, bo, landed, reject)
	}
	if tooLarge(err) && len(idx) > 1 {
		h := len(idx) / 2
		if err := w.send(ctx, rows, idx[:h], bo, landed, reject); err != nil {
			return err
		}
		return w.send(ctx, rows, idx[h:], bo, landed, reject)
	}
	delay, stop := bo.Next(err)
	if stop != nil {
		for _, j := range idx {
			reject(j, stop)
		}
		return nil
	}
	log.Warnf(ctx, "bigquery: InsertAll of %d rows to %s failed (attempt %d), retrying in %v (until %s): %v",
		len(idx), w.ref, bo.Attempts(), delay.Round(time.Millisecond), bo.Deadline().Format(time.TimeOnly), err)
	if err := retry.Wait(ctx, delay); err != nil {
		return fmt.Errorf("bigquery InsertAll to %s: %w", w.ref, err)
	}
	return w.send(ctx, rows, idx, bo, landed, reject)
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

// insertAllWriter is the WriteInsertAll method: batches of MaxInsertRows
// rows (or MaxRequestBytes) sent with InsertAll, each row with its key as
// insertId, so BigQuery drops retried duplicates (best effort). A batch
// is sent, and waited for, before it would hold more than
// MaxBufferedBytes of memory (insertRowMemory), the bound the Storage
// Write writer keeps: a batch of rows whose payloads are large (a
// stream's final firing renders each reading's) is sent smaller than
// MaxInsertRows, not held whole.
type insertAllWriter struct {
	f     *writeFn
	bq    *bigquery.Client
	w     InsertAll
	idCol int // the column holding the insertId, or -1

	rows  []hours.BQRow
	bytes int // the batch's estimated request size
	mem   int // what the batch holds in memory (insertRowMemory of each row)
}

// insertRowMemory is what one row of an insertAll batch holds until
// BigQuery answers: its values (about their protobuf encoding's size), the
// JSON row they become when the batch is sent (about twice that), its
// origin and the origin's payload (kept for its dead letter).
func insertRowMemory(row hours.BQRow, encoded []byte) int {
	return 3*len(encoded) + len(row.Origin.Raw) + int(unsafe.Sizeof(row)) + len(row.Values)*int(unsafe.Sizeof(schemas.Value{}))
}

// openInsertAllWriter opens a BigQuery client for f's table.
func openInsertAllWriter(ctx context.Context, f *writeFn) (*insertAllWriter, error) {
	c, err := bigquery.NewClient(ctx, f.Project, ClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("bigquery client for %s: %w", endpoint(), err)
	}
	return &insertAllWriter{
		f: f, bq: c, idCol: insertIDColumn(f.Schema),
		w: NewInsertAll(c.Dataset(f.Dataset).Table(f.Table), f.ref, f.MaxInsertRows),
	}, nil
}

// add queues row, sending the batch first when row would take its memory
// over MaxBufferedBytes, and sends the batch when it is full.
func (w *insertAllWriter) add(ctx context.Context, row hours.BQRow, encoded []byte, dead func(deadletter.DeadLetter)) error {
	mem := insertRowMemory(row, encoded)
	if len(w.rows) > 0 && w.mem+mem > w.f.MaxBufferedBytes {
		if err := w.flush(ctx, dead); err != nil {
			return err
		}
	}
	w.rows = append(w.rows, row)
	w.mem += mem
	// JSON is about twice the protobuf size.
	w.bytes += 2*len(encoded) + 64
	if len(w.rows) >= w.f.MaxInsertRows || w.bytes >= w.f.MaxRequestBytes {
		return w.flush(ctx, dead)
	}
	return nil
}

// flush sends the batch: rows that cannot be converted, or that BigQuery
// rejects, are dead-lettered.
func (w *insertAllWriter) flush(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	rows := w.rows
	w.reset()
	savers := make([]bigquery.ValueSaver, 0, len(rows))
	sent := make([]hours.Origin, 0, len(rows))
	for _, r := range rows {
		s, err := w.saver(r)
		if err != nil {
			w.f.reject(ctx, r.Origin, err, dead)
			continue
		}
		savers = append(savers, s)
		sent = append(sent, r.Origin)
	}
	return w.w.Put(ctx, savers, w.f.policy().Start(),
		func(idx []int) {
			origins := make([]hours.Origin, len(idx))
			for i, j := range idx {
				origins[i] = sent[j]
			}
			w.f.landed(ctx, origins)
		},
		func(i int, err error) { w.f.reject(ctx, sent[i], err, dead) })
}

func (w *insertAllWriter) reset() {
	w.rows = nil
	w.bytes, w.mem = 0, 0
}

func (w *insertAllWriter) close() error { return w.bq.Close() }

// insertIDColumn is the column whose value is a row's insertId: the one
// bound to $reading_id, else the table's one-column primary key, else -1.
func insertIDColumn(bq *schemas.BigQuerySpec) int {
	for i, c := range bq.Columns {
		if c.Value == schemas.ValueReadingID {
			return i
		}
	}
	if len(bq.PrimaryKey) == 1 {
		for i, c := range bq.Columns {
			if c.Name == bq.PrimaryKey[0] {
				return i
			}
		}
	}
	return -1
}

// bqSaver is one InsertAll row.
type bqSaver struct {
	row map[string]bigquery.Value
	id  string
}

// Save implements bigquery.ValueSaver.
func (s bqSaver) Save() (map[string]bigquery.Value, string, error) { return s.row, s.id, nil }

// saver converts r to an InsertAll row: null values are left out, the
// reading id is the insertId.
func (w *insertAllWriter) saver(r hours.BQRow) (bqSaver, error) {
	cols := w.f.Schema.Columns
	if len(r.Values) != len(cols) {
		return bqSaver{}, fmt.Errorf("%w: row has %d values for %d columns", bqschema.ErrBQValue, len(r.Values), len(cols))
	}
	s := bqSaver{row: make(map[string]bigquery.Value, len(cols))}
	for i, c := range cols {
		v := r.Values[i]
		if v.Null() {
			continue
		}
		x, err := bqschema.BQJSONValue(c, v)
		if err != nil {
			return bqSaver{}, err
		}
		s.row[c.Name] = x
	}
	if w.idCol >= 0 && !r.Values[w.idCol].Null() {
		s.id = string(schemas.AppendText(nil, r.Values[w.idCol]))
	}
	return s, nil
}
