package bigtableio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"golang.org/x/sync/semaphore"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio/flowcontrol"
	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/registry"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	dofnreg.DoFn(&writeFn{}, register.Function3x1[context.Context, hours.RowMutation, func(deadletter.DeadLetter), error])
}

// Limits of one Bigtable MutateRows request (Cloud Bigtable's quotas and
// limits, https://cloud.google.com/bigtable/quotas#limits-data-size).
const (
	maxMutationsPerEntry = 100_000
	// DefaultBatchCells is how many cells a bundle buffers before it
	// writes them in one ApplyBulk; the client splits a batch into
	// MutateRows requests of at most 100,000 mutations.
	DefaultBatchCells = 20_000
)

// writeFn writes row mutations with ApplyBulk. It batches entries,
// flushes when the batch is full and at the end of every bundle, retries
// transient errors under the retry policy (internal/retry: backoff with
// jitter, a timeout per attempt, a total deadline), and dead-letters the
// readings of entries that still fail as write_failed (sink bigtable).
// Every cell carries an explicit timestamp, so a retried or replayed write
// is idempotent.
//
// When a batch exhausts its deadline, Bigtable is taken to be down (a
// retry.Breaker): later batches get one attempt each until one lands, so a
// dead Bigtable costs one deadline, not one per batch, and the run ends
// with every reading written or dead-lettered.
//
// It counts each write in the run's ledger (internal/ledger): routed when
// it arrives, written when Bigtable acknowledges it, failed when it is
// dead-lettered. It emits dead letters from FinishBundle, which Beam Go
// does in the global window, so its input must be in the global window:
// Write puts it there.
type writeFn struct {
	Project  string
	Instance string
	// Retry is the retry policy's settings (zero: retry.Policy's
	// defaults, a 2-minute deadline).
	Retry retry.Settings
	// MaxInflight bounds the instance's ApplyBulk batches in flight at
	// once (default 4), so building rows overlaps with waiting for
	// Bigtable.
	MaxInflight int
	// WorkerBudget bounds the cells in flight of all the worker process's
	// instances with the same target to MaxInflight x BatchCells
	// (workerCells), since a runner runs bundles of one stage side by
	// side; otherwise the instance alone holds that budget. For batches
	// (Write): a local stream bounded so holds more memory at an hour's
	// close, its on-time firings' writes waiting behind each other
	// (docs/performance.md).
	WorkerBudget bool
	// BatchCells is how many cells one ApplyBulk batch holds (default
	// DefaultBatchCells).
	BatchCells int
	// AppProfile is the Bigtable app profile the writes use ("" is the
	// instance's default), e.g. a single-cluster profile for backfills.
	AppProfile string
	// Flow caps and paces the worker's outstanding writes (flowcontrol.go).
	Flow flowcontrol.Settings
	// Uncounted says the writes are not readings' (Config.Uncounted).
	Uncounted bool

	client  *bigtable.Client
	flow    *flowcontrol.Controller
	tables  map[string]*bigtable.Table
	pending []entry
	cells   int
	ctrs    ledger.Recorder
	// down opens when a batch exhausts its deadline, and closes when a
	// batch lands.
	down *retry.Breaker
	// latency is the worker's MutateRows latencies, which set the
	// attempts' timeouts (retry.Latency).
	latency *retry.Latency

	// Batches in flight hold a slot and their cells of the budget (the
	// worker's with WorkerBudget), and report here; the DoFn's own goroutine
	// emits their dead letters and counts their writes.
	slots    chan struct{}
	budget   int64
	inflight *semaphore.Weighted
	wg       sync.WaitGroup
	mu       sync.Mutex
	results  []batchResult
}

// batchResult is what one background batch did.
type batchResult struct {
	written []entry
	failed  []failedEntry
	err     error
}

// entry is one ApplyBulk entry with the readings it carries.
type entry struct {
	table   string
	key     string
	mut     *bigtable.Mutation
	cells   int
	bytes   int // request bytes, for flow control
	origins []hours.Origin
}

// newWriteFn returns a writer for project/instance.
func newWriteFn(project, instance string) *writeFn {
	return &writeFn{Project: project, Instance: instance}
}

// Setup opens the client. BIGTABLE_EMULATOR_HOST is honoured by the client.
func (f *writeFn) Setup(ctx context.Context) error {
	if f.MaxInflight <= 0 {
		f.MaxInflight = 4
	}
	if f.BatchCells <= 0 {
		f.BatchCells = DefaultBatchCells
	}
	f.slots = make(chan struct{}, f.MaxInflight)
	target := f.Project + "/" + f.Instance + "/" + f.AppProfile
	f.budget = int64(f.MaxInflight) * int64(f.BatchCells)
	f.inflight = semaphore.NewWeighted(f.budget)
	if f.WorkerBudget {
		f.inflight = workerCells(target, f.budget)
	}
	f.down = &retry.Breaker{}
	f.latency = retry.LatencyOf("bigtable MutateRows " + target)
	c, err := NewClientProfile(ctx, f.Project, f.Instance, f.AppProfile)
	if err != nil {
		return err
	}
	f.client = c
	f.flow = flowcontrol.ForWorker(target, f.Flow)
	f.tables = map[string]*bigtable.Table{}
	return nil
}

