package loopback

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestPrivate: a run's placeholder, made as Beam makes it, lands in the
// run's own folder and goes with it; a placeholder another process made in
// the shared temp dir meanwhile (still to be staged) stays, and TMPDIR is
// as it was.
func TestPrivate(t *testing.T) {
	shared := t.TempDir()
	t.Setenv("TMPDIR", shared)
	restore, err := Private()
	if err != nil {
		t.Fatal(err)
	}
	mine, err := os.CreateTemp(os.TempDir(), "beamloopbackworker-*") // as runnerlib.Execute does
	if err != nil {
		t.Fatal(err)
	}
	mine.Close()
	if filepath.Dir(filepath.Dir(mine.Name())) != shared {
		t.Fatalf("the run's placeholder %s is not in a folder of its own under %s", mine.Name(), shared)
	}
	other := filepath.Join(shared, "beamloopbackworker-other")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	restore()
	if got := os.Getenv("TMPDIR"); got != shared {
		t.Errorf("TMPDIR after the run: %q, want %q", got, shared)
	}
	if _, err := os.Stat(filepath.Dir(mine.Name())); !os.IsNotExist(err) {
		t.Errorf("the run's folder is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another process's placeholder was removed: %v", err)
	}
}

// TestPrivateRemovesTheFoldersOfKilledRuns: a run's folder left by a
// process that is gone (a killed launcher, which may leave a local stream's
// state on disk there) goes at the next run; one whose process is alive,
// or that names none, stays.
func TestPrivateRemovesTheFoldersOfKilledRuns(t *testing.T) {
	shared := t.TempDir()
	t.Setenv("TMPDIR", shared)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	folder := func(name, owner string) string {
		dir := filepath.Join(shared, name)
		if err := os.MkdirAll(filepath.Join(dir, "sensorpipe-windows"), 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	killed := folder("sensorpipe-run-killed", strconv.Itoa(gone.Process.Pid))
	alive := folder("sensorpipe-run-alive", strconv.Itoa(os.Getppid()))
	older := folder("sensorpipe-run-older", "")
	restore, err := Private()
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	if _, err := os.Stat(killed); !os.IsNotExist(err) {
		t.Errorf("a killed run's folder is still there: %v", err)
	}
	for _, dir := range []string{alive, older} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s was removed: %v", dir, err)
		}
	}
}
