package pipelines

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/loopback"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

func TestMain(m *testing.M) { loopback.TestMain(m) }

func init() {
	register.Function1x1(rowSummary)
	register.Function1x1(deadReason)
	dofnreg.DoFn(&bqColumnsFn{}, register.Function1x1[hours.BQRow, string])
	register.Function2x0(keyByTestSource)
}

// keyByTestSource keys a line by a fixed file name, as ReadFiles would.
func keyByTestSource(line string, emit func(string, string)) { emit("in.jsonl", line) }

// rowSummary renders a mutation as "key: family:qualifier@ts=value ...",
// cells sorted, so a test can compare whole rows.
func rowSummary(m hours.RowMutation) string {
	var cells []string
	for _, c := range m.Cells {
		cells = append(cells, fmt.Sprintf("%s:%s@%d=%s", c.Family, c.Qualifier, c.TsMicros, c.Value))
	}
	sort.Strings(cells)
	return m.Table + "/" + m.RowKey + ": " + strings.Join(cells, " ")
}

func deadReason(d deadletter.DeadLetter) string { return d.Reason + " " + d.Source }

// bqColumnsFn renders BigQuery rows as text from the columns it names,
// found by name among the table's columns (a BQRow's Values are in the
// order of its table's columns), never by position: a column added to or
// moved in the spec leaves the test's reading of the others right.
type bqColumnsFn struct {
	// Columns are the table's column names, in the order of BQRow.Values.
	Columns []string
	// Show are the columns rendered, in this order.
	Show []string
	// Format has one %s per Show; empty joins them with commas.
	Format string
}

