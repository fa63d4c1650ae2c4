// Package pubsubio is an unbounded Google Cloud Pub/Sub source for Beam Go
// pipelines on runners that execute the Go SDK's splittable DoFns themselves,
// notably the local prism runner (Beam's own pubsubio only works on
// Dataflow, where the runner reads Pub/Sub natively).
//
// Read pulls a subscription with synchronous Pull (a few pulls in flight at
// once while a backlog lasts) from a splittable DoFn that checkpoints itself
// with sdf.ResumeProcessingIn after every short bundle. Messages are
// acknowledged only once the runner has durably committed the bundle that
// emitted them: in a bundle-finalization callback, or (because the Go SDK
// runs those only for the first bundle of a reused bundle processor) by the
// next bundle, which resumes the checkpoint that carries their ack IDs. Until then their ack deadlines are extended in the
// background. A crash therefore loses nothing: unacknowledged messages are
// redelivered (delivery is at-least-once; Config.IDAttribute enables
// best-effort deduplication).
//
// Each message is emitted with its event time: the value of
// Config.TimestampAttribute (epoch milliseconds or RFC 3339) when set, else
// its publish time. The output watermark is held by a manual watermark
// estimator at the earliest on-time event time read in the last bundle, never
// moves backwards, never passes wall time (less a second), and advances to
// wall time once the subscription has been idle for Config.IdleAdvance.
package pubsubio

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

func init() {
	dofnreg.DoFn((*readFn)(nil), register.Function6x2[
		context.Context, *watermarkEstimator, beam.BundleFinalization, *sdf.LockRTracker, []byte,
		func(beam.EventTime, dofns.Message), sdf.ProcessContinuation, error,
	])
	register.Emitter2[beam.EventTime, dofns.Message]()
	beam.RegisterType(reflect.TypeOf((*pullRestriction)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*watermarkState)(nil)).Elem())
}

// Defaults for Config fields left zero.
//
// defaultMaxMessagesPerBundle is large because each bundle the reader
// commits has a cost downstream that does not depend on its size: prism
// (Beam v2.77) schedules and persists each stage's bundle, and
// re-examines every element a triggered GroupByKey holds each time a
// bundle adds to it, so larger bundles drain a backlog with less CPU a
// reading (make bench-backlog; figures in docs/performance.md). A bundle
// of a live stream ends well before it is full: at its first empty pull,
// so its latency does not grow with the bound. A backlog's first bundles
// are smaller (bundleRamp), so that the first readings land promptly.
//
// defaultMaxBytesPerBundle bounds the message bytes one bundle holds, so
// that a backlog of large messages (batched readings, up to Pub/Sub's 10
// MB each) is read a few at a time rather than 16,000 at once.
const (
	defaultIdleAdvance          = 3 * time.Second
	defaultMaxMessagesPerBundle = 16000
	defaultMaxBytesPerBundle    = 64 << 20
	DefaultAckDeadline          = 60 * time.Second
	defaultFinalizeTimeout      = 5 * time.Minute
)

const (
	// maxPullBatch is the most messages asked for in one Pull.
	maxPullBatch = 1000
	// pullTimeout bounds one (blocking) Pull call; a timeout means "nothing
	// now". A slow link widens it (see pullWait).
	pullTimeout = time.Second
	// maxBundleDuration bounds how long one bundle keeps pulling.
	maxBundleDuration = 4 * time.Second
	// idleResumeDelay is how long the reader sleeps after an empty pull.
	idleResumeDelay = 250 * time.Millisecond
	// maxPullsInFlight is the most pulls one bundle has in flight at once.
	// The Pub/Sub emulator returns at most 100 messages a pull, and has
	// been seen to stall a pull for a minute with 8 in flight on one
	// subscription.
	maxPullsInFlight = 4
	// idleLag is how far behind wall time the idle watermark stays, for
	// messages published just before an empty pull returned.
	idleLag = time.Second
)

// afterAck, when set (by tests only), is called after n messages of
// committed bundles have been acknowledged.
var afterAck func(sub string, n int)

