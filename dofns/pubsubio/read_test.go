package pubsubio_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/dofns/pubsubio"
	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/localprism"
	"github.com/sensorpipe/sensorpipe/internal/loopback"
	"github.com/sensorpipe/sensorpipe/internal/testrig/slowlink"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

const project = "test-project"

func init() {
	dofnreg.DoFn((*recordFn)(nil), register.Function3x0[context.Context, beam.EventTime, dofns.Message])
	dofnreg.DoFn((*keyByOneFn)(nil), register.Function1x2[dofns.Message, string, string])
	dofnreg.DoFn((*recordPaneFn)(nil), register.Function3x0[beam.Window, string, func(*string) bool])
	register.Iter1[string]()
	dofnreg.DoFn((*bundleSizeFn)(nil), register.Function1x0[dofns.Message])
}

func TestMain(m *testing.M) {
	// TestRead's cases mostly wait on Pub/Sub's ack deadline, not on the
	// CPU: they all run at once, not GOMAXPROCS at a time (-parallel on
	// the command line still decides).
	if err := flag.Set("test.parallel", "8"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(loopback.Run(func() int {
		defer pubsubio.StopPubSubEmulator()
		return ptest.MainRet(m)
	}))
}

// ---------------------------------------------------------------------------
// Package-level, thread-safe record of what the sinks saw (prism runs the SDK
// harness in-process in loopback mode, so sinks and test share memory).

type seen struct {
	ElementTime int64 // element timestamp, epoch ms
	Msg         dofns.Message
}

type pane struct {
	WindowEnd int64
	IDs       []string
}

// store is what the pipelines' sinks saw, shared with them through the
// process (the loopback worker runs in the test binary). resetStore starts
// each TestRead afresh, so the test can run again in one binary (-count).
var store struct {
	sync.Mutex
	elems   map[string][]seen // run -> elements
	panes   map[string][]pane // run -> fired panes
	acked   map[string]int    // subscription -> acked by finalization callbacks
	bundles map[string][]int  // run -> messages of each bundle (bundleSizeFn)
	release chan struct{}     // unblocks sinks configured to block (see recordFn.BlockOnBatch)
}

// resetStore empties the store and returns a function that releases the
// blocked sinks.
func resetStore() (release func()) {
	store.Lock()
	defer store.Unlock()
	store.elems, store.panes, store.acked = map[string][]seen{}, map[string][]pane{}, map[string]int{}
	store.bundles = map[string][]int{}
	ch := make(chan struct{})
	store.release = ch
	return func() { close(ch) }
}

func elemsOf(run string) []seen {
	store.Lock()
	defer store.Unlock()
	return append([]seen(nil), store.elems[run]...)
}

func panesOf(run string) []pane {
	store.Lock()
	defer store.Unlock()
	return append([]pane(nil), store.panes[run]...)
}

func ackedOn(sub string) int {
	store.Lock()
	defer store.Unlock()
	return store.acked[sub]
}

// recordFn records every element. If BlockOnBatch is set, it blocks forever
// (until the test binary releases it) on the first message whose "batch"
// attribute equals it, so that the bundle holding it can never finish.
type recordFn struct {
	Run          string
	BlockOnBatch string
}

func (fn *recordFn) ProcessElement(ctx context.Context, et beam.EventTime, m dofns.Message) {
	store.Lock()
	store.elems[fn.Run] = append(store.elems[fn.Run], seen{ElementTime: et.Milliseconds(), Msg: m})
	store.Unlock()
	if fn.BlockOnBatch != "" && m.Attributes["batch"] == fn.BlockOnBatch {
		store.Lock()
		release := store.release
		store.Unlock()
		<-release
	}
}

// bundleSizeFn records the number of messages of each bundle it sees
// (fused with the reader, so the reader's bundles).
type bundleSizeFn struct {
	Run string
	n   int
}

func (fn *bundleSizeFn) StartBundle() { fn.n = 0 }

func (fn *bundleSizeFn) ProcessElement(m dofns.Message) {
	fn.n++
	store.Lock()
	store.elems[fn.Run] = append(store.elems[fn.Run], seen{Msg: m})
	store.Unlock()
}

func (fn *bundleSizeFn) FinishBundle() {
	if fn.n == 0 {
		return
	}
	store.Lock()
	store.bundles[fn.Run] = append(store.bundles[fn.Run], fn.n)
	store.Unlock()
}

func bundlesOf(run string) []int {
	store.Lock()
	defer store.Unlock()
	return append([]int(nil), store.bundles[run]...)
}

type keyByOneFn struct{}

func (*keyByOneFn) ProcessElement(m dofns.Message) (string, string) { return "all", m.ID }

type recordPaneFn struct{ Run string }

func (fn *recordPaneFn) ProcessElement(w beam.Window, _ string, ids func(*string) bool) {
	p := pane{WindowEnd: w.MaxTimestamp().Milliseconds()}
	var id string
	for ids(&id) {
		p.IDs = append(p.IDs, id)
	}
	store.Lock()
	store.panes[fn.Run] = append(store.panes[fn.Run], p)
	store.Unlock()
}

// ---------------------------------------------------------------------------
// Emulator and pipeline helpers.

type env struct {
	topics *pubsub.TopicAdminClient
	subs   *pubsub.SubscriptionAdminClient
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	topics, err := pubsub.NewTopicAdminClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topics.Close() })
	subs, err := pubsub.NewSubscriptionAdminClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { subs.Close() })
	return &env{topics: topics, subs: subs}
}

