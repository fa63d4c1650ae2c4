package hours

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

// firingsHour is a closed UTC hour.
var firingsHour = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func firingsMs(d time.Duration) int64 { return firingsHour.Add(d).UnixMilli() }

// vitals renders a reading; "" leaves a field null.
func vitals(at time.Duration, hr, temp, spo2 string) string {
	null := func(v string) string {
		if v == "" {
			return "null"
		}
		return v
	}
	return fmt.Sprintf(`{"sensor_id":"s","timestamp":%d,"heart_rate":%s,"body_temperature":%s,"spO2":%s,"battery_level":87}`,
		firingsMs(at), null(hr), null(temp), null(spo2))
}

// firingsSpec is vitals with body_temperature and spO2 optional, so that
// duplicates can hold different fields.
func firingsSpec(t *testing.T) (*schemas.Spec, *Compiled) {
	t.Helper()
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	loaded.Field("body_temperature").Required = false
	loaded.Field("spO2").Required = false
	spec := MustCompile(loaded, CompileOptions{})
	return spec.Spec, spec
}

// table plays mutations as Bigtable applies them, in order: a cell
// overwrites its version, a deletion removes it.
type table map[string]string

func (tb table) apply(muts []RowMutation) {
	key := func(m RowMutation, c Cell) string {
		return fmt.Sprintf("%s %s:%s@%d", m.RowKey, c.Family, c.Qualifier, c.TsMicros)
	}
	for _, m := range muts {
		for _, c := range m.Deletes {
			delete(tb, key(m, c))
		}
		for _, c := range m.Cells {
			tb[key(m, c)] = string(c.Value)
		}
	}
}

// cellsAndDeletes lists a mutation's cells, then its deletions with the
// value "-".
func cellsAndDeletes(m RowMutation) []Cell {
	out := append([]Cell(nil), m.Cells...)
	for _, c := range m.Deletes {
		c.Value = []byte("-")
		out = append(out, c)
	}
	return out
}

