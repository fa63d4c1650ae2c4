package loopback

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSweepRemovesOnlyTheRunsEmptyPlaceholders(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	old := filepath.Join(dir, "beamloopbackworker-old")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mine := filepath.Join(dir, "beamloopbackworker-123")
	notEmpty := filepath.Join(dir, "beamloopbackworker-456")
	other := filepath.Join(dir, "something-else")
	for p, body := range map[string]string{mine: "", notEmpty: "a real binary", other: ""} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := Sweep(start); n != 1 {
		t.Errorf("Sweep removed %d files; want 1", n)
	}
	for p, want := range map[string]bool{mine: false, old: true, notEmpty: true, other: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v; want %v", filepath.Base(p), err == nil, want)
		}
	}
}