// created numbers the topics the tests create, so that a test run again
// in the same process (-count) against the same emulator gets new ones.
var created atomic.Int64

// create makes a topic and a subscription with a 10s ack deadline (the
// minimum), returning their names: name and a number of their own.
func (e *env) create(t *testing.T, name string) (topic, sub string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name = fmt.Sprintf("%s-%d", name, created.Add(1))
	topic = fmt.Sprintf("projects/%s/topics/%s", project, name)
	sub = fmt.Sprintf("projects/%s/subscriptions/%s", project, name)
	if _, err := e.topics.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if _, err := e.subs.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 10}); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	return topic, sub
}

func (e *env) publish(t *testing.T, topic string, msgs []*pubsubpb.PubsubMessage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.topics.Publish(ctx, &pubsubpb.PublishRequest{Topic: topic, Messages: msgs}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// redelivered pulls (without acking) until a message is delivered or the
// lease of every message a stopped reader may have held has run out, ackBy
// (its ack deadline after the stop): a message still unacked by then is
// redelivered at once. Pub/Sub defines absence by that deadline, so the
// wait ends at it, or at the first message, which is the failure.
func (e *env) redelivered(t *testing.T, sub string, ackBy time.Time) []*pubsubpb.ReceivedMessage {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := e.subs.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 100})
		cancel()
		if err == nil && len(resp.GetReceivedMessages()) > 0 {
			return resp.GetReceivedMessages()
		}
		if time.Now().After(ackBy) {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // the polling interval
	}
}

// startEnv points the Pub/Sub clients at the emulator, empties the
// recorded elements and counts the acks by subscription.
func startEnv(t *testing.T) *env {
	t.Helper()
	t.Setenv("PUBSUB_EMULATOR_HOST", pubsubio.PubSubEmulator(t))
	t.Cleanup(resetStore())
	pubsubio.SetAfterAck(func(sub string, n int) {
		store.Lock()
		store.acked[sub] += n
		store.Unlock()
	})
	return newEnv(t)
}

var (
	startPrism sync.Once
	prismErr   error
)

// startPipeline runs the pipeline built by build on prism until the returned
// stop function (also registered as a cleanup) cancels it.
func startPipeline(t *testing.T, build func(s beam.Scope)) (stop func()) {
	t.Helper()
	startPrism.Do(func() {
		// Once, before any pipeline: see package localprism.
		*jobopts.EnvironmentType = "loopback"
		_, prismErr = localprism.Start(context.Background())
	})
	if prismErr != nil {
		t.Fatal(prismErr)
	}
	p, s := beam.NewPipelineWithRoot()
	build(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := prism.Execute(ctx, p)
		done <- err
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				t.Logf("pipeline stopped: %v", err)
			case <-time.After(30 * time.Second):
				t.Logf("pipeline did not return within 30s of cancellation")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func idsOf(es []seen) map[string]seen {
	m := map[string]seen{}
	for _, e := range es {
		m[e.Msg.Attributes["rid"]] = e
	}
	return m
}

// ---------------------------------------------------------------------------

func TestRead(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: starts the Pub/Sub emulator (a JVM) and streaming prism pipelines; run without -short")
	}
	e := startEnv(t)

	// Each case has a topic, a subscription and a run name of its own, and
	// most of its time is waiting on Pub/Sub's ack deadline: they run side
	// by side.
	for _, tc := range []struct {
		name string
		test func(*testing.T, *env)
	}{
		{"ReadTimestampsAndAck", testReadTimestampsAndAck},
		{"IdleWatermarkFiresWindow", testIdleWatermark},
		{"RestartRedeliversUnfinalized", testRestart},
		{"BacklogInBundlesNoLargerThanTheCap", testBacklog},
		{"LargeMessagesInBundlesOfBoundedBytes", testLargeMessages},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, e)
		})
	}
}

