package dofns

import (
	"context"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*EarlyState)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*FinalState)(nil)).Elem())
	register.DoFn5x0[beam.PaneInfo, beam.Window, string, func(*schemas.Record) bool, func(string, PaneBatch)](&PaneBatchFn{})
	register.DoFn9x1[context.Context, state.Provider, timers.Provider, string, PaneBatch,
		func(schemas.RowMutation), func(schemas.BQRow), func(schemas.BQRow), func(schemas.DeadLetter), error](&StreamRowsFn{})
	register.Emitter2[string, PaneBatch]()
}

// PaneBatch is one firing of one identity's window, as PaneBatchFn hands
// it to StreamRowsFn: the window's bounds in epoch milliseconds, the pane's
// timing and index, and its readings. A stream's panes discard, so they are
// the readings that arrived since the window's previous firing.
type PaneBatch struct {
	StartMs, EndMs int64
	Timing         typex.PaneTiming
	Index          int64
	Records        []schemas.Record
}

// PaneBatchFn turns a grouped firing into a PaneBatch keyed by identity and
// window start, the key of StreamRowsFn's state.
type PaneBatchFn struct{}

// ProcessElement emits the firing's readings with its window and pane.
func (PaneBatchFn) ProcessElement(pane beam.PaneInfo, w beam.Window, key string, readings func(*schemas.Record) bool, emit func(string, PaneBatch)) {
	p := PaneBatch{Timing: pane.Timing, Index: int64(pane.Index)}
	var r schemas.Record
	for readings(&r) {
		p.Records = append(p.Records, r)
		r = schemas.Record{}
	}
	if len(p.Records) == 0 {
		return
	}
	p.StartMs, p.EndMs = windowBounds(w, p.Records[0].EventMs)
	emit(key+"@"+strconv.FormatInt(p.StartMs, 10), p)
}

// EarlyState is StreamRowsFn's summary of the early firings of one
// identity and window: the window's bounds, how many early firings there
// were, the observed values that impute the next firing's readings, and the
// rollup so far. Its size does not grow with the window.
type EarlyState struct {
	StartMs, EndMs int64
	Firings        int64
	// Dropped counts the duplicates the early firings dropped (and
	// counted), each within its own firing.
	Dropped int64
	Seen    schemas.Seen
	Rollup  schemas.Rollup
}

// FinalState is what the on-time and late firings of one identity and
// window built: each reading's event millisecond (its identity, within the
// key) and fingerprint, in event-time order, and the duplicates dropped.
type FinalState struct {
	Ms      []int64
	Prints  []uint64
	Dropped int64
}

// StreamRowsFn builds the rows of a stream's firings, keyed by identity and
// window, with state per key, so that an early firing costs the readings it
// brings rather than everything the window holds:
//
//   - An early firing prepares its own readings (PrepareEarly: duplicates
//     within the firing dropped, missing values imputed from the readings
//     seen so far) and writes their cells and the provisional rollup.
//     Earlier readings are not rewritten.
//   - The on-time firing re-imputes the window from every reading it holds
//     and rewrites each reading whose cells may differ from the batch
//     pipeline's (Rewrites: each column written or cleared): those whose
//     imputed values moved since their early firing, those it brings, and
//     those of which a duplicate was written. The rows then equal the batch
//     pipeline's. BigQuery gets every reading. Panes discard, and the
//     runner skips an empty one, so when every reading came in early
//     firings there is no on-time pane: an event-time timer at the
//     window's end fires in its place.
//   - A later firing re-imputes the window again and rewrites only what
//     changed: the readings it brings (and their duplicates), and those
//     whose imputed values moved. BigQuery gets the new readings, and the
//     changed ones again, with a higher sequence number (the time the
//     firing was built, then its pane index): the upsert write method
//     replaces the reading's row, the others append and reading_id lets a
//     reader collapse them.
//   - Every firing writes the rollup cells to Bigtable (at the window's
//     end); the on-time and later ones write the rollup row to BigQuery.
//
// Firings may reach it out of order; an early one after the on-time one is
// handled as a late one, so the last firing handled always leaves the rows
// of everything seen.
//
// It runs in the global window, keyed by identity and window start, and
// clears a window's state with an event-time timer when the window closes
// (its end plus AllowedLateness). Keyed by window instead, its state would
// be the runner's to drop, and prism (Beam v2.77) drops a stateful DoFn's
// state at the end of the window, ignoring the allowed lateness: late
// firings would find it empty.
type StreamRowsFn struct {
	Spec *schemas.Spec
	// BigQuery turns the BigQuery outputs on.
	BigQuery bool
	// AllowedLateness is the stream's: how long after its end a window's
	// state is kept.
	AllowedLateness time.Duration

	Readings state.Bag[schemas.Record]
	Early    state.Value[EarlyState]
	Final    state.Value[FinalState]
	// Timer, tagged closeTag, is the on-time firing of a window whose
	// readings all came early; tagged expiryTag, it clears the state of a
	// closed window. One family with two tags: prism (Beam v2.77) hangs a
	// bundle of a DoFn with two event-time timer families.
	Timer timers.EventTime

	hour                     hourBuilder
	sent, resent, suppressed beam.Counter
}

