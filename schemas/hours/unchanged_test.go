package hours

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
)

// storedHourOf is what a batch's read-back gives of the table's hour: its
// readings, and the rollup family's cells at the hour's end by row.
func storedHourOf(t *testing.T, rb *ReadBack, tb table, start, end int64) StoredHour {
	t.Helper()
	rows := tb.rows(t)
	recs, skipped := rb.Records(rows, "s", start, end)
	if skipped > 0 {
		t.Fatalf("%d readings not read back", skipped)
	}
	sh := StoredHour{Records: recs, Rollup: map[string]map[string][]byte{}, RollupRead: true}
	for _, row := range rows {
		for _, c := range row.Cells {
			if c.Family == "hourly" && c.TsMicros == end*1000 {
				if sh.Rollup[row.Key] == nil {
					sh.Rollup[row.Key] = map[string][]byte{}
				}
				sh.Rollup[row.Key][c.Qualifier] = c.Value
			}
		}
	}
	return sh
}

// writesOnlyChanges fails when a mutation writes a cell the table holds
// with that value already.
func writesOnlyChanges(t *testing.T, tb table, muts []RowMutation, what string) {
	t.Helper()
	probe := table{}
	for _, m := range muts {
		for _, c := range m.Cells {
			probe.apply([]RowMutation{{RowKey: m.RowKey, Cells: []Cell{c}}})
		}
	}
	for k, v := range probe {
		if old, ok := tb[k]; ok && old == v {
			t.Errorf("%s: rewrites %s=%s, which is stored", what, k, v)
		}
	}
}

// TestMergeChangesAnySplitAnyOrderIsTheBatch is
// TestMergeHourAnySplitAnyOrderIsTheBatch with MergeChanges: every split
// and order leaves the table one batch leaves, no mutation rewrites a
// stored cell with its value, and the rollup row last sent is the batch's.
func TestMergeChangesAnySplitAnyOrderIsTheBatch(t *testing.T) {
	sh := newSplitHour(t)
	eachSplit(splitHourLines(), func(cut string, pieces [][]string, order []int) {
		tb := table{}
		var rollup *BQRow
		for _, k := range order {
			out, _ := MergeChanges(sh.h, sh.pane(t, pieces[k]), storedHourOf(t, sh.rb, tb, sh.start, sh.end), true, nil, 1)
			if len(out.Dead) > 0 {
				t.Fatalf("dead letters: %v", out.Dead)
			}
			writesOnlyChanges(t, tb, out.Rows, "piece "+strings.Join(pieces[k], " "))
			tb.apply(out.Rows)
			if out.Rollup != nil {
				rollup = out.Rollup
			}
		}
		sh.check(t, cut, tb, rollup)
	})
}

// TestMergeChanges shows what a batch over a stored hour writes.
// mergedHour is the hour TestMergeChanges and
// TestMergeChangesBigQueryMarks store first and merge with: its spec,
// read-back, readings and bounds.
func mergedHour(t *testing.T) (*schemas.Spec, *Compiled, *ReadBack, []string, int64, int64) {
	t.Helper()
	spec, h := firingsSpec(t)
	rb, err := NewReadBack(spec)
	if err != nil {
		t.Fatal(err)
	}
	first := []string{
		vitals(0, "60", "36.8", "98"),
		vitals(10*time.Minute, "", "36.8", "98"), // imputed from 0m and 40m
		vitals(40*time.Minute, "90", "36.8", "98"),
		vitals(50*time.Minute, "90", "36.8", "98"),
	}
	return spec, h, rb, first, firingsHour.UnixMilli(), firingsHour.Add(time.Hour).UnixMilli()
}

