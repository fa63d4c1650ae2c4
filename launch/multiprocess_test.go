package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/internal/testrig/gobuild"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// testBootPath is where testBoot builds internal/testrig/testboot: one per test
// binary.
func testBootPath() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("sensorpipe-testboot-%d", os.Getpid()))
}

var (
	buildTestBoot sync.Once
	testBootErr   error
)

// testBoot builds the PROCESS environment's boot (internal/testrig/testboot) once
// per test binary and returns its path.
func testBoot(t *testing.T) string {
	t.Helper()
	bin := testBootPath()
	buildTestBoot.Do(func() {
		testBootErr = gobuild.Run(bin, "../internal/testrig/testboot")
	})
	if testBootErr != nil {
		t.Fatal(testBootErr)
	}
	return bin
}

var (
	jobServerOnce sync.Once
	jobServerAddr string
	jobServerErr  error
)

// standaloneJobServer starts prism's job service in the test process, on
// a free port: a Beam job server stand-alone from the launchers that
// submit to it, which runs their workers as processes of its own
// (--environment_type=PROCESS). One serves the whole test binary.
func standaloneJobServer(t *testing.T) string {
	t.Helper()
	jobServerOnce.Do(func() {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			jobServerErr = err
			return
		}
		port := lis.Addr().(*net.TCPAddr).Port
		lis.Close()
		if _, jobServerErr = prism.CreateJobServer(context.Background(), prism.Options{Port: port}); jobServerErr == nil {
			jobServerAddr = fmt.Sprintf("localhost:%d", port)
		}
	})
	if jobServerErr != nil {
		t.Fatalf("prism job server: %v", jobServerErr)
	}
	return jobServerAddr
}

// processWorkers are the flags that submit a job to the stand-alone job
// server with its workers in their own processes, started by the test
// boot in folders of their own. The workers get the job server's
// environment, not the launcher's: env (NAME=VALUE, the emulators'
// variables) is given to them through the environment's config, as a job
// server's workers would be configured.
func processWorkers(t *testing.T, env ...string) []string {
	t.Helper()
	bin := launcher(t)
	// The boots' folders go in the test's, which the test removes.
	workerEnv := map[string]string{"SENSORPIPE_WORKER_BINARY": bin, "TMPDIR": t.TempDir()}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		workerEnv[k] = v
	}
	cfg, err := json.Marshal(map[string]any{"command": testBoot(t), "env": workerEnv})
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--runner=universal", "--endpoint=" + standaloneJobServer(t), "--environment_type=PROCESS",
		"--environment_config=" + string(cfg), "--worker_binary=" + bin}
}

// sinks is one pair of emulators and what a run left in them.
type sinks struct {
	bt string
	bq *bqemu.TestServer
}

func startSinks(t *testing.T) sinks {
	return sinks{emulators.StartBigtable(t), bqemu.StartServerForTest(t)}
}

// outcome is everything a run wrote: Bigtable's cells, BigQuery's readings
// and hourly rows, the dead letters (without their times) and the ledger.
type outcome struct {
	cells        []string
	bq, hourly   map[string]string
	dead, ledger string
}

// collect reads a run's outcome; a stream's dead letters name their
// subscription, each run's own, as "the subscription".
func collect(t *testing.T, s sinks, dl, summary, subscription string) outcome {
	t.Helper()
	var dead []string
	for _, d := range deadLetters(t, dl) {
		delete(d, "time")
		if subscription != "" && d["source"] == subscription {
			d["source"] = "the subscription"
		}
		b, _ := json.Marshal(d)
		dead = append(dead, string(b))
	}
	sort.Strings(dead)
	l := readSummary(t, summary)
	if l.Stream {
		// A stream rewrites an hour's rows and rollup at each of its
		// firings, and how many firings an hour gets depends on when its
		// readings arrived in processing time: the Bigtable rows and
		// rollup writes count firings, not readings; same compares the
		// cells they leave.
		for i := range l.Sinks {
			l.Sinks[i].Rows, l.Sinks[i].Other = 0, nil
		}
	}
	// Where the counts were read from (the in-process batch's durable
	// record, the job server's metrics) differs by runner; the counts
	// must not.
	l.CountsFrom = ""
	lb, _ := json.Marshal(l)
	return outcome{
		cells:  dump(t, s.bt, "patient_vitals"),
		bq:     bqReadings(t, s.bq, "vitals"),
		hourly: bqHourly(t, s.bq, "vitals"),
		dead:   strings.Join(dead, "\n"),
		ledger: string(lb),
	}
}

