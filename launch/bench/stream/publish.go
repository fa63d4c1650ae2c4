package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/sensorpipe/sensorpipe/internal/sensorclock"
)

// Sensor index ranges of the phases, so that each phase has rows (and
// windows) of its own: a later phase never re-fires an earlier one's.
const (
	throughputSensor0 = 0
	latencySensor0    = 50_000
	warmupSensor0     = 90_000
	maxSensors        = 9_999 // per phase: the ranges above stay 5 digits apart
)

// rowKey is the row key of sensor's reading at eventMs.
func rowKey(sensor int, eventMs int64) string { return target.rowKey(sensor, eventMs) }

// message is sensor's reading at eventMs: the batch benchmark's line
// (bench.Lines), with attribute event_ts = eventMs and a unique record_id.
func message(sensor int, eventMs int64, seq int64) *pubsub.Message {
	return &pubsub.Message{
		Data: target.lines.AppendAt(nil, sensor, eventMs),
		Attributes: map[string]string{
			"event_ts":  strconv.FormatInt(eventMs, 10),
			"record_id": "bench-" + strconv.FormatInt(seq, 10),
		},
	}
}

// minBilledMessageBytes is the least Pub/Sub bills a message (the model
// the throughput phase's billed bytes use: 1 KB a message at least, its
// data and attributes when larger).
const minBilledMessageBytes = 1000

// messageSize is a message's billable size: its data and its attributes'
// keys and values.
func messageSize(m *pubsub.Message) int64 {
	n := int64(len(m.Data))
	for k, v := range m.Attributes {
		n += int64(len(k) + len(v))
	}
	return n
}

// batchMessage is the readings of sensors at eventMs as one NDJSON
// message: one line each, attribute event_ts the first reading's time and
// a unique record_id.
func batchMessage(sensors []int, eventMs []int64, seq int64) *pubsub.Message {
	var data []byte
	for i, s := range sensors {
		if i > 0 {
			data = append(data, '\n')
		}
		data = target.lines.AppendAt(data, s, eventMs[i])
	}
	return &pubsub.Message{
		Data: data,
		Attributes: map[string]string{
			"event_ts":  strconv.FormatInt(eventMs[0], 10),
			"record_id": "bench-" + strconv.FormatInt(seq, 10),
		},
	}
}

// publisher publishes readings and counts the emulator's answers.
type publisher struct {
	// bytes and billed are the messages' sizes and billed sizes so far.
	bytes, billed atomic.Int64
	pub           *pubsub.Publisher
	seq           atomic.Int64
	clock         sensorclock.Clock // event times of now, never repeating a sensor's millisecond
	// shift moves the event times from the wall clock's (see -hour_close_at).
	shift time.Duration

	results chan pending
	wg      sync.WaitGroup
	ok      atomic.Int64
	failed  atomic.Int64
	errMu   sync.Mutex
	first   error
	// onClose, if set, runs after close has stopped the publisher.
	onClose func()
}

// pending is a publish awaiting its answer; onFail, if set, runs when it
// fails.
type pending struct {
	res    *pubsub.PublishResult
	onFail func()
}

// newPublisher creates topic and its subscriptions subs (ack deadline
// 60s, as make stream does) on the emulator and returns a publisher
// batching up to 1,000 messages or 10ms.
func newPublisher(ctx context.Context, c *pubsub.Client, topic string, subs ...string) (*publisher, error) {
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		return nil, fmt.Errorf("create topic: %w", err)
	}
	for _, sub := range subs {
		if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 60}); err != nil {
			return nil, fmt.Errorf("create subscription: %w", err)
		}
	}
	p := &publisher{pub: c.Publisher(topic), results: make(chan pending, 50_000)}
	p.pub.PublishSettings.DelayThreshold = 10 * time.Millisecond
	p.pub.PublishSettings.CountThreshold = 1000
	p.pub.PublishSettings.FlowControlSettings.MaxOutstandingMessages = 50_000
	p.pub.PublishSettings.FlowControlSettings.LimitExceededBehavior = pubsub.FlowControlBlock
	for range 4 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for r := range p.results {
				if _, err := r.res.Get(context.Background()); err != nil {
					if r.onFail != nil {
						r.onFail()
					}
					p.errMu.Lock()
					if p.first == nil {
						p.first = err
					}
					p.errMu.Unlock()
					p.failed.Add(1) // last: waitAnswered returns after onFail
				} else {
					p.ok.Add(1)
				}
			}
		}()
	}
	return p, nil
}

// eventMs is the event time of sensor's next reading: now, or a
// millisecond after its last one.
func (p *publisher) eventMs(sensor int) int64 {
	return p.clock.Next(sensor, time.Now().Add(p.shift))
}

// send publishes sensor's reading at eventMs; onFail, if set, runs if the
// publish fails.
func (p *publisher) send(ctx context.Context, sensor int, eventMs int64, onFail func()) {
	p.publish(ctx, message(sensor, eventMs, p.seq.Add(1)), onFail)
}

// sendBatch publishes the readings of sensors at eventMs as one message.
func (p *publisher) sendBatch(ctx context.Context, sensors []int, eventMs []int64) {
	p.publish(ctx, batchMessage(sensors, eventMs, p.seq.Add(1)), nil)
}

func (p *publisher) publish(ctx context.Context, m *pubsub.Message, onFail func()) {
	size := messageSize(m)
	p.bytes.Add(size)
	p.billed.Add(max(size, minBilledMessageBytes))
	p.results <- pending{res: p.pub.Publish(ctx, m), onFail: onFail}
}

// publishing returns the number of publishes not answered yet.
func (p *publisher) publishing() int64 { return p.seq.Load() - p.ok.Load() - p.failed.Load() }

// waitAnswered waits until every publish so far is answered (or ctx ends).
func (p *publisher) waitAnswered(ctx context.Context) error {
	p.pub.Flush()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for p.publishing() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// firstError is the first failed publish's error, if any.
func (p *publisher) firstError() error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.first
}

// close flushes and stops the publisher.
func (p *publisher) close() {
	p.pub.Stop()
	close(p.results)
	p.wg.Wait()
	if p.onClose != nil {
		p.onClose()
	}
}
