package dofns

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	dofnreg.DoFn(&PreGroupFn{}, register.Function5x0[context.Context, beam.EventTime, string, schemas.Record, func(beam.EventTime, string, HourBatch)])
	register.Emitter3[beam.EventTime, string, HourBatch]()
	dofnreg.DoFn(&ParseBatchesFn{}, register.Function5x0[context.Context, string, string, func(beam.EventTime, string, HourBatch), func(deadletter.DeadLetter)])
	dofnreg.DoFn(&BuildBatchedRowsFn{}, register.Function9x1[context.Context, beam.PaneInfo, beam.Window, string, func(*HourBatch) bool,
		func(hours.RowMutation), func(hours.BQRow), func(hours.BQRow), func(deadletter.DeadLetter), error])
	register.Iter1[HourBatch]()
}

// Defaults of PreGroupFn.
const (
	// DefaultPreGroupReadings is the most readings one batch carries.
	DefaultPreGroupReadings = 512
	// DefaultPreGroupBuffered is the most readings a PreGroupFn holds
	// before it sends every batch it has.
	DefaultPreGroupBuffered = 65_536
)

// HourBatch is one identity's readings of one window (an hour), as
// PreGroupFn packs them for a batch's GroupByKey. Its coder compresses them
// (see dofns/coders.go).
type HourBatch struct {
	Records []schemas.Record
}

// PreGroupFn packs readings, KV<identity, Record>, into HourBatches of one
// identity's readings of one hour, stamped with the hour's start, before
// the hourly GroupByKey (HourlyWindows puts each batch in its hour's window
// by that timestamp). The shuffle then
// carries one element per batch instead of one per reading: each element
// costs the runner and the SDK harness the same whatever its size
// (encoded, sent to the runner, stored, re-bundled and sent back), and that
// cost was most of the pipeline's CPU beyond what a plain writer spends.
//
// A batch is sent when it holds MaxReadings readings, every batch when the
// instance holds MaxBuffered readings, and the rest at the bundle's end, so
// its memory is bounded whatever the bundle's size. The grouping after it
// sees the same readings, so the rows are the same (BuildBatchedRowsFn,
// and a stream's PaneBatchFn).
//
// In a stream a reading waits for its bundle's end at most, which the
// Pub/Sub reader bounds (pubsubio: four seconds of pulling), and the
// triggered GroupByKey holds a batch where it held a reading: prism
// (Beam v2.77) re-examines every element such a grouping holds each time
// a bundle adds to it, so fewer elements cost it less.
type PreGroupFn struct {
	// Window is the windows' size (default an hour).
	Window time.Duration
	// MaxReadings and MaxBuffered default to DefaultPreGroupReadings and
	// DefaultPreGroupBuffered.
	MaxReadings, MaxBuffered int

	batches  map[preGroupKey]*HourBatch
	buffered int
}

type preGroupKey struct {
	identity string
	startMs  int64
}

// StartBundle starts with nothing held. (Beam Go wants the emitter that
// ProcessElement and FinishBundle take here too.)
func (f *PreGroupFn) StartBundle(func(beam.EventTime, string, HourBatch)) {
	f.batches, f.buffered = map[preGroupKey]*HourBatch{}, 0
}

// ProcessElement adds a reading to its identity's batch of its hour.
func (f *PreGroupFn) ProcessElement(_ context.Context, _ beam.EventTime, key string, r schemas.Record, emit func(beam.EventTime, string, HourBatch)) {
	size := f.Window
	if size <= 0 {
		size = time.Hour
	}
	k := preGroupKey{key, hours.WindowStart(r.EventMs, size)}
	p := f.batches[k]
	if p == nil {
		p = &HourBatch{}
		f.batches[k] = p
	}
	p.Records = append(p.Records, r)
	f.buffered++
	switch {
	case len(p.Records) >= defaultIf(f.MaxReadings, DefaultPreGroupReadings):
		f.send(k, p, emit)
	case f.buffered >= defaultIf(f.MaxBuffered, DefaultPreGroupBuffered):
		f.flush(emit)
	}
}

