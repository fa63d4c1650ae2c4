// Package flowcontrol bounds and paces the Bigtable writes of one worker
// process, after the Java Bigtable client's flow control that Beam Java's
// BigtableIO uses (com.google.cloud.bigtable.data.v2.stub:
// BigtableBatchingCallSettings, DynamicFlowControlCallable,
// RateLimitingServerStreamingCallable).
//
// What is modelled, and how:
//
//   - A cap on outstanding work (the Java FlowController's
//     maxOutstandingElementCount and maxOutstandingRequestBytes, "blocked"
//     when exceeded; Beam's withMaxOutstandingElements/Bytes). Here the
//     elements are mutations (cells set or deleted), since one sensorpipe
//     row may carry one cell or thousands. A request larger than the cap is
//     admitted alone, so nothing deadlocks.
//   - Latency-based throttling (Java's enableLatencyBasedThrottling, opt-in
//     there and here with a target latency): a decaying mean of request
//     latency, and at most every AdjustInterval (20 s in Java) the
//     mutation limit moves: down 30% of the cap above 3x the target, down
//     10% above 1.2x, up 5% below 0.8x when requests were throttled in the
//     last 5 minutes, up 2% when the limit is under 5% of the cap and the
//     latency under 2x. The limit stays in [cap/100, cap] and starts at
//     cap/4, as in Java.
//   - Push-back (the batch write flow control of withFlowControl(true)):
//     Java lowers its rate by the factor 0.7 on RESOURCE_EXHAUSTED,
//     UNAVAILABLE or DEADLINE_EXCEEDED, at most once per 10 s period, and
//     raises it by at most 1.3 per period. Here RESOURCE_EXHAUSTED and
//     DEADLINE_EXCEEDED cut the mutation limit by 0.7 once per Period, and
//     RESOURCE_EXHAUSTED also holds every new request back for an
//     exponential backoff with jitter (100 ms doubling to 10 s), so a
//     server that says it is overloaded gets quiet time rather than the
//     same load retried; each Period without push-back grows the limit by
//     1.3 back to where latency control (or the cap) puts it. UNAVAILABLE
//     is a transport failure the client retries, not a load signal.
//
// Not modelled: the server's RateLimitInfo (the Go client does not
// surface MutateRows responses) and a QPS limiter; the limit here is on
// outstanding mutations, which bounds the rate through latency.
package flowcontrol

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/registry"
)

// Settings configure a Controller. The zero value caps nothing and never
// throttles on latency (push-back still pauses).
type Settings struct {
	// MaxMutations caps the mutations outstanding at once; 0: no cap.
	MaxMutations int64
	// MaxBytes caps the request bytes outstanding at once; 0: no cap.
	MaxBytes int64
	// TargetLatency turns on latency-based throttling toward it; 0: off.
	TargetLatency time.Duration
}

// Tuning is the timing of the adjustments; DefaultTuning is Java's.
type Tuning struct {
	AdjustInterval time.Duration // latency-based: the least time between adjustments (20 s)
	ThrottledFor   time.Duration // latency-based: how long a throttled request counts (5 min)
	Period         time.Duration // push-back: the least time between limit changes (10 s)
	BackoffBase    time.Duration // push-back: the first pause (100 ms)
	BackoffMax     time.Duration // push-back: the longest pause (10 s)
}

// DefaultTuning follows the Java client.
var DefaultTuning = Tuning{
	AdjustInterval: 20 * time.Second,
	ThrottledFor:   5 * time.Minute,
	Period:         10 * time.Second,
	BackoffBase:    100 * time.Millisecond,
	BackoffMax:     10 * time.Second,
}

// Signal is what a finished request tells the controller.
type Signal int

// Signals.
const (
	OK         Signal = iota // the request succeeded, or failed for another reason
	Overloaded               // RESOURCE_EXHAUSTED: push-back, cut and pause
	Slow                     // DEADLINE_EXCEEDED: cut
)