// Config configures Read.
type Config struct {
	// Subscription is the subscription to read (targets.ParseSubscription).
	Subscription targets.Subscription
	// TimestampAttribute, if set, names the attribute holding each message's
	// event time, as epoch milliseconds (RFC 3339 is accepted too). Messages
	// where it is missing or unparseable carry their publish time and a
	// non-empty dofns.Message.TimestampError. If empty, the publish time is used.
	TimestampAttribute string
	// IDAttribute optionally names an attribute with a unique record id, used
	// for best-effort deduplication of redeliveries.
	IDAttribute string
	// IdleAdvance is how long the subscription must be idle before the
	// watermark advances to wall time (default defaultIdleAdvance).
	IdleAdvance time.Duration
	// MaxMessagesPerBundle caps the messages emitted by one bundle
	// (default defaultMaxMessagesPerBundle). The first bundles into a
	// backlog are capped lower, from 1,000 doubling up to it (bundleRamp).
	MaxMessagesPerBundle int
	// MaxBytesPerBundle caps the bytes of the messages one bundle emits
	// (default defaultMaxBytesPerBundle): a pull asks for no more messages
	// than fit, each reckoned at the largest message seen lately (at first
	// Pub/Sub's 10 MB), so a bundle passes it only when its messages are
	// larger than the last ones, or when one message alone is larger.
	MaxBytesPerBundle int

	// AckDeadline is the lease requested each time the ack deadline of a
	// message awaiting finalization is extended (default DefaultAckDeadline,
	// 10s..600s).
	AckDeadline time.Duration
	// FinalizeTimeout is how long an emitted message waits for its bundle to
	// be finalized before its lease is released so that Pub/Sub redelivers it
	// (the bundle presumably failed). Default defaultFinalizeTimeout.
	FinalizeTimeout time.Duration

	// Dataflow has ReadMessages read with Beam's pubsubio, which only
	// Dataflow runs (natively); the local reader's settings above, but
	// Subscription and IDAttribute, then do not apply.
	Dataflow bool
}

// withDefaults validates cfg and fills in defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Subscription.Project == "" || cfg.Subscription.ID == "" {
		return cfg, errors.New("pubsubio: no subscription: give Config.Subscription (schemas.ParseSubscription)")
	}
	if cfg.IdleAdvance < 0 || cfg.MaxMessagesPerBundle < 0 || cfg.MaxBytesPerBundle < 0 || cfg.AckDeadline < 0 || cfg.FinalizeTimeout < 0 {
		return cfg, errors.New("pubsubio: negative durations or sizes are not allowed")
	}
	if cfg.IdleAdvance == 0 {
		cfg.IdleAdvance = defaultIdleAdvance
	}
	if cfg.MaxMessagesPerBundle == 0 {
		cfg.MaxMessagesPerBundle = defaultMaxMessagesPerBundle
	}
	if cfg.MaxBytesPerBundle == 0 {
		cfg.MaxBytesPerBundle = defaultMaxBytesPerBundle
	}
	if cfg.AckDeadline == 0 {
		cfg.AckDeadline = DefaultAckDeadline
	}
	if cfg.AckDeadline < 10*time.Second || cfg.AckDeadline > 600*time.Second {
		return cfg, fmt.Errorf("pubsubio: AckDeadline %v outside 10s..600s", cfg.AckDeadline)
	}
	if cfg.FinalizeTimeout == 0 {
		cfg.FinalizeTimeout = defaultFinalizeTimeout
	}
	return cfg, nil
}

// Read returns an unbounded PCollection<dofns.Message> read from cfg.Subscription,
// each element timestamped with its event time. It panics if cfg is invalid
// (at pipeline construction time); see tryRead.
func Read(s beam.Scope, cfg Config) beam.PCollection {
	out, err := tryRead(s, cfg)
	if err != nil {
		panic(err)
	}
	return out
}

// tryRead is Read, returning an error instead of panicking on invalid cfg.
func tryRead(s beam.Scope, cfg Config) (beam.PCollection, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("pubsubio.Read")
	imp := beam.Impulse(s)
	outs, err := beam.TryParDo(s, &readFn{
		Subscription:         cfg.Subscription.String(),
		TimestampAttribute:   cfg.TimestampAttribute,
		IDAttribute:          cfg.IDAttribute,
		IdleAdvance:          cfg.IdleAdvance,
		MaxMessagesPerBundle: cfg.MaxMessagesPerBundle,
		MaxBytesPerBundle:    cfg.MaxBytesPerBundle,
		AckDeadline:          cfg.AckDeadline,
		FinalizeTimeout:      cfg.FinalizeTimeout,
	}, imp)
	if err != nil {
		return beam.PCollection{}, err
	}
	return outs[0], nil
}

