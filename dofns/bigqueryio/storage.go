package bigqueryio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
	"unsafe"

	storage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/bqschema"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// storageWriter appends rows to the table's default stream with the
// Storage Write API: AppendRows requests of at most MaxRequestBytes, up to
// MaxInflight of them in flight, all of them together holding about
// MaxBufferedBytes of memory at most (a stream's hour closing sends every
// reading of the hour at once). With upsert each row carries BigQuery's
// change data capture pseudo-columns, _CHANGE_TYPE=UPSERT and its
// _CHANGE_SEQUENCE_NUMBER (BQRow.Seq).
//
// It speaks AppendRows itself (appendStream) over the generated client,
// not through managedwriter, because managedwriter cannot bound its waits
// (bigquery v1.83.0): with BigQuery unreachable it retries opening a
// connection without end while holding the connection's lock, so an
// append, a stream's Close and the client's Close all block until BigQuery
// is back; and with its write retries on, an append caught by a stream's
// close loops forever without an answer. Here every call waits at most an
// attempt timeout, and settle is the only retry.
type storageWriter struct {
	f      *writeFn
	upsert bool

	client *storage.BigQueryWriteClient
	name   string                 // the table's default stream
	schema *storagepb.ProtoSchema // sent first on each connection
	conn   *appendStream          // nil: the next send opens one

	batch    storageBatch
	inflight []*bqAppend
	// limit is how many requests may be in flight now: MaxInflight while
	// appends land, halved by each failure and grown back by one per
	// success. A failed request often takes its stream down, and every
	// append in flight on it with it: with many in flight and a share of
	// them failing, a stream can fail again before any of them lands.
	limit int
}

// inflightLimit is the current cap on requests in flight.
func (w *storageWriter) inflightLimit() int {
	if w.limit <= 0 || w.limit > w.f.MaxInflight {
		w.limit = w.f.MaxInflight
	}
	return w.limit
}

// storageBatch is the request being filled.
type storageBatch struct {
	// arena is the current block of encoded rows, back to back; data
	// slices into it and into the blocks before it.
	arena   []byte
	data    [][]byte // one encoded row each
	origins []hours.Origin
	bytes   int // the request's encoded size
	mem     int // what it holds in memory (rowMemory of each row)
}

// arenaBlock is the size of one block of a request's encoded rows.
const arenaBlock = 64 << 10

// rowMemory is what one row of a request holds until BigQuery answers:
// its encoding, its origin and the origin's payload (the record kept for
// its dead letter; a stream's final firing renders it, see
// schemas.Spec.CanonicalJSON).
func rowMemory(encoded []byte, o hours.Origin) int {
	return len(encoded) + len(o.Raw) + int(unsafe.Sizeof(o)+unsafe.Sizeof(encoded))
}

// bqAppend is one AppendRows request and its place on its connection.
type bqAppend struct {
	data    [][]byte
	origins []hours.Origin
	// bo paces the request's attempts; its deadline runs from the first.
	bo   *retry.Backoff
	conn *appendStream // the connection it was sent on
	seq  int64         // its place among the connection's requests
	err  error         // the request could not be sent
}

// openStorageWriter opens a Storage Write client and looks up the table's
// default stream, so that a missing table fails Setup with a clear
// message. An unreachable endpoint does not fail Setup: the first request
// tries again, under the retry policy, and dead-letters its rows if
// BigQuery stays unavailable.
func openStorageWriter(ctx context.Context, f *writeFn, upsert bool) (*storageWriter, error) {
	desc := f.enc.Descriptor()
	if upsert {
		desc = f.enc.ChangeDescriptor()
	}
	w := &storageWriter{
		f:      f,
		upsert: upsert,
		name:   fmt.Sprintf("projects/%s/datasets/%s/tables/%s/streams/_default", f.Project, f.Dataset, f.Table),
		schema: &storagepb.ProtoSchema{ProtoDescriptor: desc},
	}
	var err error
	// The client's context lives as long as the client.
	w.client, err = storage.NewBigQueryWriteClient(context.Background(), writerOptions()...)
	if err != nil {
		return nil, fmt.Errorf("bigquery storage write client for %s: %w", WriterEndpoint(), err)
	}
	cctx, cancel := context.WithTimeout(ctx, f.Retry.Policy().AttemptTimeout)
	defer cancel()
	if _, err := w.client.GetWriteStream(cctx, &storagepb.GetWriteStreamRequest{Name: w.name}, noRetry); err != nil {
		err = fmt.Errorf("bigquery table %s via %s: %w", f.ref, WriterEndpoint(), err)
		if !retry.Retryable(err) {
			w.client.Close()
			return nil, err
		}
		log.Warnf(ctx, "bigquery: %v; the writes will try again", err)
	}
	return w, nil
}

