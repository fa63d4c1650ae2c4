package dofns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/spill"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*EarlyState)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*FinalState)(nil)).Elem())
	dofnreg.DoFn(&PaneBatchFn{}, register.Function5x0[beam.PaneInfo, beam.Window, string, func(*HourBatch) bool, func(string, PaneBatch)])
	dofnreg.DoFn(&StreamRowsFn{}, register.Function9x1[context.Context, state.Provider, timers.Provider, string, PaneBatch,
		func(hours.RowMutation), func(hours.BQRow), func(hours.BQRow), func(deadletter.DeadLetter), error])
	register.Emitter2[string, PaneBatch]()
}

// PaneBatch is one firing of one identity's window, as PaneBatchFn hands
// it to StreamRowsFn: the window's bounds in epoch milliseconds, the pane's
// timing and index, and its readings. A stream's panes discard, so they are
// the readings that arrived since the window's previous firing.
//
// With Recover set it is not a firing but a restarted local stream's
// recovery probe (see RecoverWindowsFn): the window may hold readings in
// Bigtable that its state lost, and has no Records.
type PaneBatch struct {
	StartMs, EndMs int64
	Timing         typex.PaneTiming
	Index          int64
	Records        []schemas.Record
	Recover        bool
}

// PaneBatchFn turns a grouped firing into a PaneBatch keyed by identity and
// window start, the key of StreamRowsFn's state.
type PaneBatchFn struct{}

// ProcessElement emits the firing's readings, which come packed in
// PreGroupFn's batches, with its window and pane.
func (PaneBatchFn) ProcessElement(pane beam.PaneInfo, w beam.Window, key string, batches func(*HourBatch) bool, emit func(string, PaneBatch)) {
	p := PaneBatch{Timing: pane.Timing, Index: int64(pane.Index)}
	var b HourBatch
	for batches(&b) {
		p.Records = append(p.Records, b.Records...)
		b = HourBatch{}
	}
	if len(p.Records) == 0 {
		return
	}
	p.StartMs, p.EndMs = windowBounds(w, p.Records[0].EventMs)
	emit(stateKey(key, p.StartMs), p)
}

// EarlyState is StreamRowsFn's state of the early firings of one identity
// and window (see hours.EarlyState). A type of its own, with the same
// fields: the state's registered type and coding are part of the
// Dataflow update contract.
type EarlyState hours.EarlyState

