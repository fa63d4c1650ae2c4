package pipelines

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	register.Function1x1(hourlyCells)
}

// hourlyCells renders only a mutation's rollup cells.
func hourlyCells(m hours.RowMutation) string {
	m.Cells = append([]hours.Cell(nil), m.Cells...)
	kept := m.Cells[:0]
	for _, c := range m.Cells {
		if c.Family == "hourly" {
			kept = append(kept, c)
		}
	}
	m.Cells = kept
	return rowSummary(m)
}

// TestBatchRollups shows a batch run writing the hourly rollups: cells of
// family hourly in each hour's row at the hour's end, and one BigQuery
// rollup row per sensor-hour.
func TestBatchRollups(t *testing.T) {
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec := hours.MustCompile(loaded, hours.CompileOptions{})
	p, s := beam.NewPipelineWithRoot()
	lines := beam.ParDo(s, keyByTestSource, beam.Create(s,
		vitalsLine("a", `"2026-03-01T10:00:00Z"`, "null"),
		vitalsLine("a", `"2026-03-01T10:20:00Z"`, "60"),
		vitalsLine("a", `"2026-03-01T10:59:59.999Z"`, "90"),
		vitalsLine("a", `"2026-03-01T10:59:59.999Z"`, "90"), // duplicate
		vitalsLine("b", `"2026-03-01T11:30:00Z"`, "null"),
	))
	cfg := Config{Spec: spec, BigQuery: &bigqueryio.Config{}}
	records, _ := parseLines(s, cfg, lines, true)
	built := buildBatch(s, cfg, false, records)
	global := func(c beam.PCollection) beam.PCollection { return beam.WindowInto(s, window.NewGlobalWindows(), c) }
	passert.Equals(s, global(beam.ParDo(s, hourlyCells, built.Rows)),
		"patient_vitals/a#2026-03-01T10: hourly:battery_level_last@1772362800000000=87 hourly:body_temperature_max@1772362800000000=36.8 "+
			"hourly:body_temperature_mean@1772362800000000=36.8 hourly:body_temperature_min@1772362800000000=36.8 hourly:count@1772362800000000=3 "+
			"hourly:heart_rate_imputed_count@1772362800000000=1 hourly:heart_rate_max@1772362800000000=90 hourly:heart_rate_mean@1772362800000000=75 "+
			"hourly:heart_rate_min@1772362800000000=60 hourly:spO2_max@1772362800000000=98 hourly:spO2_mean@1772362800000000=98 hourly:spO2_min@1772362800000000=98",
		"patient_vitals/b#2026-03-01T11: hourly:battery_level_last@1772366400000000=87 hourly:body_temperature_max@1772366400000000=36.8 "+
			"hourly:body_temperature_mean@1772366400000000=36.8 hourly:body_temperature_min@1772366400000000=36.8 hourly:count@1772366400000000=1 "+
			"hourly:heart_rate_imputed_count@1772366400000000=0 hourly:spO2_max@1772366400000000=98 hourly:spO2_mean@1772366400000000=98 "+
			"hourly:spO2_min@1772366400000000=98",
	)
	passert.Equals(s, global(beam.ParDo(s, rollupSummary(spec), built.Rollups)),
		"ontime a count=3 hr_mean=75 imputed=1",
		"ontime b count=1 hr_mean= imputed=0",
	)
	ptest.RunAndValidate(t, p)
}