// add appends row's encoding (with the change pseudo-columns for upserts)
// to the request being filled, sending it first when row would not fit.
func (w *storageWriter) add(ctx context.Context, row hours.BQRow, encoded []byte, dead func(deadletter.DeadLetter)) error {
	if w.upsert {
		encoded = w.f.enc.AppendChange(encoded, bqschema.ChangeUpsert, row.Seq)
	}
	size := len(encoded) + 1 + protowire.SizeVarint(uint64(len(encoded)))
	mem := rowMemory(encoded, row.Origin)
	if len(w.batch.data) > 0 && (w.batch.bytes+size > w.f.MaxRequestBytes || w.batch.mem+mem > w.requestMemory()) {
		w.send(ctx, &bqAppend{data: w.batch.data, origins: w.batch.origins})
		w.batch = storageBatch{}
		if err := w.drain(ctx, w.inflightLimit(), dead); err != nil {
			return err
		}
	}
	b := &w.batch
	if cap(b.arena)-len(b.arena) < len(encoded) {
		// A new block, not a grown one: the rows before keep slicing
		// their blocks, so growing by reallocation would keep every
		// earlier size of the arena alive with the request (append grows
		// a large slice by a quarter: about five times its rows).
		b.arena = make([]byte, 0, max(arenaBlock, len(encoded)))
	}
	start := len(b.arena)
	b.arena = append(b.arena, encoded...)
	// A full slice expression: no row's slice reaches into the next.
	b.data = append(b.data, b.arena[start:len(b.arena):len(b.arena)])
	b.origins = append(b.origins, row.Origin)
	b.bytes += size
	b.mem += mem
	return nil
}

// requestMemory is what one request may hold in memory (rowMemory): the
// writer's MaxBufferedBytes shared by the requests in flight and the one
// being filled.
func (w *storageWriter) requestMemory() int {
	return max(1, w.f.MaxBufferedBytes/(w.f.MaxInflight+1))
}

// flush sends the last request and waits for every append.
func (w *storageWriter) flush(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	if len(w.batch.data) > 0 {
		w.send(ctx, &bqAppend{data: w.batch.data, origins: w.batch.origins})
		w.batch = storageBatch{}
	}
	return w.drain(ctx, 0, dead)
}

func (w *storageWriter) reset() {
	// Their answers would come to the next bundle's requests.
	for _, req := range w.inflight {
		if req.conn != nil {
			req.conn.close()
		}
	}
	if w.conn != nil {
		w.conn.close()
		w.conn = nil
	}
	w.batch = storageBatch{}
	w.inflight = nil
}

func (w *storageWriter) close() error {
	w.reset()
	return w.client.Close()
}

// retire closes c once it is no longer the connection sends go to and no
// answer is due on it. A connection that failed is kept open while
// requests sent before the failure may still read their answers: closing
// it would lose them, and send the requests again.
func (w *storageWriter) retire(c *appendStream) {
	if c != nil && c != w.conn && (c.answered == c.sent || c.err != nil) {
		c.close()
	}
}

// send sends req's rows without waiting for the answer, opening a
// connection first if there is none.
func (w *storageWriter) send(ctx context.Context, req *bqAppend) {
	if req.bo == nil {
		req.bo = w.f.policy().Start()
	}
	w.inflight = append(w.inflight, req)
	timeout := min(w.f.policy().AttemptTimeout, max(0, time.Until(req.bo.Deadline())))
	first := false
	if w.conn == nil || w.conn.failed() != nil {
		old := w.conn
		c, err := openAppendStream(w.client, timeout)
		if err != nil {
			req.err = fmt.Errorf("bigquery append stream of %s via %s: %w", w.f.ref, WriterEndpoint(), err)
			return
		}
		w.conn, first = c, true
		w.retire(old)
	}
	r := &storagepb.AppendRowsRequest{Rows: &storagepb.AppendRowsRequest_ProtoRows{ProtoRows: &storagepb.AppendRowsRequest_ProtoData{
		Rows: &storagepb.ProtoRows{SerializedRows: req.data}}}}
	if first {
		// BigQuery wants the stream and the schema in a connection's first
		// request only.
		r.WriteStream = w.name
		r.GetProtoRows().WriterSchema = w.schema
		r.TraceId = "sensorpipe"
	}
	req.conn = w.conn
	req.seq, req.err = w.conn.send(ctx, r, timeout)
}

