package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/internal/bench"
	"github.com/sensorpipe/sensorpipe/internal/emulators"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
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
		"--write_retry_deadline=5s", "--progress_interval=1s", "--summary_json="+summary)

	// Kill it once a fifth of the rows have landed.
	t.Setenv("BIGTABLE_EMULATOR_HOST", proc.HostPort)
	c, err := bigtable.NewClient(context.Background(), "p", "i")
	if err != nil {
		t.Fatal(err)
	}
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
		if s.Sink == schemas.SinkBigtable {
			bt = s
		}
	}
	if bt.Routed != int64(w.Readings()) || bt.Written+bt.Failed != bt.Routed || bt.Unavailable == 0 || bt.Unavailable != bt.Failed {
		t.Errorf("bigtable %+v; want every reading written or dead-lettered as unavailable", bt)
	}
	t.Logf("before the kill %d readings were written; %d dead-lettered", bt.Written, bt.Failed)
	if got := l.DeadLetters[schemas.SinkBigtable]["write_failed"]; got != bt.Failed {
		t.Errorf("%d bigtable write_failed dead letters stored; want %d", got, bt.Failed)
	}
}
