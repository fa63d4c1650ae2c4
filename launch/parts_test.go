package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// partsInput writes six hours of readings from five sensors every 20 s,
// roughly in event-time order as a historical export is: some readings come
// a few lines late (past the next hour's first readings), some are
// duplicates or lack a value to impute, some lines are bad. The lines are
// spread over two plain files and a gzip file; a sixth sensor's first hour
// is in a gzip file cut short. shuffled puts them in random
// order instead.
func partsInput(t *testing.T, shuffled bool) string {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var out []string
	var late []string
	for s := 0; s < 6*3600; s += 20 {
		for sensor := 1; sensor <= 5; sensor++ {
			ts := start.Add(time.Duration(s) * time.Second)
			var hr any = 60 + (s/20+sensor)%30
			if rng.Intn(7) == 0 {
				hr = nil // imputed
			}
			l := line(fmt.Sprintf("w-%d", sensor), ts.Format(time.RFC3339), hr)
			switch rng.Intn(40) {
			case 0:
				late = append(late, l) // comes after the next few lines
				continue
			case 1:
				out = append(out, l) // a duplicate
			case 2:
				out = append(out, `{"sensor_id":"w-9","timestamp":"soon"}`)
			}
			out = append(out, l)
			if len(late) > 0 && rng.Intn(3) == 0 {
				out = append(out, late...)
				late = late[:0]
			}
		}
	}
	out = append(out, late...)
	if shuffled {
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	dir := t.TempDir()
	third := len(out) / 3
	write := func(name string, lines []string) {
		text := strings.Join(lines, "\n") + "\n"
		if strings.HasSuffix(name, ".gz") {
			f, err := os.Create(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			zw := gzip.NewWriter(f)
			if _, err := zw.Write([]byte(text)); err != nil {
				t.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.jsonl", out[:third])
	write("b.jsonl.gz", out[third:2*third])
	write("c.jsonl", out[2*third:])
	// A gzip file cut short, first in the run's order: its lines up to the
	// cut are read, and the rest is dead-lettered once, whatever the parts.
	var cut []string
	for s := 0; s < 3600; s += 10 {
		cut = append(cut, line("w-7", start.Add(time.Duration(s)*time.Second).Format(time.RFC3339), 70))
	}
	write("0-cut.jsonl.gz", cut)
	gz := filepath.Join(dir, "0-cut.jsonl.gz")
	b, err := os.ReadFile(gz)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gz, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLocalPartsEqualOneJob: a local batch cut into parts (--local_part_mb)
// of whole hours, or of shares of an hour's identities, leaves exactly the
// Bigtable cells, BigQuery readings and rollup rows, and ledger figures,
// that the input run as one job leaves; so does shuffled input, which has
// no place to cut between hours and splits by identity alone.
func TestLocalPartsEqualOneJob(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	host := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	ctx := context.Background()
	client, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	type state struct {
		cells, readings, rollups []string
		ledger                   string
	}
	run := func(t *testing.T, in, name, partMB string) (state, string) {
		t.Helper()
		summary := filepath.Join(t.TempDir(), "summary.json")
		r := runLauncher(t, bqEnv(host, bq), "--source=files", "--input="+in+"/*", "--bigtable_project=p",
			"--bigtable_instance=i", "--bigtable_table="+name, "--bigquery_dataset="+name,
			"--dead_letter="+t.TempDir(), "--local_part_mb="+partMB, "--summary_json="+summary)
		if r.code != 0 {
			t.Fatalf("--local_part_mb=%s: exit %d\n%s\n%s", partMB, r.code, r.stdout, r.stderr)
		}
		l := readSummary(t, summary)
		st := state{cells: dump(t, host, name), ledger: fmt.Sprintf("read %d, rejected %d, duplicates %d, dead-lettered %d, balanced %v",
			l.Read, l.Rejected, l.Duplicates, l.DeadLettered(), l.Balanced)}
		for _, tbl := range []string{"readings", "readings_hourly"} {
			rows, err := emulators.ReadBigQuery(ctx, client.Dataset(name).Table(tbl))
			if err != nil {
				t.Fatal(err)
			}
			var text []string
			for _, row := range rows {
				delete(row, "ingested_at") // the times of the write
				delete(row, "fired_at")
				text = append(text, fmt.Sprint(row))
			}
			slices.Sort(text)
			if tbl == "readings" {
				st.readings = text
			} else {
				st.rollups = text
			}
		}
		return st, r.stderr
	}
	same := func(t *testing.T, what string, got, want state) {
		t.Helper()
		for _, c := range []struct {
			what      string
			got, want []string
		}{
			{"Bigtable cells", got.cells, want.cells},
			{"BigQuery readings", got.readings, want.readings},
			{"BigQuery rollup rows", got.rollups, want.rollups},
		} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("%s differ: %d %s, %d as one job", c.what, len(c.got), what, len(c.want))
				for i := range min(len(c.got), len(c.want)) {
					if c.got[i] != c.want[i] {
						t.Errorf("first difference:\n %s: %s\n as one job: %s", what, c.got[i], c.want[i])
						break
					}
				}
			}
		}
		if got.ledger != want.ledger {
			t.Errorf("ledger %s: %s; as one job: %s", what, got.ledger, want.ledger)
		}
	}
	jobs := func(t *testing.T, stderr, notice string) string {
		t.Helper()
		m := regexp.MustCompile(`runs as (\d+) jobs, one after another .*: (.*)`).FindStringSubmatch(stderr)
		if m == nil || !strings.Contains(m[2], notice) {
			t.Fatalf("stderr lacks the notice that the input runs as parts (%s):\n%s", notice, stderr)
		}
		return m[1]
	}
	in := partsInput(t, false)
	one, _ := run(t, in, "one", "0")
	if len(one.cells) == 0 || len(one.readings) == 0 || len(one.rollups) < 6*5 {
		t.Fatalf("one job wrote %d cells, %d readings, %d rollup rows", len(one.cells), len(one.readings), len(one.rollups))
	}
	t.Logf("one job: %s", one.ledger)
	t.Run("parts of whole hours", func(t *testing.T) {
		// An hour is about 90 kB: parts of a few hours, under the 300 kB asked, and no shares.
		parted, stderr := run(t, in, "parted", "0.3")
		n := jobs(t, stderr, "parts of whole hours")
		if strings.Contains(stderr, "shares") {
			t.Errorf("hours under --local_part_mb were split into shares:\n%s", stderr)
		}
		t.Logf("%s parts", n)
		same(t, "in parts", parted, one)
	})
	t.Run("hours over the part size in shares of their identities", func(t *testing.T) {
		shared, stderr := run(t, in, "shared", "0.03")
		n := jobs(t, stderr, "split into shares of their identities")
		if !strings.Contains(stderr, "the readings of share 2 of ") {
			t.Errorf("stderr lacks a part's share:\n%s", stderr)
		}
		t.Logf("%s parts", n)
		same(t, "in shares", shared, one)
	})
	t.Run("shuffled input in shares of its identities", func(t *testing.T) {
		// The same lines in random order: no place to cut between hours,
		// so the whole input splits by identity, and the stores end as
		// after the ordered input as one job.
		shuffled, stderr := run(t, partsInput(t, true), "shuffled", "0.1")
		jobs(t, stderr, "hours overlap throughout")
		jobs(t, stderr, "split into shares of their identities")
		same(t, "shuffled, in shares", shuffled, one)
	})
}
