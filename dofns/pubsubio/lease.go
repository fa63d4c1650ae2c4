package pubsubio

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/registry"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxIDsPerRequest bounds the ack IDs sent in one Acknowledge or
// ModifyAckDeadline request (the service limits request size).
const maxIDsPerRequest = 1000

// rpcTimeout bounds every ack / modack RPC.
const rpcTimeout = 30 * time.Second

// heldMsg is a message that was pulled and emitted but not yet acknowledged.
type heldMsg struct {
	pulled  time.Time // when it was pulled
	expires time.Time // when its current lease (ack deadline) ends
}

// leases keeps track of the messages a reader instance holds: pulled and
// emitted, waiting for their bundle to be finalized. A background loop
// extends their ack deadlines (ModifyAckDeadline) so that Pub/Sub does not
// redeliver them while the bundle is open or awaiting finalization, and
// releases (nacks) any that wait longer than maxHold: their bundle has failed
// or the pipeline is gone, so they must be redelivered.
type leases struct {
	client  *pubsub.SubscriptionAdminClient
	sub     string
	initial time.Duration // the subscription's own ack deadline
	extend  time.Duration // lease requested on each extension
	maxHold time.Duration // give up on finalization after this long

	mu    sync.Mutex
	held  map[string]heldMsg
	acked *recentIDs // recently acked here, to avoid acking twice
}

// recentAckTTL is how long acked ids are remembered to avoid double acks.
// The two acknowledgement paths (finalization and the committed residual)
// meet within seconds, and acknowledging an id twice is harmless (Pub/Sub
// ignores it, and a failed ack is only logged), so a short memory suffices:
// it holds an entry per message read in this span, 240,000 at 2,000
// readings/s with 2 minutes; ten minutes would hold 1.2 million.
const recentAckTTL = 2 * time.Minute

func newLeases(client *pubsub.SubscriptionAdminClient, sub string, initial, extend, maxHold time.Duration) *leases {
	return &leases{client: client, sub: sub, initial: initial, extend: extend, maxHold: maxHold,
		held: map[string]heldMsg{}, acked: newRecentIDs(recentAckTTL, 0)}
}

// add starts tracking freshly pulled ack IDs.
func (l *leases) add(pulled time.Time, ackIDs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ackIDs {
		l.held[id] = heldMsg{pulled: pulled, expires: pulled.Add(l.initial)}
	}
}

// take stops tracking ackIDs and returns those that were still held.
func (l *leases) take(ackIDs []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := ackIDs[:0:0]
	for _, id := range ackIDs {
		if _, ok := l.held[id]; ok {
			delete(l.held, id)
			out = append(out, id)
		}
	}
	return out
}

// count returns the number of held messages.
func (l *leases) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// ackHeld acknowledges those of ackIDs that this process still holds, and
// returns how many it acknowledged.
func (l *leases) ackHeld(ctx context.Context, ackIDs []string) (int, error) {
	ids := l.take(ackIDs)
	l.markAcked(ids)
	return len(ids), l.send(ctx, ids)
}

// ackAll acknowledges ackIDs whether or not this process pulled them (they
// may come from a checkpoint written on another worker), skipping those it
// acknowledged recently. It returns how many it acknowledged.
func (l *leases) ackAll(ctx context.Context, ackIDs []string) (int, error) {
	l.take(ackIDs)
	l.mu.Lock()
	ids := l.acked.recordNew(ackIDs, time.Now())
	l.mu.Unlock()
	return len(ids), l.send(ctx, ids)
}

func (l *leases) markAcked(ids []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked.record(ids, time.Now())
}

// send sends Acknowledge requests for ids.
func (l *leases) send(ctx context.Context, ids []string) error {
	for len(ids) > 0 {
		n := min(len(ids), maxIDsPerRequest)
		rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		err := l.client.Acknowledge(rctx, &pubsubpb.AcknowledgeRequest{Subscription: l.sub, AckIds: ids[:n]})
		cancel()
		if err != nil {
			return fmt.Errorf("pubsubio: acknowledging %d messages on %s: %w", n, l.sub, err)
		}
		ids = ids[n:]
	}
	return nil
}

// nack releases the given held messages for immediate redelivery.
func (l *leases) nack(ctx context.Context, ackIDs []string) error {
	return l.modify(ctx, l.take(ackIDs), 0)
}

// nackAll releases every held message (used on Teardown).
func (l *leases) nackAll(ctx context.Context) error {
	l.mu.Lock()
	ids := make([]string, 0, len(l.held))
	for id := range l.held {
		ids = append(ids, id)
	}
	l.held = map[string]heldMsg{}
	l.mu.Unlock()
	return l.modify(ctx, ids, 0)
}

func (l *leases) modify(ctx context.Context, ids []string, deadline time.Duration) error {
	for len(ids) > 0 {
		n := min(len(ids), maxIDsPerRequest)
		rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		err := l.client.ModifyAckDeadline(rctx, &pubsubpb.ModifyAckDeadlineRequest{
			Subscription:       l.sub,
			AckIds:             ids[:n],
			AckDeadlineSeconds: int32(deadline / time.Second),
		})
		cancel()
		if err != nil {
			return fmt.Errorf("pubsubio: modifying ack deadline of %d messages on %s: %w", n, l.sub, err)
		}
		ids = ids[n:]
	}
	return nil
}