// Clock is the time source; tests supply a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Stats is a snapshot of a controller.
type Stats struct {
	Limit                    int64 // the current mutation limit (0: no cap)
	Mutations, Bytes         int64 // outstanding now
	PeakMutations, PeakBytes int64 // the most outstanding at once
	Requests                 int64 // requests admitted
	Throttled                int64 // requests that had to wait
	Waiting                  int   // requests waiting now
	PushBacks                int64 // Overloaded signals
	Cuts, Raises             int64 // limit changes
	PausedUntil              time.Time
}

// Controller admits requests while the outstanding mutations and bytes stay
// under their limits, and adapts the mutation limit to push-back and
// latency. It is safe for concurrent use; share one per worker process
// (ForWorker).
type Controller struct {
	s     Settings
	t     Tuning
	clock Clock

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced when a waiter may proceed
	limit       int64         // mutations; 0: no cap
	minLimit    int64
	mutations   int64
	bytes       int64
	pauseUntil  time.Time
	consecutive int // push-backs since the last success
	lastCut     time.Time
	lastRaise   time.Time
	lastAdjust  time.Time // latency-based
	throttledAt time.Time
	waiting     int // goroutines blocked in Acquire
	mean        decaying
	stats       Stats
}

// New returns a controller with the Java client's tuning.
func New(s Settings) *Controller { return NewWith(s, DefaultTuning, wallClock{}) }

// NewWith returns a controller with its own tuning and clock.
func NewWith(s Settings, t Tuning, clock Clock) *Controller {
	c := &Controller{s: s, t: t, clock: clock, changed: make(chan struct{})}
	c.limit = s.MaxMutations
	if s.MaxMutations > 0 {
		c.minLimit = max(1, s.MaxMutations/100)
		if s.TargetLatency > 0 {
			c.limit = max(c.minLimit, s.MaxMutations/4)
		}
	}
	now := clock.Now()
	c.lastCut, c.lastRaise, c.lastAdjust = now, now, now
	return c
}

// Acquire waits until a request of n mutations and b bytes may go: no
// push-back pause is running, and it fits under both limits (or nothing is
// outstanding). It returns a release to call with the request's latency
// and signal when it finishes, or ctx's error.
func (c *Controller) Acquire(ctx context.Context, n, b int64) (release func(latency time.Duration, sig Signal), err error) {
	waited := false
	for {
		c.mu.Lock()
		now := c.clock.Now()
		pause := c.pauseUntil.Sub(now)
		if pause <= 0 && c.fits(n, b) {
			c.mutations += n
			c.bytes += b
			c.stats.Requests++
			c.stats.PeakMutations = max(c.stats.PeakMutations, c.mutations)
			c.stats.PeakBytes = max(c.stats.PeakBytes, c.bytes)
			if waited {
				c.stats.Throttled++
				c.throttledAt = now
			}
			c.mu.Unlock()
			var once sync.Once
			return func(latency time.Duration, sig Signal) {
				once.Do(func() { c.release(n, b, latency, sig) })
			}, nil
		}
		ch := c.changed
		c.waiting++
		c.mu.Unlock()
		waited = true
		var timer <-chan time.Time
		if pause > 0 {
			timer = c.clock.After(pause)
		}
		var done bool
		select {
		case <-ctx.Done():
			done = true
		case <-ch:
		case <-timer:
		}
		c.mu.Lock()
		c.waiting--
		c.mu.Unlock()
		if done {
			return nil, ctx.Err()
		}
	}
}

// fits reports whether n mutations and b bytes may start now.
func (c *Controller) fits(n, b int64) bool {
	if c.mutations == 0 && c.bytes == 0 {
		return true // alone, even when larger than a limit
	}
	if c.limit > 0 && c.mutations+n > c.limit {
		return false
	}
	if c.s.MaxBytes > 0 && c.bytes+b > c.s.MaxBytes {
		return false
	}
	return true
}

