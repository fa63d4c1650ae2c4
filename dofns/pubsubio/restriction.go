package pubsubio

import (
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
)

// pullRestriction is the (unbounded) restriction of the reading SDF. A Pub/Sub
// subscription has no offsets a runner could split on, so the restriction
// counts the pulls claimed so far and carries the acknowledgements owed for
// the bundle that wrote it: it exists so that the reader can checkpoint
// itself (ProcessContinuation) and be resumed as a residual.
type pullRestriction struct {
	// Pulls is the number of pulls claimed by earlier bundles.
	Pulls int64
	// Done marks a restriction that must not claim anything any more
	// (the primary after a checkpoint, or a truncated restriction on drain).
	Done bool
	// PendingAcks are the ack IDs of the messages emitted by the bundle that
	// checkpointed this restriction. The runner commits a residual together
	// with the output of its bundle, so whoever resumes the residual may (and
	// does, first thing) acknowledge them.
	PendingAcks []string
	// PendingIDs are the Config.IDAttribute values of those messages, for
	// deduplication.
	PendingIDs []string
}

// tracker is the RTracker for pullRestriction. A claim (position = next pull
// number, int64) is made before every Pull, so everything a pull returns
// belongs to the claiming bundle.
//
// The tracker only agrees to split once ProcessElement has finished and
// marked it (checkpoint): that is the self-checkpoint the SDK performs for a
// resuming ProcessContinuation, whose residual is committed atomically with
// the bundle's output. Runner-initiated splits while the bundle is running
// are refused: their residual would start (and acknowledge the pending
// messages) before the bundle that emitted them is committed. Bundles are
// short (a couple of seconds), so the runner loses nothing by this.
type tracker struct {
	rest    pullRestriction
	stopped bool
	err     error

	ready       bool     // ProcessElement finished: a checkpoint may be taken
	pendingAcks []string // handed to the residual
	pendingIDs  []string
}

func newTracker(rest pullRestriction) *tracker {
	return &tracker{rest: rest, stopped: rest.Done}
}

// checkpoint records the acknowledgements owed by the finishing bundle and
// allows the self-checkpoint. Call with the LockRTracker's mutex held.
func (t *tracker) checkpoint(acks, ids []string) {
	t.ready = true
	t.pendingAcks, t.pendingIDs = acks, ids
}

// TryClaim claims the next pull. pos must be an int64 equal to Pulls+1.
func (t *tracker) TryClaim(pos any) bool {
	if t.stopped || t.err != nil {
		return false
	}
	p, ok := pos.(int64)
	if !ok {
		t.err = fmt.Errorf("pubsubio: claim position %v is %T, want int64", pos, pos)
		return false
	}
	if p != t.rest.Pulls+1 {
		t.err = fmt.Errorf("pubsubio: claim position %d, want %d", p, t.rest.Pulls+1)
		return false
	}
	t.rest.Pulls = p
	return true
}

// GetError reports a misuse of the tracker.
func (t *tracker) GetError() error { return t.err }

// TrySplit finishes the current restriction and returns the rest of the
// stream, with the pending acknowledgements, as the residual. It refuses
// (nil residual) until ProcessElement has marked the tracker ready.
func (t *tracker) TrySplit(fraction float64) (primary, residual any, err error) {
	if fraction < 0 || fraction > 1 {
		return nil, nil, errors.New("pubsubio: split fraction must be in [0, 1]")
	}
	if t.stopped || !t.ready {
		return t.rest, nil, nil
	}
	t.stopped = true
	p := t.rest
	p.Done = true
	p.PendingAcks, p.PendingIDs = nil, nil
	return p, pullRestriction{Pulls: t.rest.Pulls, PendingAcks: t.pendingAcks, PendingIDs: t.pendingIDs}, nil
}

// GetProgress reports the pulls done; the remaining work of an unbounded
// stream is unknown, so it is reported as 1 until the tracker is stopped.
func (t *tracker) GetProgress() (done, remaining float64) {
	if t.stopped {
		return float64(t.rest.Pulls), 0
	}
	return float64(t.rest.Pulls), 1
}

// IsDone reports whether the tracker can claim no more work.
func (t *tracker) IsDone() bool { return t.stopped }

// GetRestriction returns the current restriction.
func (t *tracker) GetRestriction() any { return t.rest }

// IsBounded is false: the restriction covers the unbounded subscription.
func (t *tracker) IsBounded() bool { return false }

// watermarkState is the persisted state of the reader's manual watermark
// estimator. It travels with every residual, so it survives checkpoints and
// the fact that successive bundles may run on different DoFn instances.
type watermarkState struct {
	// WatermarkMs is the current output watermark, epoch milliseconds.
	WatermarkMs int64
	// LastMessageMs is the wall time (epoch ms) at which the reader last
	// received a message, or first ran; used for the idle advance.
	LastMessageMs int64
}

// watermarkEstimator is a manual watermark estimator (like
// sdf.ManualWatermarkEstimator: it only moves when ProcessElement says so and
// does not observe output timestamps), extended with the idle bookkeeping.
// It never moves backwards.
type watermarkEstimator struct {
	state watermarkState
}

// CurrentWatermark implements sdf.WatermarkEstimator.
func (e *watermarkEstimator) CurrentWatermark() time.Time {
	return mtime.FromMilliseconds(e.state.WatermarkMs).ToTime()
}

// UpdateWatermark advances the watermark to t (epoch ms) if that is later.
func (e *watermarkEstimator) UpdateWatermark(ms int64) {
	if ms > int64(mtime.MaxTimestamp) {
		ms = int64(mtime.MaxTimestamp)
	}
	if ms > e.state.WatermarkMs {
		e.state.WatermarkMs = ms
	}
}
