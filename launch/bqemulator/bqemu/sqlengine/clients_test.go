package sqlengine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
)

// TestBQCLI runs the real bq CLI, unmodified and with no flag but --api and
// --project_id (the guide's queries add --oauth_access_token), against an
// emulator: ls, show, head (with -c), query (GoogleSQL and bq's legacy
// default) with the querying guide's SQL, and ls -j.
func TestBQCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the bq CLI; skipped with -short")
	}
	bqPath := emulators.BQCLI(t)
	e := newEnv(t)
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		return emulators.RunBQ(t, bqPath, e.ts.RESTEndpoint, project, args...)
	}
	// The guide's queries, many, give the token by flag (bq then starts
	// no gcloud); every other command gives it as the docs do.
	query := func(t *testing.T, args ...string) string {
		t.Helper()
		return emulators.RunBQTokenFlag(t, bqPath, e.ts.RESTEndpoint, project, args...)
	}
	jsonRows := func(t *testing.T, out string) []map[string]any {
		t.Helper()
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("bq output is not a JSON array: %v\n%s", err, out)
		}
		return rows
	}

	// Each bq run is a fresh Python process that spends seconds starting:
	// the reading commands run side by side, then ls -j, which lists the
	// jobs the queries ran.
	t.Run("reads", func(t *testing.T) { testBQCLIReads(t, run, query, jsonRows) })
	t.Run("ls -j", func(t *testing.T) {
		if out := run(t, "ls", "-j"); !strings.Contains(out, "SUCCESS") {
			t.Errorf("bq ls -j:\n%s", out)
		}
	})
}

// testBQCLIReads runs bq's reading commands, each a parallel subtest.
func testBQCLIReads(t *testing.T, run, query func(*testing.T, ...string) string, jsonRows func(*testing.T, string) []map[string]any) {
	t.Run("ls", func(t *testing.T) {
		t.Parallel()
		out := run(t, "ls", "vitals")
		if !strings.Contains(out, "readings") || !strings.Contains(out, "readings_hourly") {
			t.Errorf("bq ls vitals:\n%s", out)
		}
	})
	t.Run("show", func(t *testing.T) {
		t.Parallel()
		var md struct {
			NumRows string `json:"numRows"`
			Schema  struct {
				Fields []struct{ Name string } `json:"fields"`
			} `json:"schema"`
		}
		out := run(t, "show", "--format=json", "vitals.readings")
		if err := json.Unmarshal([]byte(out), &md); err != nil {
			t.Fatalf("bq show: %v\n%s", err, out)
		}
		if md.NumRows != "13" || len(md.Schema.Fields) != 9 {
			t.Errorf("bq show: numRows %s, %d fields; want 13 and 9", md.NumRows, len(md.Schema.Fields))
		}
	})
	t.Run("head", func(t *testing.T) {
		t.Parallel()
		if rows := jsonRows(t, run(t, "head", "-n", "100", "--format=json", "vitals.readings")); len(rows) != 13 {
			t.Errorf("bq head: %d rows, want 13", len(rows))
		}
	})
	t.Run("head -c", func(t *testing.T) {
		t.Parallel()
		rows := jsonRows(t, run(t, "head", "-n", "3", "-c", "sensor_id,reading_id", "--format=json", "vitals.readings"))
		if len(rows) != 3 {
			t.Fatalf("bq head -c: %d rows, want 3", len(rows))
		}
		for _, r := range rows {
			if len(r) != 2 || r["sensor_id"] == nil || r["reading_id"] == nil {
				t.Errorf("bq head -c sensor_id,reading_id: row %v", r)
			}
		}
	})
	t.Run("query with the querying guide's SQL", func(t *testing.T) {
		t.Parallel()
		b, err := os.ReadFile("../../../../docs/guide/querying.md")
		if err != nil {
			t.Fatal(err)
		}
		blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(b), -1)
		if len(blocks) == 0 {
			t.Fatal("no sql blocks in docs/guide/querying.md")
		}
		for i, m := range blocks {
			sql := strings.NewReplacer("PROJECT", project, "`P.", "`"+project+".").Replace(m[1])
			if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(sql)), "ALTER") {
				continue // changes the table: TestAlterTable runs it
			}
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				out := query(t, "query", "--use_legacy_sql=false", "--format=json", sql)
				if rows := jsonRows(t, out); len(rows) == 0 {
					t.Errorf("README query %d returned no rows:\n%s", i, sql)
				}
			})
		}
	})
	t.Run("query: the dedup keeps each reading once", func(t *testing.T) {
		t.Parallel()
		rows := jsonRows(t, run(t, "query", "--use_legacy_sql=false", "--format=json",
			"SELECT * EXCEPT (n) FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY reading_id ORDER BY ingested_at DESC) AS n "+
				"FROM `"+project+".vitals.readings` WHERE event_timestamp >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY)) WHERE n = 1"))
		seen := map[any]bool{}
		for _, r := range rows {
			if seen[r["reading_id"]] {
				t.Errorf("reading %v twice", r["reading_id"])
			}
			seen[r["reading_id"]] = true
		}
		if len(rows) != 6 {
			t.Errorf("%d rows, want 6", len(rows))
		}
	})
	t.Run("query with bq's defaults", func(t *testing.T) {
		t.Parallel()
		rows := jsonRows(t, run(t, "query", "--format=json", "SELECT COUNT(*) AS n, COUNT(DISTINCT reading_id) AS d FROM vitals.readings"))
		if fmt.Sprint(rows) != "[map[d:7 n:13]]" {
			t.Errorf("rows = %v, want n=13 d=7", rows)
		}
	})
}

// TestNodeClient runs Google's Node.js client (launch/bqemulator/bqemu/nodeclient,
// pinned with a lockfile) against an emulator: create table, insert,
// getRows and query.
func TestNodeClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node; skipped with -short")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (the Node.js client test needs Node 18+ and npm)")
	}
	dir, err := filepath.Abs("../nodeclient")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@google-cloud", "bigquery")); err != nil {
		t.Skipf("the Node.js client is not installed: run npm ci --prefix %s (.ci/run does when npm is present)", dir)
	}
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.js", project)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BIGQUERY_EMULATOR_HOST="+e.ts.RESTEndpoint)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.js: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var got struct {
		PrimaryKey           []string  `json:"primaryKey"`
		RowsRead             int       `json:"rowsRead"`
		Count                int       `json:"count"`
		Distinct             int       `json:"distinct"`
		DedupHeartRates      []float64 `json:"dedupHeartRates"`
		DedupTimestampIsDate bool      `json:"dedupTimestampIsDate"`
		BadQuery             string    `json:"badQuery"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("node client output: %v\n%s", err, stdout.String())
	}
	if fmt.Sprint(got.PrimaryKey) != "[reading_id]" {
		t.Errorf("table constraints after createTable = %v", got.PrimaryKey)
	}
	if got.RowsRead != 6 || got.Count != 6 || got.Distinct != 3 {
		t.Errorf("getRows %d, COUNT(*) %d, COUNT(DISTINCT) %d; want 6, 6, 3", got.RowsRead, got.Count, got.Distinct)
	}
	if fmt.Sprint(got.DedupHeartRates) != "[80 81 82]" || !got.DedupTimestampIsDate {
		t.Errorf("dedup query = %v (timestamps typed: %v), want the later copies [80 81 82]", got.DedupHeartRates, got.DedupTimestampIsDate)
	}
	if !strings.Contains(got.BadQuery, "Unrecognized name: nope") {
		t.Errorf("bad query error = %q", got.BadQuery)
	}
}