// FinalState is StreamRowsFn's state of the on-time and late firings of
// one identity and window (see hours.FinalState), a type of its own for
// the same reason.
type FinalState hours.FinalState

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
// With MergeStored, every final firing (on-time or late) reads the
// window back from Bigtable and merges it in, as below, so that streams
// that share a subscription, and the jobs of a drain-and-replace update,
// build each window from every reading stored, as a batch does; a settle
// timer reads it once more a minute after the first final firing (see
// settleTimer).
//
// With Recovery on (a local stream: prism keeps windows in memory, and a
// killed or stopped run loses them), the window's readings in Bigtable are
// read back and merged in, so that its final firing imputes and rolls up
// from everything the window holds, not only what this run has seen:
//
//   - RecoverWindowsFn sends, at start-up, a probe for each window that
//     holds readings in Bigtable. The probe marks the window (Pending) and
//     makes sure it gets a final firing: through the close timer if it has
//     none yet, at once if it has had one.
//   - The first final firing of a marked window reads it back (see
//     hours.ReadBack): the readings this run holds win over the read-back
//     ones with the same millisecond; those it does not hold join the
//     window's state and are re-imputed and rewritten like any other (their
//     cells may hold an early firing's provisional values), and sent to
//     BigQuery. They are counted as group.recovered, not as this run's
//     readings (group.readings); one that this run brings later after all
//     (it was in flight at the read-back) is then counted as this run's,
//     and taken off group.recovered.
//   - A read-back that fails after its bounded retries leaves the firing to
//     the state alone (counted as group.recover_failed and logged) and the
//     mark in place, so the window's next firing tries again. Failing the
//     bundle instead would stop the whole stream on prism, which does not
//     retry bundles, over values that are derived: the readings' own cells
//     are in Bigtable already.
//
// It runs in the global window, keyed by identity and window start, and
// clears a window's state with an event-time timer when the window closes
// (its end plus AllowedLateness). Keyed by window instead, its state would
// be the runner's to drop, and prism (Beam v2.77) drops a stateful DoFn's
// state at the end of the window, ignoring the allowed lateness: late
// firings would find it empty.
type StreamRowsFn struct {
	Spec *hours.Compiled
	// BigQuery turns the BigQuery outputs on.
	BigQuery bool
	// AllowedLateness is the stream's: how long after its end a window's
	// state is kept.
	AllowedLateness time.Duration

	// Recovery is the instance the read-back reads (see above); the zero
	// value reads nothing.
	Recovery Recovery
	// MergeStored reads every final firing's window back (the on-time one
	// and each late one), not only the windows a recovery probe marked, so
	// that the window is built from every reading stored in Bigtable,
	// whoever wrote it: another stream reading the same subscription, or
	// the job a drain-and-replace update replaced. With any number of such
	// writers, the last final firing of a window builds it from all its
	// readings, as a batch with --merge_stored does. It needs Recovery.
	// Early firings stay cheap: they read nothing.
	MergeStored bool

	// ArrivalWritten says each reading's observed cells were written on
	// arrival (ArrivalRowsFn, the local runners): an early firing then
	// writes only what it adds (hours.Compiled.EarlyFiring). The final
	// firings are unchanged.
	ArrivalWritten bool

	// DiskState, on a local runner, keeps each window's held readings and
	// final state in files on local disk (internal/spill: the readings
	// appended as each firing brings them, framed by hours.AppendChunk;
	// the final state packed by hours.AppendFinalState) instead of in
	// Readings and Final: prism keeps state in the launcher's heap, where
	// an open hour grows by every reading and a closed one stays for the
	// allowed lateness (a day by default). They come back byte for byte, so
	// every firing is the one it would have been. If the disk fails a
	// write, that part stays in state, with a warning. Off on Dataflow,
	// whose state is not in the workers' memory.
	DiskState bool
	// SpillRun names this pipeline's windows in the process's spill store
	// apart from another pipeline's (tests run several in one process).
	SpillRun string

	// Readings are the window's readings, one chunk per firing packed by
	// schemas.Spec.AppendHeld: event time, source and observed values,
	// not whole records (no raw payload), so that an hour held for its
	// allowed lateness costs a few bytes per reading. With DiskState they
	// are on disk, and here only if the disk failed.
	Readings state.Bag[[]byte]
	Early    state.Value[EarlyState]
	Final    state.Value[FinalState]
	// Pending marks a window to read back from Bigtable before its next
	// final firing.
	Pending state.Value[bool]
	// Timer, tagged closeTag, is the on-time firing of a window whose
	// readings all came early; tagged settleTag, the settle read-back of
	// MergeStored; tagged expiryTag, it clears the state of a closed
	// window. One family with three tags: prism (Beam v2.77) hangs a
	// bundle of a DoFn with two event-time timer families.
	Timer timers.EventTime

	hour                     hourBuilder
	sent, resent, suppressed beam.Counter
	reader                   *readBacker
	recovered                recoveryCounters
	// disk is the spill store with DiskState; diskFailed counts the
	// writes it failed, which stayed in state.
	disk       *spill.Store
	diskFailed beam.Counter
	// settled counts the settle firings that found readings to add.
	settled beam.Counter
}

// recoveryCounters count what the read-back does (the readings that join
// a window are the ledger's group.recovered).
type recoveryCounters struct {
	// windows read back; readings read back (this run's own among them);
	// read-back readings that a later firing brought
	// from the source after all; readings whose cells could not be
	// rebuilt; read-backs that failed.
	windows, read, superseded, skipped, failed beam.Counter
	// bqRows are the BigQuery rows of read-back readings sent for the
	// first time (bigquery_once.rows counts the others).
	bqRows beam.Counter
}

// NewStreamRowsFn returns a StreamRowsFn with its state and timer
// declared.
func NewStreamRowsFn(spec *hours.Compiled, bigQuery bool, allowedLateness time.Duration) *StreamRowsFn {
	return &StreamRowsFn{
		Spec:            spec,
		BigQuery:        bigQuery,
		AllowedLateness: allowedLateness,
		Readings:        state.MakeBagState[[]byte]("held"),
		Early:           state.MakeValueState[EarlyState]("early"),
		Final:           state.MakeValueState[FinalState]("final"),
		Pending:         state.MakeValueState[bool]("recover"),
		Timer:           timers.InEventTime("window"),
	}
}

