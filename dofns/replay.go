package dofns

import (
	"context"
	"errors"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	register.DoFn6x0[context.Context, string, string, func(string, string), func(beam.EventTime, string, schemas.Record), func(schemas.DeadLetter)](&UnwrapDeadLetterFn{})
}

// UnwrapDeadLetterFn is the front of a dead-letter replay
// (--format=deadletter): it reads each input line or message as a dead
// letter (schemas.ParseEnvelope), keeps those Filter takes, and hands the
// payload on to the parse, as KV<source, payload>, with a source that
// carries the dead letter (schemas.ReplaySource): a record that fails
// again is dead-lettered with its new reason and keeps the earlier ones,
// and one whose write failed is written to that sink only. A rollup's dead
// letter becomes a rebuild probe of its sensor-hour (schemas.RebuildProbe),
// on the probes output, for the batch to read back and roll up again.
//
// A line that is not a dead letter is dead-lettered itself (reason
// malformed, sink parse), counted as a record read and rejected. The dead
// letters replayed and those the filter leaves out are counted apart
// (ledger.Replayed, ledger.ReplayFiltered).
type UnwrapDeadLetterFn struct {
	Spec   *schemas.Compiled
	Filter schemas.ReplayFilter

	ctrs ledger.Recorder
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (f *UnwrapDeadLetterFn) FinishBundle(ctx context.Context, _ func(string, string), _ func(beam.EventTime, string, schemas.Record), _ func(schemas.DeadLetter)) error {
	return f.ctrs.Commit(ctx)
}

// ProcessElement unwraps one dead letter.
func (f *UnwrapDeadLetterFn) ProcessElement(ctx context.Context, at, line string, emit func(string, string),
	probe func(beam.EventTime, string, schemas.Record), dead func(schemas.DeadLetter)) {
	f.ctrs.Register(ctx, ledger.Replayed)
	if len(line) == 0 {
		return // a blank line, as the parse skips it
	}
	reject := func(err error) {
		f.ctrs.Inc(ctx, ledger.InputRecords, 1)
		f.ctrs.Inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(schemas.SinkParse, line, at, err))
	}
	var d schemas.DeadLetter
	var err error
	if perr := ledger.Guard(func() { d, err = schemas.ParseEnvelope([]byte(line)) }); perr != nil {
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
	if d.IsRollup() {
		key, r, err := f.Spec.RebuildProbe(d)
		if err != nil {
			reject(err)
			return
		}
		f.ctrs.Inc(ctx, ledger.Replayed, 1)
		f.ctrs.Inc(ctx, ledger.ReplayRebuilds, 1)
		probe(mtime.FromMilliseconds(r.EventMs), key, r)
		return
	}
	payload, err := d.PayloadBytes()
	if err != nil {
		reject(errors.Join(schemas.ErrMalformed, err))
		return
	}
	f.ctrs.Inc(ctx, ledger.Replayed, 1)
	emit(schemas.ReplaySource(d), string(payload))
}
