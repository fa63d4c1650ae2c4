package flowcontrol

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand; After fires on Advance.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_772_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, fakeWaiter{f.now.Add(d), ch})
	return ch
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// cancelled is a context that is already done: Acquire with it succeeds
// only when the request may go at once.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func mustAcquire(t *testing.T, c *Controller, n, b int64) func(time.Duration, Signal) {
	t.Helper()
	rel, err := c.Acquire(cancelled(), n, b)
	if err != nil {
		t.Fatalf("Acquire(%d, %d) had to wait: %v (stats %+v)", n, b, err, c.Stats())
	}
	return rel
}

func mustWait(t *testing.T, c *Controller, n, b int64) {
	t.Helper()
	if _, err := c.Acquire(cancelled(), n, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire(%d, %d) = %v, want it to wait (stats %+v)", n, b, err, c.Stats())
	}
}

func TestCapOnOutstandingMutations(t *testing.T) {
	c := NewWith(Settings{MaxMutations: 10}, DefaultTuning, newFakeClock())
	a := mustAcquire(t, c, 6, 0)
	mustWait(t, c, 6, 0) // 12 > 10
	b := mustAcquire(t, c, 4, 0)
	a(time.Millisecond, OK)
	mustAcquire(t, c, 6, 0)(time.Millisecond, OK)
	b(time.Millisecond, OK)
	if s := c.Stats(); s.PeakMutations != 10 || s.Mutations != 0 {
		t.Errorf("stats = %+v, want a peak of 10 and nothing outstanding", s)
	}
}

func TestCapOnOutstandingBytes(t *testing.T) {
	c := NewWith(Settings{MaxBytes: 1000}, DefaultTuning, newFakeClock())
	a := mustAcquire(t, c, 1, 800)
	mustWait(t, c, 1, 300)
	a(time.Millisecond, OK)
	mustAcquire(t, c, 1, 300)
}

func TestARequestLargerThanTheCapGoesAlone(t *testing.T) {
	c := NewWith(Settings{MaxMutations: 10, MaxBytes: 100}, DefaultTuning, newFakeClock())
	big := mustAcquire(t, c, 50, 5000)
	mustWait(t, c, 1, 1)
	big(time.Millisecond, OK)
	mustAcquire(t, c, 1, 1)
}

func TestAcquireWakesWhenCapacityFrees(t *testing.T) {
	c := NewWith(Settings{MaxMutations: 10}, DefaultTuning, newFakeClock())
	a := mustAcquire(t, c, 10, 0)
	got := make(chan error, 1)
	go func() {
		rel, err := c.Acquire(context.Background(), 5, 0)
		if err == nil {
			rel(0, OK)
		}
		got <- err
	}()
	a(time.Millisecond, OK)
	if err := <-got; err != nil {
		t.Fatalf("waiting Acquire = %v, want it admitted once capacity freed", err)
	}
}

func TestPushBackCutsTheLimitAndPauses(t *testing.T) {
	clock := newFakeClock()
	c := NewWith(Settings{MaxMutations: 1000}, DefaultTuning, clock)
	rel := mustAcquire(t, c, 100, 0)
	rel(time.Millisecond, Overloaded)
	s := c.Stats()
	if s.Limit != 700 || s.PushBacks != 1 || s.Cuts != 1 {
		t.Fatalf("after RESOURCE_EXHAUSTED: stats %+v, want limit 700 (x0.7), one push-back, one cut", s)
	}
	// Paused: nothing goes, though nothing is outstanding.
	mustWait(t, c, 1, 0)
	pause := s.PausedUntil.Sub(clock.Now())
	if pause < DefaultTuning.BackoffBase/2 || pause > DefaultTuning.BackoffBase {
		t.Fatalf("pause = %v, want within [%v, %v]", pause, DefaultTuning.BackoffBase/2, DefaultTuning.BackoffBase)
	}
	// A waiter goes when the pause ends.
	got := make(chan error, 1)
	go func() {
		rel, err := c.Acquire(context.Background(), 1, 0)
		if err == nil {
			rel(time.Millisecond, Overloaded) // a second push-back in the same period
		}
		got <- err
	}()
	waitForTimer(t, clock)
	clock.Advance(pause)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	s = c.Stats()
	if s.Limit != 700 || s.PushBacks != 2 {
		t.Errorf("second push-back within the period: stats %+v, want the limit cut once only", s)
	}
	if p := s.PausedUntil.Sub(clock.Now()); p < DefaultTuning.BackoffBase || p > 2*DefaultTuning.BackoffBase {
		t.Errorf("second pause = %v, want the backoff doubled: within [%v, %v]", p, DefaultTuning.BackoffBase, 2*DefaultTuning.BackoffBase)
	}
	// A period later, a success grows the limit back by 1.3.
	clock.Advance(DefaultTuning.Period)
	mustAcquire(t, c, 1, 0)(time.Millisecond, OK)
	if s := c.Stats(); s.Limit != 910 {
		t.Errorf("after a quiet period: limit %d, want 910 (700 x 1.3)", s.Limit)
	}
}

