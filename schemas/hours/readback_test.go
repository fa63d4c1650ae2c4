package hours

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// sampleRecords parses the valid lines of testdata/samples/<name>.jsonl
// (the samples hold bad lines too).
func sampleRecords(t *testing.T, spec *schemas.Spec, name string) []schemas.Record {
	t.Helper()
	f, err := os.Open("../../testdata/samples/" + name + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := codec.NewParser(spec)
	b, err := NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	var recs []schemas.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		more, err := p.Parse(nil, sc.Bytes(), name)
		for i := range more {
			if err == nil {
				err = b.Check(&more[i])
			}
		}
		if err == nil {
			recs = append(recs, more...)
		}
	}
	if len(recs) < 5 {
		t.Fatalf("sample %s: only %d valid records", name, len(recs))
	}
	return recs
}

// bigtableStore plays row mutations as Bigtable keeps them: per table and
// row, one cell per column and timestamp.
type bigtableStore map[string]map[string]map[string]Cell

func (st bigtableStore) apply(muts []RowMutation) {
	for _, m := range muts {
		if st[m.Table] == nil {
			st[m.Table] = map[string]map[string]Cell{}
		}
		row := st[m.Table][m.RowKey]
		if row == nil {
			row = map[string]Cell{}
			st[m.Table][m.RowKey] = row
		}
		id := func(c Cell) string { return fmt.Sprintf("%s:%s@%d", c.Family, c.Qualifier, c.TsMicros) }
		for _, c := range m.Deletes {
			delete(row, id(c))
		}
		for _, c := range m.Cells {
			row[id(c)] = c
		}
	}
}

