package hours

import (
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// TestHourRows: the rollup's cells ride with the last reading of the
// first table's row; a rollup row no reading touches gets them alone.
func TestHourRows(t *testing.T) {
	s, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	c := MustCompile(s, CompileOptions{})
	recs := prepared(t, s,
		`{"sensor_id":"p-1","timestamp":"2026-03-01T10:00:01Z","heart_rate":70,"body_temperature":36.8,"spO2":98,"battery_level":90}`,
		`{"sensor_id":"p-1","timestamp":"2026-03-01T10:00:02Z","heart_rate":71,"body_temperature":36.8,"spO2":98,"battery_level":90}`)
	start := WindowStart(recs[0].EventMs, 3600e9)
	ru := c.Roller().Compute(recs, start, start+3600e3)
	rollupCells := len(c.Roller().Cells(&ru))
	for _, tc := range []struct {
		name       string
		rollup     *Rollup
		rollupRows []string
		wantRows   int
		wantLast   int // cells of the first row's last origin, beyond its own
	}{
		{"no rollup", nil, nil, 1, 0},
		{"rollup with the row", &ru, []string{"p-1#2026-03-01T10"}, 1, rollupCells},
		{"rollup alone on another row", &ru, []string{"p-1#2026-03-01T10", "p-1#elsewhere"}, 2, rollupCells},
	} {
		t.Run(tc.name, func(t *testing.T) {
			muts, rejected := HourRows(c, recs, tc.rollup, false, tc.rollupRows, nil)
			if len(rejected) != 0 || len(muts) != tc.wantRows {
				t.Fatalf("%d rows, %d rejected; want %d rows", len(muts), len(rejected), tc.wantRows)
			}
			plain, _ := HourRows(c, recs, nil, false, nil, nil)
			os, plainOs := muts[0].Origins, plain[0].Origins
			if got := os[len(os)-1].Cells - plainOs[len(plainOs)-1].Cells; got != tc.wantLast {
				t.Errorf("the last reading carries %d extra cells; want %d", got, tc.wantLast)
			}
			if tc.wantRows == 2 && (muts[1].RowKey != "p-1#elsewhere" || len(muts[1].Cells) != rollupCells) {
				t.Errorf("row %q has %d cells; want p-1#elsewhere with the %d rollup cells", muts[1].RowKey, len(muts[1].Cells), rollupCells)
			}
		})
	}
}