// FinishBundle sends the batches left.
func (f *PreGroupFn) FinishBundle(emit func(beam.EventTime, string, HourBatch)) {
	f.flush(emit)
}

func (f *PreGroupFn) send(k preGroupKey, p *HourBatch, emit func(beam.EventTime, string, HourBatch)) {
	emit(beam.EventTime(k.startMs), k.identity, *p)
	f.buffered -= len(p.Records)
	delete(f.batches, k)
}

func (f *PreGroupFn) flush(emit func(beam.EventTime, string, HourBatch)) {
	for k, p := range f.batches {
		f.send(k, p, emit)
	}
}

// ParseBatchesFn is ParseFn whose readings go straight into PreGroupFn's
// batches: KV<source, line> in, the same dead letters and ledger counts as
// ParseFn's, and HourBatches out as PreGroupFn sends them. A batch's
// readings then cross no DoFn boundary between the parse and the
// grouping, each crossing of which costs Beam's harness its emitter, the
// next DoFn's invocation and the window's bookkeeping (figures in
// docs/performance.md).
type ParseBatchesFn struct {
	// Spec and MaxLineBytes are ParseFn's.
	Spec         *hours.Compiled
	MaxLineBytes int

	parse ParseFn
	group PreGroupFn
	// add hands a parsed reading to group, emitting with emit: a method
	// value made once, not a closure per line.
	add  func(beam.EventTime, string, schemas.Record)
	ctx  context.Context
	emit func(beam.EventTime, string, HourBatch)
}

// Setup makes the ParseFn that parses each line.
func (f *ParseBatchesFn) Setup() error {
	f.parse = ParseFn{Spec: f.Spec, MaxLineBytes: f.MaxLineBytes}
	f.add = f.addReading
	return f.parse.Setup()
}

// StartBundle starts with no batch held.
func (f *ParseBatchesFn) StartBundle(emit func(beam.EventTime, string, HourBatch), _ func(deadletter.DeadLetter)) {
	f.group.StartBundle(emit)
}

// ProcessElement parses line, read from at, into its identity's batches.
func (f *ParseBatchesFn) ProcessElement(ctx context.Context, at, line string, emit func(beam.EventTime, string, HourBatch), dead func(deadletter.DeadLetter)) {
	f.ctx, f.emit = ctx, emit
	f.parse.ProcessElement(ctx, at, line, f.add, dead)
	f.ctx, f.emit = nil, nil
}

func (f *ParseBatchesFn) addReading(et beam.EventTime, key string, r schemas.Record) {
	f.group.ProcessElement(f.ctx, et, key, r, f.emit)
}

// FinishBundle sends the batches left and writes the bundle's counts to
// the run's ledger record.
func (f *ParseBatchesFn) FinishBundle(ctx context.Context, emit func(beam.EventTime, string, HourBatch), _ func(deadletter.DeadLetter)) error {
	f.group.FinishBundle(emit)
	return f.parse.ctrs.Commit(ctx)
}

func defaultIf(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// BuildBatchedRowsFn is BuildRowsFn for a window's readings packed in
// HourBatches (PreGroupFn's): it builds the window from all of them at once.
type BuildBatchedRowsFn struct {
	BuildRowsFn
}

// ProcessElement builds the window's rows from every batch's readings.
func (f *BuildBatchedRowsFn) ProcessElement(ctx context.Context, pane beam.PaneInfo, w beam.Window, key string, batches func(*HourBatch) bool,
	emitRow func(hours.RowMutation), emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), dead func(deadletter.DeadLetter)) error {
	var recs []schemas.Record
	var p HourBatch
	for batches(&p) {
		recs = append(recs, p.Records...)
		p = HourBatch{}
	}
	return f.build(ctx, pane, w, key, recs, emitRow, emitBQ, emitRollup, dead)
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (f *BuildBatchedRowsFn) FinishBundle(ctx context.Context, _ func(hours.RowMutation), _ func(hours.BQRow), _ func(hours.BQRow), _ func(deadletter.DeadLetter)) error {
	return f.hour.ctrs.Commit(ctx)
}
