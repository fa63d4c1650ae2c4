package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

var backlogWarmup = flag.Int("backlog_warmup", -1, "-backlog: before the backlog, publish this many messages to a topic of their own on each side's Pub/Sub emulator and drain them twice, "+
	"by unary Pull (as the launcher's reader pulls) and by StreamingPull (as the plain subscriber receives), so that neither measured side pays its Pub/Sub emulator's "+
	"warm-up (a JVM: its pull path costs it less CPU a message once it has run a while); -1: as many as -readings; 0 skips it.")

// warmPubSub publishes n messages to a topic of its own with two
// subscriptions, drains one with unary pulls and the other with the v2
// client's Receive, and returns how long that took. The side that drains
// the backlog first would otherwise pull from an emulator whose pull path
// the JVM has not compiled yet: on this project's machine the first 200,000
// messages drained by either method took 8-10 s longer than the second.
func warmPubSub(ctx context.Context, c *pubsub.Client, project string, n int) (time.Duration, error) {
	start := time.Now()
	topic := "projects/" + project + "/topics/warmup"
	subPull, subStream := "projects/"+project+"/subscriptions/warmup-pull", "projects/"+project+"/subscriptions/warmup-stream"
	pub, err := newPublisher(ctx, c, topic, subPull, subStream)
	if err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	for i := range n {
		pub.send(ctx, throughputSensor0+i%maxSensors, time.Now().UnixMilli(), nil)
	}
	err = pub.waitAnswered(ctx)
	pub.close()
	if err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	if f := pub.failed.Load(); f > 0 {
		return 0, fmt.Errorf("warm-up: %d publishes failed: %w", f, pub.firstError())
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := drainByPull(wctx, subPull, n); err != nil {
		return 0, fmt.Errorf("warm-up by Pull: %w", err)
	}
	if err := drainByReceive(wctx, c, subStream, n); err != nil {
		return 0, fmt.Errorf("warm-up by Receive: %w", err)
	}
	return time.Since(start), nil
}

// drainByPull acknowledges n messages of sub, pulled by 4 unary pulls at
// a time.
func drainByPull(ctx context.Context, sub string, n int) error {
	cl, err := vkit.NewSubscriptionAdminClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(ctx) // the pulls still waiting once all n are in
	defer cancel()
	var (
		got   atomic.Int64
		wg    sync.WaitGroup
		first atomic.Value
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got.Load() < int64(n) && ctx.Err() == nil {
				r, err := cl.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 1000})
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
				ids := make([]string, 0, len(r.GetReceivedMessages()))
				for _, m := range r.GetReceivedMessages() {
					ids = append(ids, m.GetAckId())
				}
				if len(ids) == 0 {
					continue
				}
				if err := cl.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: ids}); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
				if got.Add(int64(len(ids))) >= int64(n) {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	if g := got.Load(); g < int64(n) {
		err, _ := first.Load().(error)
		return fmt.Errorf("%d of %d messages: %v", g, n, err)
	}
	return nil
}

// drainByReceive acknowledges n messages of sub with the v2 client's
// Receive and the plain subscriber's streams.
func drainByReceive(ctx context.Context, c *pubsub.Client, sub string, n int) error {
	s := c.Subscriber(sub)
	s.ReceiveSettings.NumGoroutines = *plainStreams
	var got atomic.Int64
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := s.Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		if got.Add(1) >= int64(n) {
			cancel()
		}
	})
	if g := got.Load(); g < int64(n) {
		return fmt.Errorf("%d of %d messages: %v", g, n, err)
	}
	return nil
}
