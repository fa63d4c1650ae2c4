package dofns

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sensorpipe/sensorpipe/internal/progress"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	register.DoFn3x1[context.Context, schemas.RowMutation, func(schemas.DeadLetter), error](&BigtableWriteFn{})
}

// Limits of one Bigtable MutateRows request (seed 002 and the API's quota).
const (
	maxMutationsPerEntry = 100_000
	// flushCells is how many cells a bundle buffers before it writes; the
	// client splits a flush into requests of at most 100,000 mutations.
	flushCells = 20_000
)

// BigtableWriteFn writes row mutations with ApplyBulk. It batches entries,
// flushes when the batch is full and at the end of every bundle, retries
// transient errors with backoff, and dead-letters the readings of entries
// that still fail as write_failed. Every cell carries an explicit timestamp,
// so a retried or replayed write is idempotent.
//
// It replaces Beam's bigtableio, which routes every write through one
// GroupByKey on a fixed key and so serialises the sink.
type BigtableWriteFn struct {
	Project  string
	Instance string
	// MaxAttempts bounds the attempts at one entry (default 5).
	MaxAttempts int
	// Backoff is the first retry delay, doubled each attempt (default 200ms).
	Backoff time.Duration
	// MaxInflight bounds the ApplyBulk batches in flight at once (default
	// 4), so building rows overlaps with waiting for Bigtable.
	MaxInflight int

	client  *bigtable.Client
	tables  map[string]*bigtable.Table
	pending []entry
	cells   int
	written beam.Counter
	failed  beam.Counter

	// Batches in flight report here; the DoFn's own goroutine emits their
	// dead letters and counts their writes.
	slots   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []batchResult
}

// batchResult is what one background batch did.
type batchResult struct {
	written int64
	failed  []failedEntry
	err     error
}

// entry is one ApplyBulk entry with the readings it carries.
type entry struct {
	table   string
	key     string
	mut     *bigtable.Mutation
	cells   int
	origins []schemas.Origin
}

// NewBigtableWriteFn returns a writer for project/instance.
func NewBigtableWriteFn(project, instance string) *BigtableWriteFn {
	return &BigtableWriteFn{Project: project, Instance: instance}
}

// Setup opens the client. BIGTABLE_EMULATOR_HOST is honoured by the client.
func (f *BigtableWriteFn) Setup(ctx context.Context) error {
	if f.MaxAttempts <= 0 {
		f.MaxAttempts = 5
	}
	if f.Backoff <= 0 {
		f.Backoff = 200 * time.Millisecond
	}
	if f.MaxInflight <= 0 {
		f.MaxInflight = 4
	}
	f.slots = make(chan struct{}, f.MaxInflight)
	c, err := NewBigtableClient(ctx, f.Project, f.Instance)
	if err != nil {
		return err
	}
	f.client = c
	f.tables = map[string]*bigtable.Table{}
	f.written = beam.NewCounter("bigtable", "readings_written")
	f.failed = beam.NewCounter("bigtable", "write_failed")
	return nil
}

