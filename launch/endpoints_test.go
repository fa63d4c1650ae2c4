package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runLauncherEnv runs the launcher with exactly the emulator and credential
// variables given: the ones the test's own environment (make exports them)
// sets are removed first.
func runLauncherEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	bin := launcher(t)
	var base []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "BIGTABLE_EMULATOR_HOST", "BIGQUERY_EMULATOR_HOST", "BIGQUERY_STORAGE_EMULATOR_HOST",
			"PUBSUB_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "HOME", "CLOUDSDK_CONFIG":
			continue
		}
		base = append(base, kv)
	}
	// No credentials anywhere: an empty home, a credentials file that does
	// not exist.
	base = append(base, "HOME="+t.TempDir(), "CLOUDSDK_CONFIG="+t.TempDir())
	cmd := exec.Command(bin, args...)
	cmd.Env = append(base, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run launcher: %v", err)
	}
	return result{code, out.String(), errb.String()}
}

// TestEndpointsAndNamesFailInOneLine shows the set-up mistakes the launcher
// refuses before any call, each as one line on stderr with its exit code:
// the BigQuery emulator set for one API only, missing credentials, and
// names BigQuery would refuse. Nothing listens at the emulator addresses
// given, so a call made in spite of the check would fail differently.
func TestEndpointsAndNamesFailInOneLine(t *testing.T) {
	dl := t.TempDir()
	batch := []string{"--input=../testdata/vitals/*", "--dead_letter=" + dl, "--progress_interval=0"}
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want []string
	}{
		{"storage emulator variable missing",
			[]string{"BIGTABLE_EMULATOR_HOST=127.0.0.1:1", "BIGQUERY_EMULATOR_HOST=127.0.0.1:9050"},
			[]string{"--bigquery_dataset=vitals"}, exitFailed,
			[]string{"BIGQUERY_STORAGE_EMULATOR_HOST is not set while BIGQUERY_EMULATOR_HOST=127.0.0.1:9050", "export BIGQUERY_STORAGE_EMULATOR_HOST=127.0.0.1:9060", "make env"}},
		{"REST emulator variable missing",
			[]string{"BIGTABLE_EMULATOR_HOST=127.0.0.1:1", "BIGQUERY_STORAGE_EMULATOR_HOST=127.0.0.1:9060"},
			[]string{"--bigquery_dataset=vitals", "--bigquery_project=local-project"}, exitFailed,
			[]string{"BIGQUERY_EMULATOR_HOST is not set while BIGQUERY_STORAGE_EMULATOR_HOST=127.0.0.1:9060", "export BIGQUERY_EMULATOR_HOST=127.0.0.1:9050"}},
		{"no credentials for Google Cloud",
			[]string{"GOOGLE_APPLICATION_CREDENTIALS=/nonexistent/key.json"},
			[]string{"--bigtable_project=p", "--bigtable_instance=i", "--bigquery_dataset=vitals"}, exitFailed,
			[]string{"no Google Cloud credentials for Bigtable (bigtable.googleapis.com:443), BigQuery (bigquery.googleapis.com:443), BigQuery Storage Write (bigquerystorage.googleapis.com:443)", "gcloud auth application-default login"}},
		{"a dataset name BigQuery refuses",
			[]string{"BIGTABLE_EMULATOR_HOST=127.0.0.1:1", "BIGQUERY_EMULATOR_HOST=127.0.0.1:9050", "BIGQUERY_STORAGE_EMULATOR_HOST=127.0.0.1:9060"},
			[]string{"--bigquery_dataset=my-vitals"}, exitUsage,
			[]string{`--bigquery_dataset: dataset name "my-vitals" has "-" at byte 2`, "e.g. my_vitals"}},
		{"a table name BigQuery refuses",
			[]string{"BIGTABLE_EMULATOR_HOST=127.0.0.1:1", "BIGQUERY_EMULATOR_HOST=127.0.0.1:9050", "BIGQUERY_STORAGE_EMULATOR_HOST=127.0.0.1:9060"},
			[]string{"--bigquery_dataset=vitals", "--bigquery_table=readings.v2"}, exitUsage,
			[]string{`--bigquery_table: table name "readings.v2" has "." at byte 8`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runLauncherEnv(t, tc.env, append(append([]string{}, batch...), tc.args...)...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if lines := strings.Count(strings.TrimSpace(r.stderr), "\n") + 1; lines != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", lines, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}