// readFn is the splittable DoFn behind Read.
type readFn struct {
	Subscription         string
	TimestampAttribute   string
	IDAttribute          string
	IdleAdvance          time.Duration
	MaxMessagesPerBundle int
	MaxBytesPerBundle    int
	AckDeadline          time.Duration
	FinalizeTimeout      time.Duration

	key subscriberKey // of the shared subscriber
	sub *subscriber   // shared per process and subscription
	// msgSize is the size a pull reckons each message it asks for at
	// (reckonedSize).
	msgSize int

	messages  beam.Counter
	badTS     beam.Counter
	dups      beam.Counter
	acked     beam.Counter
	ackErrors beam.Counter
}

// Setup attaches the instance to the process's shared subscriber for the
// subscription (client, honouring PUBSUB_EMULATOR_HOST, and lease keeper).
func (fn *readFn) Setup(ctx context.Context) error {
	key, sub, err := acquireSubscriber(ctx, fn.Subscription, fn.IDAttribute, fn.AckDeadline, fn.FinalizeTimeout)
	if err != nil {
		return err
	}
	fn.key, fn.sub = key, sub
	ns := "pubsubio"
	fn.messages = beam.NewCounter(ns, "messages")
	fn.badTS = beam.NewCounter(ns, "timestamp_errors")
	fn.dups = beam.NewCounter(ns, "duplicates_dropped")
	fn.acked = beam.NewCounter(ns, "acked")
	fn.ackErrors = beam.NewCounter(ns, "ack_errors")
	return nil
}

// Teardown detaches from the shared subscriber; the last instance releases
// any messages still held and closes the client.
func (fn *readFn) Teardown(ctx context.Context) error {
	if fn.sub == nil {
		return nil
	}
	fn.sub = nil
	return releaseSubscriber(ctx, fn.key)
}

// CreateInitialRestriction starts at the first pull.
func (fn *readFn) CreateInitialRestriction(_ []byte) pullRestriction { return pullRestriction{} }

// SplitRestriction does not split: one reader per subscription.
func (fn *readFn) SplitRestriction(_ []byte, rest pullRestriction) []pullRestriction {
	return []pullRestriction{rest}
}

// RestrictionSize is unknown for a stream; report a constant.
func (fn *readFn) RestrictionSize(_ []byte, rest pullRestriction) float64 {
	if rest.Done {
		return 0
	}
	return 1
}

// CreateTracker wraps the restriction tracker in a LockRTracker.
func (fn *readFn) CreateTracker(rest pullRestriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(newTracker(rest))
}

// TruncateRestriction stops reading when the pipeline is drained (the
// pending acknowledgements are still made).
func (fn *readFn) TruncateRestriction(rt *sdf.LockRTracker, _ []byte) pullRestriction {
	r, _ := restriction(rt)
	r.Done = true
	return r
}

// restriction is rt's restriction; ok is false when rt holds another type
// (never, as CreateTracker makes it), so nothing here can panic.
func restriction(rt *sdf.LockRTracker) (pullRestriction, bool) {
	r, ok := rt.GetRestriction().(pullRestriction)
	return r, ok
}

// InitialWatermarkEstimatorState starts the watermark at the impulse's time.
func (fn *readFn) InitialWatermarkEstimatorState(et beam.EventTime, _ pullRestriction, _ []byte) watermarkState {
	return watermarkState{WatermarkMs: et.Milliseconds()}
}

// CreateWatermarkEstimator restores the manual watermark estimator.
func (fn *readFn) CreateWatermarkEstimator(st watermarkState) *watermarkEstimator {
	return &watermarkEstimator{state: st}
}

// WatermarkEstimatorState saves the estimator's state into the residual.
func (fn *readFn) WatermarkEstimatorState(we *watermarkEstimator) watermarkState {
	return we.state
}

// ackCommitted acknowledges the messages of a committed bundle. It never
// fails: at worst Pub/Sub redelivers (at-least-once); errors are logged.
// If all is false only messages this process still holds are acknowledged
// (so that the two acknowledgement paths do not both ack).
func (fn *readFn) ackCommitted(ctx context.Context, acks, ids []string, all bool) {
	if len(acks) == 0 {
		return
	}
	var n int
	var err error
	if all {
		n, err = fn.sub.leases.ackAll(fn.sub.ctx, acks)
	} else {
		n, err = fn.sub.leases.ackHeld(fn.sub.ctx, acks)
	}
	if err != nil {
		log.Warnf(ctx, "pubsubio: %v (messages will be redelivered)", err)
		fn.ackErrors.Inc(ctx, int64(n))
		return
	}
	fn.acked.Inc(ctx, int64(n))
	if len(ids) > 0 {
		fn.sub.seen.record(ids, time.Now())
	}
	if afterAck != nil && n > 0 {
		afterAck(fn.Subscription, n)
	}
}

