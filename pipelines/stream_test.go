package pipelines

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	register.Function2x1(paneCells)
	register.Function3x0(keyByRowWithPane)
	register.Function2x1(lastWriteWins)
	register.Function1x1(hrCells)
	register.Function1x1(bqIdentity)
	register.Function1x1(rollupSummary)
	register.Emitter2[string, paneMutation]()
	register.Iter1[paneMutation]()
}

// paneCells renders a mutation's heart-rate cells with the firing that
// wrote them: "early 0 s#T10: +0m hr=70 imp=true, +10m hr=70 imp=false".
func paneCells(pane beam.PaneInfo, m schemas.RowMutation) string {
	return fmt.Sprintf("%s %d %s", pane.Timing, pane.Index, hrCells(m))
}

// hrCells renders the heart_rate and heart_rate_imputed cells of a row by
// minute of the hour.
func hrCells(m schemas.RowMutation) string {
	byMin := map[int64][]string{}
	for _, c := range m.Cells {
		min := c.TsMicros / 1000 % 3600000 / 60000
		switch c.Qualifier {
		case "heart_rate":
			byMin[min] = append(byMin[min], "hr="+string(c.Value))
		case "heart_rate_imputed":
			byMin[min] = append(byMin[min], "imp="+string(c.Value))
		}
	}
	mins := make([]int64, 0, len(byMin))
	for m := range byMin {
		mins = append(mins, m)
	}
	sort.Slice(mins, func(i, j int) bool { return mins[i] < mins[j] })
	var parts []string
	for _, min := range mins {
		sort.Strings(byMin[min])
		parts = append(parts, fmt.Sprintf("+%dm %s", min, strings.Join(byMin[min], " ")))
	}
	key := m.RowKey[:strings.Index(m.RowKey, "#")]
	return key + ": " + strings.Join(parts, ", ")
}

// paneMutation is a mutation with the index of the firing that wrote it.
type paneMutation struct {
	Index int64
	M     schemas.RowMutation
}

func keyByRowWithPane(pane beam.PaneInfo, m schemas.RowMutation, emit func(string, paneMutation)) {
	emit(m.Table+"/"+m.RowKey, paneMutation{Index: int64(pane.Index), M: m})
}

// lastWriteWins plays a row's mutations in firing order, as Bigtable keeps
// the last write of a cell version, and renders the final row.
func lastWriteWins(_ string, ms func(*paneMutation) bool) string {
	var all []paneMutation
	var pm paneMutation
	for ms(&pm) {
		all = append(all, pm)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Index < all[j].Index })
	type cellKey struct {
		fam, q string
		ts     int64
	}
	final := map[cellKey]schemas.Cell{}
	var m schemas.RowMutation
	for _, pm := range all {
		m = pm.M
		for _, c := range pm.M.Cells {
			final[cellKey{c.Family, c.Qualifier, c.TsMicros}] = c
		}
	}
	m.Cells = m.Cells[:0]
	for _, c := range final {
		m.Cells = append(m.Cells, c)
	}
	return rowSummary(m)
}

func bqIdentity(r schemas.BQRow) string { return bqSummary(r) }

// rollupSummary renders a vitals rollup row: "ontime 2 s count=2
// hr_mean=70 imputed=1".
func rollupSummary(r schemas.BQRow) string {
	v := func(i int) string { return string(schemas.AppendText(nil, r.Values[i])) }
	return fmt.Sprintf("%s %s %s count=%s hr_mean=%s imputed=%s", v(15), v(16), v(0), v(3), v(6), v(14))
}

// streamHour is the start of the UTC hour three hours ago: recent enough
// for the default allowed lateness, closed long ago by the wall clock.
func streamHour() time.Time { return time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour) }

func at(h time.Time, d time.Duration) int64 { return h.Add(d).UnixMilli() }