// waitForTimer waits until a goroutine is blocked on the fake clock.
func waitForTimer(t *testing.T, f *fakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		n := len(f.waiters)
		f.mu.Unlock()
		if n > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no goroutine waited on the clock")
}

func TestSlowRequestsCutWithoutPausing(t *testing.T) {
	c := NewWith(Settings{MaxMutations: 1000}, DefaultTuning, newFakeClock())
	mustAcquire(t, c, 1, 0)(time.Second, Slow)
	if s := c.Stats(); s.Limit != 700 || !s.PausedUntil.IsZero() {
		t.Errorf("after DEADLINE_EXCEEDED: %+v, want limit 700 and no pause", s)
	}
	mustAcquire(t, c, 1, 0)
}

// TestLatencyRules walks Java's latency-based rules: the limit starts at a
// quarter of the cap, drops 30% of the cap when the mean latency passes 3x
// the target, 10% above 1.2x, and rises 5% when it is low and requests
// were throttled; never below 1% of the cap, and at most once per interval.
func TestLatencyRules(t *testing.T) {
	clock := newFakeClock()
	c := NewWith(Settings{MaxMutations: 1000, TargetLatency: 100 * time.Millisecond}, DefaultTuning, clock)
	if l := c.Stats().Limit; l != 250 {
		t.Fatalf("initial limit %d, want 250 (cap/4)", l)
	}
	step := func(latency time.Duration) int64 {
		clock.Advance(DefaultTuning.AdjustInterval)
		mustAcquire(t, c, 1, 0)(latency, OK)
		return c.Stats().Limit
	}
	if l := step(50 * time.Millisecond); l != 250 {
		t.Errorf("low latency, never throttled: limit %d, want 250 (unchanged)", l)
	}
	// The mean decays slowly; a few very slow requests lift it past 3x.
	var l int64
	for i := 0; i < 5; i++ {
		l = step(2 * time.Second)
	}
	if l != 10 {
		t.Errorf("latency far above 3x the target: limit %d, want the floor 10 (cap/100)", l)
	}
	// Throttle a request, then let latency fall: the limit rises.
	hold := mustAcquire(t, c, 10, 0)
	got := make(chan struct{})
	go func() {
		rel, err := c.Acquire(context.Background(), 5, 0)
		if err == nil {
			rel(0, OK)
		}
		close(got)
	}()
	waitForStat(t, func() bool { return c.Stats().Waiting > 0 })
	hold(time.Millisecond, OK)
	<-got
	before := c.Stats().Limit
	for i := 0; i < 40; i++ {
		l = step(time.Millisecond)
	}
	if l <= before {
		t.Errorf("low latency after throttling: limit %d, want above %d", l, before)
	}
	if s := c.Stats(); s.Throttled == 0 {
		t.Errorf("stats %+v: want the throttled request counted", s)
	}
}

func waitForStat(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestForWorkerSharesOneControllerPerTargetAndSettings(t *testing.T) {
	a := ForWorker("p/i/test-shared", Settings{MaxMutations: 5})
	b := ForWorker("p/i/test-shared", Settings{MaxMutations: 5})
	other := ForWorker("p/i/test-shared", Settings{MaxMutations: 99})
	c := ForWorker("p/i/test-other", Settings{MaxMutations: 5})
	if a != b {
		t.Errorf("ForWorker: the same target and settings gave %p and %p; want one controller", a, b)
	}
	if other == a || c == a {
		t.Errorf("ForWorker: other settings gave %p, another target %p, both sharing %p; want each its own", other, c, a)
	}
}
