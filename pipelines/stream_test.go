package pipelines

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	register.Function1x1(finalTiming)
	register.Function1x1(bqDeadText)
}

func bqDeadText(d deadletter.DeadLetter) string { return d.Reason + ": " + d.Error + " " + d.Payload }

// finalTiming reports whether a rollup summary is of an on-time or late
// firing.
func finalTiming(r string) bool {
	return strings.HasPrefix(r, "ontime ") || strings.HasPrefix(r, "late ")
}

// rollupSummary renders a vitals rollup row, its columns read by name:
// "ontime a count=2 hr_mean=70 imputed=1".
func rollupSummary(spec *hours.Compiled) *bqColumnsFn {
	return bqColumns(spec.Roller().BigQuery(), "%s %s count=%s hr_mean=%s imputed=%s",
		"pane_timing", "sensor_id", "count", "heart_rate_mean", "heart_rate_imputed_count")
}

// streamHour is the start of the UTC hour three hours ago: recent enough
// for the default allowed lateness, closed long ago by the wall clock.
func streamHour() time.Time { return time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour) }

func at(h time.Time, d time.Duration) int64 { return h.Add(d).UnixMilli() }

// vitalsWithOptionalValues is the vitals spec with body_temperature and
// spO2 optional, so that copies of a reading can hold different fields.
func vitalsWithOptionalValues(t *testing.T) *hours.Compiled {
	t.Helper()
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec := hours.MustCompile(loaded, hours.CompileOptions{})
	spec.Field("body_temperature").Required = false
	spec.Field("spO2").Required = false
	return spec
}

