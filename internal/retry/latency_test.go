package retry

import (
	"context"
	"testing"
	"time"
)

func TestLatencyTimeout(t *testing.T) {
	observed := func(d time.Duration, n int) *Latency {
		l := &Latency{}
		for i := 0; i < n; i++ {
			l.Observe(d)
		}
		return l
	}
	for _, tc := range []struct {
		name    string
		l       *Latency
		attempt int
		ceiling time.Duration
		want    time.Duration
	}{
		{"no answers yet: the cold timeout", &Latency{}, 1, 30 * time.Second, ColdTimeout},
		{"too few answers: still cold", observed(100*time.Millisecond, MinSamples-1), 1, 30 * time.Second, ColdTimeout},
		{"fast calls: the floor", observed(100*time.Millisecond, MinSamples), 1, 30 * time.Second, TimeoutFloor},
		{"400ms calls: 4 x p99", observed(400*time.Millisecond, 100), 1, 30 * time.Second, 1600 * time.Millisecond},
		{"second attempt doubles", observed(400*time.Millisecond, 100), 2, 30 * time.Second, 3200 * time.Millisecond},
		{"fourth attempt: 8x", observed(400*time.Millisecond, 100), 4, 30 * time.Second, 12800 * time.Millisecond},
		{"never past the ceiling", observed(400*time.Millisecond, 100), 9, 30 * time.Second, 30 * time.Second},
		{"slow calls: the ceiling", observed(20*time.Second, 100), 1, 30 * time.Second, 30 * time.Second},
		{"cold, under a short ceiling", &Latency{}, 1, 2 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.l.Timeout(tc.attempt, tc.ceiling); got != tc.want {
				t.Errorf("Timeout(%d, %v) = %v; want %v", tc.attempt, tc.ceiling, got, tc.want)
			}
		})
	}
}

func TestLatencyP99KeepsTheLatestCalls(t *testing.T) {
	l := &Latency{}
	for i := 0; i < 1000; i++ {
		l.Observe(10 * time.Second) // an old, slow spell
	}
	for i := 0; i < latencyWindow; i++ {
		l.Observe(time.Duration(i+1) * time.Millisecond)
	}
	p, n := l.P99()
	if n != latencyWindow || p != 254*time.Millisecond {
		t.Errorf("P99 = %v of %d calls; want 254ms of %d (the latest calls only)", p, n, latencyWindow)
	}
}

func TestBackoffTakesItsAttemptTimeoutFromLatency(t *testing.T) {
	l := &Latency{}
	b := Policy{Deadline: time.Minute, AttemptTimeout: 30 * time.Second, Latency: l}.Start()
	for i := 0; i < MinSamples; i++ {
		_, cancel := b.AttemptContext(context.Background())
		b.Answered() // at once: well under the floor
		cancel()
	}
	b = Policy{Deadline: time.Minute, AttemptTimeout: 30 * time.Second, Latency: l}.Start()
	ctx, cancel := b.AttemptContext(context.Background())
	defer cancel()
	dl, _ := ctx.Deadline()
	if left := time.Until(dl); left > TimeoutFloor || left < TimeoutFloor/2 {
		t.Errorf("first attempt after fast answers has %v left; want about %v", left, TimeoutFloor)
	}
	if got := b.AttemptTimeout(); got != TimeoutFloor {
		t.Errorf("AttemptTimeout = %v; want %v", got, TimeoutFloor)
	}
}
