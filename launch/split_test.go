package main

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// storeState is what a run leaves in the stores: every Bigtable cell, the
// BigQuery readings by reading_id and the hourly rollups by sensor and
// hour (their values without the time they were written), and the number
// of rows of each BigQuery table.
type storeState struct {
	cells                   []string
	readings                map[string]string
	readingRows             int
	hourly                  map[string]string
	hourlyRows              int
	withBigQuery, deadValid bool
}

// captureState reads the state of table and dataset (dataset "" for none).
func captureState(t *testing.T, bt string, bq *bqemu.TestServer, table, dataset string) storeState {
	t.Helper()
	s := storeState{cells: dump(t, bt, table)}
	if dataset != "" {
		s.withBigQuery = true
		s.readings, s.readingRows = bqReadingRows(t, bq, dataset)
		_, s.hourlyRows = bqLatest(t, bq, dataset, "readings_hourly", "fired_at",
			func(row map[string]bigquery.Value) string {
				return fmt.Sprint(row["sensor_id"], " ", row["window_start"])
			},
			func(map[string]bigquery.Value) string { return "" })
		s.hourly = bqHourly(t, bq, dataset)
	}
	return s
}

// diff says how got differs from want, "" when it does not.
func (got storeState) diff(want storeState) string {
	var out []string
	if d := cellDiff(got.cells, want.cells); d > 0 || len(got.cells) != len(want.cells) {
		out = append(out, fmt.Sprintf("Bigtable: %d cells, want %d, %d differ:\n%s", len(got.cells), len(want.cells), d, firstDiffs(got.cells, want.cells, 8)))
	}
	if want.withBigQuery {
		if got.readingRows != len(got.readings) {
			out = append(out, fmt.Sprintf("BigQuery readings: %d rows for %d reading_ids", got.readingRows, len(got.readings)))
		}
		if d := mapDiff(got.readings, want.readings); d > 0 {
			out = append(out, fmt.Sprintf("BigQuery readings: %d of %d differ", d, len(want.readings)))
		}
		if got.hourlyRows != len(got.hourly) {
			out = append(out, fmt.Sprintf("BigQuery hourly rollups: %d rows for %d sensor-hours", got.hourlyRows, len(got.hourly)))
		}
		if d := mapDiff(got.hourly, want.hourly); d > 0 {
			out = append(out, fmt.Sprintf("BigQuery hourly rollups: %d differ\n got: %v\nwant: %v", d, got.hourly, want.hourly))
		}
	}
	return strings.Join(out, "\n")
}

// deadLetterSet is the dead letters under dir as sorted "sink reason
// payload" lines: what was rejected and why, not where or when.
func deadLetterSet(t *testing.T, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, dir := range dirs {
		for _, d := range deadLetters(t, dir) {
			out = append(out, d["sink"]+" "+d["reason"]+" "+d["payload"])
		}
	}
	sort.Strings(out)
	return out
}