// TestStreamPanesImputeAndConvergeToBatch drives one sensor-hour through
// early, on-time and late firings with TestStream on prism and checks what
// each firing writes, that BigQuery gets each reading once (again only when
// a late reading changes its imputation), that a reading older than the
// allowed lateness is dead-lettered as too_late, and that the final
// Bigtable state equals the batch result for the same readings.
func TestStreamPanesImputeAndConvergeToBatch(t *testing.T) {
	spec, err := schemas.LoadSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	h := streamHour()
	a := vitalsLine("s", fmt.Sprint(at(h, 0)), "null")                          // +0m, heart rate missing
	b := vitalsLine("s", fmt.Sprint(at(h, 10*time.Minute)), "70")               // +10m
	c := vitalsLine("s", fmt.Sprint(at(h, 5*time.Minute)), "60")                // +5m, arrives after the on-time firing
	old := vitalsLine("s", fmt.Sprint(at(h, -26*time.Hour)), "80")              // its window closed two hours ago
	d := vitalsLine("s", fmt.Sprint(at(h, 20*time.Minute+time.Second)), "null") // +20m, a duplicate pair
	dDup := vitalsLine("s", fmt.Sprint(at(h, 20*time.Minute+time.Second)), "null")

	con := teststream.NewConfig()
	con.AdvanceWatermark(at(h, -time.Minute))
	con.AddElements(at(h, 0), a)
	con.AddElements(at(h, -26*time.Hour), old)
	con.AdvanceProcessingTime(int64(11 * time.Second / time.Millisecond)) // early firing 0: a alone
	con.AddElements(at(h, 10*time.Minute), b)
	con.AdvanceProcessingTime(int64(11 * time.Second / time.Millisecond)) // early firing 1: a imputed from b
	con.AdvanceWatermark(at(h, time.Hour))                                // on-time firing
	con.AddElements(at(h, 5*time.Minute), c)
	con.AddElements(at(h, 20*time.Minute+time.Second), d, dDup)
	con.AdvanceProcessingTime(int64(2 * time.Second / time.Millisecond)) // late firing: c changes a's imputation
	con.AdvanceWatermarkToInfinity()

	p, s := beam.NewPipelineWithRoot()
	lines := beam.ParDo(s, keyByTestSource, teststream.Create(s, con))
	records, parseDead := Parse(s, spec, lines)
	w := StreamWindowing(10*time.Second, 0)
	onTime, tooLate := DeadLetterTooLate(s, w, records)
	built := BuildRowsAndRollups(s, spec, true, HourlyWindows(s, onTime, w.Options()...))
	global := func(c beam.PCollection) beam.PCollection { return beam.WindowInto(s, window.NewGlobalWindows(), c) }

	passert.Count(s, global(parseDead), "parse dead letters", 0)
	passert.Equals(s, global(beam.ParDo(s, deadReason, tooLate)), "too_late in.jsonl")

	// What each firing writes. Early firings are processing-time driven;
	// the on-time firing re-imputes everything seen; the late one adds the
	// late readings and re-imputes.
	passert.Equals(s, global(beam.ParDo(s, paneCells, built.Rows)),
		"early 0 s: +0m imp=false",
		"early 1 s: +0m hr=70 imp=true, +10m hr=70 imp=false",
		"ontime 2 s: +0m hr=70 imp=true, +10m hr=70 imp=false",
		"late 3 s: +0m hr=60 imp=true, +5m hr=60 imp=false, +10m hr=70 imp=false, +20m hr=70 imp=true",
	)

	// BigQuery: each reading once, on the on-time firing or the late one
	// that brought it; a's row again because c changed its imputed value.
	passert.Equals(s, global(beam.ParDo(s, bqIdentity, built.BQRows)),
		fmt.Sprintf("s,%d,70,36.8,98,87,true", at(h, 0)),
		fmt.Sprintf("s,%d,70,36.8,98,87,false", at(h, 10*time.Minute)),
		fmt.Sprintf("s,%d,60,36.8,98,87,false", at(h, 5*time.Minute)),
		fmt.Sprintf("s,%d,70,36.8,98,87,true", at(h, 20*time.Minute+time.Second)),
		fmt.Sprintf("s,%d,60,36.8,98,87,true", at(h, 0)),
	)

	// One rollup row per on-time or late firing, with the pane's timing
	// and index; statistics over observed values only.
	passert.Equals(s, global(beam.ParDo(s, rollupSummary, built.Rollups)),
		"ontime 2 s count=2 hr_mean=70 imputed=1",
		"late 3 s count=4 hr_mean=65 imputed=2",
	)

	// Converges to batch (readings and rollup cells): the last write of every cell equals what the
	// batch pipeline writes for the same (on-time and late) readings.
	final := beam.ParDo(s, lastWriteWins, beam.GroupByKey(s, global(beam.ParDo(s, keyByRowWithPane, built.Rows))))
	batchLines := beam.ParDo(s, keyByTestSource, beam.Create(s, a, b, c, d, dDup))
	batchRecords, _ := Parse(s, spec, batchLines)
	batchRows, _, _ := BuildRows(s, spec, false, HourlyWindows(s, batchRecords))
	passert.Equals(s, final, global(beam.ParDo(s, rowSummary, batchRows)))

	ptest.RunAndValidate(t, p)
}
