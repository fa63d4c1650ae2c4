package pipelines

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/teststream"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/spill"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// TestStreamStateOnDiskConvergesToBatch runs a local stream (ingestStream as
// the launcher runs it on prism: written on arrival, read back, each
// sensor-hour's state on local disk) through early, on-time and late
// firings, with TestStream, into the Bigtable emulator and our BigQuery
// emulator. Every final firing reads the hour's readings from disk: the
// on-time one, a late one, and two more late ones after the watermark has
// moved on, which bring a copy of an on-time reading that wins over it
// (its spO2 must be cleared), a duplicate pair, and a reading that moves
// an earlier one's imputation. Once the window expires, Bigtable and
// BigQuery equal the batch pipeline's, each reading is counted once and
// each duplicate once, the disk was written, and the hour's file is gone.
// With every other disk write failing, those parts wait in prism's state,
// and the result is the same.
func TestStreamStateOnDiskConvergesToBatch(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx := context.Background()
	spec := vitalsWithOptionalValues(t)
	cases := []struct {
		name string
		// failEvery fails every failEvery-th disk write (0: none).
		failEvery int64
	}{{"disk", 0}, {"faults", 2}}
	for _, instance := range []string{"disk", "faults", "batch"} {
		if err := bigtableio.EnsureTables(ctx, "p", instance, spec.Spec, true, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	bq := bqemu.StartServerForTest(t)
	t.Setenv(bigqueryio.EmulatorHostEnv, strings.TrimPrefix(bq.RESTEndpoint, "http://"))
	t.Setenv(bigqueryio.StorageEmulatorHostEnv, bq.GRPCAddr)
	roller := spec.Roller()
	for _, ds := range []string{"disk", "faults", "batch"} {
		for _, tbl := range []*schemas.BigQuerySpec{spec.BigQuery, roller.BigQuery()} {
			if err := bigqueryio.EnsureTable(ctx, "p", ds, tbl.Table, tbl, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	store, err := spill.In(dofns.DiskStateFolder())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var writes, failed atomic.Int64
			store.SetFault(func(string) error {
				if n := writes.Add(1); tc.failEvery > 0 && n%tc.failEvery == 0 {
					failed.Add(1)
					return errors.New("injected disk fault")
				}
				return nil
			})
			defer store.SetFault(nil)
			written := store.Written()
			pr := runDiskStream(t, host, bq, spec, tc.name)
			checkDiskStream(t, pr, tc.failEvery > 0)
			if tc.failEvery > 0 && failed.Load() == 0 {
				t.Error("no disk write failed")
			}
			if store.Written() == written {
				t.Error("nothing was written to disk")
			}
			if keys, files := store.Keys(); keys != 0 || files != 0 {
				t.Errorf("after the window expired the disk holds %d keys in %d files", keys, files)
			}
		})
	}
}

// runDiskStream runs the stream of TestStreamStateOnDiskConvergesToBatch
// into Bigtable instance and BigQuery dataset name, and the batch pipeline
// into batch, and checks that they hold the same.
func runDiskStream(t *testing.T, host string, bq *bqemu.TestServer, spec *hours.Compiled, name string) beam.PipelineResult {
	roller := spec.Roller()
	h := streamHour()
	line := func(d time.Duration, hr string) string { return vitalsLine("s", fmt.Sprint(at(h, d)), hr) }
	var (
		a  = line(0, "null")              // imputed from the nearest later reading: b, then c, then f
		b  = line(10*time.Minute, "70")   //
		c  = line(5*time.Minute, "60")    // late
		f  = line(2*time.Minute, "65")    // late: moves a's imputation again
		d  = line(20*time.Minute, "null") // late, twice
		g  = line(50*time.Minute, "90")   // late, in the last firing
		eA = fmt.Sprintf(`{"sensor_id":"s","timestamp":%d,"heart_rate":80,"body_temperature":null,"spO2":98,"battery_level":87}`, at(h, 30*time.Minute))
		eB = fmt.Sprintf(`{"sensor_id":"s","timestamp":%d,"heart_rate":80,"body_temperature":37.5,"spO2":null,"battery_level":87}`, at(h, 30*time.Minute))
	)
	con := teststream.NewConfig()
	con.AdvanceWatermark(at(h, -time.Minute))
	con.AddElements(at(h, 0), a, eA)
	con.AdvanceProcessingTime(int64(11 * time.Second / time.Millisecond)) // early: a, eA
	con.AddElements(at(h, 10*time.Minute), b)
	con.AdvanceWatermark(at(h, time.Hour))                               // on time: b
	con.AddElements(at(h, 5*time.Minute), c)                             //
	con.AdvanceProcessingTime(int64(2 * time.Second / time.Millisecond)) // late: c
	con.AdvanceWatermark(at(h, time.Hour+5*time.Minute))                 // the watermark moves on
	con.AddElements(at(h, 30*time.Minute), eB)                           //
	con.AddElements(at(h, 20*time.Minute), d, d)                         //
	con.AddElements(at(h, 2*time.Minute), f)                             //
	con.AdvanceProcessingTime(int64(2 * time.Second / time.Millisecond)) // late: eB, d, d, f
	con.AddElements(at(h, 50*time.Minute), g)                            //
	con.AdvanceProcessingTime(int64(2 * time.Second / time.Millisecond)) // late: g
	con.AdvanceWatermarkToInfinity()                                     // expiry

	p, s := beam.NewPipelineWithRoot()
	bqCfg := func(ds string) *bigqueryio.Config {
		return &bigqueryio.Config{Project: "p", Dataset: ds, Table: spec.BigQuery.Table, WriteMethod: "upsert"}
	}
	cfg := Config{Spec: spec, Bigtable: bigtableio.Config{Project: "p", Instance: name}, DeadLetter: targets.DeadLetterTarget{Path: t.TempDir()},
		Local: &LocalRunner{WriteOnArrival: true, Recover: true, DiskState: true}, BigQuery: bqCfg(name)}
	records, parseDead := parseLines(s, cfg, beam.ParDo(s, keyByTestSource, teststream.Create(s, con)), false)
	dead := ingestStream(s, cfg, Windowing{EarlyFiring: 10 * time.Second}, false, records)

	batchCfg := Config{Spec: spec, Bigtable: bigtableio.Config{Project: "p", Instance: "batch"}, DeadLetter: targets.DeadLetterTarget{Path: t.TempDir()},
		BigQuery: bqCfg("batch")}
	batchRecords, _ := parseLines(s.Scope("batch"), batchCfg, beam.ParDo(s, keyByTestSource, beam.Create(s, a, b, c, f, d, d, g, eA, eB)), true)
	dead = append(dead, ingestBatch(s.Scope("batch"), batchCfg, false, batchRecords)...)
	for i, d := range append(dead, parseDead) {
		passert.Empty(s.Scope(fmt.Sprint("dead", i)), beam.WindowInto(s, window.NewGlobalWindows(), d))
	}
	pr := ptest.RunAndValidate(t, p)

	sameAsBatch(t, "Bigtable", emulators.DumpBigtable(t, host, "p", name, "patient_vitals"), emulators.DumpBigtable(t, host, "p", "batch", "patient_vitals"))
	for _, tbl := range []string{spec.BigQuery.Table, roller.BigQuery().Table} {
		sameAsBatch(t, "BigQuery "+tbl, bqTable(t, bq, name, tbl), bqTable(t, bq, "batch", tbl))
	}

	return pr
}

// checkDiskStream checks the counters of the stream's row builder: each
// reading and duplicate counted once, and no disk failure unless faulty
// (with faults, prism may lose the first reports of a counter that several
// bundles start at once, so the test counts the failures it injects).
func checkDiskStream(t *testing.T, pr beam.PipelineResult, faulty bool) {
	// The counters of the stream's row builder (prism names steps e1,
	// e2...: it is the step that counts BigQuery rows sent once; the
	// batch's row builder counts its readings apart).
	counters := pr.Metrics().AllMetrics().Counters()
	stream := map[string]bool{}
	for _, c := range counters {
		if c.Key.Namespace == "bigquery_once" && c.Result() > 0 {
			stream[c.Key.Step] = true
		}
	}
	counter := func(ns, name string) int64 {
		var n int64
		for _, c := range counters {
			if k := c.Key; k.Namespace == ns && k.Name == name && stream[k.Step] {
				n += c.Result()
			}
		}
		return n
	}
	if failed := counter("group", "disk_state_failed"); failed > 0 && !faulty {
		t.Errorf("counter group.disk_state_failed = %d without faults", failed)
	}
	for _, want := range []struct {
		ns, name string
		n        int64
	}{
		{"group", "firings", 5},                              // 1 early, on time, 3 late
		{ledger.Readings.Namespace, ledger.Readings.Name, 7}, // a, b, c, f, d, g, eA/eB: each once
		{ledger.Duplicates.Namespace, ledger.Duplicates.Name, 2},
	} {
		if got := counter(want.ns, want.name); got != want.n {
			t.Errorf("counter %s.%s = %d, want %d", want.ns, want.name, got, want.n)
		}
	}
}
