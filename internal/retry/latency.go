package retry

import (
	"slices"
	"sync"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/registry"
)

// The attempt-timeout rule (see the package doc for why).
const (
	// TimeoutMultiple times the observed p99 latency is an attempt's
	// timeout.
	TimeoutMultiple = 4
	// TimeoutFloor is the shortest attempt timeout.
	TimeoutFloor = time.Second
	// ColdTimeout is the first attempt's timeout before MinSamples calls
	// have answered.
	ColdTimeout = 5 * time.Second
	// MinSamples answered calls make the observed latency trusted.
	MinSamples = 16
	// latencyWindow is how many of the latest answered calls count.
	latencyWindow = 256
)

// Latency keeps the latencies of the latest answered calls of one kind (a
// store's write method, in this process) and derives attempt timeouts
// from them. It is safe for concurrent use; the zero value is ready.
type Latency struct {
	mu      sync.Mutex
	samples [latencyWindow]time.Duration
	n       int // calls observed in all
}

// Observe records the latency of a call that answered.
func (l *Latency) Observe(d time.Duration) {
	if l == nil || d < 0 {
		return
	}
	l.mu.Lock()
	l.samples[l.n%latencyWindow] = d
	l.n++
	l.mu.Unlock()
}

// P99 is the 99th percentile of the latest answered calls' latencies,
// and how many calls it is drawn from (at most latencyWindow).
func (l *Latency) P99() (time.Duration, int) {
	l.mu.Lock()
	k := min(l.n, latencyWindow)
	s := slices.Clone(l.samples[:k])
	l.mu.Unlock()
	if k == 0 {
		return 0, 0
	}
	slices.Sort(s)
	return s[(k*99-1)/100], k
}

// Timeout is the timeout of a call's attempt-th attempt (1 the first),
// at most ceiling: TimeoutMultiple x the p99 latency of the latest
// answered calls, at least TimeoutFloor (ColdTimeout until MinSamples
// calls have answered), doubled for each attempt of the same call that
// came before.
func (l *Latency) Timeout(attempt int, ceiling time.Duration) time.Duration {
	base := ColdTimeout
	if p, n := l.P99(); n >= MinSamples {
		base = max(TimeoutFloor, TimeoutMultiple*p)
	}
	for i := 1; i < attempt && base < ceiling; i++ {
		base *= 2
	}
	if ceiling > 0 {
		base = min(base, ceiling)
	}
	return base
}

// latencies are the process's Latencies, one per name, kept for the life
// of the process (registry.Get): a Latency only measures, and every
// writer of the same store and method learns from the calls of all.
var latencies registry.Registry[string, *Latency]

// LatencyOf is this process's Latency of the calls named key (e.g.
// "bigtable MutateRows p/i"): every writer of the same store and method
// in a worker process learns from the calls of all of them.
func LatencyOf(key string) *Latency {
	return latencies.Get(key, func() *Latency { return &Latency{} })
}
