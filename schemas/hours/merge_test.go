package hours

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
)

// TestMergeHourAnySplitAnyOrderIsTheBatch cuts an hour's lines (with
// duplicates that hold different fields, and missing values to impute) at
// every pair of places into three pieces, and builds each piece as a batch
// merged with what the pieces before it wrote (read back from the table):
// in every order, the table ends as one batch over all the lines leaves it,
// and the rollup is the batch's.
func TestMergeHourAnySplitAnyOrderIsTheBatch(t *testing.T) {
	sh := newSplitHour(t)
	eachSplit(splitHourLines(), func(cut string, pieces [][]string, order []int) {
		tb := table{}
		var last Firing
		for _, k := range order {
			stored, skipped := sh.rb.Records(tb.rows(t), "s", sh.start, sh.end)
			if skipped > 0 {
				t.Fatalf("%d readings not read back", skipped)
			}
			last = MergeHour(sh.h, sh.pane(t, pieces[k]), stored, true, 1)
			if len(last.Dead) > 0 {
				t.Fatalf("dead letters: %v", last.Dead)
			}
			tb.apply(last.Rows)
		}
		sh.check(t, cut, tb, last.Rollup)
	})
}

// splitHour is the hour the split tests cut: the spec, its read-back, and
// what one batch over all of splitHourLines writes.
type splitHour struct {
	spec       *schemas.Spec
	h          *Compiled
	rb         *ReadBack
	start, end int64
	want       table
	wantRollup *BQRow
}

func newSplitHour(t *testing.T) splitHour {
	t.Helper()
	spec, h := firingsSpec(t)
	rb, err := NewReadBack(spec)
	if err != nil {
		t.Fatal(err)
	}
	all := splitHourLines()
	sh := splitHour{spec: spec, h: h, rb: rb, start: firingsHour.UnixMilli(), end: firingsHour.Add(time.Hour).UnixMilli(), want: batchTable(t, spec, h, all)}
	sh.wantRollup = BatchHour(h, sh.pane(t, all), true, 1).Rollup
	return sh
}

// pane is the hour's pane of lines.
func (sh splitHour) pane(t *testing.T, lines []string) HourPane {
	return HourPane{StartMs: sh.start, EndMs: sh.end, Records: readingtest.Parse(t, sh.spec, lines...)}
}

// check fails the test unless the table a split left, and the rollup row
// it last sent, are the one batch's.
func (sh splitHour) check(t *testing.T, cut string, tb table, rollup *BQRow) {
	t.Helper()
	if got := tb.String(); got != sh.want.String() {
		t.Errorf("%s:\n got %s\nwant %s", cut, got, sh.want)
	}
	if rollup == nil || bqRollupText(rollup) != bqRollupText(sh.wantRollup) {
		t.Errorf("%s: rollup %v, want %v", cut, rollup, sh.wantRollup)
	}
}

// splitHourLines are an hour's lines, with duplicates that hold different
// fields and missing values to impute, for the split tests to cut.
func splitHourLines() []string {
	return []string{
		vitals(0, "", "36.8", "98"),
		vitals(10*time.Minute, "70", "36.8", "98"),
		vitals(5*time.Minute, "60", "36.8", "98"),
		vitals(20*time.Minute, "", "36.8", "98"),
		vitals(30*time.Minute, "80", "", "98"),
		vitals(30*time.Minute, "80", "37.5", ""), // wins over the one before: spO2 must go
		vitals(50*time.Minute, "90", "36.8", "98"),
		vitals(20*time.Minute, "", "36.8", "98"), // a copy
	}
}

// eachSplit calls f with every cut of lines at two places into three
// pieces, each in four orders of the pieces.
func eachSplit(lines []string, f func(cut string, pieces [][]string, order []int)) {
	orders := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}}
	for i := 1; i < len(lines); i++ {
		for j := i + 1; j < len(lines); j++ {
			pieces := [][]string{lines[:i], lines[i:j], lines[j:]}
			for _, order := range orders {
				f(fmt.Sprintf("cut at %d and %d, order %v", i, j, order), pieces, order)
			}
		}
	}
}

// bqRollupText is a rollup row's values, without when it was built.
func bqRollupText(r *BQRow) string {
	var b strings.Builder
	for _, v := range r.Values {
		b.Write(schemas.AppendText(nil, v))
		b.WriteByte(',')
	}
	return b.String()
}

// TestMergeHourCountsTheBatchsReadingsOnly: a batch over an hour already
// stored counts as its readings those it brings, its copies of stored
// readings that it wins, and the stored readings it keeps as merged.
func TestMergeHourCountsTheBatchsReadingsOnly(t *testing.T) {
	spec, h := firingsSpec(t)
	rb, _ := NewReadBack(spec)
	start, end := firingsHour.UnixMilli(), firingsHour.Add(time.Hour).UnixMilli()
	first := []string{vitals(0, "60", "36.8", "98"), vitals(time.Minute, "61", "36.8", "98")}
	tb := table{}
	tb.apply(BatchHour(h, HourPane{StartMs: start, EndMs: end, Records: readingtest.Parse(t, spec, first...)}, false, 1).Rows)
	stored, _ := rb.Records(tb.rows(t), "s", start, end)
	second := []string{vitals(time.Minute, "61", "36.8", "98"), vitals(2*time.Minute, "62", "36.8", "98")}
	out := MergeHour(h, HourPane{StartMs: start, EndMs: end, Records: readingtest.Parse(t, spec, second...)}, stored, false, 1)
	if out.Readings != 2 || out.Merged != 1 || out.Dropped != 0 {
		t.Errorf("readings %d, merged %d, dropped %d; want 2, 1, 0", out.Readings, out.Merged, out.Dropped)
	}
}