// same fails the test where two runs' outcomes differ.
func same(t *testing.T, got, want outcome) {
	t.Helper()
	if len(want.cells) == 0 || len(want.bq) == 0 || want.dead == "" {
		t.Fatalf("the in-process run wrote %d cells, %d BigQuery readings and dead letters %q: nothing to compare", len(want.cells), len(want.bq), want.dead)
	}
	if n := cellDiff(got.cells, want.cells); n != 0 {
		t.Errorf("Bigtable: %d cells differ from the in-process run's (%d cells, want %d):\n%s", n, len(got.cells), len(want.cells), firstDiffs(got.cells, want.cells, 5))
	}
	if n := mapDiff(got.bq, want.bq); n != 0 {
		t.Errorf("BigQuery readings: %d differ from the in-process run's (%d, want %d)", n, len(got.bq), len(want.bq))
	}
	if n := mapDiff(got.hourly, want.hourly); n != 0 {
		t.Errorf("BigQuery hourly rows: %d differ from the in-process run's (%d, want %d)", n, len(got.hourly), len(want.hourly))
	}
	if got.dead != want.dead {
		t.Errorf("dead letters differ from the in-process run's:\n%s\nwant:\n%s", got.dead, want.dead)
	}
	if got.ledger != want.ledger {
		t.Errorf("ledger differs from the in-process run's:\n%s\nwant:\n%s", got.ledger, want.ledger)
	}
}

