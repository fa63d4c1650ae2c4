package dofns

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	dofnreg.DoFn(&UnwrapDeadLetterFn{}, register.Function6x0[context.Context, string, string, func(string, string), func(beam.EventTime, string, schemas.Record), func(deadletter.DeadLetter)])
	dofnreg.DoFn(&ReplayRowsFn{}, register.Function7x1[context.Context, string, HourBatch,
		func(hours.RowMutation), func(hours.BQRow), func(hours.BQRow), func(deadletter.DeadLetter), error])
}

// ReplayRowsFn is a stream replay's hour builder: BuildRowsFn on each
// HourBatch as PreGroupFn packs a bundle's records, one identity's of one
// hour, with no grouping or windowing between. With Merge on, each hour is
// read back from Bigtable and built whole with what is stored, as a batch
// replay builds it: each record is written to the sinks its dead letter
// names only, and every hour it touches gets its rollup rebuilt (a rollup's
// dead letter, a rebuild probe, brings no reading and rebuilds its hour).
// Its rollup row is labelled as a batch's is: on time, the hour's one
// firing.
type ReplayRowsFn struct {
	BuildRowsFn
}

// replayPane is the pane a stream replay's hours are built with.
var replayPane = beam.PaneInfo{Timing: typex.PaneOnTime, IsFirst: true, IsLast: true}

// ProcessElement builds the hour of one batch of records.
func (f *ReplayRowsFn) ProcessElement(ctx context.Context, key string, b HourBatch,
	emitRow func(hours.RowMutation), emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), dead func(deadletter.DeadLetter)) error {
	return f.build(ctx, replayPane, window.GlobalWindow{}, key, b.Records, emitRow, emitBQ, emitRollup, dead)
}

// UnwrapDeadLetterFn is the front of a dead-letter replay
// (--format=deadletter): it reads each input line or message as a dead
// letter (deadletter.ParseEnvelope), keeps those Filter takes, and hands the
// payload on to the parse, as KV<source, payload>, with a source that
// carries the dead letter (deadletter.ReplaySource): a record that fails
// again is dead-lettered with its new reason and keeps the earlier ones,
// and one whose write failed is written to that sink only. A rollup's dead
// letter becomes a rebuild probe of its sensor-hour (deadletter.RebuildProbe),
// on the probes output, for the batch to read back and roll up again.
//
// A line that is not a dead letter is dead-lettered itself (reason
// malformed, sink parse), counted as a record read and rejected. The dead
// letters replayed and those the filter leaves out are counted apart
// (ledger.Replayed, ledger.ReplayFiltered).
//
// A dead letter whose sink the run does not write (Sinks) is rejected the
// same way, naming its sink, once the filter has taken it.
type UnwrapDeadLetterFn struct {
	Spec   *hours.Compiled
	Filter deadletter.ReplayFilter
	// Sinks are the run's sinks (deadletter.Sinks that it writes); empty:
	// any.
	Sinks []string
	// MaxLineBytes is the run's --max_line_bytes: a too_large dead letter
	// of a file (deadletter.DeadLetter.Length) no longer than it is read
	// back from the file (Stores.ReadRecord); a longer one stays
	// too_large.
	MaxLineBytes int

	ctrs ledger.Recorder
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (f *UnwrapDeadLetterFn) FinishBundle(ctx context.Context, _ func(string, string), _ func(beam.EventTime, string, schemas.Record), _ func(deadletter.DeadLetter)) error {
	return f.ctrs.Commit(ctx)
}

// ProcessElement unwraps one dead letter.
func (f *UnwrapDeadLetterFn) ProcessElement(ctx context.Context, at, line string, emit func(string, string),
	probe func(beam.EventTime, string, schemas.Record), dead func(deadletter.DeadLetter)) {
	f.ctrs.Register(ctx, ledger.Replayed)
	f.ctrs.Register(ctx, ledger.ReplayNotReadBack)
	if len(line) == 0 {
		return // a blank line, as the parse skips it
	}
	reject := func(err error) {
		f.ctrs.Inc(ctx, ledger.InputRecords, 1)
		f.ctrs.Inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(deadletter.SinkParse, line, at, err))
	}
	var d deadletter.DeadLetter
	var err error
	if perr := ledger.Guard(func() { d, err = deadletter.ParseEnvelope([]byte(line)) }); perr != nil {
		err = perr
	}
	if err != nil {
		reject(err)
		return
	}
	if !f.Filter.Takes(d) {
		f.ctrs.Inc(ctx, ledger.ReplayFiltered, 1)
		return
	}
	if err := deadletter.CheckSinkOfRun(d, f.Sinks); err != nil {
		reject(err)
		return
	}
	if d.IsRollup() {
		key, r, err := deadletter.RebuildProbe(f.Spec.Spec, d)
		if err != nil {
			reject(err)
			return
		}
		f.ctrs.Inc(ctx, ledger.Replayed, 1)
		f.ctrs.Inc(ctx, ledger.ReplayRebuilds, 1)
		probe(mtime.FromMilliseconds(r.EventMs), key, r)
		return
	}
	if d.Reason == schemas.ErrTooLarge.Error() && d.Length > 0 && d.SHA256 != "" {
		f.readBack(ctx, d, emit, dead)
		return
	}
	payload, err := d.PayloadBytes()
	if err != nil {
		reject(errors.Join(schemas.ErrMalformed, err))
		return
	}
	f.ctrs.Inc(ctx, ledger.Replayed, 1)
	emit(deadletter.ReplaySource(d), string(payload))
}

// readBack replays a too_large dead letter of a file: the record read back
// from the file when the run's limit takes it, else (or when the file
// changed) a dead letter again, which keeps the record's place.
func (f *UnwrapDeadLetterFn) readBack(ctx context.Context, d deadletter.DeadLetter, emit func(string, string), dead func(deadletter.DeadLetter)) {
	f.ctrs.Inc(ctx, ledger.Replayed, 1)
	again := func(err error) {
		f.ctrs.Inc(ctx, ledger.InputRecords, 1)
		f.ctrs.Inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(deadletter.SinkParse, d.Payload, deadletter.ReplaySource(d), err))
	}
	max := schemas.LineLimit(f.MaxLineBytes)
	if d.Length > int64(max) {
		again(schemas.TooLargeInFile(d.Length, max))
		return
	}
	b, err := readRecord(ctx, d)
	if err != nil {
		f.ctrs.Inc(ctx, ledger.ReplayNotReadBack, 1)
		again(fmt.Errorf("%w: the record cannot be read back: %w", schemas.ErrTooLarge, err))
		return
	}
	emit(deadletter.ReplaySource(d), string(b))
}

// readRecord reads d's record back from its file with the registered
// Stores.ReadRecord.
func readRecord(ctx context.Context, d deadletter.DeadLetter) ([]byte, error) {
	if stores.ReadRecord == nil {
		return nil, errNoStore
	}
	return stores.ReadRecord(ctx, d.Source, d.Offset, d.Length, d.SHA256)
}
