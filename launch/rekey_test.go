package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
)

// saltedSpec is vitals with a salted row key (docs/guide/rekey.md).
const saltedSpec = "../testdata/rekey/vitals_salted.yaml"

// withoutRowKeys is cells (dump's lines) without their row keys: the
// cells of two layouts of one dataset, to compare.
func withoutRowKeys(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		_, rest, _ := strings.Cut(c, " ")
		out[i] = rest
	}
	slices.Sort(out)
	return out
}

// runKeys runs go run ./launch/keys with args against the emulator at
// host.
func runKeys(t *testing.T, host string, args ...string) result {
	t.Helper()
	return runKeysEnv(t, []string{"BIGTABLE_EMULATOR_HOST=" + host}, args...)
}

// runKeysEnv runs go run ./launch/keys with args and env added to the
// test's environment.
func runKeysEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "./keys"}, args...)...)
	cmd.Env = append(cmd.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("go run ./keys: %v", err)
	}
	return result{code, stdout.String(), stderr.String()}
}

// deleteVitalsReading deletes the cells of a vitals reading at epoch
// milliseconds ms from row of table: its observed values and its imputed
// flag.
func deleteVitalsReading(t *testing.T, c *bigtable.Client, table, row string, ms int64) {
	t.Helper()
	ts := bigtable.Timestamp(ms * 1000)
	m := bigtable.NewMutation()
	for _, col := range []string{"vitals:heart_rate", "vitals:body_temperature", "vitals:spO2", "meta:battery_level", "meta:heart_rate_imputed"} {
		fam, q, _ := strings.Cut(col, ":")
		m.DeleteTimestampRange(fam, q, ts, ts+1000)
	}
	if err := c.Open(table).Apply(context.Background(), row, m); err != nil {
		t.Fatal(err)
	}
}

