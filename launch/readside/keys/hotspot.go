package keys

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// maxSplitSample bounds the distinct keys the split points are chosen from.
const maxSplitSample = 100_000

// Report is a hot-spot simulation: writes played in event-time order over
// tablets split at equal key counts, counted per time slice and tablet.
type Report struct {
	Title   string
	Tablets int
	// Splits are the N-1 split keys: tablet i holds [Splits[i-1], Splits[i]).
	Splits  []string
	StartMs int64
	SliceMs int64
	// Counts[s][t] is the writes of time slice s to tablet t.
	Counts [][]int
	Writes int
}

// SliceStat summarises one time slice.
type SliceStat struct {
	Writes  int
	Hottest int     // the tablet with the most writes
	Share   float64 // the hottest tablet's share of the slice's writes
	Active  int     // tablets that got any write
}

// Simulate splits the key space of writes into tablets at equal key counts
// (from a sample of the distinct keys, as Bigtable splits a table into
// tablets of about equal size) and counts each time slice's writes per
// tablet. writes must be in event-time order (ReadWrites returns them so).
func Simulate(writes []Write, tablets, slices int) *Report {
	r := &Report{Tablets: tablets, Writes: len(writes)}
	if len(writes) == 0 || tablets < 1 || slices < 1 {
		return r
	}
	r.Splits = SplitPoints(writes, tablets)
	start, end := writes[0].EventMs, writes[len(writes)-1].EventMs
	// Whole minutes read better on the axis, when the span allows them.
	const minute = 60_000
	if end-start >= int64(slices)*minute {
		start -= floorMod(start, minute)
	}
	r.StartMs = start
	r.SliceMs = (end - start + int64(slices)) / int64(slices)
	if r.SliceMs >= minute {
		r.SliceMs = (r.SliceMs + minute - 1) / minute * minute
	}
	if r.SliceMs < 1 {
		r.SliceMs = 1
	}
	r.Counts = make([][]int, slices)
	for i := range r.Counts {
		r.Counts[i] = make([]int, tablets)
	}
	for _, w := range writes {
		s := int((w.EventMs - start) / r.SliceMs)
		if s >= slices {
			s = slices - 1
		}
		r.Counts[s][r.Tablet(w.RowKey)]++
	}
	return r
}

// SplitPoints chooses tablets-1 split keys so each tablet holds about the
// same number of distinct row keys.
func SplitPoints(writes []Write, tablets int) []string {
	seen := map[string]bool{}
	var keys []string
	for _, w := range writes {
		if !seen[w.RowKey] {
			seen[w.RowKey] = true
			keys = append(keys, w.RowKey)
		}
	}
	sort.Strings(keys)
	if len(keys) > maxSplitSample {
		step := len(keys) / maxSplitSample
		sample := keys[:0:0]
		for i := 0; i < len(keys); i += step {
			sample = append(sample, keys[i])
		}
		keys = sample
	}
	var splits []string
	for i := 1; i < tablets; i++ {
		k := keys[i*len(keys)/tablets]
		if len(splits) > 0 && splits[len(splits)-1] >= k {
			k = splits[len(splits)-1] + "\x00" // fewer distinct keys than tablets
		}
		splits = append(splits, k)
	}
	return splits
}

// Tablet is the index of the tablet holding key.
func (r *Report) Tablet(key string) int {
	return sort.Search(len(r.Splits), func(i int) bool { return r.Splits[i] > key })
}

// Stat summarises time slice s.
func (r *Report) Stat(s int) SliceStat {
	var st SliceStat
	for t, n := range r.Counts[s] {
		st.Writes += n
		if n > r.Counts[s][st.Hottest] {
			st.Hottest = t
		}
		if n > 0 {
			st.Active++
		}
	}
	if st.Writes > 0 {
		st.Share = float64(r.Counts[s][st.Hottest]) / float64(st.Writes)
	}
	return st
}

// FairShare is each tablet's share of writes when they are spread evenly.
func (r *Report) FairShare() float64 { return 1 / float64(r.Tablets) }

// MeanHottestShare is the hottest tablet's share of writes, averaged over
// the slices that have writes, weighted by their writes.
func (r *Report) MeanHottestShare() float64 {
	var hot, all int
	for s := range r.Counts {
		st := r.Stat(s)
		hot += r.Counts[s][st.Hottest]
		all += st.Writes
	}
	if all == 0 {
		return 0
	}
	return float64(hot) / float64(all)
}

// WorstSlice is the slice whose hottest tablet has the largest share.
func (r *Report) WorstSlice() (int, SliceStat) {
	best, bs := 0, SliceStat{}
	for s := range r.Counts {
		if st := r.Stat(s); st.Writes > 0 && st.Share > bs.Share {
			best, bs = s, st
		}
	}
	return best, bs
}

// TabletRange is tablet t's key range as text.
func (r *Report) TabletRange(t int) (start, end string) {
	if t > 0 {
		start = r.Splits[t-1]
	}
	if t < len(r.Splits) {
		end = r.Splits[t]
	}
	return start, end
}

// SliceStart is the start of slice s.
func (r *Report) SliceStart(s int) time.Time {
	return time.UnixMilli(r.StartMs + int64(s)*r.SliceMs).UTC()
}

// WriteText writes the report: the tablets' key ranges, one line per time
// slice with each tablet's share of writes and the hottest tablet's share
// against the fair share, and a summary.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "hotspots: %s\n", r.Title)
	fair := r.FairShare()
	fmt.Fprintf(&b, "%d writes, %d tablets (split at equal key counts), %d slices of %v; fair share %.1f%%\n",
		r.Writes, r.Tablets, len(r.Counts), time.Duration(r.SliceMs)*time.Millisecond, 100*fair)
	fmt.Fprintln(&b, "tablets:")
	for t := 0; t < r.Tablets; t++ {
		s, e := r.TabletRange(t)
		fmt.Fprintf(&b, "  t%-3d [%q, %q)\n", t, s, e)
	}
	fmt.Fprintf(&b, "%-5s %-20s %7s %7s %7s %7s  %s\n", "slice", "start", "writes", "hottest", "share", "x fair", "share per tablet % (t0 ...)")
	for s := range r.Counts {
		st := r.Stat(s)
		var shares []string
		for _, n := range r.Counts[s] {
			pct := 0.0
			if st.Writes > 0 {
				pct = 100 * float64(n) / float64(st.Writes)
			}
			shares = append(shares, fmt.Sprintf("%3.0f", pct))
		}
		fmt.Fprintf(&b, "%-5d %-20s %7d %7s %6.1f%% %6.2fx  %s\n", s, r.SliceStart(s).Format(time.RFC3339), st.Writes,
			fmt.Sprintf("t%d", st.Hottest), 100*st.Share, st.Share/fair, strings.Join(shares, " "))
	}
	ws, wst := r.WorstSlice()
	mean := r.MeanHottestShare()
	fmt.Fprintf(&b, "summary: hottest tablet takes %.1f%% of writes on average (%.2fx the fair %.1f%%); worst slice %d: t%d takes %.1f%% (%.2fx)\n",
		100*mean, mean/fair, 100*fair, ws, wst.Hottest, 100*wst.Share, wst.Share/fair)
	_, err := io.WriteString(w, b.String())
	return err
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
