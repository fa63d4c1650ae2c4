package ledger

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// Recorder keeps the Beam counters of the run's ledger (this package
// names them) that one DoFn keeps, made on first use. The runner reports
// them: the ledger is the runner's account, locally and on Dataflow.
//
// When the run keeps a durable record (RecordOption), the Recorder also
// tallies its bundle's counts, and Commit, in the DoFn's FinishBundle,
// writes them to the record as one file: the ledger is then read from
// the record (ReadRecord), which no runner's metrics reporting can lose.
type Recorder struct {
	ctrs map[Key]beam.Counter

	// dir is the record's folder ("": none), read once.
	dir   string
	known bool
	// tally is the counts of bundle since its start.
	tally  Counters
	bundle string
}

// Inc counts n of k.
func (c *Recorder) Inc(ctx context.Context, k Key, n int64) {
	if n == 0 {
		return
	}
	c.Register(ctx, k)
	c.ctrs[k].Inc(ctx, n)
	if c.recording() {
		if id := metrics.GetBundleID(ctx); id != c.bundle {
			// A new bundle: counts left from another were of a bundle
			// that failed before its FinishBundle, which the runner
			// does not commit.
			c.tally, c.bundle = nil, id
		}
		if c.tally == nil {
			c.tally = Counters{}
		}
		c.tally[k] += n
	}
}

// recording reports whether the run keeps a durable record.
func (c *Recorder) recording() bool {
	if !c.known {
		c.dir, c.known = recordDir(), true
	}
	return c.dir != ""
}

// Commit writes the counts of the bundle ending to the run's durable
// record, when it keeps one: a DoFn calls it last in FinishBundle, and a
// bundle whose record cannot be written fails.
func (c *Recorder) Commit(ctx context.Context) error {
	if len(c.tally) == 0 || !c.recording() {
		c.tally = nil
		return nil
	}
	if err := WriteRecord(ctx, c.dir, c.tally); err != nil {
		return err
	}
	c.tally = nil
	return nil
}

// Register makes the counters of k's family (Family) and, the first
// time, reports them all at zero, so that the runner knows each before
// several bundles first count it at once. A DoFn whose first count may
// come in many bundles at once (a dead letter when a store dies) registers
// in StartBundle, before it has anything to count.
//
// Not on the direct runner: it keeps one metrics store for the whole run
// and, of two cells of one counter, only the first, so a zero cell made
// here would hide the counts of a later bundle. It has no short ids, and
// so no race to avoid.
func (c *Recorder) Register(ctx context.Context, k Key) {
	if _, ok := c.ctrs[k]; ok {
		return
	}
	if c.ctrs == nil {
		c.ctrs = map[Key]beam.Counter{}
	}
	zero := metrics.GetBundleID(ctx) != "direct"
	for _, fk := range append(Family(k), k) {
		if _, ok := c.ctrs[fk]; !ok {
			c.ctrs[fk] = beam.NewCounter(fk.Namespace, fk.Name)
			if zero {
				c.ctrs[fk].Inc(ctx, 0)
			}
		}
	}
}

// Sink counts a write of kind to sink's table with outcome.
func (c *Recorder) Sink(ctx context.Context, sink, table string, kind hours.OriginKind, outcome string, n int64) {
	c.Inc(ctx, SinkKey(sink, table, kind, outcome), n)
}

// Guard runs fn and turns a panic into an error wrapping
// schemas.ErrInternal, naming where it happened, so a record that reaches
// code that cannot handle it is dead-lettered (reason internal) instead of
// crashing its bundle.
func Guard(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic: %v%s", schemas.ErrInternal, r, panicSite())
		}
	}()
	fn()
	return nil
}

// panicSite names the first sensorpipe function on the panicking stack.
func panicSite() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "sensorpipe/") && !strings.Contains(f.Function, "ledger.Guard") && !strings.Contains(f.Function, "ledger.panicSite") {
			return fmt.Sprintf(" (at %s, %s:%d)", f.Function, f.File[strings.LastIndex(f.File, "/")+1:], f.Line)
		}
		if !more {
			return ""
		}
	}
}