// Setup compiles the spec and, with Recovery on, opens the Bigtable
// client of the read-back.
func (f *StreamRowsFn) Setup(ctx context.Context) error {
	f.sent = beam.NewCounter("bigquery_once", "rows")
	f.resent = beam.NewCounter("bigquery_once", "changed_rows_resent")
	f.suppressed = beam.NewCounter("bigquery_once", "rows_already_sent")
	f.recovered = recoveryCounters{
		windows:    beam.NewCounter("group", "recovered_windows"),
		read:       beam.NewCounter("group", "read_back_readings"),
		superseded: beam.NewCounter("group", "recovered_superseded"),
		skipped:    beam.NewCounter("group", "recover_skipped"),
		failed:     beam.NewCounter("group", "recover_failed"),
		bqRows:     beam.NewCounter("bigquery_once", "recovered_rows"),
	}
	f.diskFailed = beam.NewCounter("group", "disk_state_failed")
	f.settled = beam.NewCounter("group", "settle_firings")
	if err := f.hour.setup(f.Spec); err != nil {
		return err
	}
	if f.DiskState {
		s, err := spill.In(DiskStateFolder())
		if err != nil {
			return fmt.Errorf("the windows' folder on disk (--local_state_on_disk=false keeps them in memory): %w", err)
		}
		f.disk = s
	}
	if !f.Recovery.On() {
		return nil
	}
	r, err := openReadBacker(ctx, f.Spec, f.Recovery)
	if errors.Is(err, hours.ErrNoReadBack) {
		// The launcher says so at start.
		return nil
	}
	f.reader = r
	return err
}

// Teardown closes the read-back's client.
func (f *StreamRowsFn) Teardown() error {
	if f.reader != nil {
		return f.reader.close()
	}
	return nil
}

// ProcessElement builds and emits the rows of one firing, or handles a
// recovery probe.
func (f *StreamRowsFn) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, key string, p PaneBatch,
	emitRow func(hours.RowMutation), emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), emitDead func(deadletter.DeadLetter)) error {
	if len(p.Records) == 0 && (!p.Recover || f.reader == nil) {
		return nil
	}
	fin, final, err := f.readFinal(sp, key)
	if err != nil {
		return err
	}
	_, early, err := f.Early.Read(sp)
	if err != nil {
		return fmt.Errorf("read early-firing state: %w", err)
	}
	if !final && !early {
		// The window's first element (in this run): set its expiry once.
		// prism (Beam v2.77) keeps every Set of a timer in its pending
		// heap until the timer's time, even when a later Set replaced it,
		// so a Set per firing held one entry per firing for the hour plus
		// the allowed lateness. No output timestamp: the timer emits
		// nothing, so it holds no watermark.
		f.Timer.Set(tp, time.UnixMilli(p.EndMs).Add(f.AllowedLateness), timers.WithTag(expiryTag), timers.WithNoOutputTimestamp())
	}
	if p.Recover {
		return f.probe(ctx, sp, tp, key, p, fin, final, emitRow, emitBQ, emitRollup, emitDead)
	}
	return f.fire(ctx, sp, tp, key, p, fin, final, false, emitRow, emitBQ, emitRollup, emitDead)
}

// probe marks a window to be read back, and makes sure it gets a final
// firing: a window that has had one fires again now, as a late firing; one
// that has not gets an (empty) early state, so that the close timer fires
// it when the watermark passes its end, as it does a window whose readings
// all came early.
func (f *StreamRowsFn) probe(ctx context.Context, sp state.Provider, tp timers.Provider, key string, p PaneBatch, fin FinalState, final bool,
	emitRow func(hours.RowMutation), emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), emitDead func(deadletter.DeadLetter)) error {
	if err := f.Pending.Write(sp, true); err != nil {
		return fmt.Errorf("write read-back mark: %w", err)
	}
	if final {
		return f.fire(ctx, sp, tp, key, PaneBatch{StartMs: p.StartMs, EndMs: p.EndMs, Timing: typex.PaneLate}, fin, final, false,
			emitRow, emitBQ, emitRollup, emitDead)
	}
	_, early, err := f.Early.Read(sp)
	if err != nil {
		return fmt.Errorf("read early-firing state: %w", err)
	}
	if !early {
		if err := f.Early.Write(sp, EarlyState{StartMs: p.StartMs, EndMs: p.EndMs}); err != nil {
			return fmt.Errorf("write early-firing state: %w", err)
		}
	}
	f.Timer.Set(tp, time.UnixMilli(p.EndMs-1), timers.WithTag(closeTag), timers.WithNoOutputTimestamp())
	return nil
}

