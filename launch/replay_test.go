package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/internal/testrig/faultproxy"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// TestReplayAfterBigQueryDiesMidBatch stops BigQuery midway through a
// batch (exit 3, the readings and rollups it did not take dead-lettered
// as write_failed), brings it back, and runs the replay command the exit
// message printed: the stores then hold what one batch without the fault
// leaves, one BigQuery row per reading and per sensor-hour.
func TestReplayAfterBigQueryDiesMidBatch(t *testing.T) {
	bt := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	in, n := faultWorkload(t)

	if r := runLauncher(t, bqEnv(bt, bq), batchArgs(in, "whole", "whole", t.TempDir())...); r.code != 0 {
		t.Fatalf("the batch without faults: exit %d\n%s", r.code, r.stderr)
	}
	want := captureState(t, bt, bq, "whole", "whole")
	if len(want.readings) != n {
		t.Fatalf("the batch without faults wrote %d readings; want %d", len(want.readings), n)
	}

	p, err := faultproxy.Start(bq.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetRules(faultproxy.Rule{Method: "/AppendRows", PerMessage: true})
	p.SetDelay(20 * time.Millisecond)
	dl := t.TempDir()
	faulty := []string{"BIGTABLE_EMULATOR_HOST=" + bt, "BIGQUERY_EMULATOR_HOST=" + strings.TrimPrefix(bq.RESTEndpoint, "http://"),
		"BIGQUERY_STORAGE_EMULATOR_HOST=" + p.Addr()}
	job := startStream(t, faulty, batchArgs(in, "dies", "dies", dl, "--bigquery_request_bytes=16384", "--write_retry_deadline=5s")...)
	eventually(t, 3*time.Minute, job, func() (bool, string) {
		return faultproxy.Total(p.Stats().Calls, "/AppendRows") >= 20, "20 AppendRows requests through the proxy"
	})
	p.Close()
	if code := job.wait(t, 3*time.Minute); code != exitUnavailable {
		t.Fatalf("exit %d; want %d\nstderr (tail):\n%s", code, exitUnavailable, tailLines(job.stderr.String(), 20))
	}
	last := lastLine(job.stderr.String())
	_, cmd, ok := strings.Cut(last, "replay them with: ")
	if !ok {
		t.Fatalf("the exit message names no replay command: %q", last)
	}
	t.Logf("replay command: %s", cmd)
	failed := 0
	for _, d := range deadLetters(t, dl) {
		if d["reason"] == "write_failed" {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no write_failed dead letters")
	}
	if got := captureState(t, bt, bq, "dies", "dies"); got.diff(want) == "" {
		t.Fatal("BigQuery took every row before the stop: nothing to replay")
	}

	// BigQuery is back (no proxy in front of it): run the command as
	// printed.
	sh := exec.Command("sh", "-c", cmd)
	sh.Env = append(os.Environ(), bqEnv(bt, bq)...)
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("replayed dead letters:     %d", failed)) {
		t.Errorf("the replay's ledger does not count %d replayed dead letters:\n%s", failed, out)
	}
	if d := captureState(t, bt, bq, "dies", "dies").diff(want); d != "" {
		t.Errorf("after the replay, not the one batch's state:\n%s", d)
	}
	if got := deadLetterSet(t, dl); len(got) != failed {
		t.Errorf("%d dead letters after the replay; want the %d of the failed run only", len(got), failed)
	}
}

// TestReplayFixedParseDeadLetters fixes two of the acceptance input's
// four parse dead letters, replays all four, then replays them again: the
// fixed ones land as if they had been right in the first place (the
// tables equal one batch over the corrected input), the two left as they
// were are dead-lettered again with their earlier failure kept, and the
// second replay changes nothing.
func TestReplayFixedParseDeadLetters(t *testing.T) {
	bt := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	env := bqEnv(bt, bq)
	lines := acceptanceLines(t)

	dl := t.TempDir()
	if r := runLauncher(t, env, batchArgs(writeLines(t, lines)+"/*", "fixed", "fixed", dl)...); r.code != 0 {
		t.Fatalf("batch: exit %d\n%s", r.code, r.stderr)
	}
	fix := map[string]string{
		`"timestamp":"yesterday"`: `"timestamp":"2026-03-01T11:30:00Z"`,
		`"body_temperature":99`:   `"body_temperature":37.5`,
	}
	var corrected []string
	for _, l := range lines {
		for bad, good := range fix {
			l = strings.ReplaceAll(l, bad, good)
		}
		corrected = append(corrected, l)
	}
	wantDL := t.TempDir()
	if r := runLauncher(t, env, batchArgs(writeLines(t, corrected)+"/*", "want", "want", wantDL)...); r.code != 0 {
		t.Fatalf("batch over the corrected input: exit %d\n%s", r.code, r.stderr)
	}
	want := captureState(t, bt, bq, "want", "want")

	// The dead letters, two of them fixed by hand.
	var edited []string
	fixedN := 0
	for _, f := range mustGlob(t, filepath.Join(dl, "*.jsonl")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var d schemas.DeadLetter
			if err := json.Unmarshal([]byte(l), &d); err != nil {
				t.Fatal(err)
			}
			if d.Line == 0 {
				t.Errorf("dead letter without its line: %s", l)
			}
			for bad, good := range fix {
				if strings.Contains(d.Payload, bad) {
					d.Payload = strings.ReplaceAll(d.Payload, bad, good)
					fixedN++
				}
			}
			e, _ := json.Marshal(d)
			edited = append(edited, string(e))
		}
	}
	if len(edited) != 4 || fixedN != 2 {
		t.Fatalf("%d dead letters, %d fixed; want 4 and 2", len(edited), fixedN)
	}
	// And one line that is no dead letter: it is dead-lettered itself.
	replayIn := writeLines(t, append(edited, `{"payload": 42`))

	for round := 1; round <= 2; round++ {
		rdl := t.TempDir()
		r := runLauncher(t, env, batchArgs(replayIn+"/*", "fixed", "fixed", rdl, "--format=deadletter")...)
		if r.code != 0 {
			t.Fatalf("replay %d: exit %d\n%s\n%s", round, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "replayed dead letters:     4") {
			t.Errorf("replay %d: the ledger does not count 4 replayed dead letters:\n%s", round, r.stdout)
		}
		if d := captureState(t, bt, bq, "fixed", "fixed").diff(want); d != "" {
			t.Errorf("replay %d: not the state of one batch over the corrected input:\n%s", round, d)
		}
		again := deadLetters(t, rdl)
		byReason := map[string]int{}
		for _, d := range again {
			byReason[d["reason"]]++
			if d["payload"] != `{"payload": 42` && !strings.Contains(d["previous"], `"reason":"`+d["reason"]+`"`) {
				t.Errorf("replay %d: a dead letter that failed again does not keep its earlier failure: %v", round, d)
			}
		}
		if len(again) != 3 || byReason["malformed"] != 2 || byReason["invalid_field"] != 1 {
			t.Errorf("replay %d: dead letters %v; want the two left unfixed and the line that is no dead letter", round, again)
		}
	}
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		t.Fatalf("%s: %v (%d files)", pattern, err, len(m))
	}
	return m
}