func (c *Controller) release(n, b int64, latency time.Duration, sig Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.mutations -= n
	c.bytes -= b
	switch sig {
	case Overloaded:
		c.stats.PushBacks++
		c.consecutive++
		c.cut(now)
		d := c.t.BackoffBase << min(c.consecutive-1, 30)
		if d > c.t.BackoffMax || d <= 0 {
			d = c.t.BackoffMax
		}
		d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1)) // jitter in [d/2, d]
		if until := now.Add(d); until.After(c.pauseUntil) {
			c.pauseUntil = until
		}
	case Slow:
		c.cut(now)
	default:
		c.consecutive = 0
		if c.s.TargetLatency > 0 {
			c.mean.update(float64(latency.Milliseconds()), now)
			c.adjustForLatency(now)
		} else if c.limit > 0 && c.limit < c.s.MaxMutations && now.Sub(c.lastCut) >= c.t.Period && now.Sub(c.lastRaise) >= c.t.Period {
			c.setLimit(int64(math.Ceil(float64(c.limit) * 1.3)))
			c.lastRaise = now
			c.stats.Raises++
		}
	}
	c.stats.PausedUntil = c.pauseUntil
	c.wake()
}

// cut lowers the mutation limit by the factor 0.7, once per Period.
func (c *Controller) cut(now time.Time) {
	if c.limit == 0 || now.Sub(c.lastCut) < c.t.Period && c.stats.Cuts > 0 {
		return
	}
	c.setLimit(int64(float64(c.limit) * 0.7))
	c.lastCut = now
	c.stats.Cuts++
}

// adjustForLatency applies the Java client's latency rules.
func (c *Controller) adjustForLatency(now time.Time) {
	if c.s.MaxMutations == 0 || now.Sub(c.lastAdjust) < c.t.AdjustInterval {
		return
	}
	target := float64(c.s.TargetLatency.Milliseconds())
	mean := c.mean.value
	top := c.s.MaxMutations
	throttled := !c.throttledAt.IsZero() && now.Sub(c.throttledAt) <= c.t.ThrottledFor
	step := int64(0)
	switch {
	case mean > 3*target:
		step = -int64(math.Round(0.3 * float64(top)))
	case mean > 1.2*target:
		step = -int64(math.Round(0.1 * float64(top)))
	case throttled && mean < 0.8*target:
		step = int64(math.Round(0.05 * float64(top)))
	case throttled && c.limit < top/20 && mean < 2*target:
		step = int64(math.Round(0.02 * float64(top)))
	}
	if step == 0 {
		return
	}
	c.lastAdjust = now
	c.setLimit(c.limit + step)
	if step < 0 {
		c.stats.Cuts++
	} else {
		c.stats.Raises++
	}
}

func (c *Controller) setLimit(l int64) {
	c.limit = min(max(l, c.minLimit), c.s.MaxMutations)
}

// wake lets the waiters re-check.
func (c *Controller) wake() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Stats returns a snapshot.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Limit, s.Mutations, s.Bytes, s.Waiting = c.limit, c.mutations, c.bytes, c.waiting
	return s
}

// decaying is a mean that forgets: each value weighs more than the one
// before by e^(0.015 s) per second between them, so the mean follows the
// last five minutes (Java's DynamicFlowControlStats).
type decaying struct {
	value, weight float64
	start         time.Time
}

func (d *decaying) update(v float64, now time.Time) {
	if d.weight == 0 {
		d.value, d.weight, d.start = v, 1, now
		return
	}
	w := math.Exp(0.015 * now.Sub(d.start).Seconds())
	if math.IsInf(w, 0) || w > 1e12 {
		// Restart the epoch so the weights stay finite.
		d.value, d.weight, d.start = v, 1, now
		return
	}
	d.value = d.value*(d.weight/(d.weight+w)) + v*w/(d.weight+w)
	d.weight += w
}

// workers are the process's controllers, one per Bigtable target and
// settings, kept for the life of the process (registry.Get): every DoFn
// instance of a worker with the same target and settings shares one, so
// the caps hold per worker process; a pipeline with other settings gets
// its own.
var workers registry.Registry[workerKey, *Controller]

type workerKey struct {
	target string
	s      Settings
}

// ForWorker returns the process-wide controller for target (a Bigtable
// project, instance and app profile) and s, creating it on first use: the
// caps hold per worker process, however many DoFn instances it runs.
func ForWorker(target string, s Settings) *Controller {
	return workers.Get(workerKey{target, s}, func() *Controller { return New(s) })
}