// ProcessElement runs one short bundle. It first acknowledges the messages of
// the previous bundle, whose checkpoint it resumes (the residual only exists
// because the runner committed that bundle). It then pulls until the bundle
// is full, its time is up, or the subscription is empty, emits the messages,
// registers their acknowledgement for bundle finalization and in the
// checkpoint, updates the watermark and asks to be resumed.
func (fn *readFn) ProcessElement(
	ctx context.Context,
	we *watermarkEstimator,
	bf beam.BundleFinalization,
	rt *sdf.LockRTracker,
	_ []byte,
	emit func(beam.EventTime, dofns.Message),
) (sdf.ProcessContinuation, error) {
	start := time.Now()
	rest, ok := restriction(rt)
	if !ok {
		return sdf.StopProcessing(), fmt.Errorf("pubsubio: restriction %T is not a pubsubio.pullRestriction", rt.GetRestriction())
	}
	fn.ackCommitted(ctx, rest.PendingAcks, rest.PendingIDs, true)
	if len(rest.PendingAcks) > 0 {
		fn.sub.pending.take(rest.PendingAcks[0]) // acked: its callback has nothing left to do
	}
	if we.state.LastMessageMs == 0 {
		we.state.LastMessageMs = start.UnixMilli()
	}
	var (
		emittedAcks []string // ack IDs to ack once this bundle is committed
		emittedIDs  []string // IDAttribute values, recorded when acked
		dupAcks     []string // redeliveries of acked messages: ack at once
		bundleIDs   = map[string]bool{}
		minOnTime   = int64(mtime.MaxTimestamp)
		emitted     int
		bytes       int // of the messages emitted
		full        bool
		stopped     bool
	)

	// The bundle's cap on messages: MaxMessagesPerBundle once the reader
	// is into a backlog, smaller at its start (see bundleRamp).
	bundleCap := fn.sub.ramp.cap(fn.MaxMessagesPerBundle)

	// Up to maxPullsInFlight pulls run at once, so that pulling overlaps
	// with emitting (and with the downstream work that emitting runs) and
	// a backlog is read with several requests in flight, as the client
	// library's streaming subscriber reads with several streams. A pull is
	// claimed before it starts, so everything it returns belongs to this
	// bundle, even when it returns after the bundle's time is up. Until a
	// pull returns messages, one pull at a time: an idle subscription costs
	// one request per resumption, as with a single reader.
	var (
		results   = make(chan pulled, maxPullsInFlight)
		inFlight  int // pulls started and not yet handled
		requested int // messages asked for by the pulls in flight
		reqBytes  int // their bytes, reckoned at msgSize
		received  int // messages of the pull being handled, not yet emitted
		recBytes  int // their bytes
		busy      bool
		idle      bool  // a pull came back empty: start no more
		pullErr   error // the first failed pull: start no more
	)
	start1 := func() bool {
		room := bundleCap - emitted - received - requested
		byteRoom := fn.maxBytes() - bytes - recBytes - reqBytes
		limit := 1
		if busy {
			limit = maxPullsInFlight
		}
		if stopped || idle || pullErr != nil || inFlight >= limit || room <= 0 || byteRoom <= 0 || time.Since(start) >= maxBundleDuration {
			return false
		}
		size := fn.reckonedSize()
		if byteRoom < size && emitted+received+requested > 0 {
			return false // the next message might not fit
		}
		cur, _ := restriction(rt)
		if !rt.TryClaim(cur.Pulls + 1) {
			stopped = true // truncated (drain)
			return false
		}
		n := min(room, maxPullBatch)
		if busy {
			n = min(n, max(1, bundleCap/maxPullsInFlight))
		}
		// At least one: a message larger than the bundle's bytes is read
		// alone.
		n = max(1, min(n, byteRoom/size))
		inFlight++
		requested += n
		reqBytes += n * size
		go func() {
			resp, err := fn.pull(ctx, n)
			results <- pulled{resp: resp, err: err, asked: n, size: size}
		}()
		return true
	}
	for start1() {
	}
	var unhandled []string // ack IDs pulled after a pull failed: released below
	for inFlight > 0 {
		r := <-results
		inFlight--
		requested -= r.asked
		reqBytes -= r.asked * r.size
		if r.err != nil {
			if pullErr == nil {
				pullErr = r.err
			}
			continue
		}
		msgs := r.resp.GetReceivedMessages()
		now := time.Now()
		ackIDs := make([]string, 0, len(msgs))
		for _, rm := range msgs {
			ackIDs = append(ackIDs, rm.GetAckId())
		}
		fn.sub.leases.add(now, ackIDs)
		if pullErr != nil {
			unhandled = append(unhandled, ackIDs...)
			continue
		}
		if len(msgs) == 0 {
			idle = true
			continue
		}
		busy = true
		received, recBytes = len(msgs), fn.observe(msgs)
		for start1() { // the next pulls run while these are emitted
		}
		received, recBytes = 0, 0
		we.state.LastMessageMs = now.UnixMilli()
		for _, rm := range msgs {
			m := fn.convert(rm.GetMessage())
			if fn.IDAttribute != "" {
				if id := m.Attributes[fn.IDAttribute]; id != "" {
					if bundleIDs[id] || fn.sub.seen.contains(id, now) {
						dupAcks = append(dupAcks, rm.GetAckId())
						fn.dups.Inc(ctx, 1)
						continue
					}
					bundleIDs[id] = true
					emittedIDs = append(emittedIDs, id)
				}
			}
			if m.TimestampError != "" {
				fn.badTS.Inc(ctx, 1)
			}
			emit(mtime.FromMilliseconds(m.EventTime), m)
			emittedAcks = append(emittedAcks, rm.GetAckId())
			emitted++
			bytes += messageBytes(rm.GetMessage())
			// Messages already behind the watermark are late whatever we do;
			// only on-time ones may hold the watermark back.
			if m.EventTime >= we.state.WatermarkMs && m.EventTime < minOnTime {
				minOnTime = m.EventTime
			}
		}
		fn.messages.Inc(ctx, int64(len(msgs)))
		if emitted >= bundleCap || bytes >= fn.maxBytes() {
			full = true
		}
		for start1() { // the room that these left
		}
	}
	if pullErr != nil {
		// The bundle fails and its output is discarded: release what it
		// pulled so that it is redelivered promptly.
		release := append(append(emittedAcks, dupAcks...), unhandled...)
		if nerr := fn.sub.leases.nack(fn.sub.ctx, release); nerr != nil {
			log.Warnf(ctx, "pubsubio: %v", nerr)
		}
		return sdf.StopProcessing(), pullErr
	}

	// Duplicates of already acknowledged messages emit nothing: ack them now.
	if len(dupAcks) > 0 {
		if _, err := fn.sub.leases.ackHeld(fn.sub.ctx, dupAcks); err != nil {
			log.Warnf(ctx, "pubsubio: acking duplicates: %v", err)
		}
	}

	// Path 1: bundle finalization. Never fail it: the runner has committed
	// the bundle and cannot redo it. (A callback is registered even for
	// empty bundles: prism finalizes every bundle of a stage that requests
	// finalization, and the Go harness logs an error for a bundle without
	// callbacks.)
	// The callback holds only the bundle's key (see pending).
	acks, ids := emittedAcks, emittedIDs
	key := fn.sub.pending.hold(acks, ids, time.Now())
	bf.RegisterCallback(fn.FinalizeTimeout, func() error {
		if acks, ids, ok := fn.sub.pending.take(key); ok {
			fn.ackCommitted(context.Background(), acks, ids, false)
		}
		return nil
	})
	// Path 2: the checkpoint. The Go SDK (v2.77) runs the finalization
	// callbacks only for the first bundle of each reused bundle processor, so
	// the ack IDs also travel in the residual restriction, which the runner
	// commits atomically with this bundle's output; the next bundle acks them.
	if !stopped {
		rt.Mu.Lock()
		if t, ok := rt.Rt.(*tracker); ok {
			t.checkpoint(acks, ids)
		}
		rt.Mu.Unlock()
	} else if len(acks) > 0 {
		// No residual follows a drained reader: release for redelivery.
		fn.sub.pending.take(key)
		if err := fn.sub.leases.nack(fn.sub.ctx, acks); err != nil {
			log.Warnf(ctx, "pubsubio: %v", err)
		}
	}

	if wm, ok := nextWatermark(minOnTime, we.state.LastMessageMs, time.Now().UnixMilli(), fn.IdleAdvance); ok {
		we.UpdateWatermark(wm)
	}
	fn.sub.ramp.ended(full, idle)
	if stopped {
		return sdf.StopProcessing(), nil
	}
	if full || time.Since(start) >= maxBundleDuration {
		return sdf.ResumeProcessingIn(0), nil // more is probably waiting
	}
	return sdf.ResumeProcessingIn(idleResumeDelay), nil
}

