// Package progress keeps process-wide counters of what a run has read,
// written and dead-lettered, and prints them while the run goes on.
//
// Beam metrics only reach the launcher when a job ends; on the local runners
// (prism and direct) the SDK harness runs inside the launcher's process, so
// these counters let a long backfill report progress as it happens. On
// Dataflow the job's own metrics serve instead.
package progress

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Counters of one process.
var (
	Read         atomic.Int64 // input records parsed (valid or not)
	Written      atomic.Int64 // readings landed in Bigtable
	Rows         atomic.Int64 // Bigtable row mutations applied
	Duplicates   atomic.Int64 // readings merged into an earlier one (same identity and millisecond)
	BQWritten    atomic.Int64 // rows landed in BigQuery
	DeadLettered atomic.Int64 // records written to the dead letter
)

var (
	byReason  sync.Map // reason -> *atomic.Int64
	byBQTable sync.Map // table -> *atomic.Int64
)

// AddDead counts n dead letters with reason.
func AddDead(reason string, n int64) {
	DeadLettered.Add(n)
	add(&byReason, reason, n)
}

// AddBQ counts n rows landed in BigQuery table.
func AddBQ(table string, n int64) {
	BQWritten.Add(n)
	add(&byBQTable, table, n)
}

func add(m *sync.Map, key string, n int64) {
	c, _ := m.LoadOrStore(key, new(atomic.Int64))
	c.(*atomic.Int64).Add(n)
}

// DeadByReason returns the dead letters counted per reason, sorted by reason.
func DeadByReason() []Count { return counts(&byReason) }

// BQByTable returns the BigQuery rows counted per table, sorted by table.
func BQByTable() []Count { return counts(&byBQTable) }

func counts(m *sync.Map) []Count {
	var out []Count
	m.Range(func(k, v any) bool {
		out = append(out, Count{Key: k.(string), N: v.(*atomic.Int64).Load()})
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Count is a number of records under one key (a reason or a table).
type Count struct {
	Key string
	N   int64
}

// Snapshot is the counters at one instant.
type Snapshot struct {
	Read, Written, BQWritten, DeadLettered int64
	At                                     time.Time
}

// Take reads the counters.
func Take() Snapshot {
	return Snapshot{Read: Read.Load(), Written: Written.Load(), BQWritten: BQWritten.Load(), DeadLettered: DeadLettered.Load(), At: time.Now()}
}

// Reset zeroes the counters (between runs in one process, e.g. tests).
func Reset() {
	Read.Store(0)
	Written.Store(0)
	Rows.Store(0)
	Duplicates.Store(0)
	BQWritten.Store(0)
	DeadLettered.Store(0)
	byReason.Clear()
	byBQTable.Clear()
}

// Line formats a progress line: totals and the read rate since prev.
func Line(prev, cur Snapshot, start time.Time) string {
	rate := 0.0
	if d := cur.At.Sub(prev.At).Seconds(); d > 0 {
		rate = float64(cur.Read-prev.Read) / d
	}
	return fmt.Sprintf("progress %6.0fs: read %d, written %d (bigquery %d), dead-lettered %d, %.0f readings/s",
		cur.At.Sub(start).Seconds(), cur.Read, cur.Written, cur.BQWritten, cur.DeadLettered, rate)
}

// Report prints a progress line to w every interval until stop is closed.
func Report(w io.Writer, interval time.Duration, stop <-chan struct{}) {
	start := time.Now()
	prev := Take()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			cur := Take()
			fmt.Fprintln(w, Line(prev, cur, start))
			prev = cur
		}
	}
}
