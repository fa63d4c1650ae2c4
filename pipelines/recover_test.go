package pipelines

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/readside/readpath"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// TestStreamRecoversWhatAKilledRunWrote starts a stream (ingestStream with
// Recover, on prism, against the Bigtable emulator) on a table that a
// killed run left behind: readings written on arrival and provisionally
// imputed by early firings, with provisional rollups, and no final firing.
// Sensor s gets more readings of the hour in the new run; sensor q gets
// none, so only the start-up probe finishes its hour. Once the windows
// close, the table equals the batch result for all the readings.
func TestStreamRecoversWhatAKilledRunWrote(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx := context.Background()
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec := hours.MustCompile(loaded, hours.CompileOptions{})
	for _, instance := range []string{"restart", "batch"} {
		if err := bigtableio.EnsureTables(ctx, "p", instance, spec.Spec, true, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	h := streamHour()
	line := func(sensor string, d time.Duration, hr string) string {
		return vitalsLine(sensor, fmt.Sprint(at(h, d)), hr)
	}
	var (
		// Seen by the killed run, in two early firings each.
		killed = [][]string{
			{line("s", 20*time.Minute, "null"), line("s", 0, "null")},
			{line("s", 10*time.Minute, "70")},
			{line("q", 0, "null")},
			{line("q", 10*time.Minute, "75"), line("q", 40*time.Minute, "null")},
		}
		// Published after the restart.
		c = line("s", 5*time.Minute, "60")
		e = line("s", 30*time.Minute, "80")
	)
	p := codec.NewParser(spec.Spec)
	parse := func(lines ...string) []schemas.Record {
		var recs []schemas.Record
		for _, l := range lines {
			if recs, err = p.Parse(recs, []byte(l), "sub"); err != nil {
				t.Fatal(err)
			}
		}
		return recs
	}
	b, roller := spec.Builder(), spec.Roller()
	write := func(instance string, muts []hours.RowMutation) {
		t.Helper()
		c, err := bigtableio.NewClient(ctx, "p", instance)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := readpath.WriteMutations(ctx, c, muts); err != nil {
			t.Fatal(err)
		}
	}
	// What the killed run wrote: each reading on arrival, then its early
	// firing's provisional imputation and rollup.
	seen := map[string]*group.Seen{"s": {}, "q": {}}
	rollups := map[string]*hours.Rollup{}
	var all []string
	for _, firing := range killed {
		all = append(all, firing...)
		recs := parse(firing...)
		arrival, _ := b.Mutations(recs)
		write("restart", arrival)
		sensor := recs[0].Values[spec.FieldIndex("sensor_id")].Str
		kept, _ := group.PrepareEarly(spec.Spec, recs, seen[sensor])
		if rollups[sensor] == nil {
			ru := roller.Start(h.UnixMilli(), h.Add(time.Hour).UnixMilli())
			rollups[sensor] = &ru
		}
		roller.Add(rollups[sensor], kept)
		muts, _ := b.Mutations(kept)
		muts[0].Cells = append(muts[0].Cells, roller.Cells(rollups[sensor])...)
		write("restart", muts)
	}
	// The batch result for every reading.
	all = append(all, c, e)
	for _, sensor := range []string{"s", "q"} {
		var lines []string
		for _, l := range all {
			if strings.Contains(l, fmt.Sprintf(`"sensor_id":%q`, sensor)) {
				lines = append(lines, l)
			}
		}
		kept, _ := group.Prepare(spec.Spec, parse(lines...))
		muts, _ := b.Mutations(kept)
		ru := roller.Compute(kept, h.UnixMilli(), h.Add(time.Hour).UnixMilli())
		muts[0].Cells = append(muts[0].Cells, roller.Cells(&ru)...)
		write("batch", muts)
	}
	want := emulators.DumpBigtable(t, host, "p", "batch", "patient_vitals")
	if got := emulators.DumpBigtable(t, host, "p", "restart", "patient_vitals"); strings.Join(got, "\n") == strings.Join(want, "\n") {
		t.Fatal("the killed run's table already equals the batch result: nothing to recover")
	}

	con := teststream.NewConfig()
	con.AdvanceWatermark(at(h, -time.Minute))
	con.AddElements(at(h, 5*time.Minute), c)
	con.AddElements(at(h, 30*time.Minute), e)
	con.AdvanceProcessingTime(int64(11 * time.Second / time.Millisecond)) // early firing: c, e
	con.AdvanceWatermarkToInfinity()

	pipe, s := beam.NewPipelineWithRoot()
	cfg := Config{Spec: spec, Bigtable: bigtableio.Config{Project: "p", Instance: "restart"}, DeadLetter: targets.DeadLetterTarget{Path: t.TempDir()},
		Local: &LocalRunner{WriteOnArrival: true, Recover: true}}
	records, parseDead := parseLines(s, cfg, beam.ParDo(s, keyByTestSource, teststream.Create(s, con)), false)
	dead := ingestStream(s, cfg, Windowing{EarlyFiring: 10 * time.Second}, false, records)
	for i, d := range append(dead, parseDead) {
		passert.Empty(s.Scope(fmt.Sprint("dead", i)), beam.WindowInto(s, window.NewGlobalWindows(), d))
	}
	ptest.RunAndValidate(t, pipe)

	sameAsBatch(t, "Bigtable, after the restart", emulators.DumpBigtable(t, host, "p", "restart", "patient_vitals"), want)
}
