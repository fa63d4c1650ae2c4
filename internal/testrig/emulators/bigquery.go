package emulators

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"
)

// ReadBigQuery reads every row of tbl (on the BigQuery emulator, or
// BigQuery itself) with tables.list data, as column -> value maps. It is
// the BigQuery twin of DumpBigtable; the error (say, a table not created
// yet) is the caller's to judge.
func ReadBigQuery(ctx context.Context, tbl *bigquery.Table) ([]map[string]bigquery.Value, error) {
	var rows []map[string]bigquery.Value
	it := tbl.Read(ctx)
	for {
		var row map[string]bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
}

// BQCLI returns the path of the gcloud SDK's bq CLI, and skips the test,
// saying why, when it is not installed.
func BQCLI(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("bq"); err == nil {
		return p
	}
	if root, err := SDKRoot(); err == nil {
		p := filepath.Join(root, "bin", "bq")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	tb.Skip("the bq CLI is not installed (it comes with the gcloud SDK: the google-cloud-cli package, or gcloud components install bq)")
	return ""
}

// RunBQ runs the bq CLI at path against the BigQuery REST endpoint (e.g.
// http://127.0.0.1:9050) as a user would: CLOUDSDK_AUTH_ACCESS_TOKEN=x and
// no flag but --api and --project_id, with a HOME of its own so that no
// user configuration applies. It fails the test when bq fails, and returns
// its standard output.
func RunBQ(tb testing.TB, path, endpoint, project string, args ...string) string {
	tb.Helper()
	return runBQ(tb, path, []string{"CLOUDSDK_AUTH_ACCESS_TOKEN=x"}, append([]string{"--api=" + endpoint, "--project_id=" + project}, args...))
}

// RunBQTokenFlag is RunBQ with the dummy token given by bq's own
// --oauth_access_token flag instead of CLOUDSDK_AUTH_ACCESS_TOKEN. With
// the variable, bq starts gcloud three times a call to find credentials
// (config list, print-access-token, print-refresh-token), which doubles
// its CPU; with the flag it starts none. Tests that run bq many times use
// it, after RunBQ has shown the docs' way.
func RunBQTokenFlag(tb testing.TB, path, endpoint, project string, args ...string) string {
	tb.Helper()
	return runBQ(tb, path, nil, append([]string{"--api=" + endpoint, "--project_id=" + project, "--oauth_access_token=x"}, args...))
}

func runBQ(tb testing.TB, path string, env, args []string) string {
	tb.Helper()
	home := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(append(os.Environ(), "HOME="+home, "CLOUDSDK_CONFIG="+filepath.Join(home, "gcloud"),
		"CLOUDSDK_CORE_DISABLE_PROMPTS=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("bq %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
