package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// deleteBigtableTable deletes table from the Bigtable emulator's p/i.
func deleteBigtableTable(t *testing.T, host, table string) {
	t.Helper()
	conn, err := grpc.NewClient(host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ac, err := bigtable.NewAdminClient(context.Background(), "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	defer ac.Close()
	if err := ac.DeleteTable(context.Background(), table); err != nil {
		t.Fatalf("delete table %s: %v", table, err)
	}
	if got := dump(t, host, table); len(got) != 0 {
		t.Fatalf("table %s still has %d cells after its deletion", table, len(got))
	}
}

// TestRebuildBigtableFromBigQuery: a batch writes both stores; the
// Bigtable table is deleted; a batch with --source=bigquery reads the
// readings back from BigQuery (Storage Read API, in several streams) and
// rebuilds the table cell for cell, rollups and imputed values included,
// and its ledger balances. --from_time and --to_time rebuild only the
// hours they bound.
func TestRebuildBigtableFromBigQuery(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	env := bqEnv(host, bq)
	r := runLauncher(t, env, "--source=files", "--input="+writeInput(t)+"/*", "--bigtable_project=p",
		"--bigtable_instance=i", "--bigquery_dataset=vitals", "--dead_letter="+t.TempDir())
	if r.code != 0 {
		t.Fatalf("batch: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := dump(t, host, "patient_vitals")
	if len(want) == 0 {
		t.Fatal("the batch wrote no cells")
	}
	imputed, rollups := 0, 0
	for _, c := range want {
		imputed += strings.Count(c, "meta:heart_rate_imputed@") * strings.Count(c, "=true")
		rollups += strings.Count(c, " hourly:")
	}
	if imputed == 0 || rollups == 0 {
		t.Fatalf("the input makes %d imputed values and %d rollup cells; want some of each", imputed, rollups)
	}

	t.Run("keys compare --against_bigquery", func(t *testing.T) {
		compare := []string{"compare", "--bigtable_project=p", "--bigtable_instance=i", "--spec=vitals", "--against_bigquery=vitals.readings"}
		r := runKeysEnv(t, env, compare...)
		if r.code != 0 || !strings.Contains(r.stdout, "; equal") || !strings.Contains(r.stdout, "bigquery:p:vitals.readings") ||
			strings.Contains(r.stdout, "rollups not compared") {
			t.Fatalf("keys compare of the table with BigQuery: exit %d; want 0, equal, rollups compared\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		r = runKeysEnv(t, env, "compare", "--bigtable_project=p", "--bigtable_instance=i", "--spec=vitals", "--against_bigquery=vitals.nope")
		if r.code != 1 || !strings.Contains(r.stderr, "bigquery table p:vitals.nope does not exist") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("keys compare against a missing BigQuery table: exit %d, want 1 and one line naming the table\nstderr:\n%s", r.code, r.stderr)
		}
		// Delete one reading (p-4 at 10:00:05Z) from Bigtable: BigQuery
		// holds it alone.
		var row string
		for _, cell := range want {
			if key, _, _ := strings.Cut(cell, " "); strings.HasPrefix(key, "p-4#") && (strings.HasSuffix(key, "2026030110") || strings.Contains(key, "2026-03-01T10")) {
				row = key
				break
			}
		}
		if row == "" {
			t.Fatal("no row of p-4's hour 10 in the table")
		}
		c := emulators.BigtableClient(t, host, "p", "i")
		defer c.Close()
		deleteVitalsReading(t, c, "patient_vitals", row, 1772359205000) // 2026-03-01T10:00:05Z
		r = runKeysEnv(t, env, compare...)
		if r.code != 1 || !strings.Contains(r.stdout, "p-4 2026-03-01T10:00:00Z") || !strings.Contains(r.stdout, "reading 2026-03-01T10:00:05Z only in B") {
			t.Fatalf("keys compare after deleting a reading of p-4 from Bigtable: exit %d, want 1 naming p-4's hour and the reading at 10:00:05 only in BigQuery\nstdout:\n%s\nstderr:\n%s",
				r.code, r.stdout, r.stderr)
		}
		t.Logf("keys compare after the deletion:\n%s", r.stdout)

		// Another hour's rollup count changed in Bigtable.
		var other, at string
		for _, cell := range want {
			key, rest, _ := strings.Cut(cell, " ")
			if key != row && strings.HasPrefix(rest, "hourly:count@") {
				other, at = key, strings.TrimPrefix(rest, "hourly:count@")
				break
			}
		}
		micros, err := strconv.ParseInt(at[:strings.IndexByte(at, '=')], 10, 64)
		if other == "" || err != nil {
			t.Fatalf("no rollup count cell in another row than %s (%v)", row, err)
		}
		m := bigtable.NewMutation()
		m.Set("hourly", "count", bigtable.Timestamp(micros), []byte("999"))
		if err := c.Open("patient_vitals").Apply(context.Background(), other, m); err != nil {
			t.Fatal(err)
		}
		r = runKeysEnv(t, env, compare...)
		if r.code != 1 || !strings.Contains(r.stdout, "2 sensor-hours differ") || !strings.Contains(r.stdout, "1 with another rollup") ||
			!strings.Contains(r.stdout, "rollup: count 999 in A") {
			t.Fatalf("keys compare after changing a rollup count in Bigtable: exit %d, want 1 naming the rollup's count\nstdout:\n%s\nstderr:\n%s",
				r.code, r.stdout, r.stderr)
		}
	})

	t.Run("the whole table", func(t *testing.T) {
		deleteBigtableTable(t, host, "patient_vitals")
		dl := t.TempDir()
		summary := filepath.Join(t.TempDir(), "summary.json")
		r := runLauncher(t, env, "--source=bigquery", "--from_table=vitals.readings", "--bigtable_project=p",
			"--bigtable_instance=i", "--dead_letter="+dl, "--summary_json="+summary)
		if r.code != 0 {
			t.Fatalf("rebuild: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		got := dump(t, host, "patient_vitals")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the rebuilt table differs from the one the batch wrote:\n%s", rebuildDiff(want, got))
		}
		l := readSummary(t, summary)
		if l.Read != 304 || l.Rejected != 0 || len(deadLetters(t, dl)) != 0 {
			t.Errorf("ledger: read %d, rejected %d, %d dead letters; want 304 readings read back, none rejected\n%s", l.Read, l.Rejected, len(deadLetters(t, dl)), r.stdout)
		}
		if strings.Contains(r.stdout, "readings_hourly") || strings.Contains(r.stdout, "bigquery ") {
			t.Errorf("the rebuild wrote BigQuery without --bigquery_dataset:\n%s", r.stdout)
		}
	})

	t.Run("a missing table is refused before the job", func(t *testing.T) {
		r := runLauncher(t, env, "--source=bigquery", "--from_table=vitals.nope", "--bigtable_project=p",
			"--bigtable_instance=i", "--dead_letter="+t.TempDir())
		if r.code == 0 || !strings.Contains(r.stderr, "--from_table: bigquery table p:vitals.nope does not exist") {
			t.Errorf("exit %d; want a failure naming the table\n%s", r.code, r.stderr)
		}
	})

	t.Run("an event-time range", func(t *testing.T) {
		deleteBigtableTable(t, host, "patient_vitals")
		r := runLauncher(t, env, "--source=bigquery", "--from_table=p:vitals.readings", "--bigtable_project=p",
			"--bigtable_instance=i", "--dead_letter="+t.TempDir(), "--from_time=2026-03-01T11:00:00Z", "--to_time=2026-03-01T12:00:00Z")
		if r.code != 0 {
			t.Fatalf("rebuild: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		var wantHour []string
		for _, c := range want {
			if strings.Contains(c, "#2026030111 ") || strings.Contains(c, "#2026-03-01T11") {
				wantHour = append(wantHour, c)
			}
		}
		got := dump(t, host, "patient_vitals")
		if len(wantHour) == 0 || strings.Join(got, "\n") != strings.Join(wantHour, "\n") {
			t.Errorf("the 11h rebuild differs from the batch's 11h rows:\n%s", rebuildDiff(wantHour, got))
		}
	})
}

// rebuildDiff lists the cells only one side has.
func rebuildDiff(want, got []string) string {
	in := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, c := range want {
		if !g[c] {
			fmt.Fprintf(&b, "  missing: %s\n", c)
		}
	}
	for _, c := range got {
		if !w[c] {
			fmt.Fprintf(&b, "  extra:   %s\n", c)
		}
	}
	return b.String()
}

// bigQueryDead finds the BigQuery readings written and dead-lettered in a
// batch's ledger.
var bigQueryDead = regexp.MustCompile(`bigquery [^ ]+: readings routed \d+ = written (\d+) \+ dead-lettered (\d+)`)

// TestRebuildEveryBuiltinSpecFromBigQuery: for each built-in spec with a
// BigQuery table, a batch of its sample writes both stores, its Bigtable
// tables are deleted, and --source=bigquery rebuilds them cell for cell.
func TestRebuildEveryBuiltinSpecFromBigQuery(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	env := bqEnv(host, bq)
	for _, name := range schemas.BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			spec, err := schemas.BuiltinSpec(name)
			if err != nil {
				t.Fatal(err)
			}
			if spec.BigQuery == nil {
				t.Skip("no bigquery section")
			}
			method := "upsert"
			if len(spec.BigQuery.PrimaryKey) == 0 {
				method = "storage_write"
			}
			instance := strings.ReplaceAll(name, "_", "-")
			batch := runLauncher(t, env, "--source=files", "--spec="+name, "--input=../testdata/samples/"+name+".jsonl",
				"--bigtable_project=p", "--bigtable_instance="+instance, "--bigquery_dataset="+name,
				"--bigquery_write_method="+method, "--dead_letter="+t.TempDir())
			if batch.code != 0 {
				t.Fatalf("batch: exit %d\n%s\n%s", batch.code, batch.stdout, batch.stderr)
			}
			dumpAll := func() []string {
				var out []string
				for _, tbl := range spec.Bigtable.Tables {
					for _, c := range emulators.DumpBigtable(t, host, "p", instance, tbl.Name) {
						out = append(out, tbl.Name+" "+c)
					}
				}
				return out
			}
			want := dumpAll()
			if len(want) == 0 {
				t.Fatal("the batch wrote no cells")
			}
			conn, err := grpc.NewClient(host, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			ac, err := bigtable.NewAdminClient(context.Background(), "p", instance, option.WithGRPCConn(conn))
			if err != nil {
				t.Fatal(err)
			}
			for _, tbl := range spec.Bigtable.Tables {
				if err := ac.DeleteTable(context.Background(), tbl.Name); err != nil {
					t.Fatalf("delete %s: %v", tbl.Name, err)
				}
			}
			ac.Close()
			r := runLauncher(t, env, "--source=bigquery", "--spec="+name, "--from_table="+name+"."+spec.BigQuery.Table,
				"--bigtable_project=p", "--bigtable_instance="+instance, "--dead_letter="+t.TempDir())
			if r.code != 0 {
				t.Fatalf("rebuild: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			got := dumpAll()
			m := bigQueryDead.FindStringSubmatch(batch.stdout)
			if m == nil {
				t.Fatalf("the batch's ledger has no BigQuery readings line:\n%s", batch.stdout)
			}
			if m[1] == "0" {
				if len(got) != 0 {
					t.Errorf("BigQuery took no reading, yet the rebuild wrote %d cells", len(got))
				}
				return
			}
			if m[2] != "0" {
				// Readings BigQuery did not take (outside its writable
				// window, with stores_may_differ) cannot come back from it:
				// the rebuild holds the others, cell for cell.
				kept := map[string]bool{}
				for _, c := range want {
					kept[c] = true
				}
				for _, c := range got {
					if !kept[c] {
						t.Errorf("the rebuild wrote a cell the batch did not: %s", c)
					}
				}
				if len(got) == 0 {
					t.Errorf("the rebuild wrote nothing, though BigQuery took some readings:\n%s", batch.stdout)
				}
				return
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("the rebuilt tables differ from the batch's:\n%s", rebuildDiff(want, got))
			}
		})
	}
}