// drain settles the oldest requests until at most keep are in flight.
// Settling may send requests again (retries, the good rows of a rejected
// request); they join the queue.
func (w *storageWriter) drain(ctx context.Context, keep int, dead func(deadletter.DeadLetter)) error {
	for len(w.inflight) > keep {
		req := w.inflight[0]
		w.inflight[0] = nil
		w.inflight = w.inflight[1:]
		if err := w.settle(ctx, req, dead); err != nil {
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
func (w *storageWriter) settle(ctx context.Context, req *bqAppend, dead func(deadletter.DeadLetter)) error {
	err := req.err
	var resp *storagepb.AppendRowsResponse
	if err == nil {
		actx, cancel := req.bo.AttemptContext(ctx)
		resp, err = req.conn.answer(actx, req.seq)
		cancel()
	}
	w.retire(req.conn)
	if err == nil {
		req.bo.Answered()
		w.f.landed(ctx, req.origins)
		w.limit = w.inflightLimit() + 1
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("bigquery append to %s: %w", w.f.ref, ctx.Err())
	}
	if status.Code(err) == codes.Canceled {
		// Not this bundle's context (checked above) and not our own
		// timeouts (errNoAnswer): the connection was cancelled from the
		// other end or in transport before it answered, which leaves
		// unknown whether the request landed. Send it again.
		err = status.Errorf(codes.Unavailable, "the append stream closed before it answered: %v", err)
	}
	if bad := rowErrors(resp, len(req.data)); len(bad) > 0 {
		// BigQuery appended none of the request's rows: dead-letter the
		// rejected ones and send the others again.
		good := &bqAppend{bo: req.bo}
		for i := range req.data {
			if msg, ok := bad[i]; ok {
				w.f.reject(ctx, req.origins[i], errors.New(msg), dead)
				continue
			}
			good.data = append(good.data, req.data[i])
			good.origins = append(good.origins, req.origins[i])
		}
		if len(good.data) > 0 {
			w.send(ctx, good)
		}
		return nil
	}
	if tooLarge(err) && len(req.data) > 1 {
		h := len(req.data) / 2
		w.send(ctx, &bqAppend{data: req.data[:h], origins: req.origins[:h], bo: req.bo})
		w.send(ctx, &bqAppend{data: req.data[h:], origins: req.origins[h:], bo: req.bo})
		return nil
	}
	delay, stop := req.bo.Next(err)
	if stop != nil {
		for _, o := range req.origins {
			w.f.reject(ctx, o, stop, dead)
		}
		return nil
	}
	log.Warnf(ctx, "bigquery: append of %d rows to %s failed (attempt %d), retrying in %v (until %s): %v",
		len(req.data), w.f.ref, req.bo.Attempts(), delay.Round(time.Millisecond), req.bo.Deadline().Format(time.TimeOnly), err)
	if err := retry.Wait(ctx, delay); err != nil {
		return fmt.Errorf("bigquery append to %s: %w", w.f.ref, err)
	}
	// Fewer in flight until appends land again: settle older requests
	// before this one goes again.
	w.limit = max(1, w.inflightLimit()/2)
	if err := w.drain(ctx, w.limit-1, dead); err != nil {
		return err
	}
	w.send(ctx, req)
	return nil
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

// appendStream is one AppendRows connection: a bidi stream whose requests
// BigQuery answers one each, in order. It is used by one goroutine at a
// time. Every call on it is bounded: a send or a wait that outlasts its
// timeout cancels the stream, which fails every request still in flight
// on it, so nothing waits on a wedged connection.
type appendStream struct {
	cs       storagepb.BigQueryWrite_AppendRowsClient
	cancel   context.CancelFunc
	sent     int64 // requests sent
	answered int64 // answers received
	sendErr  error // why no more requests can be sent
	err      error // why no more answers will come
}

// errNoAnswer is an attempt that timed out on the connection.
var errNoAnswer = fmt.Errorf("no answer within the attempt's timeout (from the latency of the calls that answered, at most --write_attempt_timeout): %w", context.DeadlineExceeded)

// noRetry turns off the generated client's own retries of a call, which
// would retry an unreachable endpoint for as long as the call may last:
// settle retries, with backoff, under the retry policy, and while the
// breaker is open a dead endpoint then fails each call at once.
var noRetry = gax.WithRetry(func() gax.Retryer { return nil })

// openAppendStream opens a connection, waiting at most timeout.
func openAppendStream(c *storage.BigQueryWriteClient, timeout time.Duration) (*appendStream, error) {
	// The stream outlives this call, so its context cannot carry the
	// timeout: a timer cancels it instead.
	sctx, cancel := context.WithCancel(context.Background())
	t := time.AfterFunc(timeout, cancel)
	cs, err := c.AppendRows(sctx, noRetry)
	if !t.Stop() {
		err = errNoAnswer
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &appendStream{cs: cs, cancel: cancel}, nil
}

// failed is why the connection can take no more requests, or nil.
func (a *appendStream) failed() error {
	if a.err != nil {
		return a.err
	}
	return a.sendErr
}

func (a *appendStream) close() {
	a.end(status.Error(codes.Canceled, "the append stream was closed"))
}

// end cancels the stream: the requests in flight on it get err.
func (a *appendStream) end(err error) {
	if a.err == nil {
		a.err = err
	}
	a.cancel()
}

// bounded runs call, ending the stream if call takes longer than until or
// ctx ends first.
func (a *appendStream) bounded(ctx context.Context, until time.Time, call func() error) error {
	var late atomic.Bool
	t := time.AfterFunc(time.Until(until), func() { late.Store(true); a.cancel() })
	stop := context.AfterFunc(ctx, a.cancel)
	err := call()
	t.Stop()
	stop()
	if err == nil {
		return nil
	}
	switch {
	case late.Load() || errors.Is(ctx.Err(), context.DeadlineExceeded):
		a.end(errNoAnswer)
	case ctx.Err() != nil:
		a.end(ctx.Err())
	default:
		return err
	}
	return a.err
}

// send sends r and returns its place among the connection's requests.
func (a *appendStream) send(ctx context.Context, r *storagepb.AppendRowsRequest, timeout time.Duration) (int64, error) {
	if err := a.failed(); err != nil {
		return 0, err
	}
	err := a.bounded(ctx, time.Now().Add(timeout), func() error { return a.cs.Send(r) })
	if errors.Is(err, io.EOF) {
		// The stream has ended. Recv has its status, after the answers
		// still on their way, which the requests before this one read.
		err = status.Error(codes.Unavailable, "the append stream ended")
	}
	if err != nil {
		if a.sendErr == nil {
			a.sendErr = err
		}
		return 0, err
	}
	a.sent++
	return a.sent - 1, nil
}

// answer waits, until ctx's deadline, for the answer to request seq,
// reading (and dropping) any answers before it. An answer that reports an
// error is returned with it as a status error.
func (a *appendStream) answer(ctx context.Context, seq int64) (*storagepb.AppendRowsResponse, error) {
	until, ok := ctx.Deadline()
	if !ok {
		until = time.Now().Add(retry.DefaultAttemptTimeout)
	}
	for a.answered <= seq {
		if a.err != nil {
			return nil, a.err
		}
		var resp *storagepb.AppendRowsResponse
		err := a.bounded(ctx, until, func() (err error) {
			resp, err = a.cs.Recv()
			return err
		})
		if err != nil {
			if a.err == nil {
				a.err = err
			}
			return nil, err
		}
		a.answered++
		if a.answered <= seq {
			continue
		}
		if st := resp.GetError(); st != nil {
			return resp, status.ErrorProto(st)
		}
		return resp, nil
	}
	// Only a bug asks for an answer already read.
	return nil, fmt.Errorf("%w: bigquery append answer %d asked for after %d answers", schemas.ErrInternal, seq, a.answered)
}
