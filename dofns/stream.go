package dofns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	dofnreg.DoFn(&TooLateFn{}, register.Function6x0[context.Context, beam.EventTime, string, schemas.Record, func(string, schemas.Record), func(deadletter.DeadLetter)])
	dofnreg.DoFn(&ArrivalRowsFn{}, register.Function4x0[context.Context, string, schemas.Record, func(hours.RowMutation)])
	register.Emitter2[string, schemas.Record]()
	register.Emitter2[string, string]()
}

// TooLateFn dead-letters, with reason too_late, the readings of a stream
// whose window has closed: window end plus AllowedLateness at or before the
// wall clock plus Margin. The runner would drop them silently at the
// grouping (once its watermark passes a window's end plus the allowed
// lateness), so they are caught before windowing.
//
// Why the wall clock is enough: a stream source's watermark does not pass
// wall time (pubsubio holds it at the earliest recent event time, never
// past the wall clock, however far ahead a device's clock stamps a
// reading, and moves it to wall time only when idle), and an element in
// flight holds the watermark downstream of it. So a reading behind the
// watermark by more than AllowedLateness is behind the wall clock by more,
// and is dead-lettered here, never held in an hour that will not fire. So the grouping's watermark, when a reading
// that passed this check reaches it, is at most the wall-clock time of that
// moment; Margin covers the time between the check and the grouping (the
// rest of the bundle).
type TooLateFn struct {
	WindowSize      time.Duration
	AllowedLateness time.Duration
	Margin          time.Duration

	ctrs ledger.Recorder
}

// StartBundle registers the too_late counter before the first one.
// (Beam wants StartBundle to take ProcessElement's emitters.)
func (f *TooLateFn) StartBundle(ctx context.Context, _ func(string, schemas.Record), _ func(deadletter.DeadLetter)) {
	f.ctrs.Register(ctx, ledger.TooLate)
}

// ProcessElement passes on-time and allowed-late readings and dead-letters
// the others.
func (f *TooLateFn) ProcessElement(ctx context.Context, et beam.EventTime, key string, r schemas.Record,
	emit func(string, schemas.Record), dead func(deadletter.DeadLetter)) {
	now := time.Now().Add(f.Margin).UnixMilli()
	if !hours.TooLate(r.EventMs, now, f.WindowSize, f.AllowedLateness) {
		emit(key, r)
		return
	}
	f.ctrs.Inc(ctx, ledger.TooLate, 1)
	closed := time.UnixMilli(hours.WindowEnd(r.EventMs, f.WindowSize)).Add(f.AllowedLateness).UTC()
	dead(deadLetter(deadletter.SinkWindow, r.Raw, r.Source, fmt.Errorf("%w: event time %s is in a window closed since %s (allowed lateness %v)",
		schemas.ErrTooLate, time.UnixMilli(r.EventMs).UTC().Format(time.RFC3339Nano), closed.Format(time.RFC3339), f.AllowedLateness)))
}

// ArrivalRowsFn builds the Bigtable cells a reading's own values give,
// before any grouping: no imputed values, which the windowed firings add.
//
// On the local runners (prism, direct) the runner keeps windows in memory
// and the Pub/Sub source acknowledges a message once the bundle that read it
// commits. Writing each reading's observed cells in that same bundle makes
// "acknowledged" imply "in Bigtable", so a killed launcher loses no reading:
// an unacknowledged one is redelivered, and the write is idempotent.
//
// It builds a bundle's readings together, at the bundle's end or every
// ArrivalBatch readings: one mutation per row (a sensor's hour) rather
// than one per reading, so the writer sends, and Bigtable applies, a
// fraction of the entries. The writer after it, in the same bundle,
// writes them before the bundle commits.
type ArrivalRowsFn struct {
	Spec *hours.Compiled

	builder *hours.Builder
	held    []schemas.Record
}

// ArrivalBatch is the most readings ArrivalRowsFn holds before it builds
// their rows.
const ArrivalBatch = 4096

// Setup takes the compiled spec's row builder.
func (f *ArrivalRowsFn) Setup() error {
	if f.Spec == nil {
		return errors.New("arrival rows: no compiled spec")
	}
	f.builder = f.Spec.Builder()
	return nil
}

// StartBundle starts with nothing held. (Beam Go wants StartBundle to
// take ProcessElement's emitter.)
func (f *ArrivalRowsFn) StartBundle(context.Context, func(hours.RowMutation)) {
	f.held = f.held[:0]
}

// ProcessElement holds r, and builds the rows of what it holds once that
// is ArrivalBatch readings.
func (f *ArrivalRowsFn) ProcessElement(_ context.Context, _ string, r schemas.Record, emit func(hours.RowMutation)) {
	// With the imputed fields' flags of the values it has (false), so
	// that an early firing need not write it again (ArrivalWritten).
	f.held = append(f.held, hours.ArrivalRecord(f.Spec.Spec, r))
	if len(f.held) >= ArrivalBatch {
		f.flush(emit)
	}
}

// FinishBundle builds the rows of the readings left.
func (f *ArrivalRowsFn) FinishBundle(_ context.Context, emit func(hours.RowMutation)) {
	f.flush(emit)
}

// flush emits the held readings' observed cells, one mutation per row.
// Rejected records never pass Parse. The firings write the readings
// again, with their imputed values: this write is provisional.
func (f *ArrivalRowsFn) flush(emit func(hours.RowMutation)) {
	if len(f.held) == 0 {
		return
	}
	muts, _ := f.builder.Build(f.held, false, func(int) hours.OriginKind { return hours.OriginProvisional })
	for _, m := range muts {
		emit(m)
	}
	clear(f.held)
	f.held = f.held[:0]
}
