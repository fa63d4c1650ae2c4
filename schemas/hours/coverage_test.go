package hours

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

// fleetLines are a device's readings at the given minutes of 10:00.
func fleetLines(device string, minutes ...int) []string {
	var out []string
	for _, m := range minutes {
		out = append(out, fmt.Sprintf(`{"device":%q,"ts":"2026-03-01T10:%02d:00Z","interval":"1m","temp":%d}`, device, m, 20+m%3))
	}
	return out
}

// TestNoCadenceBuildsWhatItDid shows that a spec without a cadence and
// inventory builds what it builds without this feature: for every built-in
// spec (none declares one) a batch hour's rows are the readings' and the
// rollup's cells alone (HourRows, which adds no coverage), and for the
// fleet spec with its cadence_field and inventory taken out, the rows,
// the rollup row and the rollup table are the fleet's without the four
// coverage cells and columns and the inventory row.
func TestNoCadenceBuildsWhatItDid(t *testing.T) {
	for _, name := range schemas.BuiltinSpecNames() {
		s, err := schemas.BuiltinSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.HasCadence() || s.Bigtable.Inventory != "" {
			t.Fatalf("built-in spec %s declares a cadence or inventory: pick one that does not for this check", name)
		}
	}
	vitals, spec := firingsSpec(t)
	recs := readingtest.Parse(t, vitals,
		`{"sensor_id":"s","timestamp":"2026-03-01T10:00:00Z","heart_rate":60,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
		`{"sensor_id":"s","timestamp":"2026-03-01T10:20:00Z","body_temperature":36.9,"spO2":97,"battery_level":86}`)
	out := BatchHour(spec, HourPane{Records: recs, Pane: Pane{Timing: PaneOnTime}}, true, 1)
	kept, _ := group.Prepare(spec.Spec, append([]schemas.Record(nil), recs...))
	ru := spec.Roller().Compute(kept, 1772359200000, 1772362800000)
	rows, _ := HourRows(spec, kept, &ru, false, nil, nil)
	if !reflect.DeepEqual(out.Rows, rows) {
		t.Errorf("vitals: BatchHour rows differ from the readings' and rollup's cells:\n%v\n%v", out.Rows, rows)
	}
	if n := len(spec.Roller().BigQuery().Columns); len(out.Rollup.Values) != n {
		t.Errorf("vitals: rollup row has %d values for %d columns", len(out.Rollup.Values), n)
	}

	with, err := spectest.Load("../../testdata/fleet/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	without, err := spectest.Load("../../testdata/fleet/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	without.CadenceField, without.Bigtable.Inventory = "", ""
	cw := MustCompile(with, CompileOptions{})
	cn := MustCompile(without, CompileOptions{})
	lines := fleetLines("d", 0, 1, 2, 10, 11, 30)
	fw := BatchHour(cw, HourPane{Records: readingtest.Parse(t, with, lines...), Pane: Pane{Timing: PaneOnTime}}, true, 1)
	fn := BatchHour(cn, HourPane{Records: readingtest.Parse(t, without, lines...), Pane: Pane{Timing: PaneOnTime}}, true, 1)

	coverageCols := []string{coverage.RollupExpected, coverage.RollupCoverage, coverage.RollupGaps, coverage.RollupLongestGapS}
	var stripped []RowMutation
	for _, m := range fw.Rows {
		if m.Table == with.Bigtable.Inventory {
			continue
		}
		m.Cells = slices.DeleteFunc(slices.Clone(m.Cells), func(c Cell) bool { return c.Family == "hourly" && slices.Contains(coverageCols, c.Qualifier) })
		m.Origins = slices.Clone(m.Origins)
		m.Origins[len(m.Origins)-1].Cells -= 4
		stripped = append(stripped, m)
	}
	if len(stripped) != len(fw.Rows)-1 {
		t.Errorf("fleet: %d rows with the inventory's; want one inventory row", len(fw.Rows))
	}
	if !reflect.DeepEqual(stripped, fn.Rows) {
		t.Errorf("fleet without cadence: rows\n%v\nwant the fleet's without coverage and inventory\n%v", fn.Rows, stripped)
	}
	colsW, colsN := cw.Roller().BigQuery().Columns, cn.Roller().BigQuery().Columns
	if !reflect.DeepEqual(colsW[:len(colsW)-4], colsN) {
		t.Errorf("fleet without cadence: rollup columns %v; want %v", colsN, colsW[:len(colsW)-4])
	}
	for i, name := range coverageCols {
		if colsW[len(colsW)-4+i].Name != name {
			t.Errorf("rollup column %d = %s; want %s", len(colsW)-4+i, colsW[len(colsW)-4+i].Name, name)
		}
	}
	if !reflect.DeepEqual(fw.Rollup.Values[:len(fw.Rollup.Values)-4], fn.Rollup.Values) {
		t.Errorf("fleet without cadence: rollup row %v; want %v", fn.Rollup.Values, fw.Rollup.Values[:len(fw.Rollup.Values)-4])
	}
	// The fleet's coverage: its first hour from 10:00, 6 of 60, the gaps
	// 10:02-10:10, 10:11-10:30 and 10:30-11:00.
	got := fw.Rollup.Values[len(fw.Rollup.Values)-4:]
	want := []schemas.Value{{Kind: schemas.KindFloat, Num: 60}, {Kind: schemas.KindFloat, Num: 0.1}, {Kind: schemas.KindInt, Int: 3}, {Kind: schemas.KindFloat, Num: 1800}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fleet coverage %v; want %v", got, want)
	}
}