func (tb table) String() string {
	var out []string
	for k, v := range tb {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// written renders what a firing writes to the vitals family as
// "+10m hr=70 imp=false temp=- ..." per reading (- is a deletion), and the
// rollup count when it writes one.
func written(muts []RowMutation) string {
	byMin := map[int64][]string{}
	var rollup string
	for _, m := range muts {
		for _, c := range cellsAndDeletes(m) {
			v := string(c.Value)
			if c.Family == "hourly" {
				if c.Qualifier == RollupCount {
					rollup = " rollup count=" + v
				}
				continue
			}
			if c.Qualifier == "battery_level" {
				continue
			}
			min := (c.TsMicros/1000 - firingsHour.UnixMilli()) / 60000
			name := map[string]string{"heart_rate": "hr", "heart_rate_imputed": "imp", "body_temperature": "temp", "spO2": "spo2"}[c.Qualifier]
			byMin[min] = append(byMin[min], name+"="+v)
		}
	}
	var mins []int64
	for m := range byMin {
		mins = append(mins, m)
	}
	sort.Slice(mins, func(i, j int) bool { return mins[i] < mins[j] })
	var parts []string
	for _, m := range mins {
		sort.Strings(byMin[m])
		parts = append(parts, fmt.Sprintf("+%dm %s", m, strings.Join(byMin[m], " ")))
	}
	return strings.Join(parts, ", ") + rollup
}

func bqHR(spec *schemas.Spec, rows []BQRow) string {
	var out []string
	for _, r := range rows {
		ms := r.Values[bqColumn(spec.BigQuery, "event_timestamp")].Int
		out = append(out, fmt.Sprintf("+%dm:%s", (ms-firingsHour.UnixMilli())/60000, schemas.AppendText(nil, r.Values[bqColumn(spec.BigQuery, "heart_rate")])))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// fire plays one firing against in-memory state, as StreamRowsFn does with
// the runner's.
type windowState struct {
	// held are the hour's readings as StreamRowsFn keeps them: one chunk
	// per firing, packed by AppendHeld (no raw payload, observed values
	// only).
	held  [][]byte
	early EarlyState
	fin   FinalState
	final bool
	// arrival says each reading's observed cells were written on arrival
	// (EarlyFiring's arrivalWritten).
	arrival bool
}

func (ws *windowState) fire(h *Compiled, timing string, index int64, recs []schemas.Record) Firing {
	return ws.fireRecovered(h, timing, index, recs, nil)
}

// fireRecovered is fire with the readings a final firing read back.
func (ws *windowState) fireRecovered(h *Compiled, timing string, index int64, recs, recovered []schemas.Record) Firing {
	p := HourPane{StartMs: firingsHour.UnixMilli(), EndMs: firingsHour.Add(time.Hour).UnixMilli(), Pane: Pane{Timing: timing, Index: index}, Records: recs}
	var out Firing
	if timing == PaneEarly && !ws.final {
		out = EarlyFiring(h, p, &ws.early, ws.arrival)
	} else {
		var prev []schemas.Record
		for _, c := range ws.held {
			var err error
			if prev, err = packed.DecodeHeld(h.Spec, prev, c); err != nil {
				panic(fmt.Sprintf("DecodeHeld: %v", err)) // fails the test that fired
			}
		}
		counted := ws.fin.Dropped
		if !ws.final {
			counted = ws.early.Dropped
		}
		ws.fin, out = FinalFiring(h, p, prev, recovered, ws.fin, ws.final, counted, true, 1)
		ws.final, ws.early = true, EarlyState{}
	}
	if len(out.Keep) > 0 {
		ws.held = append(ws.held, packed.AppendHeld(h.Spec, nil, out.Keep))
	}
	return out
}

// batchTable is what the batch pipeline writes for the lines.
func batchTable(t *testing.T, spec *schemas.Spec, h *Compiled, lines []string) table {
	out := BatchHour(h, HourPane{StartMs: firingsHour.UnixMilli(), EndMs: firingsHour.Add(time.Hour).UnixMilli(), Records: readingtest.Parse(t, spec, lines...)}, false, 1)
	muts, dead := out.Rows, out.Dead
	if len(dead) > 0 {
		t.Fatalf("batch dead letters: %v", dead)
	}
	tb := table{}
	tb.apply(muts)
	return tb
}

func TestStreamFiringsWriteWhatTheyBringAndConvergeToBatch(t *testing.T) {
	spec, h := firingsSpec(t)
	var (
		a    = vitals(0, "", "36.8", "98")                // heart rate missing
		b    = vitals(10*time.Minute, "70", "36.8", "98") //
		c    = vitals(5*time.Minute, "60", "36.8", "98")  // late
		d    = vitals(20*time.Minute, "", "36.8", "98")   // late, heart rate missing
		eA   = vitals(30*time.Minute, "80", "", "98")     // loses to eB (temperature, earlier in the spec) ...
		eB   = vitals(30*time.Minute, "80", "37.5", "")   // ... so spO2 must be cleared
		out  = vitals(40*time.Minute, "", "36.8", "98")   // out of order: after f
		f    = vitals(50*time.Minute, "90", "36.8", "98") //
		all  = []string{a, b, c, d, d, eA, eB, f, out}    //
		want = batchTable(t, spec, h, all)                //
	)
	type step struct {
		timing string
		lines  []string
		// writes is what the firing writes; bq its BigQuery heart rates.
		writes, bq string
	}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "in order",
		steps: []step{
			{PaneEarly, []string{a, eA}, "+0m hr=80 imp=true spo2=98 temp=36.8, +30m hr=80 imp=false spo2=98 rollup count=2", ""},
			// Only b: a keeps its provisional imputation until on time.
			{PaneEarly, []string{b}, "+10m hr=70 imp=false spo2=98 temp=36.8 rollup count=3", ""},
			// f, then out, which takes the nearest earlier value the early
			// state holds (b's: it keeps the first and last observed only).
			{PaneEarly, []string{f}, "+50m hr=90 imp=false spo2=98 temp=36.8 rollup count=4", ""},
			{PaneEarly, []string{out}, "+40m hr=70 imp=true spo2=98 temp=36.8 rollup count=5", ""},
			// On time: re-imputed, and every reading written with its final
			// values, the write the ledger counts (a, now from b; out, now
			// from eB; eB clearing eA's spO2).
			{PaneOnTime, []string{eB},
				"+0m hr=70 imp=true spo2=98 temp=36.8, +10m hr=70 imp=false spo2=98 temp=36.8, +30m hr=80 imp=false spo2=- temp=37.5, " +
					"+40m hr=80 imp=true spo2=98 temp=36.8, +50m hr=90 imp=false spo2=98 temp=36.8 rollup count=5",
				"+0m:70 +10m:70 +30m:80 +40m:80 +50m:90"},
			// Late: c and d (a duplicate pair), and a, whose imputation c
			// changes; b, eB, out and f are not rewritten.
			{PaneLate, []string{c, d, d},
				"+0m hr=60 imp=true spo2=98 temp=36.8, +5m hr=60 imp=false spo2=98 temp=36.8, +20m hr=70 imp=true spo2=98 temp=36.8 rollup count=7",
				"+0m:60 +20m:70 +5m:60"},
		},
	}, {
		// The runner skips an empty on-time pane; StreamRowsFn's Close
		// timer fires an on-time firing with no readings in its place.
		name: "every reading early, closed by the timer",
		steps: []step{
			{PaneEarly, []string{a, eA, b, c}, "+0m hr=60 imp=true spo2=98 temp=36.8, +5m hr=60 imp=false spo2=98 temp=36.8, " +
				"+10m hr=70 imp=false spo2=98 temp=36.8, +30m hr=80 imp=false spo2=98 rollup count=4", ""},
			// Early firings do not clear: eB leaves eA's spO2 until on time.
			{PaneEarly, []string{d, d, eB, f, out}, "+20m hr=60 imp=true spo2=98 temp=36.8, +30m hr=80 imp=false temp=37.5, " +
				"+40m hr=80 imp=true spo2=98 temp=36.8, +50m hr=90 imp=false spo2=98 temp=36.8 rollup count=8", ""},
			// Every reading with its final values: d re-imputed, eB
			// clearing eA's spO2.
			{PaneOnTime, nil, "+0m hr=60 imp=true spo2=98 temp=36.8, +5m hr=60 imp=false spo2=98 temp=36.8, " +
				"+10m hr=70 imp=false spo2=98 temp=36.8, +20m hr=70 imp=true spo2=98 temp=36.8, +30m hr=80 imp=false spo2=- temp=37.5, " +
				"+40m hr=80 imp=true spo2=98 temp=36.8, +50m hr=90 imp=false spo2=98 temp=36.8 rollup count=7",
				"+0m:60 +10m:70 +20m:70 +30m:80 +40m:80 +50m:90 +5m:60"},
		},
	}, {
		name: "on time before the early firings",
		steps: []step{
			{PaneOnTime, []string{eB}, "+30m hr=80 imp=false spo2=- temp=37.5 rollup count=1", "+30m:80"},
			// An early firing after the on-time one is a late one: eA's
			// duplicate eB is rewritten, since eA may have been written.
			{PaneEarly, []string{a, eA}, "+0m hr=80 imp=true spo2=98 temp=36.8, +30m hr=80 imp=false spo2=- temp=37.5 rollup count=2", "+0m:80"},
			{PaneEarly, []string{b, f, out}, "+0m hr=70 imp=true spo2=98 temp=36.8, +10m hr=70 imp=false spo2=98 temp=36.8, " +
				"+40m hr=80 imp=true spo2=98 temp=36.8, +50m hr=90 imp=false spo2=98 temp=36.8 rollup count=5", "+0m:70 +10m:70 +40m:80 +50m:90"},
			{PaneLate, []string{c, d, d}, "+0m hr=60 imp=true spo2=98 temp=36.8, +5m hr=60 imp=false spo2=98 temp=36.8, +20m hr=70 imp=true spo2=98 temp=36.8 rollup count=7",
				"+0m:60 +20m:70 +5m:60"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ws windowState
			var dropped, readings int64
			got := table{}
			for i, st := range tc.steps {
				out := ws.fire(h, st.timing, int64(i), readingtest.Parse(t, spec, st.lines...))
				if w := written(out.Rows); w != st.writes {
					t.Errorf("firing %d (%v) writes\n  %s\nwant\n  %s", i, st.timing, w, st.writes)
				}
				if g := bqHR(spec, out.BQ); g != st.bq {
					t.Errorf("firing %d (%v) sends BigQuery %q, want %q", i, st.timing, g, st.bq)
				}
				if (out.Rollup != nil) != (st.timing != PaneEarly || i > 0 && ws.final) {
					t.Errorf("firing %d (%v): rollup row %v", i, st.timing, out.Rollup != nil)
				}
				if err := kindsFollowTiming(out, st.timing, ws.final); err != nil {
					t.Errorf("firing %d (%v): %v", i, st.timing, err)
				}
				got.apply(out.Rows)
				dropped += out.Dropped
				readings += out.Readings
			}
			if got.String() != want.String() {
				t.Errorf("final table differs from the batch result\n got:\n%s\nwant:\n%s", got, want)
			}
			if dropped != 2 {
				t.Errorf("duplicates dropped = %d, want 2 (d, eA)", dropped)
			}
			if readings != 7 {
				t.Errorf("distinct readings counted = %d, want 7, each once", readings)
			}
		})
	}
}

// kindsFollowTiming checks the kinds of a firing's writes: an early
// firing's are provisional; a final firing writes each reading it
// finalizes for the first time as an OriginReading, the others as
// rewrites, and as many OriginReadings as the readings it counts.
func kindsFollowTiming(out Firing, timing string, final bool) error {
	var n int64
	for _, m := range out.Rows {
		for _, o := range m.Origins {
			switch {
			case o.Kind == OriginRollup:
			case timing == PaneEarly && !final && o.Kind != OriginProvisional:
				return fmt.Errorf("early write of kind %v", o.Kind)
			case o.Kind == OriginReading:
				n++
			}
		}
	}
	if n != out.Readings {
		return fmt.Errorf("%d reading writes for %d readings counted", n, out.Readings)
	}
	return nil
}

// TestFiringsCountEachDuplicateOnce: an early firing counts the duplicates
// within it when it fires (a stream stopped before the hour closes reports
// them), and the hour's close counts only those across firings.
func TestFiringsCountEachDuplicateOnce(t *testing.T) {
	spec, h := firingsSpec(t)
	d := vitals(20*time.Minute, "", "36.8", "98")
	b := vitals(10*time.Minute, "70", "36.8", "98")
	var ws windowState
	for i, st := range []struct {
		timing string
		lines  []string
		want   int64
	}{
		{PaneEarly, []string{d, d}, 1},
		{PaneEarly, []string{b, d}, 0},
		{PaneOnTime, nil, 1},
	} {
		if got := ws.fire(h, st.timing, int64(i), readingtest.Parse(t, spec, st.lines...)).Dropped; got != st.want {
			t.Errorf("firing %d (%v) counts %d duplicates; want %d", i, st.timing, got, st.want)
		}
	}
}

// rows turns the table back into Bigtable rows, as a read returns them.
func (tb table) rows(t *testing.T) []ReadRow {
	t.Helper()
	byKey := map[string]*ReadRow{}
	var keys []string
	for k, v := range tb {
		row, rest, _ := strings.Cut(k, " ")
		col, ts, _ := strings.Cut(rest, "@")
		fam, q, _ := strings.Cut(col, ":")
		var micros int64
		if _, err := fmt.Sscan(ts, &micros); err != nil {
			t.Fatal(err)
		}
		if byKey[row] == nil {
			byKey[row] = &ReadRow{Key: row}
			keys = append(keys, row)
		}
		byKey[row].Cells = append(byKey[row].Cells, Cell{Family: fam, Qualifier: q, TsMicros: micros, Value: []byte(v)})
	}
	sort.Strings(keys)
	var out []ReadRow
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	return out
}

// TestStreamFiringsAfterARestartConvergeToBatch plays a local stream that is
// killed (its window state lost, the cells it wrote kept) and restarted:
// the restarted run's final firing reads the window back (ReadBack)
// and the table converges to the batch result, BigQuery gets every reading
// (its latest row holding the batch's values), and read-back readings are
// counted apart, not as duplicates.
func TestStreamFiringsAfterARestartConvergeToBatch(t *testing.T) {
	spec, h := firingsSpec(t)
	rb, err := NewReadBack(spec)
	if err != nil {
		t.Fatal(err)
	}
	var (
		a   = vitals(0, "", "36.8", "98")                // heart rate missing: imputed from later
		b   = vitals(10*time.Minute, "70", "36.8", "98") //
		c   = vitals(5*time.Minute, "60", "36.8", "98")  //
		d   = vitals(20*time.Minute, "", "36.8", "98")   // heart rate missing
		e   = vitals(30*time.Minute, "80", "37.5", "")   //
		f   = vitals(50*time.Minute, "90", "36.8", "98") //
		all = []string{a, b, c, d, e, f}
	)
	want := batchTable(t, spec, h, all)
	wantBQ := map[string]string{}
	kept, _ := group.Prepare(spec, readingtest.Parse(t, spec, all...))
	for i := range kept {
		r := h.Builder().BQRow(&kept[i], 1)
		wantBQ[fmt.Sprint(r.Values[bqColumn(spec.BigQuery, "event_timestamp")].Int)] = bqHR(spec, []BQRow{r})
	}
	type step struct {
		timing string
		lines  []string
		// arrive are lines written on arrival only (in flight when the
		// firing reads back); readBack makes the firing read the window
		// back, as a final firing of a window marked Pending does.
		arrive   []string
		readBack bool
	}
	tests := []struct {
		name                   string
		before, after          []step
		recovered, super, dups int64
	}{{
		name: "killed before on time; the rest comes on time",
		// The early firings wrote a's heart rate provisionally, from b
		// (the batch takes c's 60).
		before:    []step{{timing: PaneEarly, lines: []string{a, b}}, {timing: PaneEarly, lines: []string{d}}},
		after:     []step{{timing: PaneOnTime, lines: []string{c, e, f}, readBack: true}},
		recovered: 3,
	}, {
		name:      "killed before on time; no reading after: the probe's close timer fires it",
		before:    []step{{timing: PaneEarly, lines: []string{d, e}}, {timing: PaneEarly, lines: []string{a, b, c, f}}},
		after:     []step{{timing: PaneOnTime, readBack: true}},
		recovered: 6,
	}, {
		name:      "killed after on time; a late reading comes",
		before:    []step{{timing: PaneEarly, lines: []string{a, b, d, e, f}}, {timing: PaneOnTime}},
		after:     []step{{timing: PaneLate, lines: []string{c}, readBack: true}},
		recovered: 5,
	}, {
		name: "unacknowledged readings come again; one is in flight at the read-back",
		// a and b were written but not acknowledged: redelivered, this
		// run's copies win. f was written on arrival by this run and is
		// read back before its pane brings it.
		before:    []step{{timing: PaneEarly, lines: []string{a, b, d}}},
		after:     []step{{timing: PaneOnTime, lines: []string{a, b, c, e}, arrive: []string{f}, readBack: true}, {timing: PaneLate, lines: []string{f}}},
		recovered: 2, super: 1,
	}, {
		name: "a reading in flight at the read-back comes twice",
		// The second copy of f is a duplicate, not another superseding.
		before: []step{{timing: PaneEarly, lines: []string{a, b, d}}},
		after: []step{{timing: PaneOnTime, lines: []string{c, e}, arrive: []string{f}, readBack: true},
			{timing: PaneLate, lines: []string{f}}, {timing: PaneLate, lines: []string{f}}},
		recovered: 4, super: 1, dups: 1,
	}, {
		name: "a late firing before the probe: the probe fires it again",
		// The restarted run's first firing (late) came before the probe
		// marked the window, so without a read-back.
		before:    []step{{timing: PaneEarly, lines: []string{a, b, d, e}}},
		after:     []step{{timing: PaneLate, lines: []string{c, f}}, {timing: PaneLate, readBack: true}},
		recovered: 4,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := table{}
			bq := map[string]string{}
			var dropped, recovered, super, readings int64
			play := func(ws *windowState, i int, st step) {
				for _, l := range st.arrive {
					muts, _ := h.Builder().Mutations(readingtest.Parse(t, spec, l))
					tb.apply(muts)
				}
				recs := readingtest.Parse(t, spec, st.lines...)
				for j := range recs { // written on arrival
					muts, _ := h.Builder().Mutations(recs[j : j+1])
					tb.apply(muts)
				}
				var back []schemas.Record
				if st.readBack {
					var skipped int
					back, skipped = rb.Records(tb.rows(t), "s", firingsHour.UnixMilli(), firingsHour.Add(time.Hour).UnixMilli())
					if skipped > 0 {
						t.Fatalf("%d readings skipped", skipped)
					}
				}
				out := ws.fireRecovered(h, st.timing, int64(i), recs, back)
				tb.apply(out.Rows)
				for _, r := range out.BQ {
					bq[fmt.Sprint(r.Values[bqColumn(spec.BigQuery, "event_timestamp")].Int)] = bqHR(spec, []BQRow{r})
				}
				dropped += out.Dropped
				recovered += out.Recovered
				super += out.Superseded
				readings += out.Readings
				for _, r := range out.Dead {
					t.Errorf("dead letter %v", r)
				}
			}
			var before windowState
			for i, st := range tc.before {
				play(&before, i, st)
			}
			var after windowState // killed: the state is lost, the cells stay
			readings = 0
			brought := map[string]bool{}
			for i, st := range tc.after {
				play(&after, i, st)
				for _, l := range st.lines {
					brought[l] = true
				}
			}
			// The ledger's distinct readings of the new run: those it
			// brought, not those it read back.
			if readings != int64(len(brought)) {
				t.Errorf("the new run counted %d distinct readings; want %d", readings, len(brought))
			}
			if tb.String() != want.String() {
				t.Errorf("table differs from the batch result\n got:\n%s\nwant:\n%s", tb, want)
			}
			if fmt.Sprint(bq) != fmt.Sprint(wantBQ) {
				t.Errorf("BigQuery's latest rows %v; want %v", bq, wantBQ)
			}
			if dropped != tc.dups || recovered != tc.recovered || super != tc.super {
				t.Errorf("counted %d duplicates, %d recovered, %d superseded; want %d, %d, %d", dropped, recovered, super, tc.dups, tc.recovered, tc.super)
			}
		})
	}
}

// bqColumn is the index of the BigQuery column called name.
func bqColumn(t *schemas.BigQuerySpec, name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	panic("table " + t.Table + " has no column " + name)
}

// TestEarlyFiringsAfterArrivalWritesConvergeToBatch: with each reading's
// observed cells written on arrival (ArrivalRowsFn), an early firing
// writes only the readings it imputes or that came with a copy, and the
// rollup; the table still ends as the batch pipeline's.
func TestEarlyFiringsAfterArrivalWritesConvergeToBatch(t *testing.T) {
	spec, h := firingsSpec(t)
	var (
		a    = vitals(0, "", "36.8", "98")
		b    = vitals(10*time.Minute, "70", "36.8", "98")
		c    = vitals(5*time.Minute, "60", "36.8", "98")
		eA   = vitals(30*time.Minute, "80", "", "98")
		eB   = vitals(30*time.Minute, "80", "37.5", "")
		f    = vitals(50*time.Minute, "90", "36.8", "98")
		want = batchTable(t, spec, h, []string{a, b, c, eA, eB, f})
	)
	tests := []struct {
		name   string
		early  [][]string
		writes []string // each early firing's writes
	}{
		{"imputed and copies only", [][]string{{a, b}, {eA, eB, c}, {f}}, []string{
			"+0m hr=70 imp=true spo2=98 temp=36.8 rollup count=2",
			"+30m hr=80 imp=false temp=37.5 rollup count=4",
			" rollup count=5"}},
		{"copies in two firings", [][]string{{eA, a}, {eB, b, c, f}}, []string{
			"+0m hr=80 imp=true spo2=98 temp=36.8 rollup count=2",
			" rollup count=6"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := windowState{arrival: true}
			got := table{}
			for i, lines := range tc.early {
				recs := readingtest.Parse(t, spec, lines...)
				for _, r := range recs {
					arrival, _ := h.Builder().Build([]schemas.Record{ArrivalRecord(spec, r)}, false, nil)
					got.apply(arrival)
				}
				out := ws.fire(h, PaneEarly, int64(i), recs)
				if w := written(out.Rows); w != tc.writes[i] {
					t.Errorf("early firing %d writes\n  %q\nwant\n  %q", i, w, tc.writes[i])
				}
				got.apply(out.Rows)
			}
			out := ws.fire(h, PaneOnTime, int64(len(tc.early)), nil)
			got.apply(out.Rows)
			if got.String() != want.String() {
				t.Errorf("final table differs from the batch result\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestTwoStreamsFinalFiringsMergeToBatch plays two streams that share a
// subscription, each with its own state and one Bigtable table: each
// writes its readings on arrival and reads the hour back at its final
// firings (MergeStored). Whatever order their firings run in, once the
// settle firings (a late firing with no readings, reading back once more)
// have run, the table equals the batch result; a settle firing that finds
// nothing new rewrites nothing.
func TestTwoStreamsFinalFiringsMergeToBatch(t *testing.T) {
	spec, h := firingsSpec(t)
	rb, err := NewReadBack(spec)
	if err != nil {
		t.Fatal(err)
	}
	var (
		a = vitals(0, "", "36.8", "98") // heart rate imputed: from c (60) in the batch
		b = vitals(10*time.Minute, "70", "36.8", "98")
		c = vitals(5*time.Minute, "60", "36.8", "98")
		d = vitals(20*time.Minute, "", "36.8", "98")
		e = vitals(30*time.Minute, "80", "37.5", "")
		f = vitals(50*time.Minute, "90", "36.8", "98")
	)
	want := batchTable(t, spec, h, []string{a, b, c, d, e, f})
	// x's readings and y's; late are y's readings stored only after x's
	// on-time firing read the hour back.
	x, y := []string{a, b, d}, []string{c, e}
	late := []string{f}
	for _, tc := range []struct {
		name string
		// order of the final firings' writes: "x" or "y" writes last.
		lastWriter string
		// settled: the settle firings that find readings to add.
		settled map[string]bool
	}{
		{"the complete build writes last", "y", map[string]bool{"x": true}},
		{"the build that missed a reading writes last", "x", map[string]bool{"x": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := table{}
			arrive := func(lines []string) []schemas.Record {
				recs := readingtest.Parse(t, spec, lines...)
				for j := range recs {
					muts, _ := h.Builder().Mutations(recs[j : j+1])
					tb.apply(muts)
				}
				return recs
			}
			readBack := func() []schemas.Record {
				back, skipped := rb.Records(tb.rows(t), "s", firingsHour.UnixMilli(), firingsHour.Add(time.Hour).UnixMilli())
				if skipped > 0 {
					t.Fatalf("%d readings skipped", skipped)
				}
				return back
			}
			var wx, wy windowState
			xr, yr := arrive(x), arrive(y)
			outX := wx.fireRecovered(h, PaneOnTime, 0, xr, readBack()) // reads before f is stored
			yr = append(yr, arrive(late)...)
			outY := wy.fireRecovered(h, PaneOnTime, 0, yr, readBack())
			if outX.Recovered != int64(len(y)) || outY.Recovered != int64(len(x)) {
				t.Errorf("read back %d and %d readings of the other stream; want %d and %d", outX.Recovered, outY.Recovered, len(y), len(x))
			}
			if tc.lastWriter == "x" {
				tb.apply(outY.Rows)
				tb.apply(outX.Rows)
			} else {
				tb.apply(outX.Rows)
				tb.apply(outY.Rows)
			}
			if tc.lastWriter == "x" && tb.String() == want.String() {
				t.Fatal("the build that missed f wrote last, yet the table equals the batch's: the case shows nothing")
			}
			for _, s := range []struct {
				name string
				ws   *windowState
			}{{"x", &wx}, {"y", &wy}} {
				out := s.ws.fireRecovered(h, PaneLate, 1, nil, readBack())
				found := out.Recovered > 0 || out.Rewritten > 0
				if found != tc.settled[s.name] {
					t.Errorf("stream %s's settle firing found readings to add: %v (read back %d, rewrote %d); want %v",
						s.name, found, out.Recovered, out.Rewritten, tc.settled[s.name])
				}
				if found {
					tb.apply(out.Rows)
				}
			}
			if tb.String() != want.String() {
				t.Errorf("table differs from the batch result\n got:\n%s\nwant:\n%s", tb, want)
			}
		})
	}
}
