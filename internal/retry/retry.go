// Package retry is sensorpipe's one retry policy, for every call to
// Bigtable, BigQuery, Pub/Sub and the dead-letter stores: which errors are
// worth another attempt (Retryable, each case explained), exponential
// backoff with full jitter (gax-go's Backoff, the one the Google clients
// use), a timeout per attempt and a total deadline. It never waits forever:
// when the deadline would pass, the caller gets ErrExhausted wrapping the
// last error, and dead-letters or fails.
//
// It is modelled on google-cloud-go's bigquery/storage/managedwriter
// retry.go.
//
// # Attempt timeouts
//
// An attempt timeout is what a lost answer costs: a call the store applied
// but whose answer never came (a connection wedged by a proxy or a load
// balancer, a stream reset without a status) waits out its attempt's
// timeout before it is sent again. A fixed timeout must be long enough for
// the slowest call the store ever answers, so it is many times a normal
// call's latency, and a few lost answers in a row spend the whole retry
// deadline on one call the store normally answers at once.
//
// So a write's attempts take their timeouts from the latency of the calls
// that answered (Policy.Latency; one Latency per store, write method and
// worker process, LatencyOf), the way TCP derives its retransmission
// timeout from the round-trip times it measures (RFC 6298):
//
//   - TimeoutMultiple (4) x the p99 of the latest 256 answered calls: a
//     call that answers normally is almost never cut, since p99 already
//     covers the slow tail and the multiple its jitter;
//   - at least TimeoutFloor (1 s): scheduling, a collection or a loaded
//     machine delays a call by this much without anything being wrong;
//   - ColdTimeout (5 s) until 16 calls have answered: no latency is known
//     yet, and the first calls of a run open connections;
//   - doubled for each earlier attempt of the same call (exponential, as
//     TCP backs off its timer): a store that has slowed down for real
//     gets, within a few attempts, the time it needs, so a wrong estimate
//     costs a few retries, never the write;
//   - at most Policy.AttemptTimeout (--write_attempt_timeout), the bound
//     a fixed timeout had.
//
// Every write is idempotent, so a call cut short that had in fact landed
// is only written twice, to the same cells or row.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrExhausted marks an error that was retried until the policy's deadline
// and still failed: the store stayed unavailable.
var ErrExhausted = errors.New("retries exhausted")

// Defaults of a Policy's zero fields.
const (
	DefaultInitial    = 100 * time.Millisecond
	DefaultMax        = 10 * time.Second
	DefaultMultiplier = 2
	// DefaultDeadline bounds the time spent on one write, all attempts
	// included (the launcher's --write_retry_deadline).
	DefaultDeadline = 2 * time.Minute
)

// Policy says how long to keep retrying and how to pace the attempts.
type Policy struct {
	// Initial is the first backoff's upper bound, Max the largest, and
	// each backoff's bound grows by Multiplier; a backoff is drawn
	// uniformly below its bound (full jitter), so workers that failed
	// together do not retry together.
	Initial, Max time.Duration
	Multiplier   float64
	// Deadline bounds the whole call, from the first attempt to the end
	// of the last: no attempt starts, and no backoff sleeps, past it.
	Deadline time.Duration
	// AttemptTimeout bounds one attempt (0: only the Deadline does). It
	// is what keeps a call whose answer never comes from hanging.
	AttemptTimeout time.Duration
	// MaxAttempts bounds the attempts (0: as many as the Deadline allows).
	MaxAttempts int
	// Latency, when set, gives each attempt a timeout derived from the
	// latency of the calls that answered (see Latency.Timeout), at most
	// AttemptTimeout; the calls that answer within it are recorded.
	Latency *Latency
}

// WithDefaults fills the zero fields.
func (p Policy) WithDefaults() Policy {
	if p.Initial <= 0 {
		p.Initial = DefaultInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultMax
	}
	if p.Multiplier < 1 {
		p.Multiplier = DefaultMultiplier
	}
	if p.Deadline <= 0 {
		p.Deadline = DefaultDeadline
	}
	return p
}

// Retryable reports whether err may succeed if the same call is made
// again. sensorpipe's writes are idempotent (Bigtable cells carry explicit
// timestamps, BigQuery rows an insert id or a primary key), so a call that
// may have been applied before it failed is safe to repeat.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		// The run is stopping: not the store's fault, not worth a retry.
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// One attempt's own timeout: the store was slow or the answer was
		// lost; the next attempt gets a fresh timeout.
		return true
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Internal {
		// INTERNAL is retried only when it reports a broken stream, as the
		// Bigtable client does: the Bigtable emulator also answers a bad
		// request (an unknown family, an invalid timestamp) with INTERNAL,
		// which must be dead-lettered, not retried until the deadline.
		return transportInternal(st.Message())
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return retryableCode(st.Code())
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		switch {
		case ge.Code == http.StatusTooManyRequests:
			// Rate limited: back off and come again.
			return true
		case ge.Code >= 500:
			// 500, 502, 503, 504: the service or a proxy in front of it
			// failed; BigQuery documents these as retryable.
			return true
		}
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		// The connection closed or was refused: the store restarted or is
		// restarting.
		return true
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		// A REST call that never got an HTTP answer.
		return true
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unknown {
		// gRPC reports a transport failure it cannot classify (a stream
		// reset by a proxy, "transport is closing") as Unknown; a server
		// never answers with Unknown for a bad request.
		return true
	}
	return false
}