func (f *bqColumnsFn) ProcessElement(r hours.BQRow) string {
	vals := make([]any, len(f.Show))
	for i, name := range f.Show {
		j := slices.Index(f.Columns, name)
		switch {
		case j < 0:
			vals[i] = "<no column " + name + ">"
		case j >= len(r.Values):
			vals[i] = "<row without " + name + ">"
		default:
			vals[i] = string(schemas.AppendText(nil, r.Values[j]))
		}
	}
	if f.Format == "" {
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = v.(string)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprintf(f.Format, vals...)
}

// bqColumns is a bqColumnsFn for a table of a spec.
func bqColumns(t *schemas.BigQuerySpec, format string, show ...string) *bqColumnsFn {
	f := &bqColumnsFn{Show: show, Format: format}
	for _, c := range t.Columns {
		f.Columns = append(f.Columns, c.Name)
	}
	return f
}

// bqSummary renders a vitals reading row: the reading's columns, by name.
func bqSummary(spec *hours.Compiled) *bqColumnsFn {
	return bqColumns(spec.BigQuery, "", "sensor_id", "event_timestamp", "heart_rate", "body_temperature", "spO2", "battery_level", "heart_rate_imputed")
}

func vitalsLine(sensor, ts string, hr string) string {
	return fmt.Sprintf(`{"sensor_id":%q,"timestamp":%s,"heart_rate":%s,"body_temperature":36.8,"spO2":98,"battery_level":87}`, sensor, ts, hr)
}

func TestBuildRowsGroupsByHourImputesAndDeadLetters(t *testing.T) {
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec := hours.MustCompile(loaded, hours.CompileOptions{})
	spec.Rollup = nil // the rollup cells are TestBatchRollups' subject
	p, s := beam.NewPipelineWithRoot()
	lines := beam.ParDo(s, keyByTestSource, beam.Create(s,
		vitalsLine("a", `"2026-03-01T10:00:00Z"`, "null"),
		vitalsLine("a", `"2026-03-01T10:59:59.999Z"`, "70"),
		vitalsLine("a", `1772362800000`, "80"), // 11:00:00Z, the next hour
		vitalsLine("a", `1772362800000`, "80"), // duplicate
		vitalsLine("b", `"2026-03-01T12:30:00+02:00"`, "null"),
		`{"sensor_id":"c"}`,
		`oops`,
		vitalsLine("d", `"2026-03-01T10:00:00Z"`, "999"),
	))
	cfg := Config{Spec: spec, BigQuery: &bigqueryio.Config{}}
	records, parseDead := parseLines(s, cfg, lines, true)
	b := buildBatch(s, cfg, false, records)
	rows, bqRows, buildDead := b.Rows, b.BQRows, b.Dead
	// passert compares in the global window.
	global := func(c beam.PCollection) beam.PCollection { return beam.WindowInto(s, window.NewGlobalWindows(), c) }
	rows, bqRows, buildDead = global(rows), global(bqRows), global(buildDead)

	passert.Equals(s, beam.ParDo(s, rowSummary, rows),
		"patient_vitals/a#2026-03-01T10: meta:battery_level@1772359200000000=87 meta:battery_level@1772362799999000=87 "+
			"meta:heart_rate_imputed@1772359200000000=true meta:heart_rate_imputed@1772362799999000=false "+
			"vitals:body_temperature@1772359200000000=36.8 vitals:body_temperature@1772362799999000=36.8 "+
			"vitals:heart_rate@1772359200000000=70 vitals:heart_rate@1772362799999000=70 "+
			"vitals:spO2@1772359200000000=98 vitals:spO2@1772362799999000=98",
		"patient_vitals/a#2026-03-01T11: meta:battery_level@1772362800000000=87 meta:heart_rate_imputed@1772362800000000=false "+
			"vitals:body_temperature@1772362800000000=36.8 vitals:heart_rate@1772362800000000=80 vitals:spO2@1772362800000000=98",
		"patient_vitals/b#2026-03-01T10: meta:battery_level@1772361000000000=87 meta:heart_rate_imputed@1772361000000000=false "+
			"vitals:body_temperature@1772361000000000=36.8 vitals:spO2@1772361000000000=98",
	)
	passert.Equals(s, beam.ParDo(s, deadReason, parseDead),
		"missing_field in.jsonl", "malformed in.jsonl", "out_of_range in.jsonl")
	passert.Count(s, buildDead, "build dead letters", 0)
	passert.Equals(s, beam.ParDo(s, bqSummary(spec), bqRows),
		"a,1772359200000,70,36.8,98,87,true",
		"a,1772362799999,70,36.8,98,87,false",
		"a,1772362800000,80,36.8,98,87,false",
		"b,1772361000000,,36.8,98,87,false",
	)
	ptest.RunAndValidate(t, p)
}

func TestConfigCheck(t *testing.T) {
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec := hours.MustCompile(loaded, hours.CompileOptions{})
	bt, dl := bigtableio.Config{Project: "p", Instance: "i"}, targets.DeadLetterTarget{Path: "d"}
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"complete", Config{Spec: spec, Bigtable: bt, DeadLetter: dl}, true},
		{"no spec", Config{Bigtable: bt, DeadLetter: dl}, false},
		{"no instance", Config{Spec: spec, Bigtable: bigtableio.Config{Project: "p"}, DeadLetter: dl}, false},
		{"no dead letter", Config{Spec: spec, Bigtable: bt}, false},
		{"local-runner options on prism", Config{Spec: spec, Bigtable: bt, DeadLetter: dl, Runner: "prism", Local: &LocalRunner{WriteOnArrival: true}}, true},
		{"local-runner options on a job server", Config{Spec: spec, Bigtable: bt, DeadLetter: dl, Runner: "universal", Local: &LocalRunner{DiskState: true}}, true},
		{"local-runner options on Dataflow", Config{Spec: spec, Bigtable: bt, DeadLetter: dl, Runner: "dataflow", Local: &LocalRunner{Recover: true}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Check(); (err == nil) != tt.ok {
				t.Fatalf("Check() = %v; want ok=%v", err, tt.ok)
			}
		})
	}
}