// nextWatermark is where a bundle moves the watermark (epoch ms; ok is
// false to leave it): to minOnTimeMs, the earliest on-time event time the
// bundle read (mtime.MaxTimestamp: none), or, with none, to the wall
// clock less idleLag once the subscription has been idle (since
// lastMessageMs) for idleAdvance. Either way never past the wall clock
// less idleLag: a reading stamped ahead of its time by a device's clock
// must not close the hours of the readings still to come, which the
// runner would then drop as late. (The parse dead-letters a reading
// further ahead than the spec's max_future; the watermark does not rely
// on it.)
func nextWatermark(minOnTimeMs, lastMessageMs, nowMs int64, idleAdvance time.Duration) (int64, bool) {
	limit := nowMs - idleLag.Milliseconds()
	switch {
	case minOnTimeMs != int64(mtime.MaxTimestamp):
		return min(minOnTimeMs, limit), true
	case time.Duration(nowMs-lastMessageMs)*time.Millisecond >= idleAdvance:
		return limit, true
	}
	return 0, false
}

// pulled is what one pull of a bundle returned.
type pulled struct {
	resp  *pubsubpb.PullResponse
	err   error
	asked int
	size  int // the bytes a message it was reckoned at
}

// maxBytes is MaxBytesPerBundle, or its default.
func (fn *readFn) maxBytes() int {
	if fn.MaxBytesPerBundle <= 0 {
		return defaultMaxBytesPerBundle
	}
	return fn.MaxBytesPerBundle
}

