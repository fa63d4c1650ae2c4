package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// silenceFleet is a fleet under a cadence of 20 minutes (silent after an
// hour), over 2h45m from h: a sensor that skips readings, briefly and then
// for 70 minutes; one that reports every 20 minutes; one that stops
// mid-hour; one with two long gaps; one with a gap of exactly an hour
// (no silence). It returns the messages in event-time order and each
// sensor's event times.
func silenceFleet(h time.Time) ([]streamMsg, map[string][]time.Time) {
	times := map[string][]time.Time{}
	every := func(sensor string, from, to, step time.Duration, skip func(time.Duration) bool) {
		for d := from; d <= to; d += step {
			if skip == nil || !skip(d) {
				times[sensor] = append(times[sensor], h.Add(d))
			}
		}
	}
	every("sil-a", 0, 165*time.Minute, 5*time.Minute, func(d time.Duration) bool {
		return d >= 30*time.Minute && d <= 40*time.Minute || d > 65*time.Minute && d < 135*time.Minute
	})
	every("sil-b", 0, 160*time.Minute, 20*time.Minute, nil)
	every("sil-c", 0, 90*time.Minute, 5*time.Minute, nil)
	for _, m := range []int{0, 5, 70, 75, 155, 160} {
		times["sil-d"] = append(times["sil-d"], h.Add(time.Duration(m)*time.Minute))
	}
	for _, m := range []int{0, 60, 120, 165} {
		times["sil-e"] = append(times["sil-e"], h.Add(time.Duration(m)*time.Minute))
	}
	var msgs []streamMsg
	for sensor, ts := range times {
		for i, at := range ts {
			msgs = append(msgs, msg(line(sensor, at.UnixMilli(), 60+i%20), at.UnixMilli()))
		}
	}
	sort.SliceStable(msgs, func(i, j int) bool { return msgs[i].eventMs < msgs[j].eventMs })
	return msgs, times
}

// wantSilences are the records a fleet's times give, computed here from
// the contract: for each gap between consecutive readings longer than
// silentAfter, "silence" and "resumed" records, and for each sensor's last
// reading, whose gap the wall clock has passed, a "silence". Each is
// rendered "sensor kind last_seen resumed_at" (resumed_at "-" for a
// silence).
func wantSilences(times map[string][]time.Time, silentAfter time.Duration) []string {
	var out []string
	for sensor, ts := range times {
		for i := 1; i < len(ts); i++ {
			if ts[i].Sub(ts[i-1]) > silentAfter {
				out = append(out, silenceKey(sensor, "silence", ts[i-1], time.Time{}), silenceKey(sensor, "resumed", ts[i-1], ts[i]))
			}
		}
		out = append(out, silenceKey(sensor, "silence", ts[len(ts)-1], time.Time{}))
	}
	sort.Strings(out)
	return out
}

func silenceKey(sensor, kind string, last, resumed time.Time) string {
	r := "-"
	if !resumed.IsZero() {
		r = resumed.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s %s %s %s", sensor, kind, last.UTC().Format(time.RFC3339), r)
}

// bqSilences reads dataset.sensor_silences: its records rendered as
// silenceKey does, sorted, and its number of rows.
func bqSilences(t *testing.T, bq *bqemu.TestServer, dataset string) ([]string, int) {
	t.Helper()
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rows, err := emulators.ReadBigQuery(ctx, c.Dataset(dataset).Table("sensor_silences"))
	if err != nil {
		return nil, 0
	}
	seen := map[string]bool{}
	var out []string
	for _, row := range rows {
		last, _ := row["last_seen"].(time.Time)
		resumed, _ := row["resumed_at"].(time.Time)
		k := silenceKey(fmt.Sprint(row["sensor_id"]), fmt.Sprint(row["kind"]), last, resumed)
		if id := fmt.Sprint(row["silence_id"]); !seen[id] {
			seen[id] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, len(rows)
}

// silenceTopic is a topic the stream publishes silences to, and a
// subscription the test reads them from.
type silenceTopic struct {
	topic string
	mu    sync.Mutex
	byID  map[string]string // silence_id -> silenceKey
	msgs  int
}

func newSilenceTopic(t *testing.T, f *pubsubFixture, name string) *silenceTopic {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := &silenceTopic{topic: "projects/p/topics/" + name, byID: map[string]string{}}
	sub := "projects/p/subscriptions/" + name
	if _, err := f.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: st.topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if _, err := f.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: st.topic, AckDeadlineSeconds: 10}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.client.Subscriber(sub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			k := silenceMessageKey(string(m.Data))
			st.mu.Lock()
			st.byID[m.Attributes["silence_id"]] = k
			st.msgs++
			st.mu.Unlock()
			m.Ack()
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = f.client.SubscriptionAdminClient.DeleteSubscription(context.Background(), &pubsubpb.DeleteSubscriptionRequest{Subscription: sub})
		_ = f.client.TopicAdminClient.DeleteTopic(context.Background(), &pubsubpb.DeleteTopicRequest{Topic: st.topic})
	})
	return st
}

// silenceMessageKey renders a silence message's JSON as silenceKey does.
func silenceMessageKey(data string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		return "bad message: " + data
	}
	at := func(k string) time.Time {
		s, _ := m[k].(string)
		v, _ := time.Parse(time.RFC3339Nano, s)
		return v
	}
	return silenceKey(fmt.Sprint(m["sensor_id"]), fmt.Sprint(m["kind"]), at("last_seen"), at("resumed_at"))
}