func retryableCode(c codes.Code) bool {
	switch c {
	case codes.Unavailable:
		// The server could not be reached or dropped the connection; the
		// canonical transient error.
		return true
	case codes.DeadlineExceeded:
		// The server's own deadline passed; it may have applied the call,
		// which idempotent writes make harmless to repeat.
		return true
	case codes.ResourceExhausted:
		// Quota or throttling (Bigtable's flow control, BigQuery's
		// AppendRows throughput quota): back off and come again.
		return true
	case codes.Aborted:
		// A concurrency conflict or a stream the server chose to end;
		// the Storage Write API asks clients to retry.
		return true
	}
	// InvalidArgument, NotFound, PermissionDenied, FailedPrecondition,
	// OutOfRange, Unimplemented, ...: the same call fails again.
	return false
}

// internalTransport are the messages of an INTERNAL status that report a
// broken stream, not a bad request (google-cloud-go's bigtable.go lists
// the same).
var internalTransport = []string{"rst_stream", "rst stream", "unexpected eof", "eos on data frame", "transport is closing"}

func transportInternal(msg string) bool {
	msg = strings.ToLower(msg)
	for _, m := range internalTransport {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// Backoff paces the attempts of one call under a Policy.
type Backoff struct {
	p        Policy
	gax      gax.Backoff
	deadline time.Time
	attempts int
	began    time.Time // the latest attempt's start
}

// Start begins a call: its deadline runs from now.
func (p Policy) Start() *Backoff {
	p = p.WithDefaults()
	return &Backoff{
		p:        p,
		gax:      gax.Backoff{Initial: p.Initial, Max: p.Max, Multiplier: p.Multiplier},
		deadline: time.Now().Add(p.Deadline),
	}
}

// Attempts is how many attempts have been made.
func (b *Backoff) Attempts() int { return b.attempts }

// Deadline is when the call's time runs out.
func (b *Backoff) Deadline() time.Time { return b.deadline }

// AttemptContext returns the context of the next attempt: bounded by the
// attempt timeout and the call's deadline.
func (b *Backoff) AttemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	b.attempts++
	b.began = time.Now()
	d := b.deadline
	if t := b.AttemptTimeout(); t > 0 {
		if at := b.began.Add(t); at.Before(d) {
			d = at
		}
	}
	return context.WithDeadline(ctx, d)
}

// AttemptTimeout is the timeout of the latest attempt (AttemptContext's),
// before the call's deadline cuts it: the policy's AttemptTimeout, or with
// a Latency the timeout it derives, at most that (0: none).
func (b *Backoff) AttemptTimeout() time.Duration {
	if b.p.Latency != nil {
		return b.p.Latency.Timeout(max(1, b.attempts), b.p.AttemptTimeout)
	}
	return b.p.AttemptTimeout
}

// Answered records that the latest attempt got its answer (a success or a
// store's own error): its latency teaches the policy's Latency.
func (b *Backoff) Answered() {
	if b.p.Latency != nil && !b.began.IsZero() {
		b.p.Latency.Observe(time.Since(b.began))
	}
}

// Next decides what follows a failed attempt: it returns the backoff to
// sleep before the next one, or an error that ends the call: err itself
// when it is not retryable, or ErrExhausted wrapping it when the deadline
// leaves no room for another attempt.
func (b *Backoff) Next(err error) (time.Duration, error) {
	if !Retryable(err) {
		return 0, err
	}
	d := b.gax.Pause()
	if time.Now().Add(d).After(b.deadline) || b.p.MaxAttempts > 0 && b.attempts >= b.p.MaxAttempts {
		return 0, b.Exhausted(err)
	}
	return d, nil
}

// Exhausted wraps err, the last error of a call whose deadline passed, in
// ErrExhausted with the attempts made.
func (b *Backoff) Exhausted(err error) error {
	return fmt.Errorf("%w after %d attempts in %v: %w", ErrExhausted, b.attempts, b.p.Deadline, err)
}

// Breaker remembers that a store stayed unavailable through a whole
// deadline. While it is open, calls get one short attempt each (a probe),
// so a dead store costs one deadline, not one per call; the first call that
// succeeds closes it. It is safe for concurrent use.
type Breaker struct{ open atomic.Bool }

// ProbeTimeout bounds the one attempt a call gets while a Breaker is open.
// The clients retry UNAVAILABLE themselves within an attempt, so without
// it each probe of a dead store would last a whole attempt timeout.
const ProbeTimeout = 2 * time.Second

// Policy is p, or a single attempt of at most ProbeTimeout while the
// breaker is open.
func (br *Breaker) Policy(p Policy) Policy {
	if br.open.Load() {
		p.MaxAttempts = 1
		p.Deadline = ProbeTimeout
		p.AttemptTimeout = ProbeTimeout
	}
	return p
}

// Record notes a call's outcome: ErrExhausted opens the breaker, success
// (nil) closes it.
func (br *Breaker) Record(err error) {
	switch {
	case err == nil:
		br.open.Store(false)
	case errors.Is(err, ErrExhausted):
		br.open.Store(true)
	}
}

// Open reports whether the store was last found unavailable.
func (br *Breaker) Open() bool { return br.open.Load() }

// Wait sleeps d, or returns ctx's error if it ends first.
func Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Do calls fn until it succeeds, fails permanently, or the policy's
// deadline passes (ErrExhausted). Each attempt gets a context bounded by
// the attempt timeout and the deadline. A cancelled ctx ends it with ctx's
// error.
func Do(ctx context.Context, p Policy, fn func(context.Context) error) error {
	b := p.Start()
	for {
		actx, cancel := b.AttemptContext(ctx)
		err := fn(actx)
		cancel()
		if err == nil {
			b.Answered()
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		}
		d, stop := b.Next(err)
		if stop != nil {
			return stop
		}
		if err := Wait(ctx, d); err != nil {
			return err
		}
	}
}