// NewStreamRowsFn returns a StreamRowsFn with its state and timer
// declared.
func NewStreamRowsFn(spec *schemas.Spec, bigQuery bool, allowedLateness time.Duration) *StreamRowsFn {
	return &StreamRowsFn{
		Spec:            spec,
		BigQuery:        bigQuery,
		AllowedLateness: allowedLateness,
		Readings:        state.MakeBagState[schemas.Record]("readings"),
		Early:           state.MakeValueState[EarlyState]("early"),
		Final:           state.MakeValueState[FinalState]("final"),
		Timer:           timers.InEventTime("window"),
	}
}

// Setup compiles the spec.
func (f *StreamRowsFn) Setup() error {
	f.sent = beam.NewCounter("bigquery_once", "rows")
	f.resent = beam.NewCounter("bigquery_once", "changed_rows_resent")
	f.suppressed = beam.NewCounter("bigquery_once", "rows_already_sent")
	return f.hour.setup(f.Spec)
}

// ProcessElement builds and emits the rows of one firing.
func (f *StreamRowsFn) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, _ string, p PaneBatch,
	emitRow func(schemas.RowMutation), emitBQ func(schemas.BQRow), emitRollup func(schemas.BQRow), emitDead func(schemas.DeadLetter)) error {
	if len(p.Records) == 0 {
		return nil
	}
	// No output timestamp: the timer emits nothing, so it holds no
	// watermark.
	f.Timer.Set(tp, time.UnixMilli(p.EndMs).Add(f.AllowedLateness), timers.WithTag(expiryTag), timers.WithNoOutputTimestamp())
	fin, final, err := f.Final.Read(sp)
	if err != nil {
		return fmt.Errorf("read final-firing state: %w", err)
	}
	return f.fire(ctx, sp, tp, p, fin, final, emitRow, emitBQ, emitRollup, emitDead)
}

// OnTimer fires a window's on-time firing in place of the runner's
// (closeTag) or clears the state of a window that has closed (expiryTag).
func (f *StreamRowsFn) OnTimer(ctx context.Context, sp state.Provider, tp timers.Provider, _ string, timer timers.Context,
	emitRow func(schemas.RowMutation), emitBQ func(schemas.BQRow), emitRollup func(schemas.BQRow), emitDead func(schemas.DeadLetter)) error {
	if timer.Tag == expiryTag {
		for _, clear := range []func(state.Provider) error{f.Readings.Clear, f.Early.Clear, f.Final.Clear} {
			if err := clear(sp); err != nil {
				return fmt.Errorf("clear a closed window's state: %w", err)
			}
		}
		return nil
	}
	fin, final, err := f.Final.Read(sp)
	if err != nil {
		return fmt.Errorf("read final-firing state: %w", err)
	}
	es, early, err := f.Early.Read(sp)
	if err != nil {
		return fmt.Errorf("read early-firing state: %w", err)
	}
	if final || !early {
		return nil // the on-time (or a late) pane came
	}
	p := PaneBatch{StartMs: es.StartMs, EndMs: es.EndMs, Timing: typex.PaneOnTime, Index: es.Firings}
	return f.fire(ctx, sp, tp, p, fin, final, emitRow, emitBQ, emitRollup, emitDead)
}

