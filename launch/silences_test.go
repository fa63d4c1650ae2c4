package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// the contract: a sensor's gap between consecutive readings gives a
// "silence" and a "resumed" record when it is longer than silentAfter, or
// when the stream's watermark passed the first reading's time plus
// silentAfter before the second came (idles, each a time at which the
// stream had read every reading before it and none after, and idled:
// its watermark then moves to the wall clock, past the fleet); each
// sensor's last reading, whose gap the wall clock has passed, gives a
// "silence". Each is rendered as silenceKey renders it.
func wantSilences(times map[string][]time.Time, silentAfter time.Duration, idles ...time.Time) []string {
	var out []string
	idled := func(a, b time.Time) bool {
		for _, at := range idles {
			if !a.After(at) && b.After(at) {
				return true
			}
		}
		return false
	}
	for sensor, ts := range times {
		gap := func(kind string, last, resumed time.Time) string {
			since := last.Add(silentAfter)
			sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%s", sensor, since.UnixMilli(), kind)))
			return silenceKey(sensor, kind, last, since, resumed, hex.EncodeToString(sum[:16]))
		}
		for i := 1; i < len(ts); i++ {
			if ts[i].Sub(ts[i-1]) > silentAfter || idled(ts[i-1], ts[i]) {
				out = append(out, gap("silence", ts[i-1], time.Time{}), gap("resumed", ts[i-1], ts[i]))
			}
		}
		out = append(out, gap("silence", ts[len(ts)-1], time.Time{}))
	}
	sort.Strings(out)
	return out
}

// silenceKey renders a record by its fields: sensor_id, kind, last_seen,
// silent_since, resumed_at ("-" in a silence) and silence_id.
func silenceKey(sensor, kind string, last, since, resumed time.Time, id string) string {
	r := "-"
	if !resumed.IsZero() {
		r = resumed.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s %s last_seen=%s silent_since=%s resumed_at=%s id=%s", sensor, kind,
		last.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339), r, id)
}

// timesBefore are a fleet's event times before cut.
func timesBefore(times map[string][]time.Time, cut time.Time) map[string][]time.Time {
	out := map[string][]time.Time{}
	for sensor, ts := range times {
		for _, at := range ts {
			if at.Before(cut) {
				out[sensor] = append(out[sensor], at)
			}
		}
	}
	return out
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
		since, _ := row["silent_since"].(time.Time)
		resumed, _ := row["resumed_at"].(time.Time)
		id := fmt.Sprint(row["silence_id"])
		k := silenceKey(fmt.Sprint(row["sensor_id"]), fmt.Sprint(row["kind"]), last, since, resumed, id)
		if detected, ok := row["detected_at"].(time.Time); !ok || detected.Before(testStart) || detected.After(time.Now()) {
			k += fmt.Sprintf(" detected_at=%v (not while the test ran)", row["detected_at"])
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, len(rows)
}

// testStart is when the test binary started: every record's detected_at
// is later.
var testStart = time.Now()

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
	return silenceKey(fmt.Sprint(m["sensor_id"]), fmt.Sprint(m["kind"]), at("last_seen"), at("silent_since"), at("resumed_at"), fmt.Sprint(m["silence_id"]))
}