// acceptanceLines are the lines of the end-to-end tests' acceptance input
// (writeInput): the plain file's, then the gzipped file's.
func acceptanceLines(t *testing.T) []string {
	t.Helper()
	dir := writeInput(t)
	var out []string
	for _, name := range []string{"a.jsonl", "b.jsonl.gz"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = f
		if strings.HasSuffix(name, ".gz") {
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
		f.Close()
	}
	return out
}

// writeLines writes lines as one file in a new folder and returns the
// folder.
func writeLines(t *testing.T, lines []string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "part.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cutLines cuts lines into n consecutive non-empty pieces at random places.
func cutLines(rng *rand.Rand, lines []string, n int) [][]string {
	cuts := map[int]bool{}
	for len(cuts) < n-1 {
		cuts[1+rng.IntN(len(lines)-1)] = true
	}
	at := []int{0}
	for c := range cuts {
		at = append(at, c)
	}
	sort.Ints(at)
	at = append(at, len(lines))
	var pieces [][]string
	for i := 0; i+1 < len(at); i++ {
		pieces = append(pieces, lines[at[i]:at[i+1]])
	}
	return pieces
}

// batchArgs are a batch's flags into table and dataset.
func batchArgs(input, table, dataset, dl string, extra ...string) []string {
	return append([]string{"--source=files", "--input=" + input, "--bigtable_project=p", "--bigtable_instance=i",
		"--bigtable_table=" + table, "--bigquery_dataset=" + dataset, "--dead_letter=" + dl, "--progress_interval=0"}, extra...)
}

// TestSplitBatchesEqualOneBatch cuts the acceptance input into 4 pieces
// at random lines (hours split between pieces) and runs each as its own
// batch into the same tables, in order and shuffled: every Bigtable cell
// (imputed values, flags, the hourly family), every BigQuery reading and
// rollup row, and the dead letters equal one batch's over the whole input.
func TestSplitBatchesEqualOneBatch(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	env := bqEnv(bt, bq)
	lines := acceptanceLines(t)

	oneDL := t.TempDir()
	if r := runLauncher(t, env, batchArgs(writeLines(t, lines)+"/*", "whole", "whole", oneDL)...); r.code != 0 {
		t.Fatalf("one batch: exit %d\n%s", r.code, r.stderr)
	}
	want := captureState(t, bt, bq, "whole", "whole")
	wantDead := deadLetterSet(t, oneDL)
	if len(want.readings) != 304 || len(wantDead) != 4 {
		t.Fatalf("one batch: %d readings, %d dead letters; want 304 and 4", len(want.readings), len(wantDead))
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	pieces := cutLines(rng, lines, 4)
	for _, order := range []struct {
		name string
		perm []int
	}{{"in order", []int{0, 1, 2, 3}}, {"shuffled", rng.Perm(4)}} {
		t.Run(order.name, func(t *testing.T) {
			table := strings.ReplaceAll(order.name, " ", "_")
			var dls []string
			for _, i := range order.perm {
				dl := t.TempDir()
				dls = append(dls, dl)
				// A piece may hold only rejected lines (the input's last
				// two are): it must still run, and its dead letters count.
				r := runLauncher(t, env, batchArgs(writeLines(t, pieces[i])+"/*", table, table, dl, "--allow_all_rejected")...)
				if r.code != 0 {
					t.Fatalf("piece %d (%d lines): exit %d\n%s\n%s", i, len(pieces[i]), r.code, r.stdout, r.stderr)
				}
			}
			sizes := make([]int, 4)
			for i, p := range pieces {
				sizes[i] = len(p)
			}
			t.Logf("pieces of %v lines, run in order %v", sizes, order.perm)
			if d := captureState(t, bt, bq, table, table).diff(want); d != "" {
				t.Errorf("not the one batch's state:\n%s", d)
			}
			if got := deadLetterSet(t, dls...); strings.Join(got, "\n") != strings.Join(wantDead, "\n") {
				t.Errorf("dead letters\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantDead, "\n"))
			}
		})
	}
}

// TestBatchAfterStreamEqualsOneBatch streams the first half of an input
// (the acceptance readings moved to two and three hours ago, so their
// hours close) and runs the rest as a batch into the same tables: the
// stores then hold what one batch over the whole input leaves.
func TestBatchAfterStreamEqualsOneBatch(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t)
	ps := sharedPubSub.HostPort(t)
	bq := bqemu.StartServerForTest(t)
	env := append(bqEnv(bt, bq), "PUBSUB_EMULATOR_HOST="+ps)

	h := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	ms := func(d time.Duration) int64 { return h.Add(d).UnixMilli() }
	var all []streamMsg
	add := func(sensor string, d time.Duration, hr any) { all = append(all, msg(line(sensor, ms(d), hr), ms(d))) }
	add("p-1", 0, nil)
	add("p-1", 30*time.Minute+500*time.Millisecond, 70)
	add("p-1", time.Hour-time.Millisecond, nil)
	add("p-1", 30*time.Minute+500*time.Millisecond, 70) // a duplicate
	add("p-2", time.Hour, nil)
	for i := 0; i < 40; i++ {
		var hr any = 60 + i%10
		if i%3 == 0 {
			hr = nil
		}
		add("p-4", 20*time.Minute+time.Duration(i)*time.Second, hr)
	}
	payloads := func(msgs []streamMsg) []string {
		var out []string
		for _, m := range msgs {
			out = append(out, m.payload)
		}
		return out
	}
	// The first half ends inside p-4's hour.
	half := len(all) / 2
	first, rest := all[:half], all[half:]

	if r := runLauncher(t, env, batchArgs(writeLines(t, payloads(all))+"/*", "whole", "whole", t.TempDir())...); r.code != 0 {
		t.Fatalf("one batch: exit %d\n%s", r.code, r.stderr)
	}
	want := captureState(t, bt, bq, "whole", "whole")
	if r := runLauncher(t, env, batchArgs(writeLines(t, payloads(first))+"/*", "first", "first", t.TempDir())...); r.code != 0 {
		t.Fatalf("batch of the first half: exit %d\n%s", r.code, r.stderr)
	}
	wantFirst := captureState(t, bt, bq, "first", "first")

	f := newPubSub(t, ps, "half")
	f.publish(t, first...)
	job := startStream(t, env, streamArgs(f.sub, "mixed", t.TempDir(), "--allowed_lateness=6h", "--bigquery_dataset=mixed")...)
	eventually(t, 90*time.Second, job, func() (bool, string) {
		d := captureState(t, bt, bq, "mixed", "mixed").diff(wantFirst)
		return d == "", "the stream's tables equal to the batch of the first half:\n" + d
	})
	if code := job.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, job.stderr.String())
	}

	if r := runLauncher(t, env, batchArgs(writeLines(t, payloads(rest))+"/*", "mixed", "mixed", t.TempDir())...); r.code != 0 {
		t.Fatalf("batch of the rest: exit %d\n%s", r.code, r.stderr)
	}
	if d := captureState(t, bt, bq, "mixed", "mixed").diff(want); d != "" {
		t.Errorf("stream then batch: not the one batch's state:\n%s", d)
	}
}