// NewBigtableClient opens a data client with client-side metrics export off
// (it would need Cloud Monitoring credentials and means nothing on the
// emulator).
func NewBigtableClient(ctx context.Context, project, instance string) (*bigtable.Client, error) {
	c, err := bigtable.NewClientWithConfig(ctx, project, instance, bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	if err != nil {
		return nil, fmt.Errorf("bigtable client for %s/%s: %w", project, instance, err)
	}
	return c, nil
}

// Teardown closes the client.
func (f *BigtableWriteFn) Teardown() error {
	if f.client != nil {
		return f.client.Close()
	}
	return nil
}

// ProcessElement buffers m, splitting rows too large for one entry, and
// flushes when the buffer is full.
func (f *BigtableWriteFn) ProcessElement(ctx context.Context, m schemas.RowMutation, dead func(schemas.DeadLetter)) error {
	for _, e := range splitEntries(m) {
		if e.cells == 0 {
			// Readings with no value to store: nothing to write.
			progress.Written.Add(int64(len(e.origins)))
			f.count(ctx, int64(len(e.origins)))
			continue
		}
		f.pending = append(f.pending, e)
		f.cells += e.cells
	}
	if f.cells >= flushCells {
		f.flush(ctx)
	}
	return f.collect(ctx, dead)
}

// FinishBundle writes what is left and waits for every batch in flight, so
// the bundle commits only once every mutation has landed or been
// dead-lettered.
func (f *BigtableWriteFn) FinishBundle(ctx context.Context, dead func(schemas.DeadLetter)) error {
	f.flush(ctx)
	f.wg.Wait()
	return f.collect(ctx, dead)
}

// splitEntries turns a row mutation into entries of at most
// maxMutationsPerEntry cells and deletions, cutting only between readings.
func splitEntries(m schemas.RowMutation) []entry {
	var out []entry
	cur := entry{table: m.Table, key: m.RowKey, mut: bigtable.NewMutation()}
	next, nextDel := 0, 0
	for _, o := range m.Origins {
		n := o.Cells + o.Deletes
		if cur.cells > 0 && cur.cells+n > maxMutationsPerEntry {
			out = append(out, cur)
			cur = entry{table: m.Table, key: m.RowKey, mut: bigtable.NewMutation()}
		}
		for _, c := range m.Cells[next : next+o.Cells] {
			cur.mut.Set(c.Family, c.Qualifier, bigtable.Timestamp(c.TsMicros), c.Value)
		}
		for _, c := range m.Deletes[nextDel : nextDel+o.Deletes] {
			// The version's millisecond: [ts, ts+1ms).
			ts := bigtable.Timestamp(c.TsMicros)
			cur.mut.DeleteTimestampRange(c.Family, c.Qualifier, ts, ts+1000)
		}
		next += o.Cells
		nextDel += o.Deletes
		cur.cells += n
		cur.origins = append(cur.origins, o)
	}
	return append(out, cur)
}

func (f *BigtableWriteFn) table(name string) *bigtable.Table {
	t, ok := f.tables[name]
	if !ok {
		t = f.client.Open(name)
		f.tables[name] = t
	}
	return t
}

// flush starts writing the pending entries in the background, table by
// table, once a slot is free.
func (f *BigtableWriteFn) flush(ctx context.Context) {
	if len(f.pending) == 0 {
		return
	}
	byTable := map[string][]entry{}
	var order []string
	for _, e := range f.pending {
		if _, ok := byTable[e.table]; !ok {
			order = append(order, e.table)
		}
		byTable[e.table] = append(byTable[e.table], e)
	}
	f.pending, f.cells = nil, 0
	tables := make([]*bigtable.Table, len(order))
	for i, name := range order {
		tables[i] = f.table(name)
	}
	f.slots <- struct{}{}
	f.wg.Add(1)
	go func() {
		defer func() { <-f.slots; f.wg.Done() }()
		var res batchResult
		for i, name := range order {
			written, failed, err := f.apply(ctx, tables[i], byTable[name])
			res.written += written
			res.failed = append(res.failed, failed...)
			if err != nil {
				res.err = err
				break
			}
		}
		f.mu.Lock()
		f.results = append(f.results, res)
		f.mu.Unlock()
	}()
}

// collect emits the dead letters and counts of the batches that have
// finished, and returns the first error among them (the bundle then fails
// and the runner retries it: the writes are idempotent).
func (f *BigtableWriteFn) collect(ctx context.Context, dead func(schemas.DeadLetter)) error {
	f.mu.Lock()
	results := f.results
	f.results = nil
	f.mu.Unlock()
	var first error
	for _, res := range results {
		f.count(ctx, res.written)
		for _, fe := range res.failed {
			f.failed.Inc(ctx, int64(len(fe.entry.origins)))
			for _, o := range fe.entry.origins {
				dead(NewDeadLetter(o.Raw, o.Source, fmt.Errorf("%w: table %s row %q: %v", schemas.ErrWriteFailed, fe.entry.table, fe.entry.key, fe.err)))
			}
		}
		if res.err != nil && first == nil {
			first = res.err
		}
	}
	return first
}

type failedEntry struct {
	entry entry
	err   error
}

// apply writes entries with retries and returns how many readings landed.
// A context cancellation is returned as an error (the bundle fails and is
// retried by the runner); entries that fail permanently or exhaust their
// attempts are returned as failed.
func (f *BigtableWriteFn) apply(ctx context.Context, t *bigtable.Table, entries []entry) (int64, []failedEntry, error) {
	var (
		failed  []failedEntry
		written int64
	)
	delay := f.Backoff
	for attempt := 1; len(entries) > 0; attempt++ {
		keys := make([]string, len(entries))
		muts := make([]*bigtable.Mutation, len(entries))
		for i, e := range entries {
			keys[i], muts[i] = e.key, e.mut
		}
		errs, err := t.ApplyBulk(ctx, keys, muts)
		if ctx.Err() != nil {
			return written, nil, fmt.Errorf("apply bulk: %w", ctx.Err())
		}
		var retry []failedEntry
		for i, e := range entries {
			ee := err
			if ee == nil && errs != nil {
				ee = errs[i]
			}
			switch {
			case ee == nil:
				written += int64(len(e.origins))
				progress.Written.Add(int64(len(e.origins)))
				progress.Rows.Add(1)
			case transient(ee) && attempt < f.MaxAttempts:
				retry = append(retry, failedEntry{e, ee})
			case transient(ee):
				failed = append(failed, failedEntry{e, fmt.Errorf("after %d attempts: %w", attempt, ee)})
			default:
				failed = append(failed, failedEntry{e, ee})
			}
		}
		if len(retry) == 0 {
			break
		}
		log.Warnf(ctx, "bigtable: %d of %d entries failed (attempt %d of %d), retrying in %v: %v",
			len(retry), len(entries), attempt, f.MaxAttempts, delay, retry[0].err)
		select {
		case <-ctx.Done():
			return written, nil, fmt.Errorf("apply bulk: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay *= 2
		entries = entries[:0:0]
		for _, r := range retry {
			entries = append(entries, r.entry)
		}
	}
	return written, failed, nil
}

// count adds to the Beam counter of readings written, on the DoFn's
// goroutine (the progress counters are updated as batches land).
func (f *BigtableWriteFn) count(ctx context.Context, n int64) {
	f.written.Inc(ctx, n)
}

// transient reports whether a write error may succeed on retry.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted, codes.Internal, codes.Unknown:
		return true
	}
	return false
}
