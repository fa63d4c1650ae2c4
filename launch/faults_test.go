package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/internal/testrig/faultproxy"
	"github.com/sensorpipe/sensorpipe/launch/bench"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// wait waits for a launcher started with startStream to end by itself,
// failing the test if it is still running after within (a launcher must
// never hang); it returns the exit code.
func (j *streamJob) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-j.done:
	case <-time.After(within):
		t.Fatalf("launcher still running after %v: it must end by itself\nstderr (tail):\n%s", within, tailLines(j.stderr.String(), 20))
	}
	if ee, ok := j.err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 0
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lastLine is the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestDeadLetterPathThatIsAFileFailsBeforeTheJob(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	file := filepath.Join(t.TempDir(), "dl")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + host}, "--input="+writeInput(t)+"/*",
		"--bigtable_project=p", "--bigtable_instance=i", "--dead_letter="+file)
	msg := strings.TrimSpace(r.stderr)
	if r.code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, "--dead_letter="+file+" is a file, not a folder") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming --dead_letter and the fix", r.code, msg)
	}
	if dump(t, host, "patient_vitals") != nil {
		t.Error("the job ran: Bigtable has cells")
	}
}

// TestBigtableDiesMidBackfill kills the Bigtable emulator in the middle of
// a 300,000-reading backfill. The launcher must retry within
// --write_retry_deadline, then end by itself with exit 3 and one line
// naming Bigtable; its ledger must balance, every reading written or
// dead-lettered.
func TestBigtableDiesMidBackfill(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	if testing.Short() {
		t.Skip("end-to-end test: skipped under -short")
	}
	proc, err := emulators.Bigtable.Launch()
	if err != nil {
		t.Skipf("bigtable emulator: %v", err)
	}
	t.Cleanup(proc.Stop)
	dir := t.TempDir()
	w := bench.Workload{Sensors: 1000, Seconds: 300, Start: bench.DefaultStart}
	in, err := os.Create(filepath.Join(dir, "backfill.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(in); err != nil {
		t.Fatal(err)
	}
	in.Close()
	dl, summary := filepath.Join(dir, "dl"), filepath.Join(dir, "summary.json")
	job := startStream(t, []string{"BIGTABLE_EMULATOR_HOST=" + proc.HostPort}, "--input="+in.Name(),
		"--bigtable_project=p", "--bigtable_instance=i", "--dead_letter="+dl,
		"--write_retry_deadline=2s", "--progress_interval=1s", "--summary_json="+summary)
	// Once Bigtable is gone, each of the backfill's batches waits out the
	// retry deadline before it is dead-lettered: a short one keeps the
	// test's wait short; that it ends is what is asserted, not when.

	// Kill it once a fifth of the rows have landed.
	c := emulators.BigtableClient(t, proc.HostPort, "p", "i")
	defer c.Close()
	eventually(t, 3*time.Minute, job, func() (bool, string) {
		n := 0
		_ = c.Open("patient_vitals").ReadRows(context.Background(), bigtable.InfiniteRange(""), func(bigtable.Row) bool { n++; return true },
			bigtable.RowFilter(bigtable.CellsPerRowLimitFilter(1)))
		return n >= w.Sensors/5, "a fifth of the rows in Bigtable"
	})
	proc.Stop()
	killed := time.Now()

	code := job.wait(t, 3*time.Minute)
	t.Logf("the launcher ended %v after the kill", time.Since(killed).Round(time.Millisecond))
	stored := len(deadLetters(t, dl))
	t.Logf("%d dead letters in %s", stored, dl)
	if code != exitUnavailable {
		t.Fatalf("exit %d; want %d (a store stayed unavailable)\nstderr (tail):\n%s", code, exitUnavailable, tailLines(job.stderr.String(), 20))
	}
	last := lastLine(job.stderr.String())
	if !strings.HasPrefix(last, "sensorpipe: Bigtable (the emulator at "+proc.HostPort+") stayed unavailable") {
		t.Errorf("last line %q; want one line naming Bigtable", last)
	}
	l := readSummary(t, summary)
	if !l.Balanced || l.Read != int64(w.Readings()) || l.Readings != int64(w.Readings()) {
		t.Fatalf("ledger %+v; want %d readings read and built, balanced", l, w.Readings())
	}
	var bt ledger.Sink
	for _, s := range l.Sinks {
		if s.Sink == deadletter.SinkBigtable {
			bt = s
		}
	}
	if bt.Routed != int64(w.Readings()) || bt.Written+bt.Failed != bt.Routed || bt.Unavailable == 0 || bt.Unavailable != bt.Failed {
		t.Errorf("bigtable %+v; want every reading written or dead-lettered as unavailable", bt)
	}
	t.Logf("before the kill %d readings were written; %d dead-lettered", bt.Written, bt.Failed)
	if got := l.DeadLetters[deadletter.SinkBigtable]["write_failed"]; got != bt.Failed {
		t.Errorf("%d bigtable write_failed dead letters stored; want %d", got, bt.Failed)
	}
	if int64(stored) != bt.Failed {
		t.Errorf("%d dead letters in the folder; want %d", stored, bt.Failed)
	}
}

// faultWorkload writes the fault tests' input: 3,000 sensors, 8 readings
// each, one Bigtable row per sensor (24,000 readings, 3,000 rows), and
// returns its path and size.
func faultWorkload(t *testing.T) (string, int) {
	t.Helper()
	w := bench.Workload{Sensors: 3000, Seconds: 8, Start: time.Now().UTC().Truncate(time.Hour).Add(-26 * time.Hour)}
	path := filepath.Join(t.TempDir(), "readings.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := w.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	return path, w.Readings()
}

// faultCases are the shares and modes every sink is tested with.
var faultCases = []struct {
	share float64
	when  faultproxy.When
}{{0.1, faultproxy.Before}, {0.1, faultproxy.After}, {0.3, faultproxy.Before}, {0.3, faultproxy.After}}

// checkLedger asserts a run under faults: exit 0, a balanced ledger with
// every reading written to sink and no dead letter.
func checkLedger(t *testing.T, r result, summary string, n int, sinks ...string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr (tail):\n%s", r.code, tailLines(r.stderr, 20))
	}
	l := readSummary(t, summary)
	if !l.Balanced || l.Readings != int64(n) || l.DeadLettered() != 0 {
		t.Fatalf("ledger %+v; want %d readings, balanced, no dead letter", l, n)
	}
	for _, sink := range sinks {
		found := false
		for _, s := range l.Sinks {
			if s.Sink == sink && s.Sink != deadletter.SinkBigQueryRollups {
				found = true
				if s.Written != int64(n) || s.Failed != 0 {
					t.Errorf("%s %s: %+v; want %d readings written", s.Sink, s.Table, s, n)
				}
			}
		}
		if !found {
			t.Errorf("no %s sink in the ledger %+v", sink, l.Sinks)
		}
	}
}

// TestBigtableFaults runs the workload through a proxy that fails 10% and
// 30% of MutateRows calls, before forwarding them or after Bigtable
// applied them: every run must end with exactly the cells of a run without
// faults, every reading written, no dead letter.
func TestBigtableFaults(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	host := emulators.StartBigtable(t)
	in, n := faultWorkload(t)
	run := func(t *testing.T, btHost, table string) (result, string) {
		summary := filepath.Join(t.TempDir(), "summary.json")
		r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + btHost}, "--input="+in, "--bigtable_project=p", "--bigtable_instance=i",
			"--bigtable_table="+table, "--dead_letter="+t.TempDir(), "--bigtable_batch_cells=500", "--summary_json="+summary)
		return r, summary
	}
	r, summary := run(t, host, "no_faults")
	checkLedger(t, r, summary, n, deadletter.SinkBigtable)
	want := strings.Join(dump(t, host, "no_faults"), "\n")

	for i, fc := range faultCases {
		name := fmt.Sprintf("%.0f%% %s", fc.share*100, fc.when)
		t.Run(name, func(t *testing.T) {
			p, err := faultproxy.Start(host, faultproxy.Options{Seed: int64(i + 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.SetRules(faultproxy.Rule{Method: "/google.bigtable.v2.Bigtable/MutateRows", Share: fc.share, When: fc.when})
			table := fmt.Sprintf("faults_%d", i)
			r, summary := run(t, p.Addr(), table)
			st := p.Stats()
			t.Logf("%d of %d MutateRows calls failed %s", faultproxy.Total(st.Faults, "/MutateRows"), faultproxy.Total(st.Calls, "/MutateRows"), fc.when)
			checkLedger(t, r, summary, n, deadletter.SinkBigtable)
			if got := strings.Join(dump(t, host, table), "\n"); got != want {
				t.Fatalf("cells differ from the run without faults (%d lines, want %d)", strings.Count(got, "\n"), strings.Count(want, "\n"))
			}
			if faultproxy.Total(st.Faults, "/MutateRows") < 5 {
				t.Errorf("only %d faults injected: the workload is too small to test this", faultproxy.Total(st.Faults, "/MutateRows"))
			}
		})
	}
}

// TestStartupCallsRetryTransientErrors fails the first call of each
// admin method the launcher makes at start-up with UNAVAILABLE: the run
// must go on.
func TestStartupCallsRetryTransientErrors(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	p, err := faultproxy.Start(host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var rules []faultproxy.Rule
	for _, m := range []string{"/GetTable", "/CreateTable", "/ModifyColumnFamilies"} {
		rules = append(rules, faultproxy.Rule{Method: m, Share: 1, Limit: 1})
	}
	p.SetRules(rules...)
	r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + p.Addr()}, "--input="+writeInput(t)+"/*",
		"--bigtable_project=p", "--bigtable_instance=i", "--dead_letter="+t.TempDir())
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, m := range []string{"/GetTable", "/CreateTable", "/ModifyColumnFamilies"} {
		if f := faultproxy.Total(p.Stats().Faults, m); f != 1 {
			t.Errorf("%s: %d faults injected; want 1", m, f)
		}
	}
}

// TestBigQueryFaults runs the workload into BigQuery (Storage Write API)
// through a proxy that fails 10% and 30% of AppendRows requests, before
// forwarding them or after the emulator applied them. Every run must end:
// every reading in the table with the values of a run without faults, no
// dead letter; in "after" mode a row may repeat, only as a repeat of its
// reading_id.
func TestBigQueryFaults(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	bt := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	in, n := faultWorkload(t)
	rest := strings.TrimPrefix(bq.RESTEndpoint, "http://")
	run := func(t *testing.T, grpcAddr, dataset string) (result, string) {
		summary := filepath.Join(t.TempDir(), "summary.json")
		r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + bt, "BIGQUERY_EMULATOR_HOST=" + rest, "BIGQUERY_STORAGE_EMULATOR_HOST=" + grpcAddr},
			"--input="+in, "--bigtable_project=p", "--bigtable_instance=i", "--bigtable_table="+dataset,
			"--bigquery_dataset="+dataset, "--bigquery_write_method=storage_write", "--bigquery_request_bytes=16384",
			"--dead_letter="+t.TempDir(), "--summary_json="+summary)
		return r, summary
	}
	r, summary := run(t, bq.GRPCAddr, "no_faults")
	checkLedger(t, r, summary, n, deadletter.SinkBigtable, deadletter.SinkBigQuery)
	want, repeats := readingsByID(t, bq, "no_faults")
	if len(want) != n || repeats != 0 {
		t.Fatalf("the run without faults wrote %d readings (%d repeats); want %d", len(want), repeats, n)
	}
	for i, fc := range faultCases {
		name := fmt.Sprintf("%.0f%% %s", fc.share*100, fc.when)
		t.Run(name, func(t *testing.T) {
			p, err := faultproxy.Start(bq.GRPCAddr, faultproxy.Options{Seed: int64(i + 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.SetRules(faultproxy.Rule{Method: "/AppendRows", PerMessage: true, Share: fc.share, When: fc.when})
			dataset := fmt.Sprintf("faults_%d", i)
			r, summary := run(t, p.Addr(), dataset)
			st := p.Stats()
			got, repeats := readingsByID(t, bq, dataset)
			t.Logf("%d of %d AppendRows requests failed %s; %d rows repeat a reading_id", faultproxy.Total(st.Faults, "/AppendRows"),
				faultproxy.Total(st.Calls, "/AppendRows"), fc.when, repeats)
			checkLedger(t, r, summary, n, deadletter.SinkBigQuery)
			if fc.when == faultproxy.Before && repeats != 0 {
				t.Errorf("%d repeated rows; a request failed before forwarding never lands", repeats)
			}
			if len(got) != len(want) {
				t.Fatalf("%d readings in BigQuery; want %d", len(got), len(want))
			}
			for id, v := range want {
				if got[id] != v {
					t.Fatalf("reading %s = %q; want %q", id, got[id], v)
				}
			}
			if faultproxy.Total(st.Faults, "/AppendRows") < 5 {
				t.Errorf("only %d faults injected: the workload is too small to test this", faultproxy.Total(st.Faults, "/AppendRows"))
			}
		})
	}
}

// readingsByID reads a dataset's readings table: each reading's values
// (all its rows must agree) by reading_id, and how many rows repeat one.
func readingsByID(t *testing.T, bq *bqemu.TestServer, dataset string) (map[string]string, int) {
	t.Helper()
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rows, err := emulators.ReadBigQuery(ctx, c.Dataset(dataset).Table("readings"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	repeats := 0
	for _, row := range rows {
		id, _ := row["reading_id"].(string)
		vals := fmt.Sprint(row["sensor_id"], row["event_timestamp"], row["heart_rate"], row["body_temperature"],
			row["spO2"], row["battery_level"], row["heart_rate_imputed"])
		if prev, ok := out[id]; ok {
			repeats++
			if prev != vals {
				t.Fatalf("reading %s has two rows that differ: %q and %q", id, prev, vals)
			}
		}
		out[id] = vals
	}
	return out, repeats
}

// TestBigQueryAnswersLost swallows the answers of the first two AppendRows
// streams after the emulator applied their requests, the fault that used
// to hang the launcher: it waited for an answer that never came. Each
// wait is now bounded by --write_attempt_timeout, and the run must end
// with every reading written.
func TestBigQueryAnswersLost(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	bt := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	in, n := faultWorkload(t)
	p, err := faultproxy.Start(bq.GRPCAddr, faultproxy.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetRules(faultproxy.Rule{Method: "/AppendRows", Share: 1, Limit: 2, When: faultproxy.After})
	summary := filepath.Join(t.TempDir(), "summary.json")
	job := startStream(t, []string{"BIGTABLE_EMULATOR_HOST=" + bt, "BIGQUERY_EMULATOR_HOST=" + strings.TrimPrefix(bq.RESTEndpoint, "http://"),
		"BIGQUERY_STORAGE_EMULATOR_HOST=" + p.Addr()},
		"--input="+in, "--bigtable_project=p", "--bigtable_instance=i", "--bigquery_dataset=lost",
		"--bigquery_write_method=storage_write", "--bigquery_request_bytes=65536", "--write_attempt_timeout=2s",
		"--dead_letter="+t.TempDir(), "--summary_json="+summary)
	code := job.wait(t, 5*time.Minute)
	st := p.Stats()
	t.Logf("%d of %d AppendRows streams lost their answers", faultproxy.Total(st.Faults, "/AppendRows"), faultproxy.Total(st.Calls, "/AppendRows"))
	checkLedger(t, result{code, job.stdout.String(), job.stderr.String()}, summary, n, deadletter.SinkBigQuery)
	if got, _ := readingsByID(t, bq, "lost"); len(got) != n {
		t.Fatalf("%d readings in BigQuery; want %d", len(got), n)
	}
	if f := faultproxy.Total(st.Faults, "/AppendRows"); f != 2 {
		t.Errorf("%d faults injected; want 2", f)
	}
}

// TestBigQueryRejectionsAreDeadLettersForBigQuery runs the heroic_metrics
// sample, dated 2011, outside BigQuery's partition window, so BigQuery
// rejects every reading. The run must exit 0 with Bigtable written, each
// rejection a write_failed dead letter for bigquery with BigQuery's
// message, and a balanced ledger: the sink's end-of-bundle dead letters
// are in the global window, whatever window its rows came in.
func TestBigQueryRejectionsAreDeadLettersForBigQuery(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	dl, summary := t.TempDir(), filepath.Join(t.TempDir(), "summary.json")
	for _, method := range []string{"upsert", "storage_write", "insert_all"} {
		t.Run(method, func(t *testing.T) {
			dl := filepath.Join(dl, method)
			r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + bt, "BIGQUERY_EMULATOR_HOST=" + strings.TrimPrefix(bq.RESTEndpoint, "http://"),
				"BIGQUERY_STORAGE_EMULATOR_HOST=" + bq.GRPCAddr},
				"--spec=heroic_metrics", "--input=../testdata/samples/heroic_metrics.jsonl", "--bigtable_project=p", "--bigtable_instance=i",
				"--bigtable_table=heroic_"+method, "--bigquery_project=local-project", "--bigquery_dataset=heroic_"+method,
				"--bigquery_write_method="+method, "--dead_letter="+dl, "--summary_json="+summary)
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr (tail):\n%s", r.code, tailLines(r.stderr, 10))
			}
			l := readSummary(t, summary)
			if !l.Balanced {
				t.Fatalf("ledger does not balance: %v", l.Problems)
			}
			for _, s := range l.Sinks {
				switch s.Sink {
				case deadletter.SinkBigtable:
					if s.Written != l.Readings || s.Written == 0 {
						t.Errorf("bigtable %+v; want all %d readings written", s, l.Readings)
					}
				case deadletter.SinkBigQuery:
					if s.Failed != l.Readings || s.Unavailable != 0 {
						t.Errorf("bigquery %+v; want all %d readings dead-lettered as rejected", s, l.Readings)
					}
				}
			}
			n := 0
			for _, d := range deadLetters(t, dl) {
				if d["sink"] != deadletter.SinkBigQuery {
					continue
				}
				n++
				if d["reason"] != "write_failed" || !strings.Contains(d["error"], "outside the allowed bounds") || d["payload"] == "" {
					t.Errorf("dead letter %v; want write_failed with BigQuery's message and the payload", d)
				}
			}
			if int64(n) != l.Readings {
				t.Errorf("%d bigquery dead letters; want %d", n, l.Readings)
			}
			if len(dump(t, bt, "heroic_"+method)) == 0 {
				t.Error("no Bigtable cells")
			}
		})
	}
}

// TestReadingsBefore1970 puts a reading dated before 1970 (a negative
// epoch, and year 1) among good ones: the run must exit 0 with those
// readings dead-lettered with a reason and every other reading written.
func TestReadingsBefore1970(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t)
	in := t.TempDir()
	lines := []string{
		line("p-1", "2026-03-01T10:00:00Z", 70),
		line("p-old", -1000, 70),
		line("p-2", "2026-03-01T10:05:00Z", 71),
		line("p-old", "0001-01-01T00:00:00.000Z", 70),
		line("p-3", "2026-03-01T10:10:00Z", 72),
	}
	if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dl, summary := t.TempDir(), filepath.Join(t.TempDir(), "summary.json")
	r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + bt}, "--input="+in+"/*", "--bigtable_project=p", "--bigtable_instance=i",
		"--dead_letter="+dl, "--summary_json="+summary)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr (tail):\n%s", r.code, tailLines(r.stderr, 10))
	}
	if l := readSummary(t, summary); !l.Balanced || l.Read != 5 {
		t.Fatalf("ledger %+v; want 5 records read, balanced", l)
	}
	old := 0
	for _, d := range deadLetters(t, dl) {
		if !strings.Contains(d["payload"], "p-old") || d["reason"] == "" || d["error"] == "" {
			t.Errorf("dead letter %v; want only the pre-1970 readings, with a reason", d)
		}
		old++
	}
	if old != 2 {
		t.Errorf("%d dead letters; want the 2 pre-1970 readings", old)
	}
	rows := map[string]bool{}
	for _, c := range dump(t, bt, "patient_vitals") {
		rows[strings.Fields(c)[0]] = true
	}
	for _, want := range []string{"p-1#2026-03-01T10", "p-2#2026-03-01T10", "p-3#2026-03-01T10"} {
		if !rows[want] {
			t.Errorf("row %s missing; have %v", want, rows)
		}
	}
}

