package retry

import "time"

// Settings are a writer's retry policy settings, plain values that
// serialize with the DoFn that holds them (see Policy).
type Settings struct {
	// Deadline bounds one write, all attempts included (0: 2m).
	Deadline time.Duration
	// AttemptTimeout bounds one call (0: DefaultAttemptTimeout); the sinks'
	// writes take a shorter one from the latency of the calls that
	// answered (Latency), at most this.
	AttemptTimeout time.Duration
	// Initial is the first backoff's bound (0: 100ms).
	Initial time.Duration
}

// DefaultAttemptTimeout bounds one call to a store.
const DefaultAttemptTimeout = 30 * time.Second

// Policy is the retry policy of the settings.
func (r Settings) Policy() Policy {
	p := Policy{Initial: r.Initial, Deadline: r.Deadline, AttemptTimeout: r.AttemptTimeout}
	if p.AttemptTimeout <= 0 {
		p.AttemptTimeout = DefaultAttemptTimeout
	}
	return p
}
