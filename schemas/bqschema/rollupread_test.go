package bqschema

import (
	"reflect"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

// storageValue is v as the Storage Read API gives it back (arrowValue):
// nil, string, []byte, int64, float64, bool or time.Time.
func storageValue(v schemas.Value) any {
	switch v.Kind {
	case schemas.KindString:
		return v.Str
	case schemas.KindBytes:
		return []byte(v.Str)
	case schemas.KindInt:
		return v.Int
	case schemas.KindFloat:
		return v.Num
	case schemas.KindBool:
		return v.Bool
	case schemas.KindTime:
		return time.UnixMilli(v.Int).UTC()
	}
	return nil
}

// TestRollupReadPlanGivesTheRollupCells reads the rollup row the sink
// writes for an hour back: its cells are the ones the Bigtable sink
// writes for the same rollup, its identity and window those of the hour.
func TestRollupReadPlanGivesTheRollupCells(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
	}{
		{"every statistic", []string{readingtest.VitalsLine("p-1", 1772359200000, 60), readingtest.VitalsLine("p-1", 1772359260000, 72.5)}},
		{"a statistic with no value", []string{readingtest.VitalsLine("p-2", 1772359200000, -1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := spectest.Load("vitals")
			if err != nil {
				t.Fatal(err)
			}
			c, err := hours.Compile(spec, hours.CompileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			roller := c.Roller()
			recs := readingtest.Parse(t, spec, tc.lines...)
			start := hours.WindowStart(recs[0].EventMs, time.Hour)
			ru := roller.Compute(recs, start, start+time.Hour.Milliseconds())
			row := roller.BQRow(&ru, hours.Pane{Timing: "ON_TIME", Index: 2}, start+time.Hour.Milliseconds())
			p, err := NewRollupReadPlan(spec, roller.BigQuery())
			if err != nil {
				t.Fatal(err)
			}
			var vals []any
			for _, v := range row.Values {
				vals = append(vals, storageValue(v))
			}
			got, err := p.Row(vals)
			if err != nil {
				t.Fatal(err)
			}
			want := roller.Cells(&ru)
			for i := range want {
				want[i].Family, want[i].TsMicros = "", 0
			}
			if !reflect.DeepEqual(got.Cells, want) {
				t.Errorf("cells\n got %v\nwant %v", got.Cells, want)
			}
			if id, wantID := group.IdentityKey(spec, &got.Identity), group.IdentityKey(spec, &recs[0]); id != wantID || got.StartMs != start || got.PaneIndex != 2 {
				t.Errorf("identity %q, start %d, pane %d; want %q, %d, 2", id, got.StartMs, got.PaneIndex, wantID, start)
			}
		})
	}
}
