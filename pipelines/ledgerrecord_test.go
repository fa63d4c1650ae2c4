package pipelines

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// TestBatchLedgerIsItsRecord runs a batch of 8 files against a Bigtable
// nobody answers, so that every write bundle first counts its
// write_failed readings and dead letters at about the same time (the
// moment a runner may lose a counter's first counts), with the run's
// durable record on. The record's bundle files must hold every count:
// the ledger read from it equals the record, balances, and counts each
// reading read, dead-lettered and stored as a dead letter.
func TestBatchLedgerIsItsRecord(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("BIGTABLE_EMULATOR_HOST", l.Addr().String())
	l.Close()

	dir := t.TempDir()
	const files, sensors, bad = 8, 40, 3
	readings := 0
	for f := range files {
		var b strings.Builder
		for i := range sensors {
			for s := range 3 {
				fmt.Fprintln(&b, vitalsLine(fmt.Sprintf("f%d-s%d", f, i), fmt.Sprint(1772359200000+int64(s)*1000), "70"))
				readings++
			}
		}
		if f < bad {
			fmt.Fprintln(&b, "not json")
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("in-%d.jsonl", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dl := t.TempDir()
	record := ledger.RecordFolder(dl, "test")
	beam.PipelineOptions.Set(ledger.RecordOption, record)
	t.Cleanup(func() { beam.PipelineOptions.Set(ledger.RecordOption, "") })

	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec := hours.MustCompile(loaded, hours.CompileOptions{})
	spec.Rollup = nil
	cfg := Config{Spec: spec, Bigtable: bigtableio.Config{Project: "p", Instance: "i"},
		DeadLetter: targets.DeadLetterTarget{Path: dl},
		Retry:      retry.Settings{Deadline: 2 * time.Second, AttemptTimeout: 500 * time.Millisecond}}
	p, s := beam.NewPipelineWithRoot()
	if err := Batch(s, cfg, BatchOptions{Input: filepath.Join(dir, "in-*.jsonl")}); err != nil {
		t.Fatal(err)
	}
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}

	rec, n, err := ledger.ReadRecord(context.Background(), record)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bundle files in the record", n)
	if n < 2 {
		t.Fatalf("the record has %d bundle files; want one per bundle that counted, several", n)
	}
	m := res.Metrics()
	metrics := ledger.FromMetrics(&m)
	if lost := metrics.Lost(rec); len(lost) > 0 {
		t.Logf("the runner's metrics lost counts the record holds: %s", strings.Join(lost, ", "))
	}
	counters := metrics.WithRecord(rec)
	for k, v := range counters {
		if ledger.Kept(k) && v != rec[k] {
			t.Errorf("ledger counter %v = %d; the record holds %d", k, v, rec[k])
		}
	}
	got := ledger.FromCounters(counters, false)
	if !got.Balanced {
		t.Fatalf("the ledger from the record does not balance: %s", strings.Join(got.Problems, "; "))
	}
	var bt ledger.Sink
	for _, s := range got.Sinks {
		if s.Sink == deadletter.SinkBigtable {
			bt = s
		}
	}
	if got.Read != int64(readings+bad) || got.Readings != int64(readings) || got.Rejected != bad ||
		bt.Routed != int64(readings) || bt.Failed != int64(readings) ||
		got.DeadLetters[deadletter.SinkBigtable][schemas.ErrWriteFailed.Error()] != int64(readings) ||
		got.DeadLetters[deadletter.SinkParse][schemas.ErrMalformed.Error()] != bad {
		t.Errorf("ledger %+v, bigtable %+v; want %d records read, %d readings all dead-lettered write_failed, %d malformed", got, bt, readings+bad, readings, bad)
	}
}
