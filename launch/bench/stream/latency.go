package main

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"
)

// sampleState is where a sampled reading is.
type sampleState uint8

const (
	waiting       sampleState = iota
	seen                      // its cell was read back
	missed                    // not seen within the deadline: a failure
	publishFailed             // the emulator refused the publish
)

// sample is one sampled reading: its cell and when it was published.
type sample struct {
	key       string // row key
	tsMicros  int64  // cell timestamp of the probe cell (target.cell())
	published time.Time
	visible   time.Time
	state     sampleState
}

// poller watches a share of the sampled rows: every interval it reads the
// rows with readings still waiting, in one ReadRows call restricted to
// probe cells (target.cell()) in the waiting readings' timestamp range,
// without values. Its cost is one small request per interval, whatever the
// rate, and the rows it reads hold only their sensor's readings of the hour.
type poller struct {
	tbl      *bigtable.Table
	interval time.Duration
	deadline time.Duration

	mu      sync.Mutex
	byKey   map[string][]*sample
	waiting int

	reads, readErrs atomic.Int64
	readNanos       atomic.Int64 // time spent in ReadRows
	lastErr         atomic.Value // error
}

func newPoller(tbl *bigtable.Table, interval, deadline time.Duration) *poller {
	return &poller{tbl: tbl, interval: interval, deadline: deadline, byKey: map[string][]*sample{}}
}

// add starts watching s.
func (p *poller) add(s *sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byKey[s.key] = append(p.byKey[s.key], s)
	p.waiting++
}

// failed stops watching s: its publish failed.
func (p *poller) failed(s *sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.state != waiting {
		return
	}
	s.state = publishFailed
	p.drop(s)
}

// drop removes s from byKey; p.mu is held.
func (p *poller) drop(s *sample) {
	l := p.byKey[s.key]
	if i := slices.Index(l, s); i >= 0 {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		delete(p.byKey, s.key)
	} else {
		p.byKey[s.key] = l
	}
	p.waiting--
}

// pending is the number of samples still waiting.
func (p *poller) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}

// run polls until ctx ends.
func (p *poller) run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.poll(ctx)
	}
}

func (p *poller) poll(ctx context.Context) {
	p.mu.Lock()
	keys := make([]string, 0, len(p.byKey))
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for k, l := range p.byKey {
		keys = append(keys, k)
		for _, s := range l {
			lo, hi = min(lo, s.tsMicros), max(hi, s.tsMicros)
		}
	}
	p.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys)
	type cell struct {
		key string
		ts  int64
	}
	found := map[cell]time.Time{}
	// The end is exclusive, and the client truncates it to the
	// millisecond (hi+1 would exclude hi).
	filter := probeCells(bigtable.TimestampRangeFilterMicros(bigtable.Timestamp(lo), bigtable.Timestamp(hi+1000)))
	p.reads.Add(1)
	t0 := time.Now()
	err := p.tbl.ReadRows(ctx, bigtable.RowList(keys), func(r bigtable.Row) bool {
		at := time.Now() // visible by now: an upper bound, at most one interval late
		for _, it := range r[target.family] {
			found[cell{r.Key(), int64(it.Timestamp)}] = at
		}
		return true
	}, bigtable.RowFilter(filter))
	p.readNanos.Add(int64(time.Since(t0)))
	if err != nil && ctx.Err() == nil {
		// Transient (or the table not created yet): the next poll retries.
		p.readErrs.Add(1)
		p.lastErr.Store(err)
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		for _, s := range slices.Clone(p.byKey[k]) {
			if s.state != waiting {
				continue
			}
			if at, ok := found[cell{k, s.tsMicros}]; ok {
				s.state, s.visible = seen, at
				p.drop(s)
			} else if now.Sub(s.published) > p.deadline {
				s.state = missed
				p.drop(s)
			}
		}
	}
}

// probeCells is a filter for the probe cells (target.cell()),
// without values, that pass the filters first (applied first, so the later
// ones see fewer cells). It selects the column with a column range, not a
// regular expression: the Bigtable emulator compiles a filter's regular
// expression again for every cell it tests, which made polling with
// FamilyFilter and ColumnFilter cost the emulator most of a core.
func probeCells(first ...bigtable.Filter) bigtable.Filter {
	return bigtable.ChainFilters(append(first,
		bigtable.ColumnRangeFilter(target.family, target.qualifier, target.qualifier+"\x00"),
		bigtable.StripValueFilter())...)
}

// percentile is the nearest-rank q-quantile of sorted (q in (0, 1]).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// never stands for a sampled reading never seen: it ranks above every
// observed latency, so missed readings count against the percentiles.
const never = time.Duration(math.MaxInt64)
