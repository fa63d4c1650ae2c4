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
	if len(recs) == 0 {
		return
	}
	var (
		kept            []schemas.Record
		muts            []schemas.RowMutation
		rejected        []schemas.Rejected
		rollup          *schemas.Rollup
		dropped         int
		bqRows          []schemas.BQRow
		rollupRow       *schemas.BQRow
		start, end, now = int64(0), int64(0), time.Now().UnixMilli()
	)
	err := guard(func() {
		kept, dropped = f.Spec.PrepareGroup(recs)
		start, end = windowBounds(w, kept[0].EventMs)
		rollup = f.hour.rollup(start, end, kept)
		muts, rejected = f.hour.rows(kept, rollup, false, nil, nil)
		if !f.BigQuery {
			return
		}
		for i := range kept {
			bqRows = append(bqRows, f.hour.builder.BQRow(&kept[i], now))
		}
		if rollup != nil {
			row := f.hour.roller.BQRow(rollup, schemas.Pane{Timing: pane.Timing.String(), Index: int64(pane.Index)}, now)
			rollupRow = &row
		}
	})
	if err != nil {
		f.hour.reject(ctx, recs, err, dead)
		return
	}
	f.hour.firings.Inc(ctx, 1)
	f.hour.ctrs.inc(ctx, ledger.Readings, int64(len(kept)))
	f.hour.ctrs.inc(ctx, ledger.Duplicates, int64(dropped))
	f.hour.emit(ctx, muts, rejected, emitRow, dead)
	for _, r := range bqRows {
		emitBQ(r)
	}
	if rollupRow != nil {
		emitRollup(*rollupRow)
	}
}

// hourBuilder is what BuildRowsFn and StreamRowsFn share: the compiled
// spec, and the building of a window's rows with its rollup cells. Its
// methods other than setup and emit are pure, for table tests.
type hourBuilder struct {
	spec       *schemas.Compiled
	builder    *schemas.Builder
	roller     *schemas.Roller
	firstTable string
	rowCount   beam.Counter
	firings    beam.Counter
	ctrs       counters
}

func (h *hourBuilder) setup(spec *schemas.Compiled) error {
	if spec == nil {
		return errors.New("build rows: no compiled spec")
	}
	h.builder, h.roller = spec.Builder(), spec.Roller()
	h.spec = spec
	h.firstTable = spec.Bigtable.Tables[0].Name
	h.rowCount = beam.NewCounter("group", "rows")
	h.firings = beam.NewCounter("group", "firings")
	return nil
}

// rollup is the rollup of the prepared readings in the window [start,
// end), or nil when the spec has none.
func (h *hourBuilder) rollup(start, end int64, kept []schemas.Record) *schemas.Rollup {
	if h.roller == nil {
		return nil
	}
	ru := h.roller.Compute(kept, start, end)
	return &ru
}

// rows builds the mutations of recs with the rollup's cells (see
// schemas.Compiled.HourRows).
func (h *hourBuilder) rows(recs []schemas.Record, rollup *schemas.Rollup, rewrite bool, rollupRows []string, kind func(int) schemas.OriginKind) ([]schemas.RowMutation, []schemas.Rejected) {
	return h.spec.HourRows(recs, rollup, rewrite, rollupRows, kind)
}

// emit emits a firing's rows, and the dead letters of the records it could
// not build for a table (sink bigtable: each counted in that table's
// ledger as routed and failed).
func (h *hourBuilder) emit(ctx context.Context, muts []schemas.RowMutation, rejected []schemas.Rejected,
	emitRow func(schemas.RowMutation), emitDead func(schemas.DeadLetter)) {
	for _, rj := range rejected {
		h.ctrs.sink(ctx, schemas.SinkBigtable, rj.Table, rj.Origin.Kind, ledger.Routed, 1)
		h.ctrs.sink(ctx, schemas.SinkBigtable, rj.Table, rj.Origin.Kind, ledger.Failed, 1)
		emitDead(deadLetter(schemas.SinkBigtable, rj.Origin.Raw, rj.Origin.Source, fmt.Errorf("table %s: %w", rj.Table, rj.Err)))
	}
	for _, m := range muts {
		h.rowCount.Inc(ctx, 1)
		emitRow(m)
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

// windowBounds is the window's [start, end) in epoch milliseconds; outside
// an interval window (e.g. the global window), the UTC hour of eventMs.
func windowBounds(w beam.Window, eventMs int64) (start, end int64) {
	if iw, ok := w.(window.IntervalWindow); ok {
		return iw.Start.Milliseconds(), iw.End.Milliseconds()
	}
	return schemas.WindowStart(eventMs, time.Hour), schemas.WindowEnd(eventMs, time.Hour)
}