// readBack reads back the window's readings in Bigtable when it is marked
// Pending, or with MergeStored unless merged is set (see mergedAtClose),
// and clears the mark; a failed read-back is counted and logged, and
// leaves the mark for the next firing.
func (f *StreamRowsFn) readBack(ctx context.Context, sp state.Provider, key string, p PaneBatch, merged bool) ([]schemas.Record, error) {
	if f.reader == nil {
		return nil, nil
	}
	pending, _, err := f.Pending.Read(sp)
	if err != nil || !(pending || f.MergeStored && !merged) {
		return nil, err
	}
	recs, skipped, err := f.reader.window(ctx, stateIdentity(key), p.StartMs, p.EndMs)
	if err != nil {
		f.recovered.failed.Inc(ctx, 1)
		log.Warnf(ctx, "window %s [%s, %s) fires from this run's readings only; its next firing reads it back again: %v", stateIdentity(key),
			time.UnixMilli(p.StartMs).UTC().Format(time.RFC3339), time.UnixMilli(p.EndMs).UTC().Format(time.RFC3339), err)
		return nil, nil
	}
	f.recovered.windows.Inc(ctx, 1)
	if len(recs) > 0 {
		f.recovered.read.Inc(ctx, int64(len(recs)))
	}
	if skipped > 0 {
		f.recovered.skipped.Inc(ctx, int64(skipped))
		log.Warnf(ctx, "window %s: %d readings in Bigtable could not be rebuilt from their cells", stateIdentity(key), skipped)
	}
	if pending {
		if err := f.Pending.Clear(sp); err != nil {
			return nil, fmt.Errorf("clear read-back mark: %w", err)
		}
	}
	return recs, nil
}

// mergedAtClose reports whether the on-time pane p, which comes after
// the close timer's firing of its window (prev being the window's held
// readings), brings only readings which that firing's read-back already
// merged: each of them held as a read-back copy with the same values. On
// prism the close timer fires just before the runner's on-time pane of
// the same window arrives, and the timer's read-back found the pane's
// readings in Bigtable, written on arrival. Reading the window back once
// more would find what that read found, plus what another writer stored
// in between, which the settle read-back a minute later reads
// (settleTimer): so the pane's firing builds from the state alone.
func (f *StreamRowsFn) mergedAtClose(p PaneBatch, prev []schemas.Record) bool {
	if p.Timing != typex.PaneOnTime || len(p.Records) == 0 || f.settleDelay() <= 0 {
		return false
	}
	readBack := make(map[int64]uint64, len(prev))
	for i := range prev {
		if deadletter.IsReadBack(&prev[i]) {
			readBack[prev[i].EventMs] = prev[i].Fingerprint()
		}
	}
	for i := range p.Records {
		if fp, ok := readBack[p.Records[i].EventMs]; !ok || fp != p.Records[i].Fingerprint() {
			return false
		}
	}
	return true
}

