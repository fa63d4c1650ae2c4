package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// TestTwoStreamsOnOneSubscription runs two stream launchers on one
// subscription, as a user who scales out by hand does: Pub/Sub splits the
// readings between them, so each builds every hour from a share. Each
// hour's final firings read the hour back from Bigtable and merge what the
// other stream stored (--merge_stored, the default), so once the hours
// close the Bigtable table, the BigQuery readings and the hourly rollups
// equal one batch over the same readings: counts, imputed values and their
// flags included.
func TestTwoStreamsOnOneSubscription(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t) // skips under -short
	ps := sharedPubSub.HostPort(t)
	bq := bqemu.StartServerForTest(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + bt, "PUBSUB_EMULATOR_HOST=" + ps,
		"BIGQUERY_EMULATOR_HOST=" + strings.TrimPrefix(bq.RESTEndpoint, "http://"), "BIGQUERY_STORAGE_EMULATOR_HOST=" + bq.GRPCAddr}

	ref := batchOfRestartWorkload(t, env, bt, bq, "shared_batch")
	all, bad, good, want, wantBQ, wantHourly := ref.all, ref.bad, ref.good, ref.cells, ref.bq, ref.hourly

	f := newPubSub(t, ps, "shared")
	dl := t.TempDir()
	args := streamArgs(f.sub, "shared", dl, "--allowed_lateness=6h", "--bigquery_dataset=shared")
	sums := []string{filepath.Join(t.TempDir(), "a.json"), filepath.Join(t.TempDir(), "b.json")}
	// One after the other, so that the second does not create the tables
	// while the first does; both reading before anything is published.
	var jobs []*streamJob
	for _, sum := range sums {
		j := startStream(t, env, append(args, "--summary_json="+sum)...)
		eventually(t, 120*time.Second, j, func() (bool, string) {
			return strings.Contains(j.stderr.String(), "progress "), "the stream's first progress line"
		})
		jobs = append(jobs, j)
	}
	published := make(chan error, 1)
	go f.sendPaced(all, 100, 150*time.Millisecond, published)
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	both := func(cond func() (bool, string)) func() (bool, string) {
		return func() (bool, string) {
			for _, j := range jobs {
				if gone, out := j.exited(); gone {
					return false, out
				}
			}
			return cond()
		}
	}
	// Both streams' hours close: nothing read is left in an open hour.
	eventually(t, 150*time.Second, jobs[0], both(func() (bool, string) {
		for i, j := range jobs {
			if open := openHours(j.stderr.String()); open != "0" {
				return false, fmt.Sprintf("stream %d: %s readings in open hours", i, open)
			}
		}
		return true, ""
	}))
	eventually(t, 60*time.Second, jobs[0], both(func() (bool, string) {
		got := dump(t, bt, "shared")
		diff := cellDiff(got, want)
		return diff == 0, fmt.Sprintf("the two streams' table equal to the batch table: %d of %d cells differ\n%s", diff, len(want), firstDiffs(got, want, 10))
	}))
	eventually(t, 60*time.Second, jobs[0], both(func() (bool, string) {
		got := bqReadings(t, bq, "shared")
		return fmt.Sprint(got) == fmt.Sprint(wantBQ), fmt.Sprintf("BigQuery readings (collapsed on reading_id) equal to the batch's: %d of %d differ", mapDiff(got, wantBQ), len(wantBQ))
	}))
	eventually(t, 60*time.Second, jobs[0], both(func() (bool, string) {
		got := bqHourly(t, bq, "shared")
		return fmt.Sprint(got) == fmt.Sprint(wantHourly), fmt.Sprintf("readings_hourly (latest firing per sensor and hour) equal to the batch's: %d of %d differ", mapDiff(got, wantHourly), len(wantHourly))
	}))
	eventually(t, 30*time.Second, jobs[0], both(func() (bool, string) {
		got := reasons(t, dl)
		w := map[string]int{"malformed": len(bad)}
		return fmt.Sprint(got) == fmt.Sprint(w), fmt.Sprintf("dead letters by reason %v; want %v", got, w)
	}))
	var read, readings int64
	for i, j := range jobs {
		if code := j.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("stream %d: SIGTERM: exit %d\nstderr:\n%s", i, code, j.stderr.String())
		}
		l := readSummary(t, sums[i])
		if !l.Balanced {
			t.Errorf("stream %d: the ledger does not balance: %v", i, l.Problems)
		}
		if l.Read == 0 || l.Read == int64(len(all)) {
			t.Errorf("stream %d read %d of the %d messages; want a share, so that each builds its hours from part of their readings", i, l.Read, len(all))
		}
		t.Logf("stream %d: %d records read, %d distinct readings, %d read back from what the other stored", i, l.Read, l.Readings, l.Recovered)
		read += l.Read
		readings += l.Readings
	}
	// Each message read by one stream (by both only if Pub/Sub delivered
	// it again), each reading counted by the stream that read it.
	if read < int64(len(all)) || read == int64(len(all)) && readings != int64(len(good)) {
		t.Errorf("the two streams read %d records and counted %d distinct readings; want %d and %d", read, readings, len(all), len(good))
	}
}

// openHours is the count of readings in open hours on the last progress
// line of a stream's stderr, or "?" before the first.
func openHours(stderr string) string {
	i := strings.LastIndex(stderr, "in open hours")
	if i < 0 {
		return "?"
	}
	j := strings.LastIndexByte(stderr[:i], '(')
	if j < 0 {
		return "?"
	}
	return strings.TrimSpace(stderr[j+1 : i])
}
