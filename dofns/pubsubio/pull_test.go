package pubsubio

import (
	"context"
	"testing"
	"time"

	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
)

// TestPullAsksForWhatWaitsWhileABacklogLasts: a pull after one that
// returned messages asks the server to answer at once (so that no pull
// waits on the server for messages, to be cut off by its deadline after
// the server handed it some) and waits up to busyPullWait for the answer;
// a pull after an empty answer waits on the server again, with the short
// deadline. Against pstest, Google's in-process Pub/Sub fake, which holds
// a waiting pull on an empty subscription for half a second.
func TestPullAsksForWhatWaitsWhileABacklogLasts(t *testing.T) {
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr)
	ctx := context.Background()
	const topic, sub = "projects/p/topics/backlog", "projects/p/subscriptions/backlog"
	admin, err := vkit.NewSubscriptionAdminClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	srv.Publish(topic, []byte("before"), nil) // creates the topic; the subscription never sees it
	if _, err := admin.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	key, s, err := acquireSubscriber(ctx, sub, "", time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseSubscriber(ctx, key) })
	fn := &readFn{Subscription: sub, sub: s}
	pull := func(max int) (int, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := fn.pull(ctx, max)
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.GetReceivedMessages()), time.Since(start)
	}
	const waited = 400 * time.Millisecond // pstest holds a waiting pull 500 ms

	if n, took := pull(10); n != 0 || took < waited || s.busy.Load() {
		t.Errorf("pull of an empty subscription: %d messages in %v, busy %v; want none after the server's wait, not busy", n, took, s.busy.Load())
	}
	for range 3 {
		srv.Publish(topic, []byte("reading"), nil)
	}
	if n, _ := pull(2); n != 2 || !s.busy.Load() {
		t.Errorf("pull of a backlog: %d messages, busy %v; want 2, busy", n, s.busy.Load())
	}
	if n, _ := pull(10); n != 1 || !s.busy.Load() {
		t.Errorf("pull of the backlog's rest: %d messages, busy %v; want 1, busy", n, s.busy.Load())
	}
	if n, took := pull(10); n != 0 || took >= waited || s.busy.Load() {
		t.Errorf("pull after a backlog: %d messages in %v, busy %v; want none at once, not busy", n, took, s.busy.Load())
	}
	if n, took := pull(10); n != 0 || took < waited {
		t.Errorf("pull of an idle subscription: %d messages in %v; want none after the server's wait", n, took)
	}
}