// reckonedSize is the size a pull reckons each message it asks for at:
// Pub/Sub's largest before the reader has seen any, then the largest
// message of the last pull, or half the size reckoned before it when that
// is larger. A backlog of small messages is soon read 1,000 a pull, and
// one of large messages a few at a time.
func (fn *readFn) reckonedSize() int {
	if fn.msgSize <= 0 {
		return codec.MaxPubSubMessageBytes
	}
	return fn.msgSize
}

// observe returns the bytes of msgs and updates msgSize from them.
func (fn *readFn) observe(msgs []*pubsubpb.ReceivedMessage) int {
	total, largest := 0, 0
	for _, rm := range msgs {
		n := messageBytes(rm.GetMessage())
		total += n
		largest = max(largest, n)
	}
	fn.msgSize = max(largest, fn.reckonedSize()/2, 1)
	return total
}

// messageBytes is the size of m's data and attributes, as Pub/Sub counts
// a message's size.
func messageBytes(m *pubsubpb.PubsubMessage) int {
	n := len(m.GetData())
	for k, v := range m.GetAttributes() {
		n += len(k) + len(v)
	}
	return n
}

// convert turns a Pub/Sub message into a dofns.Message, resolving its event time.
func (fn *readFn) convert(pm *pubsubpb.PubsubMessage) dofns.Message {
	m := dofns.Message{
		ID:          pm.GetMessageId(),
		Data:        pm.GetData(),
		Attributes:  pm.GetAttributes(),
		PublishTime: pm.GetPublishTime().AsTime().UnixMilli(),
	}
	if pm.GetPublishTime() == nil {
		m.PublishTime = time.Now().UnixMilli()
	}
	m.EventTime = m.PublishTime
	if fn.TimestampAttribute == "" {
		return m
	}
	v, ok := m.Attributes[fn.TimestampAttribute]
	if !ok {
		m.TimestampError = fmt.Sprintf("timestamp attribute %q missing", fn.TimestampAttribute)
		return m
	}
	et, err := dofns.ParseEventTime(v)
	if err != nil {
		m.TimestampError = fmt.Sprintf("timestamp attribute %q: %v", fn.TimestampAttribute, err)
		return m
	}
	m.EventTime = et
	return m
}