// fire builds and emits a firing against the window's state; fin is the
// window's final state, if final.
func (f *StreamRowsFn) fire(ctx context.Context, sp state.Provider, tp timers.Provider, p PaneBatch, fin FinalState, final bool,
	emitRow func(schemas.RowMutation), emitBQ func(schemas.BQRow), emitRollup func(schemas.BQRow), emitDead func(schemas.DeadLetter)) error {
	f.hour.firings.Inc(ctx, 1)
	var out firing
	if p.Timing == typex.PaneEarly && !final {
		es, _, err := f.Early.Read(sp)
		if err != nil {
			return fmt.Errorf("read early-firing state: %w", err)
		}
		if err := guard(func() { out = f.hour.early(p, &es) }); err != nil {
			f.hour.reject(ctx, p.Records, err, emitDead)
			return nil
		}
		if err := f.Early.Write(sp, es); err != nil {
			return fmt.Errorf("write early-firing state: %w", err)
		}
		// When the watermark passes the window's end, as the runner's
		// on-time firing would (at the window's last millisecond). No
		// output timestamp: what it emits goes to sinks, which neither
		// window nor group, so it need not hold the watermark.
		f.Timer.Set(tp, time.UnixMilli(p.EndMs-1), timers.WithTag(closeTag), timers.WithNoOutputTimestamp())
	} else {
		prev, _, err := f.Readings.Read(sp)
		if err != nil {
			return fmt.Errorf("read the window's readings: %w", err)
		}
		// The duplicates counted so far: by the final firing before, or
		// else by the early firings.
		counted := fin.Dropped
		if !final {
			es, _, err := f.Early.Read(sp)
			if err != nil {
				return fmt.Errorf("read early-firing state: %w", err)
			}
			counted = es.Dropped
		}
		var next FinalState
		now := time.Now()
		if err := guard(func() { next, out = f.hour.final(p, prev, fin, final, counted, f.BigQuery, now.UnixMilli()) }); err != nil {
			f.hour.reject(ctx, p.Records, err, emitDead)
			return nil
		}
		out.sequence(now.UnixMicro(), p.Index)
		if err := f.Final.Write(sp, next); err != nil {
			return fmt.Errorf("write final-firing state: %w", err)
		}
		if !final {
			if err := f.Early.Clear(sp); err != nil {
				return fmt.Errorf("clear early-firing state: %w", err)
			}
		}
	}
	// The firing's readings join the window's, for the firings to come.
	for _, r := range out.keep {
		if err := f.Readings.Add(sp, r); err != nil {
			return fmt.Errorf("add to the window's readings: %w", err)
		}
	}
	f.hour.ctrs.inc(ctx, ledger.Readings, out.readings)
	f.hour.ctrs.inc(ctx, ledger.Duplicates, out.dropped)
	f.sent.Inc(ctx, out.sent)
	f.resent.Inc(ctx, out.resent)
	f.suppressed.Inc(ctx, out.suppressed)
	f.hour.emit(ctx, out.rows, out.dead, emitRow, emitDead)
	for _, r := range out.bq {
		emitBQ(r)
	}
	if out.rollup != nil {
		emitRollup(*out.rollup)
	}
	return nil
}

// The tags of StreamRowsFn's timer.
const (
	closeTag  = "close"
	expiryTag = "expiry"
)

// firing is what one firing of a stream's window builds.
type firing struct {
	rows   []schemas.RowMutation
	dead   []schemas.Rejected
	bq     []schemas.BQRow
	rollup *schemas.BQRow
	// keep are the readings that join the window's state.
	keep []schemas.Record
	// readings counts the distinct readings this firing built for the
	// first time with their final values (the run's ledger counts them
	// here); dropped the duplicates found in this firing; sent, resent and
	// suppressed the BigQuery rows sent for the first time, sent again
	// because they changed, and not sent again.
	readings, dropped, sent, resent, suppressed int64
}

// early builds an early firing from the window's early state, which it
// updates.
func (h *hourBuilder) early(p PaneBatch, es *EarlyState) firing {
	// Every reading joins the state, duplicates too: the on-time firing
	// must know which readings had more than one copy written (locally,
	// WriteOnArrival writes each copy).
	keep := append([]schemas.Record(nil), p.Records...)
	kept, dropped := h.spec.PrepareEarly(p.Records, &es.Seen)
	es.StartMs, es.EndMs, es.Firings = p.StartMs, p.EndMs, max(es.Firings, p.Index+1)
	es.Dropped += int64(dropped)
	var rollup *schemas.Rollup
	if r := h.roller; r != nil {
		if es.Rollup.Stats == nil {
			es.Rollup = r.Start(p.StartMs, p.EndMs)
		}
		r.Add(&es.Rollup, kept)
		rollup = &es.Rollup
	}
	out := firing{keep: keep, dropped: int64(dropped)}
	out.rows, out.dead = h.rows(kept, rollup, false, nil, func(int) schemas.OriginKind { return schemas.OriginProvisional })
	return out
}