func TestMergeChanges(t *testing.T) {
	spec, h, rb, first, start, end := mergedHour(t)
	table0 := h.Bigtable.Tables[0].Name
	for _, tc := range []struct {
		name  string
		again []string
		// written is what the merge writes to the vitals family, by
		// reading (see written), with the rollup's count when it writes
		// the rollup.
		written     string
		hour        bool
		unchangedBT int64
	}{
		{name: "the same readings write nothing", again: first,
			written: "", hour: true, unchangedBT: 4},
		{name: "some of the same readings write nothing", again: first[1:3],
			written: "", hour: true, unchangedBT: 4},
		{name: "a changed value writes its cell, its row and the rollup", again: []string{vitals(50*time.Minute, "80", "36.8", "98")},
			written: "+50m hr=80", unchangedBT: 3},
		{name: "a value that loses to the stored one writes nothing", again: []string{vitals(50*time.Minute, "95", "36.8", "98")},
			written: "", hour: true, unchangedBT: 4},
		{name: "a new reading writes itself and the rollup", again: []string{vitals(20*time.Minute, "70", "36.8", "98")},
			written: "+20m hr=70 imp=false spo2=98 temp=36.8 rollup count=5", unchangedBT: 4},
		{name: "a new reading moves an imputation: both are written", again: []string{vitals(5*time.Minute, "70", "36.8", "98")},
			written: "+5m hr=70 imp=false spo2=98 temp=36.8, +10m hr=70 rollup count=5", unchangedBT: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := table{}
			tb.apply(BatchHour(h, HourPane{StartMs: start, EndMs: end, Records: readingtest.Parse(t, spec, first...)}, true, 1).Rows)
			stored := storedHourOf(t, rb, tb, start, end)
			p := HourPane{StartMs: start, EndMs: end, Records: readingtest.Parse(t, spec, tc.again...)}
			out, un := MergeChanges(h, p, stored, true, nil, 2)
			// The table ends as the whole rewrite leaves it.
			whole := table{}
			for k, v := range tb {
				whole[k] = v
			}
			whole.apply(MergeHour(h, HourPane{StartMs: start, EndMs: end, Records: readingtest.Parse(t, spec, tc.again...)},
				storedHourOf(t, rb, tb, start, end).Records, true, 2).Rows)
			writesOnlyChanges(t, tb, out.Rows, tc.name)
			tb.apply(out.Rows)
			if got, want := tb.String(), whole.String(); got != want {
				t.Errorf("table\n%s\nwant (the whole rewrite's)\n%s", got, want)
			}
			if got := written(out.Rows); !sameWritten(got, tc.written) {
				t.Errorf("written:\n%s\nwant\n%s", got, tc.written)
			}
			// BigQuery gets every kept reading's row and the rollup's, as
			// the whole rewrite sends them: Bigtable does not say what a
			// BigQuery table holds.
			if kept := out.Readings + out.Merged; int64(len(out.BQ)) != kept || out.Rollup == nil {
				t.Errorf("BigQuery: %d reading rows (want %d, every kept reading), rollup row sent %v (want true)", len(out.BQ), kept, out.Rollup != nil)
			}
			if un.Hour != tc.hour {
				t.Errorf("hour unchanged %v, want %v", un.Hour, tc.hour)
			}
			var bt int64
			for _, u := range un.Bigtable {
				if u.Table == table0 && u.Kind != OriginRollup {
					bt += u.N
				}
			}
			if bt != tc.unchangedBT {
				t.Errorf("unchanged in Bigtable: %d; want %d", bt, tc.unchangedBT)
			}
		})
	}
}

// sameWritten compares written's output with a want whose rollup count
// may be "-" (any).
func sameWritten(got, want string) bool {
	if strings.HasSuffix(want, "rollup count=-") {
		i := strings.LastIndex(got, " rollup count=")
		if i < 0 {
			return false
		}
		return got[:i] == strings.TrimSuffix(want, " rollup count=-")
	}
	return got == want
}

// TestMergeChangesWithoutTheStoredRollup: a stored rollup that was not
// read (the readings in another table than the first) is written again.
func TestMergeChangesWithoutTheStoredRollup(t *testing.T) {
	spec, h := firingsSpec(t)
	rb, _ := NewReadBack(spec)
	lines := []string{vitals(0, "60", "36.8", "98"), vitals(10*time.Minute, "70", "36.8", "98")}
	start, end := firingsHour.UnixMilli(), firingsHour.Add(time.Hour).UnixMilli()
	tb := table{}
	tb.apply(BatchHour(h, HourPane{StartMs: start, EndMs: end, Records: readingtest.Parse(t, spec, lines...)}, true, 1).Rows)
	stored := storedHourOf(t, rb, tb, start, end)
	stored.Rollup, stored.RollupRead = nil, false
	out, un := MergeChanges(h, HourPane{StartMs: start, EndMs: end, Records: readingtest.Parse(t, spec, lines...)}, stored, true, nil, 2)
	if un.Hour {
		t.Error("hour unchanged; want the rollup's cells written")
	}
	if got := written(out.Rows); got != " rollup count=2" && !strings.Contains(got, "rollup count=2") {
		t.Errorf("written %q, want the rollup's cells alone", got)
	}
}