// tick extends leases about to expire and releases messages held too long.
func (l *leases) tick(ctx context.Context, now time.Time) {
	margin := min(l.initial/2, 5*time.Second)
	var extend, release []string
	l.mu.Lock()
	l.acked.expire(now)
	for id, h := range l.held {
		switch {
		case now.Sub(h.pulled) >= l.maxHold:
			release = append(release, id)
			delete(l.held, id)
		case h.expires.Sub(now) <= margin:
			extend = append(extend, id)
			h.expires = now.Add(l.extend)
			l.held[id] = h
		}
	}
	l.mu.Unlock()
	if len(release) > 0 {
		log.Warnf(ctx, "pubsubio: %d messages on %s were not finalized within %v; releasing them for redelivery", len(release), l.sub, l.maxHold)
		if err := l.modify(ctx, release, 0); err != nil {
			log.Warnf(ctx, "pubsubio: releasing messages: %v", err)
		}
	}
	if len(extend) > 0 {
		// Failures are not fatal: at worst Pub/Sub redelivers the message
		// (at-least-once), and the next tick retries.
		if err := l.modify(ctx, extend, l.extend); err != nil {
			log.Warnf(ctx, "pubsubio: extending leases: %v", err)
		}
	}
}

// run calls tick periodically until ctx is done.
func (l *leases) run(ctx context.Context) {
	period := max(min(l.initial/4, time.Second), 100*time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			l.tick(ctx, now)
		}
	}
}

// subscriber is the per-process state shared by all reader DoFn instances of
// one subscription: a client, the held-message leases with their keeper
// goroutine, and the dedup cache. Runners create a DoFn instance per bundle
// processor (prism makes a new one whenever an earlier one still awaits
// finalization), and a checkpoint written by one instance is resumed by
// another, so this state must not live in a single instance.
type subscriber struct {
	client *pubsub.SubscriptionAdminClient
	leases *leases
	seen   *seenIDs
	// pending are the bundles whose messages neither path has acked yet.
	pending *pending
	wait    *pullWait
	ramp    bundleRamp
	busy    atomic.Bool     // the last pull returned messages (see busyPullWait)
	ctx     context.Context // for acks and lease RPCs; outlives bundles
	cancel  context.CancelFunc
}

// subscribers are the process's shared subscribers, one per server,
// subscription, id attribute and lease settings: made by the first reader
// instance's Setup (acquireSubscriber), shared by every instance with the
// same settings, and closed by the last one's Teardown (releaseSubscriber),
// which hands the messages still held back for redelivery.
var subscribers registry.Registry[subscriberKey, *subscriber]

type subscriberKey struct {
	host, sub, idAttribute string
	extend, maxHold        time.Duration
}

// acquireSubscriber returns the shared subscriber for sub, creating it if
// needed. Pair with releaseSubscriber.
func acquireSubscriber(ctx context.Context, sub, idAttribute string, extend, maxHold time.Duration) (subscriberKey, *subscriber, error) {
	key := subscriberKey{os.Getenv("PUBSUB_EMULATOR_HOST"), sub, idAttribute, extend, maxHold}
	s, err := subscribers.Acquire(key, func() (*subscriber, error) { return newSubscriber(ctx, key) })
	return key, s, err
}

// newSubscriber opens key's client and starts its lease keeper.
func newSubscriber(ctx context.Context, key subscriberKey) (*subscriber, error) {
	client, err := pubsub.NewSubscriptionAdminClient(ctx, option.WithGRPCDialOption(grpc.WithStatsHandler(answerStarted{})))
	if err != nil {
		return nil, fmt.Errorf("pubsubio: creating subscriber client: %w", err)
	}
	// The subscription's own ack deadline is the lease a pulled message starts
	// with. Reading it needs pubsub.subscriptions.get, which a pure subscriber
	// may lack: fall back to the 10s minimum, which is always safe.
	initial := 10 * time.Second
	gctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	info, err := client.GetSubscription(gctx, &pubsubpb.GetSubscriptionRequest{Subscription: key.sub})
	cancel()
	switch {
	case err == nil && info.GetAckDeadlineSeconds() > 0:
		initial = time.Duration(info.GetAckDeadlineSeconds()) * time.Second
	case status.Code(err) == codes.NotFound:
		client.Close()
		return nil, fmt.Errorf("pubsubio: subscription %s: %w", key.sub, err)
	case err != nil:
		log.Warnf(ctx, "pubsubio: cannot read subscription %s (%v); assuming a 10s ack deadline", key.sub, err)
	}
	s := &subscriber{
		client:  client,
		leases:  newLeases(client, key.sub, initial, key.extend, key.maxHold),
		seen:    seenFor(key.host, key.sub, key.idAttribute),
		pending: newPending(key.maxHold),
		wait:    newPullWait(),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.leases.run(s.ctx)
	return s, nil
}

// releaseSubscriber drops a reference; the last one releases held messages
// for redelivery and closes the client.
func releaseSubscriber(ctx context.Context, key subscriberKey) error {
	return subscribers.Release(key, func(s *subscriber) error { return s.close(ctx) })
}

// close releases held messages for redelivery and closes the client.
func (s *subscriber) close(ctx context.Context) error {
	s.cancel()
	if s.leases.count() > 0 {
		rctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		if err := s.leases.nackAll(rctx); err != nil {
			log.Warnf(ctx, "pubsubio: releasing held messages: %v", err)
		}
		cancel()
	}
	return s.client.Close()
}