// cellBudgets are the worker process's semaphores of the cells in flight,
// one per Bigtable target and budget, kept for the life of the process
// (registry.Get). Bounded per instance only, the batches of prism's
// side-by-side bundles (5 in a local batch), each holding its cells as
// client mutations (about 240 bytes a cell), reached 700,000 cells (172
// MB) in a 300,000-reading run of 15,000-cell rows. It counts cells, not
// batches, since a batch holds as many cells as its rows bring.
var cellBudgets registry.Registry[budgetKey, *semaphore.Weighted]

type budgetKey struct {
	target string
	cells  int64
}

// workerCells returns the worker process's semaphore of budget cells in
// flight to target.
func workerCells(target string, budget int64) *semaphore.Weighted {
	return cellBudgets.Get(budgetKey{target, budget}, func() *semaphore.Weighted { return semaphore.NewWeighted(budget) })
}

// Teardown closes the client.
func (f *writeFn) Teardown() error {
	if f.client != nil {
		return f.client.Close()
	}
	return nil
}

// ProcessElement buffers m, splitting rows too large for one entry, and
// flushes when the buffer is full. A mutation it cannot handle is
// dead-lettered with reason internal.
func (f *writeFn) ProcessElement(ctx context.Context, m hours.RowMutation, dead func(deadletter.DeadLetter)) error {
	f.countOrigins(ctx, m.Table, ledger.Routed, m.Origins)
	var entries []entry
	if err := ledger.Guard(func() { entries = splitEntries(m) }); err != nil {
		f.fail(ctx, failedEntry{entry{table: m.Table, key: m.RowKey, origins: m.Origins}, err}, dead)
		return f.collect(ctx, dead)
	}
	for _, e := range entries {
		if e.cells == 0 {
			// Readings with no value to store: nothing to write.
			f.count(ctx, e)
			continue
		}
		f.pending = append(f.pending, e)
		f.cells += e.cells
	}
	if f.cells >= f.BatchCells {
		f.flush(ctx)
	}
	return f.collect(ctx, dead)
}

// FinishBundle writes what is left and waits for every batch in flight, so
// the bundle commits only once every mutation has landed or been
// dead-lettered; then its counts go to the run's ledger record.
func (f *writeFn) FinishBundle(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	f.flush(ctx)
	f.wg.Wait()
	if err := f.collect(ctx, dead); err != nil {
		return err
	}
	return f.ctrs.Commit(ctx)
}