// testReadTimestampsAndAck: every message arrives once with the right event
// timestamp, is acked by a finalization callback, and the subscription is
// empty afterwards (a fresh Pull past the ack deadline returns nothing).
func testReadTimestampsAndAck(t *testing.T, e *env) {
	topic, sub := e.create(t, "basic")
	const run = "basic"
	cfg := pubsubio.Config{
		Subscription:       mustSub(t, sub),
		TimestampAttribute: "event_ts",
		IDAttribute:        "rid",
		IdleAdvance:        time.Second,
		AckDeadline:        10 * time.Second,
		FinalizeTimeout:    5 * time.Second,
	}
	stop := startPipeline(t, func(s beam.Scope) {
		msgs := pubsubio.Read(s, cfg)
		beam.ParDo0(s, &recordFn{Run: run}, msgs)
	})

	const n = 50
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var batch []*pubsubpb.PubsubMessage
	want := map[string]int64{} // rid -> expected event time; -1: publish time + error
	for i := 0; i < n; i++ {
		rid := fmt.Sprintf("m%03d", i)
		attrs := map[string]string{"rid": rid}
		switch {
		case i == 0:
			want[rid] = -1 // no timestamp attribute
		case i == 1:
			attrs["event_ts"] = "not-a-time"
			want[rid] = -1
		case i == 2:
			ts := base.Add(2 * time.Second)
			attrs["event_ts"] = ts.UTC().Format(time.RFC3339Nano)
			want[rid] = ts.UnixMilli()
		default:
			ts := base.Add(time.Duration(i) * time.Second)
			attrs["event_ts"] = strconv.FormatInt(ts.UnixMilli(), 10)
			want[rid] = ts.UnixMilli()
		}
		batch = append(batch, &pubsubpb.PubsubMessage{Data: []byte(rid), Attributes: attrs})
	}
	// In five batches a second apart: a bundle processor that finalized a
	// bundle then runs the next ones, whose finalization callbacks the Go
	// SDK never runs (see pending), so the checkpoint path acks them.
	for i := 0; i < n; i += n / 5 {
		e.publish(t, topic, batch[i:i+n/5])
		time.Sleep(time.Second)
	}

	waitFor(t, "all messages to be read", 60*time.Second, func() bool { return len(idsOf(elemsOf(run))) == n })
	got := idsOf(elemsOf(run))
	for rid, w := range want {
		g := got[rid]
		if w == -1 {
			if g.Msg.TimestampError == "" {
				t.Errorf("%s: TimestampError is empty, want an error", rid)
			}
			if g.ElementTime != g.Msg.PublishTime || g.Msg.EventTime != g.Msg.PublishTime {
				t.Errorf("%s: element time %d / EventTime %d, want publish time %d", rid, g.ElementTime, g.Msg.EventTime, g.Msg.PublishTime)
			}
			continue
		}
		if g.Msg.TimestampError != "" {
			t.Errorf("%s: unexpected TimestampError %q", rid, g.Msg.TimestampError)
		}
		if g.ElementTime != w || g.Msg.EventTime != w {
			t.Errorf("%s: element time %d / EventTime %d, want %d", rid, g.ElementTime, g.Msg.EventTime, w)
		}
		if string(g.Msg.Data) != rid || g.Msg.ID == "" {
			t.Errorf("%s: bad message %+v", rid, g.Msg)
		}
	}
	if len(elemsOf(run)) != n {
		t.Errorf("read %d elements, want %d (duplicates?)", len(elemsOf(run)), n)
	}

	// (a) acks happen in finalization callbacks ...
	waitFor(t, "all messages to be acked on finalization", 30*time.Second, func() bool { return ackedOn(sub) >= n })
	// Every bundle's acks were let go by the path that acked them: none is
	// kept for a finalization callback the SDK never runs.
	waitFor(t, "no bundle's acks to be held once all are acked", 10*time.Second, func() bool { return pubsubio.PendingBundles(sub) == 0 })
	stop()
	// ... and the emulator agrees: nothing is redelivered once the 10s ack
	// deadline of the stopped run's leases has passed.
	if left := e.redelivered(t, sub, time.Now().Add(cfg.AckDeadline+time.Second)); len(left) > 0 {
		t.Errorf("%d messages redelivered after the pipeline acked everything", len(left))
	}
}

