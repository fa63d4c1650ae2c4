package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/internal/testrig/gobuild"
)

// The answers docs/guide/querying.md shows for the fleet
// (testdata/fleet), as of 2026-03-01T12:00:00Z.
const (
	wantSilent = `{"device":"dev-c","last_seen":"2026-03-01T11:29:15Z","first_seen":"2026-03-01T10:00:15Z"}
{"device":"dev-d","last_seen":"2026-03-01T11:40:05Z","first_seen":"2026-03-01T10:00:05Z"}
`
	wantCoverage = `{"device":"dev-c","window_start":"2026-03-01T10:00:00Z","window_end":"2026-03-01T11:00:00Z","count":60,"expected":59.75,"coverage":1,"gaps":0,"longest_gap_s":0}
{"device":"dev-c","window_start":"2026-03-01T11:00:00Z","window_end":"2026-03-01T12:00:00Z","count":30,"expected":60,"coverage":0.5,"gaps":1,"longest_gap_s":1845}
`
)

// TestSilentSensorsAndCoverage loads the fleet with the launcher and asks
// silent_sensors and coverage: dev-c (stopped at 11:29:15) and dev-d (every
// 20 minutes, last at 11:40:05) are silent for 15 minutes at noon, and
// dev-c's hours are its prorated first hour and the half hour it reported.
func TestSilentSensorsAndCoverage(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	bin := filepath.Join(t.TempDir(), "sensorpipe")
	gobuild.Build(t, bin, "github.com/sensorpipe/sensorpipe/launch")
	cmd := exec.Command(bin, "--spec=../../testdata/fleet/fleet.yaml", "--input=../../testdata/fleet/fleet.jsonl",
		"--dead_letter="+t.TempDir(), "--progress_interval=0")
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("launcher: %v\n%s", err, out)
	}
	ask := func(args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err != nil {
			t.Fatalf("query %v: %v\n%s", args, err, errb.String())
		}
		return out.String(), errb.String()
	}
	spec := "--spec=../../testdata/fleet/fleet.yaml"
	got, sum := ask("silent_sensors", spec, "--silent_for", "15m", "--now", "2026-03-01T12:00:00Z")
	if got != wantSilent {
		t.Errorf("silent_sensors:\n%s\nwant:\n%s", got, wantSilent)
	}
	if !strings.Contains(sum, `"rows_read":5`) || !strings.Contains(sum, `"silent":2`) {
		t.Errorf("silent_sensors summary %s; want one scan of the 5 inventory rows, 2 silent", sum)
	}
	// Silent for 25 minutes: dev-c alone; within a lookback of 20
	// minutes nobody was last seen long enough ago.
	if got, _ := ask("silent_sensors", spec, "--silent_for", "25m", "--now", "2026-03-01T12:00:00Z"); got != strings.SplitAfter(wantSilent, "\n")[0] {
		t.Errorf("silent_sensors --silent_for 25m:\n%s", got)
	}
	if got, _ := ask("silent_sensors", spec, "--silent_for", "10m", "--lookback", "15m", "--now", "2026-03-01T12:00:00Z"); got != "" {
		t.Errorf("silent_sensors --lookback 15m: %s; want none (dev-c and dev-d were last seen before)", got)
	}
	got, _ = ask("coverage", spec, "--param", "device=dev-c", "--since", "2h", "--now", "2026-03-01T12:00:00Z")
	if got != wantCoverage {
		t.Errorf("coverage:\n%s\nwant:\n%s", got, wantCoverage)
	}
}
