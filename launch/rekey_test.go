package main

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

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
	cmd := exec.Command("go", append([]string{"run", "./keys"}, args...)...)
	cmd.Env = append(cmd.Environ(), "BIGTABLE_EMULATOR_HOST="+host)
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
	const ts = 1772359205000000 // 2026-03-01T10:00:05Z
	m := bigtable.NewMutation()
	for _, col := range []string{"vitals:heart_rate", "vitals:body_temperature", "vitals:spO2", "meta:battery_level", "meta:heart_rate_imputed"} {
		fam, q, _ := strings.Cut(col, ":")
		m.DeleteTimestampRange(fam, q, ts, ts+1000)
	}
	if err := c.Open("rekeyed").Apply(context.Background(), row, m); err != nil {
		t.Fatal(err)
	}
	r = runKeys(t, host, compare...)
	if r.code != 1 || !strings.Contains(r.stdout, "p-4") || !strings.Contains(r.stdout, "2026-03-01T10:00:00Z") ||
		!strings.Contains(r.stdout, "10:00:05") {
		t.Fatalf("keys compare after deleting a reading of p-4: exit %d, want 1 naming p-4's hour 2026-03-01T10:00:00Z and the reading at 10:00:05\nstdout:\n%s\nstderr:\n%s",
			r.code, r.stdout, r.stderr)
	}
	t.Logf("keys compare after the deletion:\n%s", r.stdout)
}