// testBacklog: a backlog larger than a pull's answer (the emulator gives at
// most 100 messages a pull), read with several pulls in flight, arrives
// once, in bundles no larger than MaxMessagesPerBundle, all acked.
func testBacklog(t *testing.T, e *env) {
	topic, sub := e.create(t, "backlog")
	const (
		run = "backlog"
		n   = 1200
		cap = 300
	)
	var batch []*pubsubpb.PubsubMessage
	for i := 0; i < n; i++ {
		rid := fmt.Sprintf("b%04d", i)
		batch = append(batch, &pubsubpb.PubsubMessage{Data: []byte(rid), Attributes: map[string]string{"rid": rid}})
	}
	for i := 0; i < n; i += 400 {
		e.publish(t, topic, batch[i:i+400])
	}
	cfg := pubsubio.Config{
		Subscription:         mustSub(t, sub),
		IDAttribute:          "rid",
		MaxMessagesPerBundle: cap,
		AckDeadline:          10 * time.Second,
		FinalizeTimeout:      5 * time.Second,
	}
	stop := startPipeline(t, func(s beam.Scope) {
		beam.ParDo0(s, &bundleSizeFn{Run: run}, pubsubio.Read(s, cfg))
	})
	waitFor(t, "the backlog to be read", 60*time.Second, func() bool { return len(idsOf(elemsOf(run))) == n })
	if got := len(elemsOf(run)); got != n {
		t.Errorf("read %d elements, want %d (duplicates?)", got, n)
	}
	sizes := bundlesOf(run)
	total, largest := 0, 0
	for _, b := range sizes {
		total += b
		largest = max(largest, b)
	}
	if largest > cap || total != n {
		t.Errorf("bundles %v: %d messages, the largest %d; want %d, none over %d", sizes, total, largest, n, cap)
	}
	waitFor(t, "all messages to be acked", 30*time.Second, func() bool { return ackedOn(sub) >= n })
	stop()
	if left := e.redelivered(t, sub, time.Now().Add(cfg.AckDeadline+time.Second)); len(left) > 0 {
		t.Errorf("%d messages redelivered after the pipeline acked everything", len(left))
	}
}

// testLargeMessages: a backlog of messages of 1 MB, and one of 9 MB (near
// Pub/Sub's 10 MB), is read whole, in bundles whose bytes stay within
// MaxBytesPerBundle but for the message larger than it, which is read
// alone.
func testLargeMessages(t *testing.T, e *env) {
	topic, sub := e.create(t, "large")
	const (
		run   = "large"
		n     = 10
		size  = 999_999 // a multiple of a rid's length
		huge  = 9_000_000
		bytes = 3 << 20
	)
	var batch []*pubsubpb.PubsubMessage
	for i := 0; i <= n; i++ {
		rid := fmt.Sprintf("l%02d", i)
		data := []byte(strings.Repeat(rid, size/len(rid)))
		if i == n {
			data = []byte(strings.Repeat(rid, huge/len(rid)))
		}
		batch = append(batch, &pubsubpb.PubsubMessage{Data: data, Attributes: map[string]string{"rid": rid}})
	}
	for _, m := range batch {
		e.publish(t, topic, []*pubsubpb.PubsubMessage{m})
	}
	cfg := pubsubio.Config{
		Subscription:      mustSub(t, sub),
		IDAttribute:       "rid",
		MaxBytesPerBundle: bytes,
		AckDeadline:       10 * time.Second,
		FinalizeTimeout:   5 * time.Second,
	}
	stop := startPipeline(t, func(s beam.Scope) {
		beam.ParDo0(s, &bundleSizeFn{Run: run}, pubsubio.Read(s, cfg))
	})
	waitFor(t, "the large messages to be read", 90*time.Second, func() bool { return len(idsOf(elemsOf(run))) == n+1 })
	for _, m := range elemsOf(run) {
		want := size
		if m.Msg.Attributes["rid"] == fmt.Sprintf("l%02d", n) {
			want = huge
		}
		if len(m.Msg.Data) != want {
			t.Errorf("message %s has %d bytes; want %d", m.Msg.Attributes["rid"], len(m.Msg.Data), want)
		}
	}
	sizes := bundlesOf(run)
	total := 0
	for _, b := range sizes {
		total += b
		if b > bytes/size {
			t.Errorf("a bundle of %d messages of %d bytes; want at most %d (MaxBytesPerBundle %d)", b, size, bytes/size, bytes)
		}
	}
	if total != n+1 {
		t.Errorf("bundles %v hold %d messages; want %d", sizes, total, n+1)
	}
	waitFor(t, "all messages to be acked", 30*time.Second, func() bool { return ackedOn(sub) >= n+1 })
	stop()
}