// distinct is the records the topic got, one per silence_id, sorted.
func (st *silenceTopic) distinct() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]string, 0, len(st.byID))
	for _, k := range st.byID {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestStreamSilences: a stream of a spec with a cadence raises one
// silence and one resumed record per gap of each sensor (and a silence
// for each sensor once the wall clock passes its last reading), in
// BigQuery's sensor_silences (one row per record) and on the silences
// topic (one silence_id per record), whether each message comes three
// times or the stream is killed with SIGKILL mid-stream and restarted.
func TestStreamSilences(t *testing.T) {
	bt := emulators.StartBigtable(t) // skips under -short
	ps := sharedPubSub.HostPort(t)
	bq := bqemu.StartServerForTest(t)
	env := append(bqEnv(bt, bq), "PUBSUB_EMULATOR_HOST="+ps)
	spec := specWith(t, "cadence: 20m")
	h := time.Now().UTC().Truncate(time.Hour).Add(-4 * time.Hour)
	fleet, times := silenceFleet(h)
	want := wantSilences(times, time.Hour)
	if len(want) != 11 {
		t.Fatalf("the fleet has %d records; the test means 11: 3 gaps and 5 last readings", len(want))
	}

	check := func(t *testing.T, job *streamJob, name string, topic *silenceTopic) {
		t.Helper()
		eventually(t, 180*time.Second, job, func() (bool, string) {
			got, rows := bqSilences(t, bq, name)
			return strings.Join(got, "\n") == strings.Join(want, "\n") && rows == len(want),
				fmt.Sprintf("sensor_silences: %d rows, records\n%s\nwant\n%s", rows, strings.Join(got, "\n"), strings.Join(want, "\n"))
		})
		eventually(t, 60*time.Second, job, func() (bool, string) {
			got := topic.distinct()
			return strings.Join(got, "\n") == strings.Join(want, "\n"),
				fmt.Sprintf("silences topic: %d messages, distinct records\n%s\nwant\n%s", topic.msgs, strings.Join(got, "\n"), strings.Join(want, "\n"))
		})
	}

	t.Run("each message three times", func(t *testing.T) {
		const name = "silences_thrice"
		f := newPubSub(t, ps, name)
		topic := newSilenceTopic(t, f, name+"_out")
		args := streamArgs(f.sub, name, t.TempDir(), "--spec="+spec, "--bigquery_dataset="+name, "--silences_topic="+topic.topic)
		job := startStream(t, env, args...)
		for _, m := range fleet {
			f.publish(t, m, m, m)
		}
		check(t, job, name, topic)
		if code := job.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d\nstderr:\n%s", code, job.stderr.String())
		}
	})

	t.Run("killed with SIGKILL mid-stream and restarted", func(t *testing.T) {
		const name = "silences_killed"
		f := newPubSub(t, ps, name)
		topic := newSilenceTopic(t, f, name+"_out")
		dl := t.TempDir()
		args := streamArgs(f.sub, name, dl, "--spec="+spec, "--bigquery_dataset="+name, "--silences_topic="+topic.topic, "--pubsub_ack_deadline=10s")
		job := startStream(t, env, args...)
		half := len(fleet) / 2
		f.publish(t, fleet[:half]...)
		// Killed once some of the first half has landed, and (in event
		// time) past sil-a's first long gap and sil-d's first.
		eventually(t, 90*time.Second, job, func() (bool, string) {
			n := landed(dump(t, bt, name))
			return n >= half/3, fmt.Sprintf("%d readings landed before the kill", n)
		})
		if code := job.stop(t, syscall.SIGKILL); code != -int(syscall.SIGKILL) {
			t.Fatalf("SIGKILL: exit %d", code)
		}
		before, _ := bqSilences(t, bq, name)
		t.Logf("killed with %d readings in Bigtable and %d silence records in BigQuery", landed(dump(t, bt, name)), len(before))
		summary := filepath.Join(t.TempDir(), "ledger.json")
		job = startStream(t, env, append(args, "--summary_json="+summary)...)
		f.publish(t, fleet[half:]...)
		check(t, job, name, topic)
		if code := job.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d\nstderr:\n%s", code, job.stderr.String())
		}
		if l := readSummary(t, summary); !l.Balanced {
			t.Errorf("the restarted run's ledger does not balance: %v", l.Problems)
		}
	})
}
