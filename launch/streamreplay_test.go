package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// TestStreamReplayRebuildsTouchedHours replays write failures from a
// subscription on a dead-letter topic (--source=pubsub
// --format=deadletter). Bigtable lost three readings of sensor rp-0,
// whose hour's rollup and imputed values it built without them; BigQuery
// lost one reading of sensor rp-1 and that hour's rollup row. The stream
// replay writes each record to the sink its dead letter names only, and
// builds each hour it touches with what Bigtable holds: once it has run,
// both stores equal one batch over every reading, and it wrote nothing
// to the sinks that had the records, nor to the hour it did not touch.
func TestStreamReplayRebuildsTouchedHours(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t) // skips under -short
	ps := sharedPubSub.HostPort(t)
	bq := bqemu.StartServerForTest(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + bt, "PUBSUB_EMULATOR_HOST=" + ps,
		"BIGQUERY_EMULATOR_HOST=" + strings.TrimPrefix(bq.RESTEndpoint, "http://"), "BIGQUERY_STORAGE_EMULATOR_HOST=" + bq.GRPCAddr}

	// Three sensors, a reading a minute for an hour two days ago (far
	// past any allowed lateness: a replay has none), every fourth heart
	// rate missing.
	h := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)
	lines := map[string][]string{}
	var all []string
	for s := 0; s < 3; s++ {
		sensor := fmt.Sprintf("rp-%d", s)
		for m := 0; m < 60; m++ {
			var hr any = 60 + (m*7+s)%30
			if m%4 == 0 {
				hr = nil
			}
			l := line(sensor, h.Add(time.Duration(m)*time.Minute).UnixMilli(), hr)
			lines[sensor] = append(lines[sensor], l)
			all = append(all, l)
		}
	}
	lostBigtable := lines["rp-0"][9:12] // next to the missing heart rate of minute 8
	lostBigQuery := lines["rp-1"][30]
	without := func(drop ...string) []string {
		skip := map[string]bool{}
		for _, d := range drop {
			skip[d] = true
		}
		var out []string
		for _, l := range all {
			if !skip[l] {
				out = append(out, l)
			}
		}
		return out
	}
	batch := func(lines []string, table, dataset string) {
		t.Helper()
		in := t.TempDir()
		if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runLauncher(t, env, "--source=files", "--input="+in+"/*", "--bigtable_project=p", "--bigtable_instance=i",
			"--bigtable_table="+table, "--bigquery_dataset="+dataset, "--dead_letter="+t.TempDir())
		if r.code != 0 {
			t.Fatalf("batch into %s and %s: exit %d\n%s", table, dataset, r.code, r.stderr)
		}
	}
	// What one batch over every reading leaves.
	batch(all, "rp_want", "rp_want")
	want, wantBQ, wantHourly := dump(t, bt, "rp_want"), bqReadings(t, bq, "rp_want"), bqHourly(t, bq, "rp_want")
	// The stores after the failures: Bigtable without rp-0's three
	// readings (and that hour built without them), BigQuery without rp-1's
	// reading and with that hour's rollup built without it.
	batch(without(lostBigtable...), "rp", "rp_scratch")
	batch(without(lostBigQuery), "rp_scratch", "rp")
	if cellDiff(dump(t, bt, "rp"), want) == 0 || mapDiff(bqHourly(t, bq, "rp"), wantHourly) == 0 || mapDiff(bqReadings(t, bq, "rp"), wantBQ) == 0 {
		t.Fatal("the stores before the replay already hold the batch result: nothing to replay")
	}

	// The dead letters on a topic, as a pubsub: dead-letter target puts
	// them.
	envelope := func(d deadletter.DeadLetter) streamMsg {
		d.Reason, d.Error, d.Source, d.Time = "write_failed", "unavailable", "projects/p/subscriptions/readings", time.Now().UTC().Format(time.RFC3339)
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return msg(string(b), time.Now().UnixMilli())
	}
	var dls []streamMsg
	for _, l := range lostBigtable {
		dls = append(dls, envelope(deadletter.DeadLetter{Payload: l, Sink: deadletter.SinkBigtable}))
	}
	dls = append(dls, envelope(deadletter.DeadLetter{Payload: lostBigQuery, Sink: deadletter.SinkBigQuery}),
		envelope(deadletter.DeadLetter{Sink: deadletter.SinkBigQueryRollups, Identity: map[string]string{"sensor_id": "rp-1"},
			WindowStart: h.Format(time.RFC3339), WindowEnd: h.Add(time.Hour).Format(time.RFC3339)}))
	f := newPubSub(t, ps, "rp-dl")
	f.publish(t, dls...)

	started := time.Now()
	summary := filepath.Join(t.TempDir(), "ledger.json")
	dl := t.TempDir()
	job := startStream(t, env, "--source=pubsub", "--subscription="+f.sub, "--format=deadletter",
		"--bigtable_project=p", "--bigtable_instance=i", "--bigtable_table=rp", "--bigquery_dataset=rp", "--dead_letter="+dl,
		"--progress_interval=1s", "--summary_json="+summary)
	eventually(t, 90*time.Second, job, func() (bool, string) {
		got := dump(t, bt, "rp")
		d := cellDiff(got, want)
		return d == 0, fmt.Sprintf("Bigtable equal to the batch's: %d of %d cells differ\n%s", d, len(want), firstDiffs(got, want, 10))
	})
	eventually(t, 60*time.Second, job, func() (bool, string) {
		got := bqReadings(t, bq, "rp")
		return fmt.Sprint(got) == fmt.Sprint(wantBQ), fmt.Sprintf("BigQuery readings equal to the batch's: %d of %d differ", mapDiff(got, wantBQ), len(wantBQ))
	})
	eventually(t, 60*time.Second, job, func() (bool, string) {
		got := bqHourly(t, bq, "rp")
		return fmt.Sprint(got) == fmt.Sprint(wantHourly), fmt.Sprintf("readings_hourly equal to the batch's: %d of %d differ", mapDiff(got, wantHourly), len(wantHourly))
	})
	if code := job.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d\nstderr:\n%s", code, job.stderr.String())
	}
	if got := deadLetters(t, dl); len(got) != 0 {
		t.Errorf("the replay dead-lettered %d records: %v", len(got), got)
	}

	// Only the sinks that failed were written: BigQuery got rows of rp-1
	// only (its readings' failure and its rollup's), none of rp-0, whose
	// failure was Bigtable's, nor of rp-2, which no dead letter touches.
	for table, at := range map[string]string{"readings": "ingested_at", "readings_hourly": "fired_at"} {
		for _, row := range bqRows(t, bq, "rp", table) {
			when, _ := row[at].(time.Time)
			if sensor := fmt.Sprint(row["sensor_id"]); !when.Before(started) && sensor != "rp-1" {
				t.Errorf("the replay wrote a %s row of %s (%s %v): its dead letters name Bigtable, or none", table, sensor, at, when)
			}
		}
	}
	l := readSummary(t, summary)
	out, _ := json.Marshal(l)
	t.Logf("replay ledger: %s", out)
	if l.Replayed != int64(len(dls)) {
		t.Errorf("replayed %d dead letters; want %d", l.Replayed, len(dls))
	}
	// Bigtable took rp-0's three readings (and their hour's rewrites), not
	// rp-1's; BigQuery rp-1's reading (and its hour's), not rp-0's.
	if l.ReplaySkipped[deadletter.SinkBigtable] != 1 || l.ReplaySkipped[deadletter.SinkBigQuery] != int64(len(lostBigtable)) {
		t.Errorf("replay left out %v; want 1 reading of Bigtable (rp-1's) and %d of BigQuery (rp-0's)", l.ReplaySkipped, len(lostBigtable))
	}
	for _, s := range l.Sinks {
		if want := map[string]int64{deadletter.SinkBigtable: int64(len(lostBigtable)), deadletter.SinkBigQuery: 1, deadletter.SinkBigQueryRollups: 1}[s.Sink]; s.Written != want {
			t.Errorf("%s %s: the replay wrote %d; want %d", s.Sink, s.Table, s.Written, want)
		}
		if s.Sink == deadletter.SinkBigtable && s.Rows != 1 {
			t.Errorf("the replay wrote %d Bigtable rows; want 1, rp-0's hour", s.Rows)
		}
	}
	if !l.Balanced {
		t.Errorf("the replay's ledger does not balance: %v", l.Problems)
	}
}

// bqRows reads every row of dataset.table.
func bqRows(t *testing.T, bq *bqemu.TestServer, dataset, table string) []map[string]bigquery.Value {
	t.Helper()
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rows, err := emulators.ReadBigQuery(ctx, c.Dataset(dataset).Table(table))
	if err != nil {
		t.Fatalf("read %s.%s: %v", dataset, table, err)
	}
	return rows
}