// TestLargeMessageOverASlowLink: a 9 MB message over a link that carries
// 4 MiB/s takes more than 2 s to arrive, past the second that a pull first
// waits. It is read once, whole, and acked: the pull cut off while its
// answer arrived widens the deadline of the pulls after it, and the
// message's redelivery arrives within it. (With a fixed deadline each
// redelivery would be cut off again, for ever.)
func TestLargeMessageOverASlowLink(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: starts the Pub/Sub emulator (a JVM) and a streaming prism pipeline; run without -short")
	}
	e := startEnv(t)
	host := os.Getenv("PUBSUB_EMULATOR_HOST")
	topic, sub := e.create(t, "slowlink")
	sizes := map[string]int{"s0": 1_000_000, "s1": 9_000_000, "s2": 1_000_000}
	for rid, size := range sizes {
		e.publish(t, topic, []*pubsubpb.PubsubMessage{{Data: bytes.Repeat([]byte{'x'}, size), Attributes: map[string]string{"rid": rid}}})
	}
	link, err := slowlink.Start(host, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	t.Setenv("PUBSUB_EMULATOR_HOST", link.Addr()) // the reader's client only

	const run = "slowlink"
	stop := startPipeline(t, func(s beam.Scope) {
		msgs := pubsubio.Read(s, pubsubio.Config{
			Subscription:    mustSub(t, sub),
			IDAttribute:     "rid",
			AckDeadline:     30 * time.Second,
			FinalizeTimeout: 5 * time.Second,
		})
		beam.ParDo0(s, &recordFn{Run: run}, msgs)
	})
	waitFor(t, "the messages to be read over the slow link", 90*time.Second, func() bool { return len(idsOf(elemsOf(run))) == len(sizes) })
	waitFor(t, "all messages to be acked", 30*time.Second, func() bool { return ackedOn(sub) >= len(sizes) })
	stop()
	got := elemsOf(run)
	if len(got) != len(sizes) {
		t.Errorf("read %d messages; want each of %d once", len(got), len(sizes))
	}
	for _, m := range got {
		rid := m.Msg.Attributes["rid"]
		if len(m.Msg.Data) != sizes[rid] {
			t.Errorf("message %s has %d bytes; want %d", rid, len(m.Msg.Data), sizes[rid])
		}
	}
}

// testIdleWatermark: messages with old event times fall into one one-minute
// window; the default trigger fires it only when the watermark passes the
// window end, which happens when the idle subscription advances it.
func testIdleWatermark(t *testing.T, e *env) {
	topic, sub := e.create(t, "idle")
	const run = "idle"
	startPipeline(t, func(s beam.Scope) {
		msgs := pubsubio.Read(s, pubsubio.Config{
			Subscription:       mustSub(t, sub),
			TimestampAttribute: "event_ts",
			IdleAdvance:        time.Second,
		})
		w := beam.WindowInto(s, window.NewFixedWindows(time.Minute), msgs)
		keyed := beam.ParDo(s, &keyByOneFn{}, w)
		beam.ParDo0(s, &recordPaneFn{Run: run}, beam.GroupByKey(s, keyed))
	})

	const n = 20
	winStart := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	var batch []*pubsubpb.PubsubMessage
	for i := 0; i < n; i++ {
		ts := winStart.Add(time.Duration(i) * time.Second)
		batch = append(batch, &pubsubpb.PubsubMessage{
			Data:       []byte("x"),
			Attributes: map[string]string{"event_ts": strconv.FormatInt(ts.UnixMilli(), 10)},
		})
	}
	e.publish(t, topic, batch)

	waitFor(t, "the window to fire", 60*time.Second, func() bool { return len(panesOf(run)) > 0 })
	ps := panesOf(run)
	wantEnd := int64(mtime.FromTime(winStart.Add(time.Minute))) - 1
	if len(ps) != 1 || ps[0].WindowEnd != wantEnd || len(ps[0].IDs) != n {
		t.Errorf("fired panes = %+v, want one pane ending at %d with %d messages", ps, wantEnd, n)
	}
}