// final builds an on-time or late firing from the window's earlier
// readings (prev) and the state the firing before left, if final. counted
// is how many duplicates earlier firings counted. It returns the state to
// leave. now stamps the BigQuery rows' ingestion time.
//
// Every reading it finalizes for the first time (not in fin: all of them
// at the window's first on-time or late firing) is written with its final
// values: that is the write the run's ledger counts as the reading's, and
// it replaces whatever the early firings wrote provisionally (Rewrites:
// each column written or cleared, so a losing duplicate's column goes).
// A reading finalized before is rewritten only when its values changed,
// or a copy of it arrived again.
func (h *hourBuilder) final(p PaneBatch, prev []schemas.Record, fin FinalState, final bool, counted int64, bigQuery bool, now int64) (FinalState, firing) {
	out := firing{keep: p.Records}
	// sent is what the final firing before built, wrote and sent to
	// BigQuery.
	sent := make(map[int64]uint64, len(fin.Ms))
	for i, ms := range fin.Ms {
		sent[ms] = fin.Prints[i]
	}
	arrived := make(map[int64]bool, len(p.Records))
	for i := range p.Records {
		arrived[p.Records[i].EventMs] = true
	}
	// PrepareGroup re-imputes prev's values in place.
	all := make([]schemas.Record, 0, len(prev)+len(p.Records))
	all = append(append(all, prev...), p.Records...)
	kept, dropped := h.spec.PrepareGroup(all)
	out.dropped = int64(dropped) - counted

	next := FinalState{Ms: make([]int64, len(kept)), Prints: make([]uint64, len(kept)), Dropped: int64(dropped)}
	var (
		rewrite []schemas.Record
		kinds   []schemas.OriginKind
	)
	for i := range kept {
		r := &kept[i]
		fp := Fingerprint(r)
		next.Ms[i], next.Prints[i] = r.EventMs, fp
		old, had := sent[r.EventMs]
		switch {
		case !had:
			out.readings++
			rewrite, kinds = append(rewrite, *r), append(kinds, schemas.OriginReading)
		case old != fp || arrived[r.EventMs]:
			rewrite, kinds = append(rewrite, *r), append(kinds, schemas.OriginRewrite)
		}
		if !bigQuery {
			continue
		}
		switch {
		case !had:
			out.sent++
			out.bq = append(out.bq, h.builder.BQRow(r, now))
		case old != fp:
			out.resent++
			row := h.builder.BQRow(r, now)
			row.Origin.Kind = schemas.OriginRewrite
			out.bq = append(out.bq, row)
		default:
			out.suppressed++
		}
	}
	rollup := h.rollup(p.StartMs, p.EndMs, kept)
	var rollupRows []string
	if rollup != nil {
		rollupRows = h.builder.RowKeys(h.firstTable, kept)
		if bigQuery {
			// An early firing that comes after the on-time one is handled,
			// and labelled, as a late one.
			timing := p.Timing
			if timing == typex.PaneEarly {
				timing = typex.PaneLate
			}
			row := h.roller.BQRow(rollup, schemas.Pane{Timing: timing.String(), Index: p.Index}, now)
			out.rollup = &row
		}
	}
	out.rows, out.dead = h.rows(rewrite, rollup, true, rollupRows, func(i int) schemas.OriginKind { return kinds[i] })
	return next, out
}

// sequence stamps the firing's BigQuery rows with their sequence number
// (schemas.ChangeSeq): the microsecond the firing was built, then its pane
// index, so that the rows of the firing built later win in BigQuery.
func (out *firing) sequence(micros, pane int64) {
	seq := schemas.ChangeSeq{Micros: micros, Pane: pane}
	for i := range out.bq {
		out.bq[i].Seq = seq
	}
	if out.rollup != nil {
		out.rollup.Seq = seq
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
