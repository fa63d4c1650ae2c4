package pubsubio

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// maxPullWait bounds a pull's deadline however slow the link, and so how
// long an idle subscription's pull waits to answer "nothing now".
const maxPullWait = time.Minute

// busyPullWait is the least deadline of a pull while the subscription has
// a backlog (the subscriber's last pull returned messages).
const busyPullWait = 10 * time.Second

// pull performs one synchronous Pull. A pull that times out without messages
// is not an error.
//
// A pull's deadline also tells the server how long to wait for messages,
// so it is short (pullTimeout): an idle subscription answers "nothing now"
// promptly. But the server dequeues the messages of an answer before
// sending it, so a pull cut off by its deadline after that leaves them
// leased to no one until their ack deadline. On a Pub/Sub emulator sharing
// two cores with the pipeline, pulls of a backlog were cut off so, and
// its last few hundred messages came up to a minute after the rest. So
// while the subscription has a backlog (the last pull returned messages)
// a pull asks the server to answer at once with what it has
// (ReturnImmediately; an empty answer ends the bundle as before) and waits
// up to busyPullWait for that answer. Once a pull answers nothing, the
// short, waiting pull applies again.
//
// And on a link too slow to carry an answer within the deadline, its
// redelivery would be cut off again, for ever: a pull cut off while its
// answer arrived widens the subscriber's deadline (pullWait).
func (fn *readFn) pull(ctx context.Context, max int) (*pubsubpb.PullResponse, error) {
	wait := fn.sub.wait.get()
	busy := fn.sub.busy.Load()
	deadline := wait
	if busy && deadline < busyPullWait {
		deadline = busyPullWait
	}
	pctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	began := new(atomic.Int64) // when the answer began (Unix ns), or 0
	start := time.Now()
	// ReturnImmediately is deprecated as a way to poll an idle subscription
	// (it may answer nothing while messages wait); here it only asks a
	// subscription known to have a backlog for what it has now.
	req := &pubsubpb.PullRequest{Subscription: fn.Subscription, MaxMessages: int32(max), ReturnImmediately: busy}
	resp, err := fn.sub.client.Pull(context.WithValue(pctx, answerKey{}, began), req)
	if err == nil {
		msgs := resp.GetReceivedMessages()
		fn.sub.busy.Store(len(msgs) > 0)
		if len(msgs) > 0 {
			from := start
			if ns := began.Load(); ns > 0 {
				from = time.Unix(0, ns)
			}
			n := 0
			for _, rm := range msgs {
				n += messageBytes(rm.GetMessage())
			}
			fn.sub.wait.answered(wait, n, time.Since(from))
		}
		return resp, nil
	}
	if ctx.Err() == nil && (pctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded) {
		fn.sub.busy.Store(false)
		if began.Load() > 0 {
			if next, ok := fn.sub.wait.cutOff(wait); ok {
				log.Warnf(ctx, "pubsubio: a pull of %s was cut off by its %v deadline while its answer arrived; pulls now wait up to %v (its messages are redelivered after their ack deadline)", fn.Subscription, wait, next)
			}
		}
		return &pubsubpb.PullResponse{}, nil
	}
	return nil, fmt.Errorf("pubsubio: pulling %s: %w", fn.Subscription, err)
}

// pullWait is a subscriber's pull deadline: pullTimeout, widened fourfold
// (up to maxPullWait) each time an answer is cut off on the wire. It is
// halved back towards pullTimeout by each answer whose transfer shows that
// the largest answer yet would arrive within a quarter of it; the size of
// an answer cut off is unknown, so it counts as Pub/Sub's largest message. While it is
// widened, an idle subscription's pulls wait longer before they answer
// "nothing now".
type pullWait struct {
	d       atomic.Int64 // the deadline
	largest atomic.Int64 // the bytes of the largest answer that arrived
}

func newPullWait() *pullWait {
	w := &pullWait{}
	w.d.Store(int64(pullTimeout))
	return w
}

func (w *pullWait) get() time.Duration { return time.Duration(w.d.Load()) }

// cutOff widens the deadline after the answer to a pull whose deadline
// was "was" is cut off on the wire; ok is false when another pull has
// changed it already, or it is at its bound.
func (w *pullWait) cutOff(was time.Duration) (next time.Duration, ok bool) {
	w.noteAnswer(codec.MaxPubSubMessageBytes)
	next = min(was*4, maxPullWait)
	return next, next > was && w.d.CompareAndSwap(int64(was), int64(next))
}

// answered narrows the deadline after an answer of n bytes to a pull
// whose deadline was "was" took transfer to arrive.
func (w *pullWait) answered(was time.Duration, n int, transfer time.Duration) {
	largest := w.noteAnswer(n)
	if n <= 0 || was <= pullTimeout {
		return
	}
	if projected := time.Duration(float64(transfer) * float64(largest) / float64(n)); projected < was/4 {
		w.d.CompareAndSwap(int64(was), int64(max(was/2, pullTimeout)))
	}
}

// noteAnswer raises largest to n and returns it.
func (w *pullWait) noteAnswer(n int) int64 {
	for {
		l := w.largest.Load()
		if int64(n) <= l || w.largest.CompareAndSwap(l, int64(n)) {
			return max(l, int64(n))
		}
	}
}

// bundleRamp sizes the bundles at the start of a backlog: the first is
// capped at firstBundleCap messages, and each that ends full doubles the
// cap of the next, up to MaxMessagesPerBundle; a bundle that ends at an
// empty pull (the reader caught up) sets it back. Large bundles cost the
// runner less a reading (see defaultMaxMessagesPerBundle), but nothing
// downstream starts until the reader's first bundle is committed: with a
// 200,000-message backlog on the emulator, a first bundle of 16,000
// delayed the first written reading by 2.5 s, against 0.5 s for a
// subscriber that writes as it reads. A live stream's bundles end at an
// empty pull, well below the cap, so it does not see the ramp.
type bundleRamp struct {
	full atomic.Int32 // bundles ended full since the reader last caught up
}

// firstBundleCap is the cap of the first bundle into a backlog.
const firstBundleCap = 1000

// cap returns the next bundle's cap on messages, at most limit.
func (r *bundleRamp) cap(limit int) int {
	n := firstBundleCap
	for range r.full.Load() {
		if n >= limit {
			break
		}
		n *= 2
	}
	return min(n, limit)
}

// ended records how a bundle ended: full, or at an empty pull (idle).
func (r *bundleRamp) ended(full, idle bool) {
	switch {
	case full:
		if r.full.Load() < 32 {
			r.full.Add(1)
		}
	case idle:
		r.full.Store(0)
	}
}

// answerKey keys the flag that answerStarted sets in a pull's context.
type answerKey struct{}

// answerStarted is the subscriber client's gRPC stats handler: it notes
// when a pull's answer begins, that is, when its headers arrive. A gRPC
// server sends a unary call's headers with its answer, once it has the
// messages.
type answerStarted struct{}

func (answerStarted) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (answerStarted) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.InHeader); ok {
		if began, ok := ctx.Value(answerKey{}).(*atomic.Int64); ok {
			began.CompareAndSwap(0, time.Now().UnixNano())
		}
	}
}

func (answerStarted) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (answerStarted) HandleConn(context.Context, stats.ConnStats) {}