// OnTimer fires a window's on-time firing in place of the runner's
// (closeTag), reads a window back once more after its first final firing
// (settleTag), or clears the state of a window that has closed
// (expiryTag).
func (f *StreamRowsFn) OnTimer(ctx context.Context, sp state.Provider, tp timers.Provider, key string, timer timers.Context,
	emitRow func(hours.RowMutation), emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), emitDead func(deadletter.DeadLetter)) error {
	if timer.Tag == settleTag {
		fin, final, err := f.readFinal(sp, key)
		if err != nil || !final {
			return err
		}
		start, err := strconv.ParseInt(key[strings.LastIndexByte(key, '@')+1:], 10, 64)
		if err != nil {
			return fmt.Errorf("window %s: its start: %w", key, err) // cannot happen: stateKey made it
		}
		p := PaneBatch{StartMs: start, EndMs: start + time.Hour.Milliseconds(), Timing: typex.PaneLate}
		return f.fire(ctx, sp, tp, key, p, fin, final, true, emitRow, emitBQ, emitRollup, emitDead)
	}
	if timer.Tag == expiryTag {
		for _, clear := range []func(state.Provider) error{f.Readings.Clear, f.Early.Clear, f.Final.Clear, f.Pending.Clear} {
			if err := clear(sp); err != nil {
				return fmt.Errorf("clear a closed window's state: %w", err)
			}
		}
		if f.disk != nil {
			f.disk.Delete(diskHeldKey(f.SpillRun, key))
			f.disk.Delete(diskFinalKey(f.SpillRun, key))
		}
		return nil
	}
	fin, final, err := f.readFinal(sp, key)
	if err != nil {
		return err
	}
	es, early, err := f.Early.Read(sp)
	if err != nil {
		return fmt.Errorf("read early-firing state: %w", err)
	}
	if final || !early {
		return nil // the on-time (or a late) pane came
	}
	p := PaneBatch{StartMs: es.StartMs, EndMs: es.EndMs, Timing: typex.PaneOnTime, Index: es.Firings}
	return f.fire(ctx, sp, tp, key, p, fin, final, false, emitRow, emitBQ, emitRollup, emitDead)
}

