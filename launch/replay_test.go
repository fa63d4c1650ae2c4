package main

import (
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// TestReplayAfterBigQueryDiesMidBatch stops BigQuery midway through a
// batch (exit 3, the readings and rollups it did not take dead-lettered
// as write_failed), brings it back, and runs the replay command the exit
// message printed: the stores then hold what one batch without the fault
// leaves, one BigQuery row per reading and per sensor-hour.
func TestReplayAfterBigQueryDiesMidBatch(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
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
	// printed, with the default retry deadline. The printed command keeps
	// the failed run's 5 seconds, chosen so that the run gives up quickly;
	// on a loaded 2-core machine a live emulator can take longer than that
	// to answer the replay's burst of rollup rows.
	sh := exec.Command("sh", "-c", cmd+" --write_retry_deadline=2m")
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
	t.Parallel()
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
			var d deadletter.DeadLetter
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

// TestReplayTooLargeLineFromItsFile dead-letters a 20 MB line of a file
// with its line, offset, length and sha256 (and never its bytes), replays
// it with a --max_line_bytes that takes it (it lands), then with the
// default limit (too_large again, its place kept; the replay of known-bad
// data exits 0 with --allow_all_rejected), then after the file changed (the
// run fails in one line, the record stays in the dead letter).
func TestReplayTooLargeLineFromItsFile(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + bt}
	const ts = `"2026-03-01T10:00:00Z"`
	first := vitalsLine(`"small-1"`, ts, "70")
	huge := `{"sensor_id":"huge-1","timestamp":` + ts + `,"heart_rate":71,"body_temperature":36.8,"spO2":98,"battery_level":87,"note":"` +
		strings.Repeat("z", 20<<20) + `"}`
	in := t.TempDir()
	file := filepath.Join(in, "big.jsonl")
	if err := os.WriteFile(file, []byte(first+"\n"+huge+"\r\n"+vitalsLine(`"small-2"`, ts, "72")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(input, dl string, extra ...string) []string {
		return append([]string{"--source=files", "--input=" + input, "--bigtable_project=p", "--bigtable_instance=i",
			"--bigtable_table=big", "--dead_letter=" + dl, "--progress_interval=0"}, extra...)
	}
	hasRow := func(sensor string) bool {
		for _, c := range dump(t, bt, "big") {
			if strings.HasPrefix(c, sensor+"#") {
				return true
			}
		}
		return false
	}

	dl := t.TempDir()
	if r := runLauncher(t, env, args(in+"/*", dl)...); r.code != 0 {
		t.Fatalf("batch: exit %d\n%s", r.code, r.stderr)
	}
	var got []deadletter.DeadLetter
	for _, f := range mustGlob(t, filepath.Join(dl, "*.jsonl")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var d deadletter.DeadLetter
			if err := json.Unmarshal([]byte(l), &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, d)
		}
	}
	sum := sha256.Sum256([]byte(huge))
	if len(got) != 1 {
		t.Fatalf("%d dead letters; want the 20 MB line's", len(got))
	}
	d := got[0]
	want := deadletter.DeadLetter{Reason: "too_large", Source: file, Line: 2, Offset: int64(len(first) + 1), Length: int64(len(huge)), SHA256: hex.EncodeToString(sum[:])}
	if d.Reason != want.Reason || d.Source != want.Source || d.Line != want.Line || d.Offset != want.Offset || d.Length != want.Length || d.SHA256 != want.SHA256 || len(d.Payload) != 1024 {
		t.Fatalf("dead letter %s %s line %d offset %d length %d sha256 %s, payload %d bytes;\nwant %s %s line %d offset %d length %d sha256 %s, payload 1024 bytes",
			d.Reason, d.Source, d.Line, d.Offset, d.Length, d.SHA256, len(d.Payload), want.Reason, want.Source, want.Line, want.Offset, want.Length, want.SHA256)
	}
	if hasRow("huge-1") || !hasRow("small-1") || !hasRow("small-2") {
		t.Fatal("after the batch: want small-1 and small-2 in Bigtable, huge-1 not")
	}

	// The default limit: too_large again, still named in its file.
	again := t.TempDir()
	r := runLauncher(t, env, args(dl+"/*.jsonl", again, "--format=deadletter")...)
	if r.code != 1 || !strings.Contains(lastLine(r.stderr), "too_large 1") {
		t.Fatalf("replay at the default limit: exit %d, last line %q; want 1 naming too_large 1", r.code, lastLine(r.stderr))
	}
	again = t.TempDir()
	if r := runLauncher(t, env, args(dl+"/*.jsonl", again, "--format=deadletter", "--allow_all_rejected")...); r.code != 0 {
		t.Fatalf("replay at the default limit with --allow_all_rejected: exit %d\n%s", r.code, r.stderr)
	}
	letters := deadLetters(t, again)
	if len(letters) != 1 || letters[0]["reason"] != "too_large" || letters[0]["offset"] != fmt.Sprint(want.Offset) || letters[0]["sha256"] != want.SHA256 {
		t.Fatalf("replay at the default limit: dead letters %v; want too_large with the record's offset and sha256", letters)
	}

	// A limit that takes it: it lands.
	landed := t.TempDir()
	if r := runLauncher(t, env, args(dl+"/*.jsonl", landed, "--format=deadletter", "--max_line_bytes=25000000")...); r.code != 0 {
		t.Fatalf("replay with --max_line_bytes=25000000: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !hasRow("huge-1") {
		t.Fatal("replay with --max_line_bytes=25000000: huge-1 not in Bigtable")
	}
	if n := len(deadLetters(t, landed)); n != 0 {
		t.Errorf("replay with --max_line_bytes=25000000: %d dead letters; want none", n)
	}

	// The file changed: the replay fails in one line, the record stays
	// in the dead letter.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(first)+1+1000] = 'y'
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	changed := t.TempDir()
	r = runLauncher(t, env, args(dl+"/*.jsonl", changed, "--format=deadletter", "--max_line_bytes=25000000", "--allow_all_rejected")...)
	t.Logf("replay after the file changed: exit %d: %s", r.code, lastLine(r.stderr))
	if last := lastLine(r.stderr); r.code != 1 || !strings.Contains(last, "could not be read back") || !strings.Contains(last, "changed") {
		t.Fatalf("replay after the file changed: exit %d, last line %q; want 1 saying the source changed", r.code, last)
	}
	letters = deadLetters(t, changed)
	if len(letters) != 1 || letters[0]["reason"] != "too_large" || !strings.Contains(letters[0]["error"], file) || letters[0]["sha256"] != want.SHA256 {
		t.Fatalf("replay after the file changed: dead letters %v; want the record's again, naming its file", letters)
	}
}

// TestReplayChecksEnvelopes replays hand-written envelopes into a run that
// writes Bigtable only: one whose sink names no sink, and one of a sink
// the run does not write, are malformed dead letters that name the sink;
// one without sink whose reason needs none (bad_timestamp, its payload
// fixed) lands.
func TestReplayChecksEnvelopes(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + bt}
	const ts = `"2026-03-01T10:00:00Z"`
	envelope := func(sensor, reason, sink string) string {
		d := map[string]any{"payload": vitalsLine(`"`+sensor+`"`, ts, "70"), "reason": reason, "error": "e", "source": "s", "time": "t"}
		if sink != "-" {
			d["sink"] = sink
		}
		b, _ := json.Marshal(d)
		return string(b)
	}
	in := writeLines(t, []string{
		envelope("env-nosink", "bad_timestamp", "-"),
		envelope("env-empty", "out_of_range", ""),
		envelope("env-unknown", "write_failed", "nosuchsink"),
		envelope("env-notthisrun", "write_failed", "bigquery"),
	})
	dl := t.TempDir()
	r := runLauncher(t, env, "--source=files", "--input="+in+"/*", "--bigtable_project=p", "--bigtable_instance=i",
		"--bigtable_table=env", "--dead_letter="+dl, "--progress_interval=0", "--format=deadletter")
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("replay:\n%s", r.stdout)
	rows := map[string]bool{}
	for _, c := range dump(t, bt, "env") {
		rows[strings.SplitN(c, "#", 2)[0]] = true
	}
	for _, s := range []string{"env-nosink", "env-empty"} {
		if !rows[s] {
			t.Errorf("%s (no sink, a reason that needs none) not in Bigtable", s)
		}
	}
	for _, s := range []string{"env-unknown", "env-notthisrun"} {
		if rows[s] {
			t.Errorf("%s was written; want it dead-lettered", s)
		}
	}
	want := map[string]string{"env-unknown": `"nosuchsink"`, "env-notthisrun": `"bigquery" is not a sink of this run`}
	letters := deadLetters(t, dl)
	for _, d := range letters {
		for sensor, say := range want {
			if strings.Contains(d["payload"], sensor) {
				if d["reason"] != "malformed" || d["sink"] != "parse" || !strings.Contains(d["error"], say) {
					t.Errorf("dead letter of %s: reason %s, sink %s, error %q; want malformed, parse, naming %s", sensor, d["reason"], d["sink"], d["error"], say)
				}
				delete(want, sensor)
			}
		}
	}
	if len(want) > 0 || len(letters) != 2 {
		t.Errorf("dead letters %v; want one each for env-unknown and env-notthisrun", letters)
	}
}
