package pubsubio

import (
	"context"
	"fmt"
	"testing"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// TestReadersWithOtherSettingsShareNoSubscriber: two pipelines in one
// process reading the same subscription share the process's subscriber
// (client, leases, acks held) and its redelivery cache only when their
// settings match; one with another lease or id attribute gets its own, and
// the last reader to let go closes it.
func TestReadersWithOtherSettingsShareNoSubscriber(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: uses the Pub/Sub emulator")
	}
	t.Setenv("PUBSUB_EMULATOR_HOST", PubSubEmulator(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics, err := pubsub.NewTopicAdminClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer topics.Close()
	subs, err := pubsub.NewSubscriptionAdminClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer subs.Close()
	n := time.Now().UnixNano() // a name of its own when run again (-count)
	topic, sub := fmt.Sprintf("projects/p/topics/shared-%d", n), fmt.Sprintf("projects/p/subscriptions/shared-%d", n)
	if _, err := topics.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := subs.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 10}); err != nil {
		t.Fatal(err)
	}

	type reader struct {
		key subscriberKey
		s   *subscriber
	}
	acquire := func(idAttribute string, extend time.Duration) reader {
		t.Helper()
		k, s, err := acquireSubscriber(ctx, sub, idAttribute, extend, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return reader{k, s}
	}
	a1, a2 := acquire("rid", 30*time.Second), acquire("rid", 30*time.Second)
	otherID, otherLease := acquire("event_id", 30*time.Second), acquire("rid", 60*time.Second)
	if a1.s != a2.s {
		t.Error("two readers with the same settings have two subscribers")
	}
	if otherID.s == a1.s || otherLease.s == a1.s || otherID.s == otherLease.s {
		t.Error("readers with another id attribute or lease share a subscriber")
	}
	if otherID.s.seen == a1.s.seen {
		t.Error("readers with another id attribute share the ids seen")
	}
	if otherLease.s.seen != a1.s.seen {
		t.Error("readers of the same ids with another lease do not share the ids seen")
	}
	held := func() int {
		n := 0
		subscribers.Each(func(k subscriberKey, _ *subscriber) {
			if k.sub == sub {
				n++
			}
		})
		return n
	}
	for i, r := range []reader{a1, otherID, otherLease} {
		if err := releaseSubscriber(ctx, r.key); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if n := held(); n != 1 {
		t.Fatalf("%d subscribers of %s after all but one reader let go; want 1 (a2's)", n, sub)
	}
	if err := releaseSubscriber(ctx, a2.key); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 0 {
		t.Fatalf("%d subscribers of %s after every reader let go; want 0", n, sub)
	}
}
