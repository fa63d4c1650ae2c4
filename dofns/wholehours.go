package dofns

import (
	"context"
	"math"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	dofnreg.DoFn(&ParseWholeHoursFn{}, register.Function5x0[context.Context, string, []string, func(beam.EventTime, string, HourBatch), func(deadletter.DeadLetter)])
	dofnreg.DoFn(&BuildWholeHourRowsFn{}, register.Function8x1[context.Context, beam.Window, string, HourBatch,
		func(hours.RowMutation), func(hours.BQRow), func(hours.BQRow), func(deadletter.DeadLetter), error])
}

// A source whose elements each hold every reading of the hours they touch
// (the rows of a table whose rows hold whole hours, bigtableio.ReadRows)
// needs no GroupByKey: ParseWholeHoursFn parses each element into one
// HourBatch per identity and hour, and BuildWholeHourRowsFn builds each
// hour from its batch, as BuildBatchedRowsFn builds it after the grouping.
// The read, the build and the writes then run in one fused stage, with no
// shuffle of the readings.

// ParseWholeHoursFn parses the lines of one element, KV<source, lines>,
// as ParseFn parses each (the same dead letters and ledger counts), and
// emits their readings as one HourBatch per identity and hour, keyed by
// the identity and stamped with the hour's start.
type ParseWholeHoursFn struct {
	Spec         *hours.Compiled
	MaxLineBytes int

	parse ParseFn
	group PreGroupFn // with no bound: a batch holds all its hour's readings
}

// Setup makes the ParseFn that parses each line, and the PreGroupFn that
// packs an element's readings by identity and hour.
func (f *ParseWholeHoursFn) Setup() error {
	f.group = PreGroupFn{MaxReadings: math.MaxInt, MaxBuffered: math.MaxInt}
	f.parse = ParseFn{Spec: f.Spec, MaxLineBytes: f.MaxLineBytes}
	return f.parse.Setup()
}

// ProcessElement parses the element's lines and emits their hours.
func (f *ParseWholeHoursFn) ProcessElement(ctx context.Context, source string, lines []string, emit func(beam.EventTime, string, HourBatch), dead func(deadletter.DeadLetter)) {
	f.group.StartBundle(emit) // an element's hours are its own
	add := func(et beam.EventTime, key string, r schemas.Record) {
		f.group.ProcessElement(ctx, et, key, r, emit)
	}
	for _, l := range lines {
		f.parse.ProcessElement(ctx, source, l, add, dead)
	}
	f.group.flush(emit)
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (f *ParseWholeHoursFn) FinishBundle(ctx context.Context, _ func(beam.EventTime, string, HourBatch), _ func(deadletter.DeadLetter)) error {
	return f.parse.ctrs.Commit(ctx)
}

// wholeHourPane is the pane a batch's GroupByKey gives each window: its
// only one, on time.
var wholeHourPane = beam.PaneInfo{Timing: typex.PaneOnTime, IsFirst: true, IsLast: true}

// BuildWholeHourRowsFn is BuildRowsFn for an hour whose readings all come
// in one HourBatch (ParseWholeHoursFn's, in the hour's window): it builds
// the hour from the batch, with the pane a batch's grouping gives.
type BuildWholeHourRowsFn struct {
	BuildRowsFn
}

// ProcessElement builds the hour's rows from the batch's readings.
func (f *BuildWholeHourRowsFn) ProcessElement(ctx context.Context, w beam.Window, key string, b HourBatch,
	emitRow func(hours.RowMutation), emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), dead func(deadletter.DeadLetter)) error {
	return f.build(ctx, wholeHourPane, w, key, b.Records, emitRow, emitBQ, emitRollup, dead)
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (f *BuildWholeHourRowsFn) FinishBundle(ctx context.Context, _ func(hours.RowMutation), _ func(hours.BQRow), _ func(hours.BQRow), _ func(deadletter.DeadLetter)) error {
	return f.hour.ctrs.Commit(ctx)
}
