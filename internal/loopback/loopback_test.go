package loopback

import (
	"os"
	"path/filepath"
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
