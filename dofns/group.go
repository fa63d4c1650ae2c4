package dofns

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*schemas.RowMutation)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*schemas.BQRow)(nil)).Elem())
	register.DoFn9x0[context.Context, beam.PaneInfo, beam.Window, string, func(*schemas.Record) bool,
		func(schemas.RowMutation), func(schemas.BQRow), func(schemas.BQRow), func(schemas.DeadLetter)](&BuildRowsFn{})
	register.Iter1[schemas.Record]()
	register.Emitter1[schemas.RowMutation]()
	register.Emitter1[schemas.BQRow]()
}

// BuildRowsFn takes all the readings of one identity in one event-time
// window, fired once (the batch windowing), drops duplicates, imputes, and
// emits one mutation per Bigtable row, the BigQuery rows and the rollup.
// The rollup cells ride in the first table's rows, at the window's end.
// Windows that fire more than once take PaneBatchFn and StreamRowsFn.
type BuildRowsFn struct {
	Spec *schemas.Compiled
	// BigQuery turns the BigQuery outputs on.
	BigQuery bool

	hour hourBuilder
}

// Setup takes the compiled spec's builders.
func (f *BuildRowsFn) Setup() error { return f.hour.setup(f.Spec) }

// ProcessElement builds the group's rows. A group it cannot build is
// dead-lettered, each reading with reason internal.
func (f *BuildRowsFn) ProcessElement(ctx context.Context, pane beam.PaneInfo, w beam.Window, _ string, readings func(*schemas.Record) bool,
	emitRow func(schemas.RowMutation), emitBQ func(schemas.BQRow), emitRollup func(schemas.BQRow), dead func(schemas.DeadLetter)) {
	var recs []schemas.Record
	var r schemas.Record
	for readings(&r) {
		recs = append(recs, r)
		r = schemas.Record{}
	}
	f.build(ctx, pane, w, recs, emitRow, emitBQ, emitRollup, dead)
}

// build builds the rows of a window fired once with recs.
func (f *BuildRowsFn) build(ctx context.Context, pane beam.PaneInfo, w beam.Window, recs []schemas.Record,
	emitRow func(schemas.RowMutation), emitBQ func(schemas.BQRow), emitRollup func(schemas.BQRow), dead func(schemas.DeadLetter)) {
	if len(recs) == 0 {
		return
	}
	var out schemas.Firing
	now := time.Now().UnixMilli()
	if err := Guard(func() {
		p := schemas.HourPane{Pane: schemas.Pane{Timing: pane.Timing.String(), Index: int64(pane.Index)}, Records: recs}
		p.StartMs, p.EndMs = intervalBounds(w)
		out = f.Spec.BatchHour(p, f.BigQuery, now)
	}); err != nil {
		f.hour.reject(ctx, recs, err, dead)
		return
	}
	f.hour.firings.Inc(ctx, 1)
	f.hour.ctrs.inc(ctx, ledger.Readings, out.Readings)
	f.hour.ctrs.inc(ctx, ledger.Duplicates, out.Dropped)
	f.hour.emit(ctx, out, emitRow, emitBQ, emitRollup, dead)
}

// hourBuilder is what BuildRowsFn and StreamRowsFn share around the
// per-hour rules (schemas.Compiled.BatchHour, EarlyFiring, FinalFiring):
// their counters, and the emitting of a firing's outputs.
type hourBuilder struct {
	rowCount beam.Counter
	firings  beam.Counter
	ctrs     counters
}

func (h *hourBuilder) setup(spec *schemas.Compiled) error {
	if spec == nil {
		return errors.New("build rows: no compiled spec")
	}
	h.rowCount = beam.NewCounter("group", "rows")
	h.firings = beam.NewCounter("group", "firings")
	return nil
}

// emit emits a firing's rows, BigQuery rows and rollup row, and the dead
// letters of the records it could not build for a table (sink bigtable:
// each counted in that table's ledger as routed and failed).
func (h *hourBuilder) emit(ctx context.Context, out schemas.Firing, emitRow func(schemas.RowMutation),
	emitBQ func(schemas.BQRow), emitRollup func(schemas.BQRow), emitDead func(schemas.DeadLetter)) {
	for _, rj := range out.Dead {
		h.ctrs.sink(ctx, schemas.SinkBigtable, rj.Table, rj.Origin.Kind, ledger.Routed, 1)
		h.ctrs.sink(ctx, schemas.SinkBigtable, rj.Table, rj.Origin.Kind, ledger.Failed, 1)
		emitDead(deadLetter(schemas.SinkBigtable, rj.Origin.Raw, rj.Origin.Source, fmt.Errorf("table %s: %w", rj.Table, rj.Err)))
	}
	for _, m := range out.Rows {
		h.rowCount.Inc(ctx, 1)
		emitRow(m)
	}
	for _, r := range out.BQ {
		emitBQ(r)
	}
	if out.Rollup != nil {
		emitRollup(*out.Rollup)
	}
}

// reject dead-letters readings the grouping could not build (reason
// internal, sink window), counting them as rejected in the ledger.
func (h *hourBuilder) reject(ctx context.Context, recs []schemas.Record, err error, dead func(schemas.DeadLetter)) {
	h.ctrs.inc(ctx, ledger.GroupRejected, int64(len(recs)))
	for _, r := range recs {
		dead(deadLetter(schemas.SinkWindow, r.Raw, r.Source, err))
	}
}

// intervalBounds is an interval window's [start, end) in epoch
// milliseconds, or zeros outside one (e.g. the global window).
func intervalBounds(w beam.Window) (start, end int64) {
	if iw, ok := w.(window.IntervalWindow); ok {
		return iw.Start.Milliseconds(), iw.End.Milliseconds()
	}
	return 0, 0
}

// windowBounds is the window's [start, end) in epoch milliseconds; outside
// an interval window, the UTC hour of eventMs.
func windowBounds(w beam.Window, eventMs int64) (start, end int64) {
	if start, end = intervalBounds(w); start != 0 || end != 0 {
		return start, end
	}
	return schemas.WindowStart(eventMs, time.Hour), schemas.WindowEnd(eventMs, time.Hour)
}