// TestBigQueryDiesMidBackfill stops the BigQuery Storage endpoint (a proxy
// in front of the emulator, closed: connections refused) once rows are
// landing. As with Bigtable, the launcher must retry within
// --write_retry_deadline, end by itself with exit 3 and one line naming
// BigQuery, and balance its ledger: every reading in Bigtable, and in
// BigQuery or its dead letter.
func TestBigQueryDiesMidBackfill(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	if testing.Short() {
		t.Skip("end-to-end test: skipped under -short")
	}
	bt := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	in, n := faultWorkload(t)
	p, err := faultproxy.Start(bq.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Each request its own call, slow enough to stop the run midway.
	p.SetRules(faultproxy.Rule{Method: "/AppendRows", PerMessage: true})
	p.SetDelay(20 * time.Millisecond)
	dl, summary := t.TempDir(), filepath.Join(t.TempDir(), "summary.json")
	job := startStream(t, []string{"BIGTABLE_EMULATOR_HOST=" + bt, "BIGQUERY_EMULATOR_HOST=" + strings.TrimPrefix(bq.RESTEndpoint, "http://"),
		"BIGQUERY_STORAGE_EMULATOR_HOST=" + p.Addr()},
		"--input="+in, "--bigtable_project=p", "--bigtable_instance=i", "--bigquery_dataset=dies",
		"--bigquery_write_method=storage_write", "--bigquery_request_bytes=16384", "--write_retry_deadline=5s",
		"--dead_letter="+dl, "--summary_json="+summary)
	eventually(t, 3*time.Minute, job, func() (bool, string) {
		return faultproxy.Total(p.Stats().Calls, "/AppendRows") >= 20, "20 AppendRows requests through the proxy"
	})
	p.Close()
	killed := time.Now()

	code := job.wait(t, 3*time.Minute)
	t.Logf("the launcher ended %v after the stop", time.Since(killed).Round(time.Millisecond))
	if code != exitUnavailable {
		t.Fatalf("exit %d; want %d (a store stayed unavailable)\nstderr (tail):\n%s", code, exitUnavailable, tailLines(job.stderr.String(), 20))
	}
	if last := lastLine(job.stderr.String()); !strings.HasPrefix(last, "sensorpipe: BigQuery (the BigQuery Storage emulator at "+p.Addr()) {
		t.Errorf("last line %q; want one line naming BigQuery", last)
	}
	l := readSummary(t, summary)
	if !l.Balanced || l.Readings != int64(n) {
		t.Fatalf("ledger %+v; want %d readings built, balanced", l, n)
	}
	for _, s := range l.Sinks {
		switch s.Sink {
		case deadletter.SinkBigtable:
			if s.Written != int64(n) {
				t.Errorf("bigtable %+v; want all %d readings written", s, n)
			}
		case deadletter.SinkBigQuery:
			if s.Routed != int64(n) || s.Written+s.Failed != s.Routed || s.Unavailable == 0 || s.Unavailable != s.Failed {
				t.Errorf("bigquery %+v; want every reading written or dead-lettered as unavailable", s)
			}
			t.Logf("bigquery: %d readings written before the stop, %d dead-lettered", s.Written, s.Failed)
			// The stop can cut off the answer to a request BigQuery applied:
			// its readings are then in BigQuery and in the dead letter.
			if got, _ := readingsByID(t, bq, "dies"); int64(len(got)) < s.Written {
				t.Errorf("%d readings in BigQuery; the ledger says %d written", len(got), s.Written)
			}
		}
	}
	stored := 0
	for _, d := range deadLetters(t, dl) {
		if d["sink"] == deadletter.SinkBigQuery && d["reason"] == "write_failed" && d["payload"] != "" {
			stored++
		}
	}
	if want := l.DeadLetters[deadletter.SinkBigQuery]["write_failed"]; int64(stored) != want || want == 0 {
		t.Errorf("%d bigquery write_failed dead letters stored; the ledger counts %d", stored, want)
	}
}

// faultSeeds seed the draws of TestLostAnswersCostAboutACallsLatency's
// fault proxies: -args -fault_seeds=4,5,6 runs other draws.
var faultSeeds = flag.String("fault_seeds", "1,2,3", "comma-separated seeds of the lost-answer fault tests' proxies")

// TestLostAnswersCostAboutACallsLatency runs a 6,400-reading backfill to
// both sinks while 30% of Bigtable's MutateRows calls and 30% of
// BigQuery's AppendRows streams lose their answers after the store applied
// them: the call stays open, and only the writer's attempt timeout ends
// it. Each lost answer must cost about a call's normal latency (the
// attempt timeout derived from it; internal/retry), not the 30 s
// --write_attempt_timeout, so every run ends with exit 0 within the
// default 2-minute --write_retry_deadline: Bigtable holds the cells of a
// run without faults, and BigQuery (upserts) each reading once.
func TestLostAnswersCostAboutACallsLatency(t *testing.T) {
	t.Parallel()
	release := cpuHeavy(t)
	bt := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	w := bench.Workload{Sensors: 800, Seconds: 8, Start: time.Now().UTC().Truncate(time.Hour).Add(-26 * time.Hour)}
	in := filepath.Join(t.TempDir(), "readings.jsonl")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n := w.Readings()
	rest := strings.TrimPrefix(bq.RESTEndpoint, "http://")
	run := func(t *testing.T, btHost, bqHost, name string) (result, string) {
		summary := filepath.Join(t.TempDir(), "summary.json")
		r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + btHost, "BIGQUERY_EMULATOR_HOST=" + rest, "BIGQUERY_STORAGE_EMULATOR_HOST=" + bqHost},
			"--input="+in, "--bigtable_project=p", "--bigtable_instance=i", "--bigtable_table="+name, "--bigquery_dataset="+name,
			"--bigtable_batch_cells=1000", "--bigquery_request_bytes=16384", "--dead_letter="+t.TempDir(), "--summary_json="+summary)
		return r, summary
	}
	r, summary := run(t, bt, bq.GRPCAddr, "no_faults")
	checkLedger(t, r, summary, n, deadletter.SinkBigtable, deadletter.SinkBigQuery)
	want := dump(t, bt, "no_faults")
	release()

	seeds := strings.Split(*faultSeeds, ",")
	if len(seeds) < 3 {
		t.Fatalf("-fault_seeds=%s: give three or more", *faultSeeds)
	}
	for i, s := range seeds {
		seed, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("-fault_seeds: %v", err)
		}
		t.Run(fmt.Sprintf("draw %d", i+1), func(t *testing.T) {
			t.Parallel()
			cpuHeavy(t)
			btp, err := faultproxy.Start(bt, faultproxy.Options{Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			defer btp.Close()
			btp.SetRules(faultproxy.Rule{Method: "/google.bigtable.v2.Bigtable/MutateRows", Share: 0.3, When: faultproxy.Lost})
			bqp, err := faultproxy.Start(bq.GRPCAddr, faultproxy.Options{Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			defer bqp.Close()
			bqp.SetRules(faultproxy.Rule{Method: "/AppendRows", Share: 0.3, When: faultproxy.Lost})
			name := fmt.Sprintf("lost_%d", i+1)
			r, summary := run(t, btp.Addr(), bqp.Addr(), name)
			bts, bqs := btp.Stats(), bqp.Stats()
			t.Logf("seed %d: %d of %d MutateRows calls and %d of %d AppendRows streams lost their answers", seed,
				faultproxy.Total(bts.Faults, "/MutateRows"), faultproxy.Total(bts.Calls, "/MutateRows"),
				faultproxy.Total(bqs.Faults, "/AppendRows"), faultproxy.Total(bqs.Calls, "/AppendRows"))
			checkLedger(t, r, summary, n, deadletter.SinkBigtable, deadletter.SinkBigQuery)
			if got := dump(t, bt, name); cellDiff(got, want) != 0 {
				t.Errorf("Bigtable: %d cells differ from the run without faults:\n%s", cellDiff(got, want), firstDiffs(got, want, 5))
			}
			got, repeats := readingsByID(t, bq, name)
			if len(got) != n || repeats != 0 {
				t.Errorf("BigQuery has %d readings (%d repeated rows); want each of %d once", len(got), repeats, n)
			}
			if faultproxy.Total(bts.Faults, "/MutateRows") == 0 || faultproxy.Total(bqs.Faults, "/AppendRows") == 0 {
				t.Errorf("no answer lost on one of the stores: the draw tests nothing")
			}
		})
	}
}
