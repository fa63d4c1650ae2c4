package deadletterio

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// testLetters returns n dead letters with distinct payloads.
func testLetters(n int, tag string) []deadletter.DeadLetter {
	reasons := []string{"malformed", "out_of_range", "bad_timestamp"}
	out := make([]deadletter.DeadLetter, n)
	for i := range out {
		out[i] = deadletter.DeadLetter{
			Payload: fmt.Sprintf(`{"sensor_id":"s-%s-%d"`, tag, i),
			Reason:  reasons[i%len(reasons)],
			Sink:    deadletter.SinkParse,
			Error:   "test error " + tag,
			Source:  "gs://b/in.jsonl",
			// Microseconds: what a BigQuery TIMESTAMP keeps.
			Time: time.Now().UTC().Truncate(time.Microsecond).Add(-time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano),
		}
	}
	return out
}

// writeDirect runs one bundle of writeFn by hand and returns the
// FinishBundle error.
func writeDirect(t *testing.T, dir string, letters []deadletter.DeadLetter) error {
	t.Helper()
	ctx := context.Background()
	f := &writeFn{Target: mustTarget(t, dir)}
	if err := f.Setup(ctx); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	defer func() {
		if err := f.Teardown(); err != nil {
			t.Errorf("Teardown: %v", err)
		}
	}()
	f.StartBundle(ctx)
	for _, d := range letters {
		if err := f.ProcessElement(ctx, d); err != nil {
			t.Fatalf("ProcessElement: %v", err)
		}
	}
	return f.FinishBundle(ctx)
}

// writePipeline writes letters through writeFn in a pipeline on
// the test runner (prism).
func writePipeline(t *testing.T, dir string, letters []deadletter.DeadLetter) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	col := beam.CreateList(s, letters)
	beam.ParDo0(s, &writeFn{Target: mustTarget(t, dir)}, col)
	if _, err := ptest.RunWithMetrics(p); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
}

func sortLetters(ls []deadletter.DeadLetter) {
	sort.Slice(ls, func(i, j int) bool { return ls[i].Payload < ls[j].Payload })
}

func equalLetters(t *testing.T, got, want []deadletter.DeadLetter) {
	t.Helper()
	got, want = append([]deadletter.DeadLetter(nil), got...), append([]deadletter.DeadLetter(nil), want...)
	sortLetters(got)
	sortLetters(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("dead letters:\n got %v\nwant %v", got, want)
	}
}

// mustTarget parses a --dead_letter value, as the launcher does once.
func mustTarget(t *testing.T, s string) targets.DeadLetterTarget {
	t.Helper()
	target, err := targets.ParseDeadLetterTarget(s)
	if err != nil {
		t.Fatalf("ParseDeadLetterTarget(%q): %v", s, err)
	}
	return target
}

func TestWriteDeadLettersToLocalFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "dl")
	want := testLetters(5, "files")
	if err := writeDirect(t, dir, want); err != nil {
		t.Fatalf("FinishBundle: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "deadletter-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("%d files under %s; want one per bundle", len(files), dir)
	}
	fd, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	var got []deadletter.DeadLetter
	sc := bufio.NewScanner(fd)
	for sc.Scan() {
		var d deadletter.DeadLetter
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, d)
	}
	equalLetters(t, got, want)
}

func TestDeadLetterRowSave(t *testing.T) {
	d := deadletter.DeadLetter{Payload: "x", Reason: "malformed", Sink: "parse", Error: "e", Source: "s", Time: "2026-03-01T10:15:30.25Z"}
	line, _ := json.Marshal(d)
	row, id, err := deadLetterRow{d: d, insertID: deadLetterID(line)}.Save()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bigquery.Value{"payload": "x", "reason": "malformed", "sink": "parse", "error": "e", "source": "s",
		"time": time.Date(2026, 3, 1, 10, 15, 30, 250e6, time.UTC)}
	if fmt.Sprint(row) != fmt.Sprint(want) {
		t.Errorf("row = %v; want %v", row, want)
	}
	if id != deadLetterID(line) || len(id) != 32 {
		t.Errorf("insertId %q; want the 32-hex-digit digest of the line", id)
	}
	other, _ := json.Marshal(deadletter.DeadLetter{Payload: "y"})
	if deadLetterID(other) == id {
		t.Errorf("different letters share insertId %q", id)
	}
}

// readDeadLetterTable reads every row of a dead-letter table.
func readDeadLetterTable(t *testing.T, tbl *bigquery.Table) []deadletter.DeadLetter {
	t.Helper()
	rows, err := emulators.ReadBigQuery(context.Background(), tbl)
	if err != nil {
		t.Fatalf("read %s: %v", tbl.TableID, err)
	}
	var out []deadletter.DeadLetter
	for _, row := range rows {
		ts, ok := row["time"].(time.Time)
		if !ok {
			t.Fatalf("time column %T %v; want a TIMESTAMP", row["time"], row["time"])
		}
		out = append(out, deadletter.DeadLetter{
			Payload: fmt.Sprint(row["payload"]), Reason: fmt.Sprint(row["reason"]), Sink: fmt.Sprint(row["sink"]), Error: fmt.Sprint(row["error"]),
			Source: fmt.Sprint(row["source"]), Time: ts.UTC().Format(time.RFC3339Nano),
		})
	}
	return out
}

func TestWriteDeadLettersToBigQueryEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("emulator test: skipped under -short")
	}
	ts := bqemu.StartServerForTest(t)
	t.Setenv(bigqueryio.EmulatorHostEnv, strings.TrimPrefix(ts.RESTEndpoint, "http://"))
	ctx := context.Background()
	const project = "sensorpipe-test"
	c, err := bigquery.NewClient(ctx, project, bigqueryio.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Dataset("ops").Create(ctx, nil); err != nil {
		t.Fatalf("create dataset: %v", err)
	}

	t.Run("missing table created, partitioned by day on time", func(t *testing.T) {
		want := testLetters(7, "pipeline")
		writePipeline(t, "bigquery:"+project+":ops.dead_letters", want)
		tbl := c.Dataset("ops").Table("dead_letters")
		md, err := tbl.Metadata(ctx)
		if err != nil {
			t.Fatalf("table not created: %v", err)
		}
		var cols []string
		for _, f := range md.Schema {
			cols = append(cols, f.Name+" "+string(f.Type))
		}
		if got, want := strings.Join(cols, ", "), "payload STRING, reason STRING, sink STRING, error STRING, source STRING, time TIMESTAMP, payload_base64 BYTES"; got != want {
			t.Errorf("columns %s; want %s", got, want)
		}
		if tp := md.TimePartitioning; tp == nil || tp.Type != bigquery.DayPartitioningType || tp.Field != "time" {
			t.Errorf("partitioning %+v; want DAY on time", tp)
		}
		equalLetters(t, readDeadLetterTable(t, tbl), want)
	})

	t.Run("existing table appended to, retried bundle deduplicated", func(t *testing.T) {
		tbl := c.Dataset("ops").Table("dead_letters")
		before := readDeadLetterTable(t, tbl)
		more := testLetters(3, "direct")
		for attempt := 0; attempt < 2; attempt++ { // the same bundle twice, as a retry would
			if err := writeDirect(t, "bigquery:"+project+":ops.dead_letters", more); err != nil {
				t.Fatalf("FinishBundle: %v", err)
			}
		}
		equalLetters(t, readDeadLetterTable(t, tbl), append(before, more...))
	})

	t.Run("failed insert fails the bundle", func(t *testing.T) {
		// A table of the wrong shape: every row is rejected.
		if err := c.Dataset("ops").Table("wrong").Create(ctx, &bigquery.TableMetadata{
			Schema: bigquery.Schema{{Name: "payload", Type: bigquery.IntegerFieldType}},
		}); err != nil {
			t.Fatal(err)
		}
		err := writeDirect(t, "bigquery:"+project+":ops.wrong", testLetters(2, "wrong"))
		if err == nil || !strings.Contains(err.Error(), "ops.wrong") {
			t.Fatalf("FinishBundle error %v; want a failure naming the table", err)
		}
	})

	t.Run("missing dataset named with the fix", func(t *testing.T) {
		err := EnsureTarget(ctx, mustTarget(t, "bigquery:"+project+":nope.dl"))
		if err == nil || !strings.Contains(err.Error(), "bq mk --dataset "+project+":nope") {
			t.Fatalf("EnsureTarget error %v; want the bq mk fix", err)
		}
	})
}

func TestWriteDeadLettersToPubSubEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("emulator test: skipped under -short")
	}
	host := emulators.StartPubSub(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", host)
	ctx := context.Background()
	const (
		project = "sensorpipe-test"
		topic   = "projects/" + project + "/topics/dead-letters"
		sub     = "projects/" + project + "/subscriptions/dead-letters-check"
	)
	c, err := pubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 60}); err != nil {
		t.Fatal(err)
	}

	t.Run("one message per letter with its reason", func(t *testing.T) {
		if err := EnsureTarget(ctx, mustTarget(t, "pubsub:"+topic)); err != nil {
			t.Fatalf("EnsureTarget: %v", err)
		}
		want := testLetters(9, "pubsub")
		writePipeline(t, "pubsub:"+topic, want)

		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		var mu sync.Mutex
		var got []deadletter.DeadLetter
		var bad []string
		err := c.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			var d deadletter.DeadLetter
			mu.Lock()
			defer mu.Unlock()
			if err := json.Unmarshal(m.Data, &d); err != nil {
				bad = append(bad, fmt.Sprintf("data %q: %v", m.Data, err))
			} else if m.Attributes["reason"] != d.Reason {
				bad = append(bad, fmt.Sprintf("attribute reason %q; the letter says %q", m.Attributes["reason"], d.Reason))
			}
			got = append(got, d)
			if len(got) >= len(want) {
				cancel()
			}
		})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(bad) > 0 {
			t.Fatalf("bad messages: %s", strings.Join(bad, "; "))
		}
		equalLetters(t, got, want)
	})

	t.Run("missing topic fails the bundle", func(t *testing.T) {
		err := writeDirect(t, "pubsub:projects/"+project+"/topics/nope", testLetters(2, "nope"))
		if err == nil || !strings.Contains(err.Error(), "2 of 2 publishes failed") {
			t.Fatalf("FinishBundle error %v; want both publishes failed", err)
		}
		if err := EnsureTarget(ctx, mustTarget(t, "pubsub:projects/"+project+"/topics/nope")); err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("EnsureTarget error %v; want the missing topic named", err)
		}
	})
}
