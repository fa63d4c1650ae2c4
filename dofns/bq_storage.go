package dofns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sensorpipe/sensorpipe/internal/bqadmin"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// storageWriter appends rows to the table's default stream with the
// Storage Write API: AppendRows requests of at most MaxRequestBytes, up to
// MaxInflight of them in flight. With upsert each row carries BigQuery's
// change data capture pseudo-columns, _CHANGE_TYPE=UPSERT and its
// _CHANGE_SEQUENCE_NUMBER (BQRow.Seq).
type storageWriter struct {
	f      *BigQueryWriteFn
	upsert bool

	mw       *managedwriter.Client
	stream   *managedwriter.ManagedStream
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
	arena   []byte   // encoded rows back to back; data slices into it
	data    [][]byte // one encoded row each
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

// openStorageWriter opens a Storage Write client and the table's default
// stream. The client and stream retain their context for background
// connection management; the bundle's must not cancel them.
func openStorageWriter(ctx context.Context, f *BigQueryWriteFn, upsert bool) (*storageWriter, error) {
	w := &storageWriter{f: f, upsert: upsert}
	var err error
	w.mw, err = managedwriter.NewClient(context.Background(), f.Project, bqadmin.WriterOptions()...)
	if err != nil {
		return nil, fmt.Errorf("bigquery storage write client for %s: %w", bqadmin.WriterEndpoint(), err)
	}
	if err := w.openStream(ctx); err != nil {
		w.mw.Close()
		return nil, err
	}
	return w, nil
}

// openStream opens a managed stream on the table's default stream. It first
// looks the stream up with a deadline, so an unreachable endpoint or a
// missing table fails Setup promptly with a clear message.
func (w *storageWriter) openStream(ctx context.Context) error {
	parent := managedwriter.TableParentFromParts(w.f.Project, w.f.Dataset, w.f.Table)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := w.mw.GetWriteStream(cctx, &storagepb.GetWriteStreamRequest{Name: parent + "/streams/_default"}); err != nil {
		return fmt.Errorf("bigquery table %s via %s: %w", w.f.ref, bqadmin.WriterEndpoint(), err)
	}
	desc := w.f.enc.Descriptor()
	if w.upsert {
		desc = w.f.enc.ChangeDescriptor()
	}
	ms, err := w.mw.NewManagedStream(context.Background(),
		managedwriter.WithDestinationTable(parent),
		managedwriter.WithType(managedwriter.DefaultStream),
		managedwriter.WithSchemaDescriptor(proto.CloneOf(desc)),
		managedwriter.EnableWriteRetries(true),
	)
	if err != nil {
		return fmt.Errorf("bigquery default stream of %s via %s: %w", w.f.ref, bqadmin.WriterEndpoint(), err)
	}
	w.stream = ms
	return nil
}

// add appends row's encoding (with the change pseudo-columns for upserts)
// to the request being filled, sending it first when row would not fit.
func (w *storageWriter) add(ctx context.Context, row schemas.BQRow, encoded []byte, dead func(schemas.DeadLetter)) error {
	if w.upsert {
		encoded = w.f.enc.AppendChange(encoded, schemas.ChangeUpsert, row.Seq)
	}
	size := len(encoded) + 1 + protowire.SizeVarint(uint64(len(encoded)))
	if len(w.batch.data) > 0 && w.batch.bytes+size > w.f.MaxRequestBytes {
		w.send(ctx, &bqAppend{data: w.batch.data, origins: w.batch.origins})
		w.batch = storageBatch{}
		if err := w.drain(ctx, w.inflightLimit(), dead); err != nil {
			return err
		}
	}
	b := &w.batch
	if b.arena == nil {
		b.arena = make([]byte, 0, min(64<<10, w.f.MaxRequestBytes))
	}
	start := len(b.arena)
	b.arena = append(b.arena, encoded...)
	// A full slice expression: a reallocated arena leaves earlier rows in
	// the old array, which nothing writes to again.
	b.data = append(b.data, b.arena[start:len(b.arena):len(b.arena)])
	b.origins = append(b.origins, row.Origin)
	b.bytes += size
	return nil
}

// flush sends the last request and waits for every append.
func (w *storageWriter) flush(ctx context.Context, dead func(schemas.DeadLetter)) error {
	if len(w.batch.data) > 0 {
		w.send(ctx, &bqAppend{data: w.batch.data, origins: w.batch.origins})
		w.batch = storageBatch{}
	}
	return w.drain(ctx, 0, dead)
}

func (w *storageWriter) reset() {
	w.batch = storageBatch{}
	w.inflight = nil
}

func (w *storageWriter) close() error {
	var errs []error
	if w.stream != nil {
		if err := w.stream.Close(); err != nil && !errors.Is(err, io.EOF) {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, w.mw.Close())...)
}

// send appends req's rows to the stream without waiting for the result.
func (w *storageWriter) send(ctx context.Context, req *bqAppend) {
	if req.bo == nil {
		req.bo = w.f.policy().Start()
	}
	req.res, req.err = w.stream.AppendRows(ctx, req.data)
	w.inflight = append(w.inflight, req)
}

// drain settles the oldest requests until at most keep are in flight.
// Settling may send requests again (retries, the good rows of a rejected
// request); they join the queue.
func (w *storageWriter) drain(ctx context.Context, keep int, dead func(schemas.DeadLetter)) error {
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
func (w *storageWriter) settle(ctx context.Context, req *bqAppend, dead func(schemas.DeadLetter)) error {
	err := req.err
	var resp *storagepb.AppendRowsResponse
	if err == nil {
		actx, cancel := req.bo.AttemptContext(ctx)
		resp, err = req.res.FullResponse(actx)
		cancel()
	}
	if err == nil {
		w.f.landed(ctx, req.origins)
		w.limit = w.inflightLimit() + 1
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("bigquery append to %s: %w", w.f.ref, ctx.Err())
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
	if req.err != nil || errors.Is(err, context.DeadlineExceeded) {
		// The stream failed, or no answer came within the attempt's
		// timeout: a fresh stream, so a wedged connection cannot take the
		// retry down with it.
		if err := w.reopen(ctx); err != nil {
			log.Warnf(ctx, "bigquery: %v", err)
		}
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

// reopen replaces a failed managed stream.
func (w *storageWriter) reopen(ctx context.Context) error {
	if w.stream != nil {
		_ = w.stream.Close()
	}
	return w.openStream(ctx)
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