// TestSameValues is the comparison of two readings' values.
func TestSameValues(t *testing.T) {
	f := func(x float64) schemas.Value { return schemas.Value{Kind: schemas.KindFloat, Num: x} }
	i := func(x int64) schemas.Value { return schemas.Value{Kind: schemas.KindInt, Int: x} }
	tags := func(kv ...string) schemas.Value {
		v := schemas.Value{Kind: schemas.KindTags}
		for j := 0; j+1 < len(kv); j += 2 {
			v.Pairs = append(v.Pairs, schemas.Pair{K: kv[j], V: kv[j+1]})
		}
		return v
	}
	for _, tc := range []struct {
		name string
		a, b []schemas.Value
		want bool
	}{
		{"equal", []schemas.Value{f(1.5), i(3), {}}, []schemas.Value{f(1.5), i(3), {}}, true},
		{"a changed float", []schemas.Value{f(1.5)}, []schemas.Value{f(1.25)}, false},
		{"a value against none", []schemas.Value{i(3)}, []schemas.Value{{}}, false},
		{"an int against a float", []schemas.Value{i(3)}, []schemas.Value{f(3)}, false},
		{"an imputed flag", []schemas.Value{{Kind: schemas.KindBool, Bool: true}}, []schemas.Value{{Kind: schemas.KindBool}}, false},
		{"tags", []schemas.Value{tags("a", "1")}, []schemas.Value{tags("a", "1")}, true},
		{"changed tags", []schemas.Value{tags("a", "1")}, []schemas.Value{tags("a", "2")}, false},
		{"strings", []schemas.Value{{Kind: schemas.KindString, Str: "x"}}, []schemas.Value{{Kind: schemas.KindString, Str: "y"}}, false},
		{"lengths", []schemas.Value{i(1)}, []schemas.Value{i(1), i(2)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameValues(tc.a, tc.b); got != tc.want {
				t.Errorf("SameValues = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMergeChangesBigQueryMarks: with the hour's BigQuery marks, a merge
// sends a table only the rows it lacks, and marks the rows it sends with
// the fingerprint of what the table then holds.
func TestMergeChangesBigQueryMarks(t *testing.T) {
	spec, h, rb, first, start, end := mergedHour(t)
	marks := &BQMarks{Table: MarksTable(spec), RowKey: MarkRowKey("s", start),
		Readings: BQDest{Ref: "p:d.readings", Table: "readings"}, Rollups: BQDest{Ref: "p:d.readings_hourly", Table: "readings_hourly"}}
	pane := func(lines []string) HourPane {
		return HourPane{StartMs: start, EndMs: end, Records: readingtest.Parse(t, spec, lines...)}
	}
	// acked is what the marks table holds once BigQuery acknowledged the
	// rows a merge sent.
	acked := func(t *testing.T, out Firing, had map[string][]byte) map[string][]byte {
		t.Helper()
		got := map[string][]byte{}
		for k, v := range had {
			got[k] = v
		}
		rows := append([]BQRow(nil), out.BQ...)
		if out.Rollup != nil {
			rows = append(rows, *out.Rollup)
		}
		for _, r := range rows {
			m := r.Mark
			n := int64(0)
			for _, o := range rows {
				if o.Mark.Qualifier == m.Qualifier {
					n++
				}
			}
			if m.Rows != n || m.Table != marks.Table || m.RowKey != marks.RowKey || m.TsMicros != end*1000 {
				t.Fatalf("row marked %+v; want %d rows of %s in %s at the hour's end", m, n, marks.RowKey, marks.Table)
			}
			mut := m.Mutation()
			if len(mut.Cells) != 1 || len(mut.Origins) != 1 || mut.Origins[0].Cells != 1 || mut.Origins[0].Raw != "" || mut.Cells[0].Family != MarksFamily {
				t.Fatalf("mark mutation %+v: want one cell of family %s, of one origin naming no reading", mut, MarksFamily)
			}
			got[m.Qualifier] = m.Value
		}
		return got
	}
	tb := table{}
	out, un := MergeChanges(h, pane(first), StoredHour{MarksRead: true, Marks: map[string][]byte{}}, true, marks, 1)
	if len(out.BQ) != 4 || out.Rollup == nil || len(un.BigQuery) != 0 {
		t.Fatalf("into an empty hour: %d reading rows, rollup %v, unchanged %v; want 4, a rollup, none", len(out.BQ), out.Rollup != nil, un.BigQuery)
	}
	tb.apply(out.Rows)
	firstMarks := acked(t, out, nil)

	type want struct {
		rows       string // the sent readings' minutes
		rollup     bool
		unReadings int64
	}
	minutes := func(out Firing) string {
		var b []string
		for _, r := range out.BQ {
			for _, v := range r.Values {
				if v.Kind == schemas.KindTime && v.Int >= start && v.Int < end {
					b = append(b, strconv.FormatInt((v.Int-start)/60000, 10))
					break
				}
			}
		}
		return strings.Join(b, " ")
	}
	for _, tc := range []struct {
		name  string
		again []string
		marks map[string][]byte
		read  bool
		want  want
	}{
		{"the same readings send nothing", first, firstMarks, true, want{"", false, 4}},
		{"a changed value sends its row and the rollup", []string{vitals(50*time.Minute, "80", "36.8", "98")}, firstMarks, true, want{"50", true, 3}},
		{"a new reading sends itself, the imputation it moved and the rollup", []string{vitals(5*time.Minute, "70", "36.8", "98")}, firstMarks, true, want{"5 10", true, 3}},
		{"marks not read send every row", first, nil, false, want{"0 10 40 50", true, 0}},
		{"no mark sends every row", first, map[string][]byte{}, true, want{"0 10 40 50", true, 0}},
		{"a mark of other rows sends every row", []string{vitals(50*time.Minute, "80", "36.8", "98")},
			map[string][]byte{marks.Readings.Ref: []byte("other"), marks.Rollups.Ref: []byte("other")}, true, want{"0 10 40 50", true, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := storedHourOf(t, rb, tb, start, end)
			stored.Marks, stored.MarksRead = tc.marks, tc.read
			out, un := MergeChanges(h, pane(tc.again), stored, true, marks, 2)
			if got := minutes(out); got != tc.want.rows {
				t.Errorf("sent the rows of minutes %q, want %q", got, tc.want.rows)
			}
			if (out.Rollup != nil) != tc.want.rollup {
				t.Errorf("rollup sent %v, want %v", out.Rollup != nil, tc.want.rollup)
			}
			var unReadings, unRollups int64
			for _, u := range un.BigQuery {
				switch u.Table {
				case "readings":
					unReadings += u.N
				case "readings_hourly":
					unRollups += u.N
				}
			}
			if unReadings != tc.want.unReadings || (unRollups == 1) == tc.want.rollup {
				t.Errorf("unchanged: %d readings, %d rollups; want %d and %v", unReadings, unRollups, tc.want.unReadings, !tc.want.rollup)
			}
			// Once acknowledged, the marks are the whole merged hour's:
			// the same readings again send nothing.
			after := acked(t, out, tc.marks)
			next := table{}
			for k, v := range tb {
				next[k] = v
			}
			next.apply(out.Rows)
			stored = storedHourOf(t, rb, next, start, end)
			stored.Marks, stored.MarksRead = after, true
			again, _ := MergeChanges(h, pane(tc.again), stored, true, marks, 3)
			if len(again.BQ) != 0 || again.Rollup != nil {
				t.Errorf("the same merge again sent %d reading rows and rollup %v; want none", len(again.BQ), again.Rollup != nil)
			}
		})
	}
}

// TestBQFingerprint: the fingerprint is of the rows whatever their order,
// leaves out the skipped columns, and tells a changed value, a missing
// row and another table apart.
func TestBQFingerprint(t *testing.T) {
	row := func(vals ...int64) BQRow {
		var r BQRow
		for _, v := range vals {
			r.Values = append(r.Values, schemas.Value{Kind: schemas.KindInt, Int: v})
		}
		return r
	}
	skipLast := func(col int) bool { return col == 2 }
	base := BQFingerprint("p:d.t", []BQRow{row(1, 2, 100), row(3, 4, 100)}, skipLast)
	for _, tc := range []struct {
		name string
		ref  string
		rows []BQRow
		same bool
	}{
		{"reordered", "p:d.t", []BQRow{row(3, 4, 100), row(1, 2, 100)}, true},
		{"a skipped column differs", "p:d.t", []BQRow{row(1, 2, 7), row(3, 4, 8)}, true},
		{"a value differs", "p:d.t", []BQRow{row(1, 2, 100), row(3, 5, 100)}, false},
		{"a row missing", "p:d.t", []BQRow{row(1, 2, 100)}, false},
		{"a row twice", "p:d.t", []BQRow{row(1, 2, 100), row(3, 4, 100), row(3, 4, 100)}, false},
		{"another table", "p:d.u", []BQRow{row(1, 2, 100), row(3, 4, 100)}, false},
	} {
		if got := BQFingerprint(tc.ref, tc.rows, skipLast); bytes.Equal(got, base) != tc.same {
			t.Errorf("%s: same fingerprint %v, want %v", tc.name, !tc.same, tc.same)
		}
	}
}