// TestStreamPanesImputeAndConvergeToBatch drives one sensor-hour through
// early, on-time and late firings with TestStream on prism, writing to the
// real Bigtable emulator, and checks that a reading older than the allowed
// lateness is dead-lettered as too_late, that BigQuery gets every reading
// (again only when a late reading changes its imputation) and rollup rows
// only from on-time and late firings, and that once the window has closed
// the Bigtable rows equal what the batch pipeline writes for the same
// readings, even where an early firing wrote a duplicate that loses.
//
// What each firing writes depends on the order the firings reach the row
// builder, which prism does not fix when TestStream fires them within
// milliseconds; dofns' TestStreamFiringsWriteWhatTheyBringAndConvergeToBatch
// checks it firing by firing.
func TestStreamPanesImputeAndConvergeToBatch(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	spec := vitalsWithOptionalValues(t)
	for _, instance := range []string{"stream", "batch"} {
		if err := bigtableio.EnsureTables(context.Background(), "p", instance, spec.Spec, true, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// BigQuery, written with upserts: the stream's readings and rollups land
	// in dataset stream, the batch's in dataset batch.
	bq := bqemu.StartServerForTest(t)
	t.Setenv(bigqueryio.EmulatorHostEnv, strings.TrimPrefix(bq.RESTEndpoint, "http://"))
	t.Setenv(bigqueryio.StorageEmulatorHostEnv, bq.GRPCAddr)
	roller := spec.Roller()
	for _, ds := range []string{"stream", "batch"} {
		for _, tbl := range []*schemas.BigQuerySpec{spec.BigQuery, roller.BigQuery()} {
			if err := bigqueryio.EnsureTable(context.Background(), "p", ds, tbl.Table, tbl, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	upserts := func(ds string) (readings, rollups bigqueryio.Config) {
		readings = bigqueryio.Config{Project: "p", Dataset: ds, Table: spec.BigQuery.Table, WriteMethod: "upsert"}
		rollups = readings
		rollups.Table = roller.BigQuery().Table
		return readings, rollups
	}
	h := streamHour()
	a := vitalsLine("s", fmt.Sprint(at(h, 0)), "null")                          // +0m, heart rate missing
	b := vitalsLine("s", fmt.Sprint(at(h, 10*time.Minute)), "70")               // +10m
	c := vitalsLine("s", fmt.Sprint(at(h, 5*time.Minute)), "60")                // +5m, arrives after the on-time firing
	old := vitalsLine("s", fmt.Sprint(at(h, -26*time.Hour)), "80")              // its window closed two hours ago
	d := vitalsLine("s", fmt.Sprint(at(h, 20*time.Minute+time.Second)), "null") // +20m, a duplicate pair
	dDup := vitalsLine("s", fmt.Sprint(at(h, 20*time.Minute+time.Second)), "null")
	// A duplicate pair with as many values each: eB wins (smaller payload),
	// but eA comes first, so an early firing writes its spO2, which eB
	// lacks and a later firing must clear.
	eA := fmt.Sprintf(`{"sensor_id":"s","timestamp":%d,"heart_rate":80,"body_temperature":null,"spO2":98,"battery_level":87}`, at(h, 30*time.Minute))
	eB := fmt.Sprintf(`{"sensor_id":"s","timestamp":%d,"heart_rate":80,"body_temperature":37.5,"spO2":null,"battery_level":87}`, at(h, 30*time.Minute))

	con := teststream.NewConfig()
	con.AdvanceWatermark(at(h, -time.Minute))
	con.AddElements(at(h, 0), a)
	con.AddElements(at(h, 30*time.Minute), eA)
	con.AddElements(at(h, -26*time.Hour), old)
	con.AdvanceProcessingTime(int64(11 * time.Second / time.Millisecond)) // early firing: a, eA
	con.AddElements(at(h, 10*time.Minute), b)
	con.AdvanceProcessingTime(int64(11 * time.Second / time.Millisecond)) // early firing: b
	con.AddElements(at(h, 30*time.Minute), eB)
	con.AdvanceWatermark(at(h, time.Hour)) // on-time firing: eB
	con.AddElements(at(h, 5*time.Minute), c)
	con.AddElements(at(h, 20*time.Minute+time.Second), d, dDup)
	con.AdvanceProcessingTime(int64(2 * time.Second / time.Millisecond)) // late firing: c changes a's imputation
	con.AdvanceWatermarkToInfinity()

	p, s := beam.NewPipelineWithRoot()
	lines := beam.ParDo(s, keyByTestSource, teststream.Create(s, con))
	cfg := Config{Spec: spec, BigQuery: &bigqueryio.Config{}}
	records, parseDead := parseLines(s, cfg, lines, false)
	w := Windowing{EarlyFiring: 10 * time.Second}
	onTime, late := tooLate(s, w, records)
	built := buildStream(s, cfg, w, LocalRunner{}, false, onTime)
	global := func(c beam.PCollection) beam.PCollection { return beam.WindowInto(s, window.NewGlobalWindows(), c) }

	passert.Count(s, global(parseDead), "parse dead letters", 0)
	passert.Equals(s, global(beam.ParDo(s, deadReason, late)), "too_late in.jsonl")
	passert.Empty(s, global(built.Dead))
	passert.Empty(s, bigtableio.Write(s.Scope("stream"), bigtableio.Config{Project: "p", Instance: "stream"}, built.Rows))

	// The batch pipeline, for the same (on-time and late) readings.
	batchLines := beam.ParDo(s, keyByTestSource, beam.Create(s, a, b, c, d, dDup, eA, eB))
	batchRecords, _ := parseLines(s.Scope("batch"), cfg, batchLines, true)
	batch := buildBatch(s.Scope("batch"), cfg, false, batchRecords)
	passert.Empty(s, bigtableio.Write(s.Scope("batch"), bigtableio.Config{Project: "p", Instance: "batch"}, batch.Rows))

	// BigQuery: every reading, and each batch row among those sent (the
	// last one sent for a reading is its batch row; which that is depends
	// on the firings' order). Rollups: on-time and late only, the batch
	// one among them.
	batchBQ := global(beam.ParDo(s, bqSummary(spec), batch.BQRows))
	passert.Count(s, batchBQ, "batch BigQuery rows", 5)
	_, _, notSent := passert.Diff(s, global(beam.ParDo(s, bqSummary(spec), built.BQRows)), batchBQ)
	passert.Empty(s, notSent)
	rollups := global(beam.ParDo(s, rollupSummary(spec), built.Rollups))
	passert.True(s, rollups, finalTiming)
	_, _, missing := passert.Diff(s, rollups, beam.Create(s, "late s count=5 hr_mean=70 imputed=2"))
	passert.Empty(s, missing)

	// Upserts into BigQuery: whatever order the firings and their appends
	// come in, the table ends with one row per reading, the batch's.
	streamReadings, streamRollups := upserts("stream")
	batchReadings, batchRollups := upserts("batch")
	for _, dead := range []beam.PCollection{
		bigqueryio.Write(s.Scope("stream"), withColumns(streamReadings, deadletter.SinkBigQuery, spec.BigQuery), built.BQRows),
		bigqueryio.Write(s.Scope("stream.rollups"), withColumns(streamRollups, deadletter.SinkBigQueryRollups, roller.BigQuery()), built.Rollups),
		bigqueryio.Write(s.Scope("batch"), withColumns(batchReadings, deadletter.SinkBigQuery, spec.BigQuery), batch.BQRows),
		bigqueryio.Write(s.Scope("batch.rollups"), withColumns(batchRollups, deadletter.SinkBigQueryRollups, roller.BigQuery()), batch.Rollups),
	} {
		passert.Empty(s, global(beam.ParDo(s, bqDeadText, dead)))
	}

	ptest.RunAndValidate(t, p)

	for _, tbl := range []string{spec.BigQuery.Table, roller.BigQuery().Table} {
		sameAsBatch(t, "BigQuery "+tbl+" (upserts)", bqTable(t, bq, "stream", tbl), bqTable(t, bq, "batch", tbl))
	}
	sameAsBatch(t, "Bigtable", emulators.DumpBigtable(t, host, "p", "stream", "patient_vitals"), emulators.DumpBigtable(t, host, "p", "batch", "patient_vitals"))
}

// sameAsBatch fails the test unless a stream's rows (got: sorted lines of
// a table) equal the batch pipeline's (want), which must hold some.
func sameAsBatch(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: the stream's rows differ from the batch's\n got:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// bqTable reads a table of the BigQuery emulator as sorted lines of its
// values, leaving out when rows were built (ingested_at, fired_at) and
// which firing built them (pane_timing, pane_index), which the stream and
// the batch need not share.
func bqTable(t *testing.T, bq *bqemu.TestServer, dataset, table string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rows, err := emulators.ReadBigQuery(ctx, c.Dataset(dataset).Table(table))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, row := range rows {
		var cols []string
		for k, v := range row {
			switch k {
			case "ingested_at", "fired_at", "pane_timing", "pane_index":
				continue
			}
			if ts, ok := v.(time.Time); ok {
				v = ts.UTC().Format(time.RFC3339Nano)
			}
			cols = append(cols, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(cols)
		out = append(out, strings.Join(cols, " "))
	}
	sort.Strings(out)
	return out
}

// withColumns is cfg writing as sink with the table's columns.
func withColumns(cfg bigqueryio.Config, sink string, cols *schemas.BigQuerySpec) bigqueryio.Config {
	cfg.Sink, cfg.Columns = sink, cols
	return cfg
}
