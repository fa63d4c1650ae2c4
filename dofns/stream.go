package dofns

import (
	"context"
	"fmt"
	"hash/fnv"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/dofns/pubsubread"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*SentRows)(nil)).Elem())
	register.DoFn6x0[context.Context, beam.EventTime, string, schemas.Record, func(string, schemas.Record), func(schemas.DeadLetter)](&TooLateFn{})
	register.DoFn4x0[context.Context, string, schemas.Record, func(schemas.RowMutation)](&ArrivalRowsFn{})
	register.DoFn5x1[context.Context, state.Provider, string, PaneRows, func(schemas.BQRow), error](&BigQueryOnceFn{})
	register.DoFn3x0[string, PaneRows, func(schemas.BQRow)](&UnpackPaneRowsFn{})
	register.DoFn2x0[pubsubread.Message, func(string, string)](&MessageLineFn{})
	register.DoFn2x0[[]byte, func(string, string)](&PayloadLineFn{})
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
// wall time (pubsubread holds it at the earliest recent event time, and
// moves it to wall time only when idle), and an element in flight holds the
// watermark downstream of it. So the grouping's watermark, when a reading
// that passed this check reaches it, is at most the wall-clock time of that
// moment; Margin covers the time between the check and the grouping (the
// rest of the bundle).
type TooLateFn struct {
	WindowSize      time.Duration
	AllowedLateness time.Duration
	Margin          time.Duration

	late beam.Counter
}

// Setup prepares the counter.
func (f *TooLateFn) Setup() {
	f.late = beam.NewCounter("stream", "too_late")
}

// ProcessElement passes on-time and allowed-late readings and dead-letters
// the others.
func (f *TooLateFn) ProcessElement(ctx context.Context, et beam.EventTime, key string, r schemas.Record,
	emit func(string, schemas.Record), dead func(schemas.DeadLetter)) {
	now := time.Now().Add(f.Margin).UnixMilli()
	if !schemas.TooLate(r.EventMs, now, f.WindowSize, f.AllowedLateness) {
		emit(key, r)
		return
	}
	f.late.Inc(ctx, 1)
	closed := time.UnixMilli(schemas.WindowEnd(r.EventMs, f.WindowSize)).Add(f.AllowedLateness).UTC()
	dead(NewDeadLetter(r.Raw, r.Source, fmt.Errorf("%w: event time %s is in a window closed since %s (allowed lateness %v)",
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
type ArrivalRowsFn struct {
	Spec *schemas.Spec

	builder *schemas.Builder
}

// Setup compiles the spec.
func (f *ArrivalRowsFn) Setup() error {
	var err error
	_, f.builder, err = compile(f.Spec)
	return err
}

// ProcessElement emits r's observed cells.
func (f *ArrivalRowsFn) ProcessElement(_ context.Context, _ string, r schemas.Record, emit func(schemas.RowMutation)) {
	muts, _ := f.builder.Mutations([]schemas.Record{r}) // rejected records never pass Parse
	for _, m := range muts {
		emit(m)
	}
}

// SentRows is BigQueryOnceFn's state for one identity and window: the last
// pane handled, and the reading ids sent with their fingerprints.
type SentRows struct {
	Pane   int64
	IDs    []string
	Prints []uint64
}

// BigQueryOnceFn sends each reading to BigQuery once per window, keyed by
// identity, across the firings of an accumulating window: the first firing
// that carries it (on-time, or late for a late reading) sends it, and a
// later firing sends it again only if its imputed values changed (reading_id
// lets a reader collapse that repeat). A firing older than one already
// handled is ignored: panes accumulate, so a newer one carries all of it.
//
// Its state is per key and window, and expires with the window.
type BigQueryOnceFn struct {
	Sent state.Value[SentRows]

	sent       beam.Counter
	repeats    beam.Counter
	suppressed beam.Counter
}

// NewBigQueryOnceFn returns a BigQueryOnceFn with its state declared.
func NewBigQueryOnceFn() *BigQueryOnceFn {
	return &BigQueryOnceFn{Sent: state.MakeValueState[SentRows]("sent")}
}

// Setup prepares the counters.
func (f *BigQueryOnceFn) Setup() {
	f.sent = beam.NewCounter("bigquery_once", "rows")
	f.repeats = beam.NewCounter("bigquery_once", "changed_rows_resent")
	f.suppressed = beam.NewCounter("bigquery_once", "rows_already_sent")
}

// ProcessElement emits the rows of p not sent before, or changed since.
func (f *BigQueryOnceFn) ProcessElement(ctx context.Context, sp state.Provider, _ string, p PaneRows, emit func(schemas.BQRow)) error {
	st, ok, err := f.Sent.Read(sp)
	if err != nil {
		return fmt.Errorf("read bigquery-once state: %w", err)
	}
	if ok && p.Pane <= st.Pane {
		f.suppressed.Inc(ctx, int64(len(p.Rows)))
		return nil
	}
	prev := make(map[string]uint64, len(st.IDs))
	for i, id := range st.IDs {
		prev[id] = st.Prints[i]
	}
	next := SentRows{Pane: p.Pane, IDs: st.IDs, Prints: st.Prints}
	for i, row := range p.Rows {
		id, fp := p.IDs[i], p.Prints[i]
		old, seen := prev[id]
		switch {
		case !seen:
			next.IDs = append(next.IDs, id)
			next.Prints = append(next.Prints, fp)
			f.sent.Inc(ctx, 1)
			emit(row)
		case old != fp:
			prev[id] = fp
			f.repeats.Inc(ctx, 1)
			emit(row)
		default:
			f.suppressed.Inc(ctx, 1)
		}
	}
	for i, id := range next.IDs {
		if fp, ok := prev[id]; ok {
			next.Prints[i] = fp
		}
	}
	if err := f.Sent.Write(sp, next); err != nil {
		return fmt.Errorf("write bigquery-once state: %w", err)
	}
	return nil
}

// UnpackPaneRowsFn emits every row of a firing. It replaces BigQueryOnceFn
// when each window fires once (batch), so that no state is needed.
type UnpackPaneRowsFn struct{}

// ProcessElement emits p's rows.
func (UnpackPaneRowsFn) ProcessElement(_ string, p PaneRows, emit func(schemas.BQRow)) {
	for _, r := range p.Rows {
		emit(r)
	}
}

// Fingerprint hashes a prepared record's values: two firings that built the
// same reading with the same (imputed) values give the same fingerprint.
func Fingerprint(r *schemas.Record) uint64 {
	h := fnv.New64a()
	var buf []byte
	for _, v := range r.Values {
		buf = append(buf[:0], v.Kind)
		buf = schemas.AppendText(buf, v)
		buf = append(buf, 0x1f)
		h.Write(buf)
	}
	return h.Sum64()
}

// MessageLineFn keys a Pub/Sub message's payload by its source (the
// subscription), as ParseFn expects.
type MessageLineFn struct {
	Source string
}

// ProcessElement emits KV<source, payload>.
func (f *MessageLineFn) ProcessElement(m pubsubread.Message, emit func(string, string)) {
	emit(f.Source, string(m.Data))
}

// PayloadLineFn keys a raw Pub/Sub payload (Beam's pubsubio on Dataflow) by
// its source.
type PayloadLineFn struct {
	Source string
}

// ProcessElement emits KV<source, payload>.
func (f *PayloadLineFn) ProcessElement(b []byte, emit func(string, string)) {
	emit(f.Source, string(b))
}