// TestBatchWorkersInTheirOwnProcesses runs the both-sinks batch twice: in
// the launcher's process (prism, LOOPBACK), and submitted with
// --runner=universal to a stand-alone prism job server whose workers run
// in processes of their own, in other working folders, as Dataflow's do.
// Both must leave the same Bigtable cells, BigQuery rows, dead letters and
// ledger. The second run names its input and dead-letter folder relative
// to the launcher's working folder: the workers must read that input, and
// the dead letters must be in the folder the summary names.
func TestBatchWorkersInTheirOwnProcesses(t *testing.T) {
	t.Parallel()
	launcher(t) // skips under -short
	in := writeInput(t)
	args := func(in, dl, summary string) []string {
		return []string{"--source=files", "--input=" + in + "/*", "--bigtable_project=p", "--bigtable_instance=i",
			"--bigquery_project=p", "--bigquery_dataset=vitals", "--dead_letter=" + dl, "--summary_json=" + summary}
	}

	local := startSinks(t)
	dl, summary := t.TempDir(), filepath.Join(t.TempDir(), "summary.json")
	r := runLauncher(t, bqEnv(local.bt, local.bq), args(in, dl, summary)...)
	if r.code != 0 {
		t.Fatalf("in-process run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := collect(t, local, dl, summary, "")

	// The input and the dead-letter folder relative to the launcher's
	// working folder, which is not the workers'.
	remote := startSinks(t)
	cwd := t.TempDir()
	rel, err := filepath.Rel(cwd, in)
	if err != nil {
		t.Fatal(err)
	}
	summary = filepath.Join(t.TempDir(), "summary.json")
	r = runLauncherIn(t, cwd, bqEnv(remote.bt, remote.bq), append(args(rel, "dead", summary), processWorkers(t, bqEnv(remote.bt, remote.bq)...)...)...)
	if r.code != 0 {
		t.Fatalf("multi-process run: exit %d\n%s\n%s", r.code, r.stdout, tailLines(r.stderr, 30))
	}
	abs := filepath.Join(cwd, "dead")
	if !strings.Contains(r.stdout, "dead letters go to:      "+abs+"\n") {
		t.Errorf("the summary does not name the dead-letter folder %s:\n%s", abs, r.stdout)
	}
	same(t, collect(t, remote, abs, summary, ""), want)
}

// TestStreamWorkersInTheirOwnProcesses streams the same short Pub/Sub
// input twice: in the launcher's process, and on a stand-alone prism job
// server (--runner=universal) with its workers in their own processes,
// reading with the launcher's own Pub/Sub reader. Once every reading and
// dead letter has landed, each is stopped with SIGINT: both must leave
// the same Bigtable cells, BigQuery rows, dead letters and ledger.
func TestStreamWorkersInTheirOwnProcesses(t *testing.T) {
	t.Parallel()
	launcher(t) // skips under -short
	ps := sharedPubSub.HostPort(t)
	h := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	var msgs []streamMsg
	for i := 0; i < 20; i++ {
		ts := h.Add(time.Duration(i) * time.Minute).UnixMilli()
		msgs = append(msgs, msg(line(fmt.Sprintf("mp-%d", i%3), ts, 60+i), ts))
	}
	msgs = append(msgs, msg("not json", h.UnixMilli()), msg(line("mp#bad", h.UnixMilli(), 70), h.UnixMilli()))
	const readings, rejected = 20, 2

	run := func(t *testing.T, name string, processes bool) outcome {
		s := startSinks(t)
		f := newPubSub(t, ps, name)
		dl, summary := t.TempDir(), filepath.Join(t.TempDir(), "summary.json")
		env := append(bqEnv(s.bt, s.bq), "PUBSUB_EMULATOR_HOST="+ps)
		args := streamArgs(f.sub, "patient_vitals", dl, "--bigquery_project=p", "--bigquery_dataset=vitals", "--summary_json="+summary)
		if processes {
			args = append(args, processWorkers(t, env...)...)
		}
		job := startStream(t, env, args...)
		f.publish(t, msgs...)
		eventually(t, 3*time.Minute, job, func() (bool, string) {
			cells := landed(dump(t, s.bt, "patient_vitals"))
			bq := len(bqReadings(t, s.bq, "vitals"))
			dead := len(deadLetters(t, dl))
			return cells == readings && bq == readings && dead == rejected,
				fmt.Sprintf("%d of %d readings in Bigtable, %d in BigQuery, %d of %d dead letters", cells, readings, bq, dead, rejected)
		})
		if code := job.stop(t, syscall.SIGINT); code != 0 {
			t.Fatalf("SIGINT: exit %d; want 0\nstderr:\n%s", code, tailLines(job.stderr.String(), 30))
		}
		return collect(t, s, dl, summary, f.sub)
	}
	want := run(t, "inprocess", false)
	got := run(t, "processes", true)
	same(t, got, want)
}

// TestPathsMeanTheSameToLauncherAndWorkers: a local path the workers
// cannot see is refused before the job, in one line naming the fix; an
// input the launcher saw but the workers did not fails the run (exit 1)
// naming the pattern instead of a balanced empty ledger; a pattern that
// matches nothing stays a usage error; prism with --endpoint submits to
// that job server.
func TestPathsMeanTheSameToLauncherAndWorkers(t *testing.T) {
	t.Parallel()
	launcher(t) // skips under -short
	in := writeInput(t)
	base := []string{"--source=files", "--bigtable_project=p", "--bigtable_instance=i"}
	oneLine := func(t *testing.T, r result, code int, wants ...string) {
		t.Helper()
		line := lastLine(r.stderr)
		if r.code != code {
			t.Fatalf("exit %d; want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, tailLines(r.stderr, 20))
		}
		for _, w := range wants {
			if !strings.Contains(line, w) {
				t.Errorf("last line %q does not say %q", line, w)
			}
		}
	}
	refusals := []struct {
		name  string
		args  []string
		wants []string
	}{
		{"local input, remote job server's processes", []string{"--runner=universal", "--endpoint=jobs.example.com:8099", "--environment_type=PROCESS",
			"--input=" + in + "/*", "--dead_letter=gs://b/dl"}, []string{"--input=" + in + "/*", "cannot see", "gs://"}},
		{"local input, containers on this machine's job server", []string{"--runner=universal", "--endpoint=localhost:8099", "--environment_type=DOCKER",
			"--input=" + in + "/*", "--dead_letter=gs://b/dl"}, []string{"--input=", "DOCKER", "gs://"}},
		{"local input on Dataflow", []string{"--runner=dataflow", "--project=p", "--region=r", "--staging_location=gs://b/s",
			"--input=../testdata/vitals/*", "--dead_letter=gs://b/dl"}, []string{"--input=../testdata/vitals/*", "dataflow", "gs://"}},
		{"local dead letter, remote job server", []string{"--runner=universal", "--endpoint=jobs.example.com:8099", "--environment_type=PROCESS",
			"--input=gs://b/in/*", "--dead_letter=" + t.TempDir()}, []string{"--dead_letter=", "gs://"}},
		{"universal without a job server", []string{"--runner=universal", "--input=" + in + "/*", "--dead_letter=" + t.TempDir()}, []string{"--endpoint=HOST:PORT"}},
		{"a pattern that matches nothing, on a job server", []string{"--runner=universal", "--endpoint=localhost:8099", "--environment_type=LOOPBACK",
			"--input=/nonexistent/readings-*.jsonl", "--dead_letter=" + t.TempDir()}, []string{"/nonexistent/readings-*.jsonl", "matches no file"}},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=127.0.0.1:1"}, append(base, tc.args...)...)
			oneLine(t, r, 2, tc.wants...)
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Errorf("stderr has %d lines; want one:\n%s", n+1, r.stderr)
			}
		})
	}

	bt := emulators.StartBigtable(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + bt}
	t.Run("input the workers do not see: exit 1 naming the pattern", func(t *testing.T) {
		unseen := writeInput(t)
		args := append(base, "--input="+unseen+"/*", "--bigtable_table=unseen", "--dead_letter="+t.TempDir())
		r := runLauncher(t, env, append(args, processWorkers(t, append(env, "SENSORPIPE_WORKER_UNSEEN="+unseen)...)...)...)
		oneLine(t, r, 1, "--input="+unseen+"/*", "matched 2 files", "read no records")
		if !strings.Contains(r.stdout, "records read:            0") {
			t.Errorf("the summary does not show the empty read:\n%s", r.stdout)
		}
	})
	t.Run("prism with --endpoint submits to that job server", func(t *testing.T) {
		summary := filepath.Join(t.TempDir(), "summary.json")
		r := runLauncher(t, env, append(base, "--runner=prism", "--endpoint="+standaloneJobServer(t), "--input="+in+"/*",
			"--bigtable_table=prism_endpoint", "--dead_letter="+t.TempDir(), "--summary_json="+summary)...)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, tailLines(r.stderr, 20))
		}
		if l := readSummary(t, summary); l.Read != 309 || l.Readings != 304 || !l.Balanced {
			t.Errorf("ledger %+v; want 309 read, 304 readings, balanced", l)
		}
	})
}