// testRestart: run 1 emits and finalizes batch A, then blocks inside the
// bundle that emitted batch B, so B is never finalized; run 1 is cancelled.
// Run 2 must receive all of B (redelivered: nothing lost) and none of A
// (acked after its bundle was finalized).
func testRestart(t *testing.T, e *env) {
	topic, sub := e.create(t, "restart")
	cfg := pubsubio.Config{
		Subscription:    mustSub(t, sub),
		IDAttribute:     "rid",
		IdleAdvance:     time.Second,
		AckDeadline:     10 * time.Second,
		FinalizeTimeout: 5 * time.Second, // how long a dead run holds leases
	}
	mk := func(b string, n int) []*pubsubpb.PubsubMessage {
		var out []*pubsubpb.PubsubMessage
		for i := 0; i < n; i++ {
			out = append(out, &pubsubpb.PubsubMessage{
				Data:       []byte(b),
				Attributes: map[string]string{"rid": fmt.Sprintf("%s%03d", b, i), "batch": b},
			})
		}
		return out
	}
	const nA, nB = 10, 10
	const run1, run2 = "restart-1", "restart-2"

	stop1 := startPipeline(t, func(s beam.Scope) {
		beam.ParDo0(s, &recordFn{Run: run1, BlockOnBatch: "B"}, pubsubio.Read(s, cfg))
	})
	e.publish(t, topic, mk("A", nA))
	waitFor(t, "run 1 to read batch A", 60*time.Second, func() bool { return len(elemsOf(run1)) >= nA })
	waitFor(t, "batch A to be acked on finalization", 30*time.Second, func() bool { return ackedOn(sub) >= nA })

	e.publish(t, topic, mk("B", nB))
	waitFor(t, "run 1 to start on batch B", 30*time.Second, func() bool { return len(elemsOf(run1)) > nA })
	stop1() // the bundle holding B is stuck in the sink: it is never finalized
	if got := ackedOn(sub); got != nA {
		t.Errorf("acked %d messages before the restart, want %d (batch B must not be acked)", got, nA)
	}

	startPipeline(t, func(s beam.Scope) {
		beam.ParDo0(s, &recordFn{Run: run2}, pubsubio.Read(s, cfg))
	})
	waitFor(t, "run 2 to receive all of batch B", 60*time.Second, func() bool {
		got := idsOf(elemsOf(run2))
		for i := 0; i < nB; i++ {
			if _, ok := got[fmt.Sprintf("B%03d", i)]; !ok {
				return false
			}
		}
		return true
	})
	waitFor(t, "batch B to be acked by run 2", 30*time.Second, func() bool { return ackedOn(sub) >= nA+nB })
	// Would any of A show up? Run 1 leased A before B, with the same ack
	// deadline, so an A it failed to ack was due for redelivery no later
	// than B, which run 2 has received. A marker batch C, published now and
	// waited for in full, shows that run 2 has pulled past every message
	// that was due: no sleep, a condition.
	const nC = 3
	e.publish(t, topic, mk("C", nC))
	waitFor(t, "run 2 to receive the marker batch C", 60*time.Second, func() bool {
		got := idsOf(elemsOf(run2))
		for i := 0; i < nC; i++ {
			if _, ok := got[fmt.Sprintf("C%03d", i)]; !ok {
				return false
			}
		}
		return true
	})
	for rid := range idsOf(elemsOf(run2)) {
		if rid[0] == 'A' {
			t.Errorf("run 2 received %s, which run 1 had acked", rid)
		}
	}
}

// mustSub parses a subscription name, as the launcher does once.
func mustSub(t *testing.T, name string) targets.Subscription {
	t.Helper()
	sub, err := targets.ParseSubscription(name)
	if err != nil {
		t.Fatalf("ParseSubscription(%q): %v", name, err)
	}
	return sub
}