// count is how many messages the topic got.
func (st *silenceTopic) count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.msgs
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
// for each sensor once the wall clock passes its last reading), with the
// fields computed here, in BigQuery's sensor_silences (one row per
// record) and on the silences topic (one message per record), with each
// message published three times, and again killed with SIGKILL once it
// has written silence and resumed records, with gaps still ahead, and
// restarted.
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

	// check waits for sensor_silences and the topic to hold want, one row
	// and one message a record, and nothing else.
	check := func(t *testing.T, job *streamJob, name string, topic *silenceTopic, want []string, within time.Duration) {
		t.Helper()
		eventually(t, within, job, func() (bool, string) {
			got, rows := bqSilences(t, bq, name)
			return strings.Join(got, "\n") == strings.Join(want, "\n") && rows == len(want),
				fmt.Sprintf("sensor_silences: %d rows, records\n%s\nwant\n%s", rows, strings.Join(got, "\n"), strings.Join(want, "\n"))
		})
		eventually(t, 60*time.Second, job, func() (bool, string) {
			got := topic.distinct()
			return strings.Join(got, "\n") == strings.Join(want, "\n"),
				fmt.Sprintf("silences topic: %d messages, distinct records\n%s\nwant\n%s", topic.count(), strings.Join(got, "\n"), strings.Join(want, "\n"))
		})
		if n := topic.count(); n != len(want) {
			t.Errorf("silences topic: %d messages for %d records: a record was raised twice", n, len(want))
		}
	}
	thrice := func(msgs []streamMsg) []streamMsg {
		var out []streamMsg
		for _, m := range msgs {
			out = append(out, m, m, m)
		}
		return out
	}

	t.Run("each message three times", func(t *testing.T) {
		const name = "silences_thrice"
		f := newPubSub(t, ps, name)
		topic := newSilenceTopic(t, f, name+"_out")
		args := streamArgs(f.sub, name, t.TempDir(), "--spec="+spec, "--bigquery_dataset="+name, "--silences_topic="+topic.topic)
		job := startStream(t, env, args...)
		f.publish(t, thrice(fleet)...)
		check(t, job, name, topic, want, 180*time.Second)
		if code := job.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d\nstderr:\n%s", code, job.stderr.String())
		}
	})

	t.Run("killed with SIGKILL once it wrote silences, and restarted", func(t *testing.T) {
		const name = "silences_killed"
		f := newPubSub(t, ps, name)
		topic := newSilenceTopic(t, f, name+"_out")
		args := streamArgs(f.sub, name, t.TempDir(), "--spec="+spec, "--bigquery_dataset="+name, "--silences_topic="+topic.topic, "--pubsub_ack_deadline=10s")
		// The first run reads the readings before cut, each three times,
		// and idles: its watermark passes every sensor's last reading, so
		// it writes a silence for each, and sil-d's first gap whole. Ahead
		// are sil-a's and sil-d's long gaps, sil-b's and sil-e's silences
		// the watermark raised though their next readings come within the
		// hour (their resumed records need what the first run wrote), and
		// every sensor's last reading.
		cut := h.Add(102 * time.Minute)
		var first, rest []streamMsg
		for _, m := range fleet {
			if m.eventMs < cut.UnixMilli() {
				first = append(first, m)
			} else {
				rest = append(rest, m)
			}
		}
		wantFirst := wantSilences(timesBefore(times, cut), time.Hour)
		wantAll := wantSilences(times, time.Hour, cut)
		if len(wantFirst) != 7 || len(wantAll) != 15 {
			t.Fatalf("%d records before the kill and %d in all; the test means 7 and 15", len(wantFirst), len(wantAll))
		}
		job := startStream(t, env, args...)
		f.publish(t, thrice(first)...)
		check(t, job, name, topic, wantFirst, 180*time.Second)
		if code := job.stop(t, syscall.SIGKILL); code != -int(syscall.SIGKILL) {
			t.Fatalf("SIGKILL: exit %d", code)
		}
		t.Logf("killed with %d readings in Bigtable and %d silence records written", landed(dump(t, bt, name)), len(wantFirst))
		// The rest waits in the subscription: the restarted run reads it
		// before its watermark passes anything.
		f.publish(t, thrice(rest)...)
		summary := filepath.Join(t.TempDir(), "ledger.json")
		job = startStream(t, env, append(args, "--summary_json="+summary)...)
		check(t, job, name, topic, wantAll, 180*time.Second)
		if code := job.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d\nstderr:\n%s", code, job.stderr.String())
		}
		if l := readSummary(t, summary); !l.Balanced {
			t.Errorf("the restarted run's ledger does not balance: %v", l.Problems)
		}
	})
}