// splitEntries turns a row mutation into entries of at most
// maxMutationsPerEntry cells and deletions, cutting only between readings.
func splitEntries(m hours.RowMutation) []entry {
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
			cur.bytes += cellBytes(c)
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

func (f *writeFn) table(name string) *bigtable.Table {
	t, ok := f.tables[name]
	if !ok {
		t = f.client.Open(name)
		f.tables[name] = t
	}
	return t
}

// flush starts writing the pending entries in the background, table by
// table, once a slot is free.
func (f *writeFn) flush(ctx context.Context) {
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
	// A batch over the budget goes alone.
	n := min(int64(f.cells), f.budget)
	f.pending, f.cells = nil, 0
	tables := make([]*bigtable.Table, len(order))
	for i, name := range order {
		tables[i] = f.table(name)
	}
	f.slots <- struct{}{}
	// The wait ends: batches in flight always finish (the retry policy
	// bounds them), and with a background context Acquire cannot fail.
	_ = f.inflight.Acquire(context.Background(), n)
	f.wg.Add(1)
	go func() {
		defer func() { f.inflight.Release(n); <-f.slots; f.wg.Done() }()
		var res batchResult
		for i, name := range order {
			var (
				written []entry
				failed  []failedEntry
				err     error
			)
			if perr := ledger.Guard(func() { written, failed, err = f.apply(ctx, tables[i], byTable[name]) }); perr != nil {
				// Whatever apply did not report is dead-lettered: a
				// write it may have made is idempotent to repeat.
				written, failed, err = nil, nil, nil
				for _, e := range byTable[name] {
					failed = append(failed, failedEntry{e, perr})
				}
			}
			res.written = append(res.written, written...)
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
func (f *writeFn) collect(ctx context.Context, dead func(deadletter.DeadLetter)) error {
	f.mu.Lock()
	results := f.results
	f.results = nil
	f.mu.Unlock()
	var first error
	for _, res := range results {
		for _, e := range res.written {
			f.count(ctx, e)
		}
		for _, fe := range res.failed {
			f.fail(ctx, fe, dead)
		}
		if res.err != nil && first == nil {
			first = res.err
		}
	}
	return first
}

// count counts an entry's writes as acknowledged.
func (f *writeFn) count(ctx context.Context, e entry) {
	if f.Uncounted {
		return
	}
	f.countOrigins(ctx, e.table, ledger.Written, e.origins)
	f.ctrs.Inc(ctx, ledger.RowsKey(deadletter.SinkBigtable, e.table), 1)
}

// countOrigins counts origins' writes to table with outcome: one counter
// update per kind, not per reading (each update builds its key and looks
// its counter up; per reading that was 1-2 % of a batch's CPU).
func (f *writeFn) countOrigins(ctx context.Context, table, outcome string, origins []hours.Origin) {
	if f.Uncounted {
		return
	}
	var n [4]int64
	for _, o := range origins {
		if int(o.Kind) < len(n) {
			n[o.Kind]++
		} else {
			f.ctrs.Sink(ctx, deadletter.SinkBigtable, table, o.Kind, outcome, 1)
		}
	}
	for k, c := range n {
		f.ctrs.Sink(ctx, deadletter.SinkBigtable, table, hours.OriginKind(k), outcome, c)
	}
}

// fail dead-letters an entry's readings as write_failed (or internal).
func (f *writeFn) fail(ctx context.Context, fe failedEntry, dead func(deadletter.DeadLetter)) {
	err := fe.err
	if !errors.Is(err, schemas.ErrInternal) {
		err = fmt.Errorf("%w: bigtable table %s row %q: %w", schemas.ErrWriteFailed, fe.entry.table, fe.entry.key, err)
	}
	if f.Uncounted {
		log.Warnf(ctx, "%v (left unwritten)", err)
		return
	}
	unavailable := errors.Is(err, retry.ErrExhausted)
	for _, o := range fe.entry.origins {
		f.ctrs.Sink(ctx, deadletter.SinkBigtable, fe.entry.table, o.Kind, ledger.Failed, 1)
		if unavailable {
			f.ctrs.Sink(ctx, deadletter.SinkBigtable, fe.entry.table, o.Kind, ledger.Unavailable, 1)
		}
		dead(deadletter.NewDeadLetter(deadletter.SinkBigtable, o.Raw, o.Source, err, time.Now()))
	}
}

type failedEntry struct {
	entry entry
	err   error
}

// apply writes entries under the retry policy and returns those that
// landed and those that failed: permanently, or still failing when the
// deadline passed (ErrExhausted). Only a cancelled run is returned as an
// error (the bundle fails, and the runner retries or stops it).
func (f *writeFn) apply(ctx context.Context, t *bigtable.Table, entries []entry) ([]entry, []failedEntry, error) {
	var (
		written []entry
		failed  []failedEntry
	)
	p := f.Retry.Policy()
	p.Latency = f.latency
	b := f.down.Policy(p).Start()
	for len(entries) > 0 {
		keys := make([]string, len(entries))
		muts := make([]*bigtable.Mutation, len(entries))
		for i, e := range entries {
			keys[i], muts[i] = e.key, e.mut
		}
		errs, err := f.applyBulk(ctx, b, t, keys, muts, entries)
		if ctx.Err() != nil {
			return written, nil, fmt.Errorf("apply bulk: %w", ctx.Err())
		}
		var again []failedEntry
		for i, e := range entries {
			ee := err
			if ee == nil && errs != nil {
				ee = errs[i]
			}
			switch {
			case ee == nil:
				written = append(written, e)
			case retry.Retryable(ee):
				again = append(again, failedEntry{e, ee})
			default:
				failed = append(failed, failedEntry{e, ee})
			}
		}
		if len(again) == 0 {
			break
		}
		delay, stop := b.Next(again[0].err)
		if stop != nil {
			// Every error in again is retryable: the deadline passed.
			f.down.Record(stop)
			for _, r := range again {
				failed = append(failed, failedEntry{r.entry, b.Exhausted(r.err)})
			}
			return written, failed, nil
		}
		log.Warnf(ctx, "bigtable: %d of %d entries failed (attempt %d), retrying in %v (until %s): %v",
			len(again), len(entries), b.Attempts(), delay.Round(time.Millisecond), b.Deadline().Format(time.TimeOnly), again[0].err)
		if err := retry.Wait(ctx, delay); err != nil {
			return written, nil, fmt.Errorf("apply bulk: %w", err)
		}
		entries = entries[:0:0]
		for _, r := range again {
			entries = append(entries, r.entry)
		}
	}
	if len(written) > 0 {
		f.down.Record(nil)
	}
	return written, failed, nil
}