// fire builds and emits a firing against the window's state; fin is the
// window's final state, if final.
func (f *StreamRowsFn) fire(ctx context.Context, sp state.Provider, tp timers.Provider, key string, p PaneBatch, fin FinalState, final, settle bool,
	emitRow func(hours.RowMutation), emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), emitDead func(deadletter.DeadLetter)) error {
	var out hours.Firing
	if p.Timing == typex.PaneEarly && !final {
		es, hadEarly, err := f.Early.Read(sp)
		if err != nil {
			return fmt.Errorf("read early-firing state: %w", err)
		}
		if err := ledger.Guard(func() { out = hours.EarlyFiring(f.Spec, p.hour(), (*hours.EarlyState)(&es), f.ArrivalWritten) }); err != nil {
			f.hour.reject(ctx, p.Records, err, emitDead)
			return nil
		}
		if err := f.Early.Write(sp, es); err != nil {
			return fmt.Errorf("write early-firing state: %w", err)
		}
		// When the watermark passes the window's end, as the runner's
		// on-time firing would (at the window's last millisecond). No
		// output timestamp: what it emits goes to sinks, which neither
		// window nor group, so it need not hold the watermark. Set once
		// per window, at its first early firing (or by a probe): see the
		// expiry timer in ProcessElement.
		if !hadEarly {
			f.Timer.Set(tp, time.UnixMilli(p.EndMs-1), timers.WithTag(closeTag), timers.WithNoOutputTimestamp())
		}
		if err := f.hold(ctx, sp, key, p.StartMs, out.Keep); err != nil {
			return err
		}
	} else {
		chunks, inState, err := f.readHeld(sp, key)
		if err != nil {
			return err
		}
		var prev []schemas.Record
		for _, c := range chunks {
			if prev, err = packed.DecodeHeld(f.Spec.Spec, prev, c); err != nil {
				return fmt.Errorf("decode the window's readings: %w", err)
			}
		}
		recovered, err := f.readBack(ctx, sp, key, p, final && !settle && f.mergedAtClose(p, prev))
		if err != nil {
			return err
		}
		if final && len(p.Records) == 0 && len(recovered) == 0 {
			return nil // a probe of a window this run has all of
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
		hp := p.hour()
		hp.FirstSeenMs = f.firstSeen(ctx, key)
		var next hours.FinalState
		now := time.Now()
		if err := ledger.Guard(func() {
			next, out = hours.FinalFiring(f.Spec, hp, prev, recovered, hours.FinalState(fin), final, counted, f.BigQuery, now.UnixMilli())
		}); err != nil {
			f.hour.reject(ctx, p.Records, err, emitDead)
			return nil
		}
		if settle && out.Recovered == 0 && out.Superseded == 0 && out.Rewritten == 0 {
			return nil // every reading stored was in the window's build
		}
		out.Sequence(now.UnixMicro(), p.Index)
		if err := f.keepFinal(ctx, sp, key, p.StartMs, next, chunks, !final || inState, out.Keep); err != nil {
			return err
		}
		if !final {
			if err := f.Early.Clear(sp); err != nil {
				return fmt.Errorf("clear early-firing state: %w", err)
			}
			f.settleTimer(tp, p.EndMs)
		}
	}
	f.hour.firings.Inc(ctx, 1)
	if settle {
		f.settled.Inc(ctx, 1)
	}
	f.hour.ctrs.Inc(ctx, ledger.Readings, out.Readings)
	f.hour.ctrs.Inc(ctx, ledger.Duplicates, out.Dropped)
	// Net: a read-back reading this run brings after all is its own.
	f.hour.ctrs.Inc(ctx, ledger.Recovered, out.Recovered-out.Superseded)
	f.recovered.superseded.Inc(ctx, out.Superseded)
	f.recovered.bqRows.Inc(ctx, out.SentRecovered)
	f.sent.Inc(ctx, out.Sent)
	f.resent.Inc(ctx, out.Resent)
	f.suppressed.Inc(ctx, out.Suppressed)
	f.hour.emit(ctx, out, emitRow, emitBQ, emitRollup, emitDead)
	return nil
}

// settleTimer sets, at a window's first final firing with MergeStored, a
// read-back of the window SettleAfter later in event time: a final firing
// of another stream on the same subscription may have read the window
// before this one's last readings were stored, and written after this
// one. The settle firing then finds those readings and rewrites the window
// whole; if every reading stored was in this run's build it writes
// nothing. Set once per window (see the expiry timer), before the expiry.
func (f *StreamRowsFn) settleTimer(tp timers.Provider, endMs int64) {
	if f.reader == nil || !f.MergeStored {
		return
	}
	after := f.settleDelay()
	if after <= 0 {
		return
	}
	f.Timer.Set(tp, time.UnixMilli(endMs).Add(after), timers.WithTag(settleTag), timers.WithNoOutputTimestamp())
}

// settleDelay is how long after a window's end its settle read-back comes:
// SettleAfter, at most half the allowed lateness; none when not positive.
func (f *StreamRowsFn) settleDelay() time.Duration {
	return min(SettleAfter, f.AllowedLateness/2)
}

// SettleAfter is how long in event time after a window's end its settle
// read-back comes (see StreamRowsFn.settleTimer), at most half the
// allowed lateness.
const SettleAfter = time.Minute

// readFinal reads the window's final state: from Final, else with
// DiskState from disk.
func (f *StreamRowsFn) readFinal(sp state.Provider, key string) (FinalState, bool, error) {
	fin, final, err := f.Final.Read(sp)
	if err != nil || final || f.disk == nil {
		if err != nil {
			err = fmt.Errorf("read final-firing state: %w", err)
		}
		return fin, final, err
	}
	b, ok, err := f.disk.Get(diskFinalKey(f.SpillRun, key))
	if err != nil || !ok {
		return FinalState{}, false, err
	}
	dfin, err := hours.DecodeFinalState(b)
	if err != nil {
		return FinalState{}, false, fmt.Errorf("window %s: decode its final state on disk: %w", key, err)
	}
	return FinalState(dfin), true, nil
}

// readHeld reads the window's held chunks: with DiskState from disk, and
// any that a failed disk write left in Readings (inState says there are).
func (f *StreamRowsFn) readHeld(sp state.Provider, key string) (chunks [][]byte, inState bool, err error) {
	if f.disk != nil {
		b, _, err := f.disk.Get(diskHeldKey(f.SpillRun, key))
		if err != nil {
			return nil, false, err
		}
		if chunks, err = hours.SplitChunks(b); err != nil {
			return nil, false, fmt.Errorf("window %s: its readings on disk: %w", key, err)
		}
	}
	state, _, err := f.Readings.Read(sp)
	if err != nil {
		return nil, false, fmt.Errorf("read the window's readings: %w", err)
	}
	return append(chunks, state...), len(state) > 0, nil
}

// hold adds a firing's readings to the window's, for the firings to come:
// one packed chunk per firing, appended on disk with DiskState (in state
// if the disk fails).
func (f *StreamRowsFn) hold(ctx context.Context, sp state.Provider, key string, startMs int64, keep []schemas.Record) error {
	if len(keep) == 0 {
		return nil
	}
	chunk := packed.AppendHeld(f.Spec.Spec, nil, keep)
	if f.disk != nil {
		err := f.disk.Append(diskGroup(f.SpillRun, startMs), diskHeldKey(f.SpillRun, key), hours.AppendChunk(nil, chunk))
		if f.diskOK(ctx, key, err) {
			return nil
		}
	}
	if err := f.Readings.Add(sp, chunk); err != nil {
		return fmt.Errorf("add to the window's readings: %w", err)
	}
	return nil
}

// keepFinal keeps what a final firing leaves: next, and the firing's
// readings (keep) with the window's held chunks. With DiskState both go to
// disk. With rewrite (the window's first final firing, or chunks that a
// failed write had left in state) the chunks are written again as one
// part, so that a closed window's place on disk is one part, not one per
// early firing, and they leave state; otherwise (a late firing) keep is
// appended. Whatever the disk fails to take stays in state.
func (f *StreamRowsFn) keepFinal(ctx context.Context, sp state.Provider, key string, startMs int64, next hours.FinalState,
	chunks [][]byte, rewrite bool, keep []schemas.Record) error {
	if f.disk == nil || !rewrite {
		if err := f.hold(ctx, sp, key, startMs, keep); err != nil {
			return err
		}
	}
	if f.disk == nil {
		if err := f.Final.Write(sp, FinalState(next)); err != nil {
			return fmt.Errorf("write final-firing state: %w", err)
		}
		return nil
	}
	if rewrite {
		if err := f.rewriteHeld(ctx, sp, key, startMs, chunks, keep); err != nil {
			return err
		}
	}
	err := f.disk.Put(diskGroup(f.SpillRun, startMs), diskFinalKey(f.SpillRun, key), hours.AppendFinalState(nil, next))
	if f.diskOK(ctx, key, err) {
		return f.Final.Clear(sp)
	}
	if err := f.Final.Write(sp, FinalState(next)); err != nil {
		return fmt.Errorf("write final-firing state: %w", err)
	}
	return nil
}

// rewriteHeld writes a window's held chunks and keep to disk as one part,
// replacing its parts there, and clears the chunks held in state. If the
// disk fails, it keeps what it had, and keep waits in state.
func (f *StreamRowsFn) rewriteHeld(ctx context.Context, sp state.Provider, key string, startMs int64, chunks [][]byte, keep []schemas.Record) error {
	var all []byte
	for _, c := range chunks {
		all = hours.AppendChunk(all, c)
	}
	if len(keep) > 0 {
		all = hours.AppendChunk(all, packed.AppendHeld(f.Spec.Spec, nil, keep))
	}
	err := f.disk.Put(diskGroup(f.SpillRun, startMs), diskHeldKey(f.SpillRun, key), all)
	if !f.diskOK(ctx, key, err) {
		return f.hold(ctx, sp, key, startMs, keep)
	}
	if err := f.Readings.Clear(sp); err != nil {
		return fmt.Errorf("clear the window's readings: %w", err)
	}
	return nil
}

// diskOK reports whether a disk write succeeded, and counts and logs one
// that failed: what it held stays in state.
func (f *StreamRowsFn) diskOK(ctx context.Context, key string, err error) bool {
	if err == nil {
		return true
	}
	f.diskFailed.Inc(ctx, 1)
	log.Warnf(ctx, "window %s: kept in memory, the disk failed: %v", key, err)
	return false
}

// DiskStateFolder is the folder of StreamRowsFn's DiskState: in the run's
// own temp folder (loopback.Private), removed when the run ends.
func DiskStateFolder() string { return filepath.Join(os.TempDir(), "sensorpipe-windows") }

// The names of a window's state on disk: its held chunks and its final
// state, in one file per run and window start.
func diskHeldKey(run, key string) string  { return run + "/" + key }
func diskFinalKey(run, key string) string { return run + "/" + key + "/final" }
func diskGroup(run string, startMs int64) string {
	return run + "@" + strconv.FormatInt(startMs, 10)
}

// hour is the firing as the per-hour rules take it.
func (p PaneBatch) hour() hours.HourPane {
	return hours.HourPane{StartMs: p.StartMs, EndMs: p.EndMs, Pane: hours.Pane{Timing: p.Timing.String(), Index: p.Index}, Records: p.Records}
}

// The tags of StreamRowsFn's timer.
const (
	closeTag  = "close"
	expiryTag = "expiry"
	settleTag = "settle"
)