// rows lists a table's rows in key order.
func (st bigtableStore) rows(table string) []ReadRow {
	var out []ReadRow
	for key, cells := range st[table] {
		r := ReadRow{Key: key}
		for _, c := range cells {
			r.Cells = append(r.Cells, c)
		}
		sort.Slice(r.Cells, func(i, j int) bool { return r.Cells[i].TsMicros < r.Cells[j].TsMicros })
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// recordText renders a record's event time and values, for comparing.
func recordText(s *schemas.Spec, r *schemas.Record) string {
	var parts []string
	for i, v := range r.Values {
		name := ""
		if i < len(s.Fields) {
			name = s.Fields[i].Name
		} else {
			name = s.Impute[i-len(s.Fields)].Flag
		}
		if v.Kind != schemas.KindNull {
			parts = append(parts, fmt.Sprintf("%s=%s", name, schemas.AppendText(nil, v)))
		}
	}
	return fmt.Sprintf("%d %s", r.EventMs, strings.Join(parts, " "))
}

// windowKey names one identity's hour.
type windowKey struct {
	identity string
	start    int64
}

// preparedWindows groups records per identity and UTC hour and prepares
// each group as the batch does.
func preparedWindows(s *schemas.Spec, recs []schemas.Record) map[windowKey][]schemas.Record {
	groups := map[windowKey][]schemas.Record{}
	for _, r := range recs {
		k := windowKey{group.IdentityKey(s, &r), WindowStart(r.EventMs, time.Hour)}
		groups[k] = append(groups[k], r)
	}
	for k, g := range groups {
		groups[k], _ = group.Prepare(s, g)
	}
	return groups
}

func TestReadBackRebuildsEveryBuiltinSpecsReadings(t *testing.T) {
	tests := []struct {
		spec, sample, table string
	}{
		{"vitals", "vitals", "patient_vitals"},
		{"vitals", "vitals_fleet", "patient_vitals"},
		// One row per reading; the second table's salted key is not read.
		{"user_events", "user_events", "user_events"},
		// A reverse timestamp, and direction after it: other directions'
		// rows are in the range and must be left out.
		{"traffic", "traffic", "traffic"},
	}
	for _, tc := range tests {
		t.Run(tc.sample, func(t *testing.T) {
			s, err := spectest.Load(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := NewReadBack(s)
			if err != nil {
				t.Fatal(err)
			}
			if rb.Table() != tc.table {
				t.Fatalf("reads table %s; want %s", rb.Table(), tc.table)
			}
			b, err := NewBuilder(s)
			if err != nil {
				t.Fatal(err)
			}
			roller, err := NewRoller(s)
			if err != nil {
				t.Fatal(err)
			}
			windows := preparedWindows(s, sampleRecords(t, s, tc.sample))
			st := bigtableStore{}
			for k, w := range windows {
				muts, rejected := b.Mutations(w)
				if len(rejected) > 0 {
					t.Fatalf("rejected: %v", rejected[0].Err)
				}
				st.apply(muts)
				if roller != nil { // rollup cells share the rows: not readings
					ru := roller.Compute(w, k.start, k.start+time.Hour.Milliseconds())
					for _, key := range b.RowKeys(s.Bigtable.Tables[0].Name, w) {
						st.apply([]RowMutation{{Table: s.Bigtable.Tables[0].Name, RowKey: key, Cells: roller.Cells(&ru)}})
					}
				}
			}
			rows := st.rows(rb.Table())
			for k, w := range windows {
				plan, err := rb.PlanWindow(k.identity, k.start, k.start+time.Hour.Milliseconds())
				if err != nil {
					t.Fatal(err)
				}
				got, skipped := rb.Records(inRanges(rows, plan.Ranges), k.identity, k.start, k.start+time.Hour.Milliseconds())
				if skipped != 0 {
					t.Errorf("%v: %d readings skipped", k, skipped)
				}
				var g, want []string
				for i := range got {
					g = append(g, recordText(s, &got[i]))
					if !deadletter.IsReadBack(&got[i]) {
						t.Errorf("source %q does not say read back", got[i].Source)
					}
				}
				for i := range w {
					want = append(want, recordText(s, &w[i]))
				}
				if strings.Join(g, "\n") != strings.Join(want, "\n") {
					t.Errorf("%v: read back\n%s\nwant\n%s", k, strings.Join(g, "\n"), strings.Join(want, "\n"))
				}
			}
		})
	}
}

// inRanges keeps the rows a scan of ranges reads.
func inRanges(rows []ReadRow, ranges []rowkey.RowRange) []ReadRow {
	var out []ReadRow
	for _, r := range rows {
		for _, rg := range ranges {
			if r.Key >= rg.Start && (rg.End == "" || r.Key < rg.End) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// TestReadBackImputedValuesAreNotObserved: a killed stream's early firings
// wrote provisional imputations; rebuilt and re-imputed, the hour equals the
// batch's, and the rebuilt readings' payloads leave the imputed values out.
func TestReadBackImputedValuesAreNotObserved(t *testing.T) {
	s, err := spectest.Load("vitals")
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := NewReadBack(s)
	b, _ := NewBuilder(s)
	h := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	line := func(min int, hr string) string {
		return fmt.Sprintf(`{"sensor_id":"s1","timestamp":%d,"heart_rate":%s,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			h.Add(time.Duration(min)*time.Minute).UnixMilli(), hr)
	}
	lines := []string{line(0, "null"), line(10, "70"), line(20, "null"), line(30, "80"), line(40, "null")}
	p := codec.NewParser(s)
	parse := func(ls ...string) []schemas.Record {
		var recs []schemas.Record
		for _, l := range ls {
			recs, _ = p.Parse(recs, []byte(l), "sub")
		}
		return recs
	}
	// Early firings, one reading each, in arrival order: +20m takes 70 then
	// (provisionally), and +0m nothing.
	st := bigtableStore{}
	var seen group.Seen
	for _, l := range []string{lines[1], lines[2], lines[0], lines[4]} {
		kept, _ := group.PrepareEarly(s, parse(l), &seen)
		muts, _ := b.Mutations(kept)
		st.apply(muts)
	}
	end := h.Add(time.Hour).UnixMilli()
	got, skipped := rb.Records(st.rows("patient_vitals"), "s1", h.UnixMilli(), end)
	if skipped != 0 || len(got) != 4 {
		t.Fatalf("read back %d readings, %d skipped; want 4, 0", len(got), skipped)
	}
	if !strings.Contains(recordText(s, &got[2]), "heart_rate=70 ") || !strings.Contains(recordText(s, &got[2]), "heart_rate_imputed=true") {
		t.Errorf("+20m read back as %s; want its provisional 70, flagged imputed", recordText(s, &got[2]))
	}
	if strings.Contains(got[2].Raw, "heart_rate") {
		t.Errorf("payload %s holds the imputed heart rate", got[2].Raw)
	}
	// The restarted stream brings +30m; the hour, re-imputed, is the batch's.
	merged, _ := group.Prepare(s, append(got, parse(lines[3])...))
	want, _ := group.Prepare(s, parse(lines...))
	var g, w []string
	for i := range merged {
		g = append(g, recordText(s, &merged[i]))
		w = append(w, recordText(s, &want[i]))
	}
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("re-imputed\n%s\nwant the batch's\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
}

func TestReadBackSkipsWhatIsNotAReading(t *testing.T) {
	s, _ := spectest.Load("vitals")
	rb, _ := NewReadBack(s)
	h := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ts := func(min int) int64 { return h.Add(time.Duration(min)*time.Minute).UnixMilli() * 1000 }
	cell := func(fam, q string, at int64, v string) Cell {
		return Cell{Family: fam, Qualifier: q, TsMicros: at, Value: []byte(v)}
	}
	reading := func(at int64, temp string) []Cell {
		return []Cell{cell("vitals", "body_temperature", at, temp), cell("vitals", "spO2", at, "98"), cell("meta", "battery_level", at, "87")}
	}
	row := func(key string, cells ...[]Cell) ReadRow {
		r := ReadRow{Key: key}
		for _, c := range cells {
			r.Cells = append(r.Cells, c...)
		}
		return r
	}
	tests := []struct {
		name     string
		rows     []ReadRow
		identity string
		want     []string
		skipped  int
	}{
		{"a good reading", []ReadRow{row("s1#2026-03-01T10", reading(ts(5), "36.8"))}, "s1",
			[]string{"1772359500000 sensor_id=s1 timestamp=1772359500000 body_temperature=36.8 spO2=98 battery_level=87"}, 0},
		{"rollup cells at the hour's end and unknown columns are not readings",
			[]ReadRow{row("s1#2026-03-01T10", []Cell{cell("hourly", "count", ts(60), "1"), cell("vitals", "other", ts(6), "1")})}, "s1", nil, 0},
		{"cells outside the hour are left out", []ReadRow{row("s1#2026-03-01T10", reading(ts(-1), "36.8"), reading(ts(61), "36.8"))}, "s1", nil, 0},
		{"a value that does not decode", []ReadRow{row("s1#2026-03-01T10", reading(ts(5), "warm"))}, "s1", nil, 1},
		{"a required field with no cell", []ReadRow{row("s1#2026-03-01T10", []Cell{cell("vitals", "spO2", ts(5), "98")})}, "s1", nil, 1},
		{"a row key of another shape", []ReadRow{row("garbage", reading(ts(5), "36.8"))}, "s1", nil, 1},
		{"a cell in a row of another hour", []ReadRow{row("s1#2026-03-01T09", reading(ts(5), "36.8"))}, "s1", nil, 1},
		{"another sensor", []ReadRow{row("s2#2026-03-01T10", reading(ts(5), "36.8"))}, "s1", nil, 0},
		{"any sensor", []ReadRow{row("s2#2026-03-01T10", reading(ts(5), "36.8"))}, "",
			[]string{"1772359500000 sensor_id=s2 timestamp=1772359500000 body_temperature=36.8 spO2=98 battery_level=87"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped := rb.Records(tc.rows, tc.identity, h.UnixMilli(), h.Add(time.Hour).UnixMilli())
			var g []string
			for i := range got {
				g = append(g, recordText(s, &got[i]))
			}
			if fmt.Sprint(g) != fmt.Sprint(tc.want) || skipped != tc.skipped {
				t.Errorf("got %q, %d skipped; want %q, %d", g, skipped, tc.want, tc.skipped)
			}
		})
	}
}

// TestReadBackKeyForms: keys with escaping, padding, reverse timestamps,
// hex and reversed domains parse back; a table that drops a field cannot
// be read back, and the error says which.
func TestReadBackKeyForms(t *testing.T) {
	spec := func(rowKey, qualifier string, escape bool) string {
		return fmt.Sprintf(`
name: kf
event_time: ts
identity: [id, host]
fields:
  - {name: id, type: string, required: true}
  - {name: host, type: string, required: true}
  - {name: n, type: int, required: true}
  - {name: ts, type: timestamp, required: true}
  - {name: x, type: float}
  - {name: raw, type: bytes}
bigtable:
  tables:
    - name: t
      row_key: %q
      escape: %v
      families:
        - name: f
          columns:
            - {qualifier: %q, value: x}
            - {qualifier: raw, value: raw}
            - {qualifier: count, value: n, encoding: int64be}
`, rowKey, escape, qualifier)
	}
	line := `{"id":"a#b\\c","host":"www.example.com","n":42,"ts":"2026-03-01T10:15:30.250Z","x":1.5,"raw":"zz"}`
	tests := []struct {
		name, rowKey, qualifier string
		escape                  bool
		noReadBack              string // the error names this
	}{
		{"escaped delimiter, reversed domain", "{id}#{host|revdomain}#{ts|hour}", "x", true, ""},
		{"hex, padded int, reverse timestamp", "{id|hex}#{n|pad:6}#{ts|reverse}#{host}", "x", false, ""},
		{"epoch ms in the key and the qualifier", "{id|hex}#{host}#{ts|day}", "{ts|ms|pad:13}", false, ""},
		{"a qualifier with a field the key lacks", "{id|hex}#{ts|day}#{host}", "{n}", false, "field x is in no column"},
		{"a hashed identity", "{hash|id,host}#{ts|hour}", "x", false, "field id is in no column"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := schemas.ParseSpec("kf.yaml", []byte(spec(tc.rowKey, tc.qualifier, tc.escape)))
			if err != nil {
				t.Fatal(err)
			}
			rb, err := NewReadBack(s)
			if tc.noReadBack != "" {
				if !errors.Is(err, ErrNoReadBack) || !strings.Contains(err.Error(), tc.noReadBack) {
					t.Fatalf("NewReadBack: %v; want ErrNoReadBack naming %q", err, tc.noReadBack)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			recs, err := codec.NewParser(s).Parse(nil, []byte(line), "sub")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := NewBuilder(s)
			muts, rejected := b.Mutations(recs)
			if len(rejected) > 0 {
				t.Fatal(rejected[0].Err)
			}
			st := bigtableStore{}
			st.apply(muts)
			start := WindowStart(recs[0].EventMs, time.Hour)
			got, skipped := rb.Records(st.rows("t"), group.IdentityKey(s, &recs[0]), start, start+time.Hour.Milliseconds())
			if skipped != 0 || len(got) != 1 {
				t.Fatalf("read back %d, skipped %d (key %s)", len(got), skipped, muts[0].RowKey)
			}
			if g, w := recordText(s, &got[0]), recordText(s, &recs[0]); g != w {
				t.Errorf("read back %s\nwant      %s\n(key %s)", g, w, muts[0].RowKey)
			}
		})
	}
}

func TestNewReadBackOnBuiltinSpecs(t *testing.T) {
	for _, name := range schemas.BuiltinSpecNames() {
		s, err := spectest.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewReadBack(s)
		switch name {
		case "heroic_metrics":
			// Its key cannot be split after the tag set, and
			// {resource|values} keeps the tag values only.
			if !errors.Is(err, ErrNoReadBack) || !strings.Contains(err.Error(), "table heroic_metrics: field ") {
				t.Errorf("%s: %v; want ErrNoReadBack naming a field of heroic_metrics", name, err)
			}
		default:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

func TestCanonicalJSONParsesBackToTheSameRecord(t *testing.T) {
	for _, tc := range []struct{ spec, sample string }{
		{"vitals", "vitals"}, {"vitals", "vitals_fleet"}, {"user_events", "user_events"},
		{"traffic", "traffic"}, {"heroic_metrics", "heroic_metrics"},
	} {
		t.Run(tc.sample, func(t *testing.T) {
			s, err := spectest.Load(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			p := codec.NewParser(s)
			for _, r := range sampleRecords(t, s, tc.sample) {
				js := codec.CanonicalJSON(s, &r)
				back, err := p.Parse(nil, []byte(js), "again")
				if err != nil || len(back) != 1 {
					t.Fatalf("%s parses to %d records: %v", js, len(back), err)
				}
				if g, w := recordText(s, &back[0]), recordText(s, &r); g != w {
					t.Errorf("%s\nparses to %s\nwant      %s", js, g, w)
				}
			}
		})
	}
}

func TestCanonicalJSON(t *testing.T) {
	vitals, _ := spectest.Load("vitals")
	heroic, _ := spectest.Load("heroic_metrics")
	ms := time.Date(2026, 3, 1, 10, 15, 30, 250e6, time.UTC).UnixMilli()
	str := func(s string) schemas.Value { return schemas.Value{Kind: schemas.KindString, Str: s} }
	num := func(f float64) schemas.Value { return schemas.Value{Kind: schemas.KindFloat, Num: f} }
	tm := schemas.Value{Kind: schemas.KindTime, Int: ms}
	tests := []struct {
		name string
		spec *schemas.Spec
		vals []schemas.Value
		want string
	}{
		{"observed", vitals, []schemas.Value{str("s1"), tm, num(72), num(36.8), num(98), num(87), {Kind: schemas.KindBool}},
			`{"sensor_id":"s1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`},
		{"an imputed value is left out", vitals, []schemas.Value{str(`s"1`), tm, num(72), num(36.8), num(98), num(87), {Kind: schemas.KindBool, Bool: true}},
			`{"sensor_id":"s\"1","timestamp":"2026-03-01T10:15:30.250Z","body_temperature":36.8,"spO2":98,"battery_level":87}`},
		{"nested paths, tags and an exploded point", heroic, []schemas.Value{str("system"), {Kind: schemas.KindTags, Pairs: []schemas.Pair{{K: "site", V: "gew"}, {K: "what", V: "cpu"}}},
			{Kind: schemas.KindTags, Pairs: []schemas.Pair{{K: "host", V: "db"}}}, tm, num(42.5)},
			`{"series":{"key":"system","tags":{"site":"gew","what":"cpu"},"resource":{"host":"db"}},"data":{"data":[[1772360130250,42.5]]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := schemas.Record{Values: tc.vals, EventMs: ms}
			if got := codec.CanonicalJSON(tc.spec, &r); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestHoldsWholeHours: a row holds whole hours of a spec's identities when
// its key renders only literals, fields of that identity (same names,
// same types) and the event time cut to the hour or coarser.
func TestHoldsWholeHours(t *testing.T) {
	spec := func(identity, rowKey, idType string) *schemas.Spec {
		t.Helper()
		s, err := schemas.ParseSpec("wh.yaml", []byte(fmt.Sprintf(`
name: wh
event_time: ts
identity: %s
fields:
  - {name: id, type: %s, required: true}
  - {name: site, type: string, required: true}
  - {name: ts, type: timestamp, required: true}
  - {name: x, type: float}
bigtable:
  tables:
    - name: t
      row_key: %q
      families:
        - name: f
          columns:
            - {qualifier: x, value: x}
            - {qualifier: id, value: id}
            - {qualifier: site, value: site}
`, identity, idType, rowKey)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	to := spec("[id, site]", "{id}#{ts|hour}", "string")
	for _, tc := range []struct {
		name, identity, rowKey string
		idType                 string
		want                   bool
	}{
		{"identity and hour", "[id]", "{id}#{ts|hour}", "string", true},
		{"a day per row", "[id]", "{id}#{ts|day}", "string", true},
		{"salted, reversed domain", "[id]", "{salt:8|id}#{site|revdomain}#{ts|month}", "string", true},
		{"hashed identity", "[id, site]", "{hash|id,site}#{ts|hour}", "string", true},
		{"a minute per row", "[id]", "{id}#{ts|minute}", "string", false},
		{"a reading per row", "[id]", "{id}#{ts|reverse}", "string", false},
		{"all of an identity's time in one row", "[id]", "{id}", "string", true},
		{"a field outside the new identity", "[id]", "{id}#{x}#{ts|hour}", "string", false},
		{"an identity field of another type", "[id]", "{id}#{ts|hour}", "int", false},
		{"the time hashed", "[id]", "{hash|id,ts}#{ts|hour}", "string", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rb, err := NewReadBack(spec(tc.identity, tc.rowKey, tc.idType))
			if err != nil {
				t.Fatal(err)
			}
			if got := rb.HoldsWholeHours(to); got != tc.want {
				t.Errorf("rows keyed %s hold whole hours of identity [id, site]: %v; want %v", tc.rowKey, got, tc.want)
			}
		})
	}
}