// TestRekeyEqualsAFreshBatch batches the acceptance input under vitals,
// rekeys the table into the salted spec with --source=bigtable, and
// checks that the new table is, cell for cell and rollups included, what a
// batch of the same input under the salted spec writes; keys compare says
// the old and new tables are equal. Deleting one reading's cells from the
// new table makes keys compare exit 1 naming its sensor-hour.
func TestRekeyEqualsAFreshBatch(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	host := emulators.StartBigtable(t)
	in := writeInput(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + host}
	common := []string{"--bigtable_project=p", "--bigtable_instance=i"}
	run := func(args ...string) {
		t.Helper()
		args = append(append(args, common...), "--dead_letter="+t.TempDir())
		if r := runLauncher(t, env, args...); r.code != 0 {
			t.Fatalf("launch %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	run("--input="+in+"/*", "--spec=vitals", "--bigtable_table=old")
	run("--source=bigtable", "--from_spec=vitals", "--from_table=old", "--spec="+saltedSpec, "--bigtable_table=rekeyed")
	run("--input="+in+"/*", "--spec="+saltedSpec, "--bigtable_table=fresh")

	rekeyed, fresh := dump(t, host, "rekeyed"), dump(t, host, "fresh")
	if len(fresh) == 0 || !slices.Equal(rekeyed, fresh) {
		t.Fatalf("rekeyed table differs from a fresh batch under the salted spec in %d cells (%d vs %d):\n%s",
			cellDiff(rekeyed, fresh), len(rekeyed), len(fresh), firstDiffs(rekeyed, fresh, 10))
	}
	if !slices.ContainsFunc(fresh, func(c string) bool { return strings.Contains(c, " hourly:") }) {
		t.Fatalf("no rollup cells in the fresh table: %v", fresh[:min(5, len(fresh))])
	}
	if old := dump(t, host, "old"); !slices.Equal(withoutRowKeys(old), withoutRowKeys(rekeyed)) {
		t.Errorf("the rekeyed table holds other cells than the old one, row keys aside:\n%s",
			firstDiffs(withoutRowKeys(rekeyed), withoutRowKeys(old), 10))
	}

	compare := []string{"compare", "--bigtable_project=p", "--bigtable_instance=i", "--spec=vitals", "--table=old",
		"--against_spec=" + saltedSpec, "--against_table=rekeyed"}
	r := runKeys(t, host, compare...)
	if r.code != 0 || !strings.Contains(r.stdout, "equal") {
		t.Fatalf("keys compare of the old and rekeyed tables: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// keys hotspots draws the stored table as it is and under the salted
	// spec, from its readings.
	out := t.TempDir()
	r = runKeys(t, host, "hotspots", "--bigtable_project=p", "--bigtable_instance=i", "--spec=vitals", "--table=old",
		"--proposed_spec="+saltedSpec, "--out="+out, "--tablets=4")
	if r.code != 0 || strings.Count(r.stdout, "hotspots: ") != 2 || !strings.Contains(r.stdout, "as it is") ||
		!strings.Contains(r.stdout, "under vitals_salted") {
		t.Fatalf("keys hotspots --table: exit %d; want the table drawn as it is and under vitals_salted\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, f := range []string{"hotspots.png", "hotspots-proposed.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("keys hotspots --table wrote no %s: %v", f, err)
		}
	}
	if !strings.Contains(r.stdout, "304 writes") {
		t.Errorf("keys hotspots --table: want the 304 readings of the acceptance input drawn\nstdout:\n%s", r.stdout)
	}

	// Delete one reading (p-4 at 10:00:05Z) from the new table.
	c := emulators.BigtableClient(t, host, "p", "i")
	defer c.Close()
	var row string
	for _, cell := range rekeyed {
		if key, _, _ := strings.Cut(cell, " "); strings.Contains(key, "#p-4#") {
			row = key
			break
		}
	}
	deleteVitalsReading(t, c, "rekeyed", row, 1772359205000) // 2026-03-01T10:00:05Z
	r = runKeys(t, host, compare...)
	if r.code != 1 || !strings.Contains(r.stdout, "p-4") || !strings.Contains(r.stdout, "2026-03-01T10:00:00Z") ||
		!strings.Contains(r.stdout, "10:00:05") {
		t.Fatalf("keys compare after deleting a reading of p-4: exit %d, want 1 naming p-4's hour 2026-03-01T10:00:00Z and the reading at 10:00:05\nstdout:\n%s\nstderr:\n%s",
			r.code, r.stdout, r.stderr)
	}
	t.Logf("keys compare after the deletion:\n%s", r.stdout)
}

// TestOnlineMigration runs the online migration of docs/guide/rekey.md: a
// table of two hours under vitals; a stream under a spec that writes both
// layouts (vitals_dual) takes the next two hours while a batch copies the
// two earlier hours from the old table into the salted one
// (--source=bigtable --to_time). Then the salted table equals, cell for
// cell and rollups included, a batch of every reading under the salted
// spec, and keys compare finds the old and new tables equal.
func TestOnlineMigration(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	bt := emulators.StartBigtable(t)
	ps := sharedPubSub.HostPort(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + bt, "PUBSUB_EMULATOR_HOST=" + ps}
	common := []string{"--bigtable_project=p", "--bigtable_instance=i"}
	batch := func(args ...string) {
		t.Helper()
		args = append(append(args, common...), "--dead_letter="+t.TempDir())
		if r := runLauncher(t, env, args...); r.code != 0 {
			t.Fatalf("launch %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// Hours h and h+1 are stored; the stream takes h+2 and h+3.
	h := time.Now().UTC().Truncate(time.Hour).Add(-4 * time.Hour)
	var stored, streamed []string
	var msgs []streamMsg
	for i := 0; i < 240; i++ {
		at := h.Add(time.Duration(i) * time.Minute)
		var hr any = 60 + i%30
		if i%7 == 0 {
			hr = nil // imputed
		}
		l := line(fmt.Sprintf("m-%d", i%3), at.UnixMilli(), hr)
		if i < 120 {
			stored = append(stored, l)
		} else {
			streamed = append(streamed, l)
			msgs = append(msgs, msg(l, at.UnixMilli()))
		}
	}
	writeLines := func(lines []string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir + "/*"
	}
	batch("--input="+writeLines(stored), "--spec=vitals")
	batch("--input="+writeLines(append(append([]string{}, stored...), streamed...)), "--spec="+saltedSpec, "--bigtable_table=fresh")
	want := dump(t, bt, "fresh")

	f := newPubSub(t, ps, "migration")
	dl := t.TempDir()
	job := startStream(t, env, append(streamArgs(f.sub, "patient_vitals_salted", dl, "--allowed_lateness=6h"),
		"--spec=../testdata/rekey/vitals_dual.yaml")...)
	f.publish(t, msgs...)
	batch("--source=bigtable", "--from_spec=vitals", "--from_table=patient_vitals", "--to_time="+h.Add(2*time.Hour).Format(time.RFC3339),
		"--spec="+saltedSpec)
	eventually(t, 120*time.Second, job, func() (bool, string) {
		got := dump(t, bt, "patient_vitals_salted")
		return slices.Equal(got, want), fmt.Sprintf("the salted table equal to a batch of every reading under the salted spec: %d cells differ:\n%s",
			cellDiff(got, want), firstDiffs(got, want, 10))
	})
	if code := job.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d\nstderr:\n%s", code, job.stderr.String())
	}
	r := runKeys(t, bt, "compare", "--bigtable_project=p", "--bigtable_instance=i", "--spec=../testdata/rekey/vitals_dual.yaml",
		"--table=patient_vitals", "--against_spec="+saltedSpec, "--against_table=patient_vitals_salted")
	if r.code != 0 || !strings.Contains(r.stdout, "240 readings") || !strings.Contains(r.stdout, "equal") {
		t.Fatalf("keys compare of the old and new layouts after the migration: exit %d, want 0, equal, 240 readings\nstdout:\n%s\nstderr:\n%s",
			r.code, r.stdout, r.stderr)
	}
	r = runKeys(t, bt, "compare", "--bigtable_project=p", "--bigtable_instance=i", "--spec="+saltedSpec,
		"--against_table=fresh")
	if r.code != 0 || !strings.Contains(r.stdout, "equal") {
		t.Fatalf("keys compare of the new table and a fresh batch, rollups included: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
