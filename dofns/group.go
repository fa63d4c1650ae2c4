package dofns

import (
	"context"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/progress"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*schemas.RowMutation)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*schemas.BQRow)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*PaneRows)(nil)).Elem())
	register.DoFn9x0[context.Context, beam.PaneInfo, beam.Window, string, func(*schemas.Record) bool,
		func(schemas.RowMutation), func(string, PaneRows), func(schemas.BQRow), func(schemas.DeadLetter)](&BuildRowsFn{})
	register.Iter1[schemas.Record]()
	register.Emitter1[schemas.RowMutation]()
	register.Emitter1[schemas.BQRow]()
	register.Emitter2[string, PaneRows]()
}

// PaneRows are the BigQuery rows one firing built for one identity and
// window, with what BigQueryOnceFn needs to send each reading once: the
// pane's index, and each row's reading id and fingerprint.
type PaneRows struct {
	Pane   int64
	Rows   []schemas.BQRow
	IDs    []string
	Prints []uint64
}

// BuildRowsFn takes the readings of one identity in one event-time window
// (one firing of it), drops duplicates, imputes, and emits one mutation per
// Bigtable row, the firing's BigQuery rows, and its rollup.
//
// Every firing re-imputes the whole window from the readings it has
// accumulated so far (PrepareGroup starts from observed values), and writes
// every reading's cells at their event times: an early firing writes a
// provisional imputation, the on-time and late firings overwrite it with
// the imputation of everything seen, which for a closed window is the
// batch result. The rollup cells ride in the first table's rows, at the
// window's end.
//
// BigQuery rows are built for the on-time, late and unknown (batch) firings
// only, never the early ones, and leave as PaneRows keyed by identity, so
// that BigQueryOnceFn can send each reading once per window.
type BuildRowsFn struct {
	Spec *schemas.Spec
	// BigQuery turns the BigQuery outputs on.
	BigQuery bool

	builder    *schemas.Builder
	roller     *schemas.Roller
	firstTable string
	duplicates beam.Counter
	rows       beam.Counter
	panes      beam.Counter
}

// Setup compiles the spec.
func (f *BuildRowsFn) Setup() error {
	var err error
	if _, f.builder, err = compile(f.Spec); err != nil {
		return err
	}
	if f.roller, err = schemas.NewRoller(f.Spec); err != nil {
		return err
	}
	f.firstTable = f.Spec.Bigtable.Tables[0].Name
	f.duplicates = beam.NewCounter("group", "duplicates_dropped")
	f.rows = beam.NewCounter("group", "rows")
	f.panes = beam.NewCounter("group", "firings")
	return nil
}

// ProcessElement builds the group's rows for this firing.
func (f *BuildRowsFn) ProcessElement(ctx context.Context, pane beam.PaneInfo, w beam.Window, key string, readings func(*schemas.Record) bool,
	emitRow func(schemas.RowMutation), emitBQ func(string, PaneRows), emitRollup func(schemas.BQRow), dead func(schemas.DeadLetter)) {
	var recs []schemas.Record
	var r schemas.Record
	for readings(&r) {
		recs = append(recs, r)
		r = schemas.Record{}
	}
	if len(recs) == 0 {
		return
	}
	f.panes.Inc(ctx, 1)
	kept, dropped := f.Spec.PrepareGroup(recs)
	f.duplicates.Inc(ctx, int64(dropped))
	if pane.IsFirst {
		// Accumulating panes repeat earlier duplicates: count them once.
		progress.Duplicates.Add(int64(dropped))
	}
	muts, rejected := f.builder.Mutations(kept)
	for _, rj := range rejected {
		dead(NewDeadLetter(rj.Origin.Raw, rj.Origin.Source, rj.Err))
	}
	var rollup schemas.Rollup
	if f.roller != nil {
		start, end := windowBounds(w, kept[0].EventMs)
		rollup = f.roller.Compute(kept, start, end)
		cells := f.roller.Cells(&rollup)
		for i := range muts {
			if m := &muts[i]; m.Table == f.firstTable && len(m.Origins) > 0 {
				// The rollup cells travel with the row's last reading, so
				// they are written (or dead-lettered) with the row.
				m.Cells = append(m.Cells, cells...)
				m.Origins[len(m.Origins)-1].Cells += len(cells)
			}
		}
	}
	for _, m := range muts {
		f.rows.Inc(ctx, 1)
		emitRow(m)
	}
	if !f.BigQuery || pane.Timing == typex.PaneEarly {
		return
	}
	now := time.Now().UnixMilli()
	pr := PaneRows{Pane: int64(pane.Index)}
	for i := range kept {
		pr.Rows = append(pr.Rows, f.builder.BQRow(&kept[i], now))
		pr.IDs = append(pr.IDs, f.Spec.ReadingID(&kept[i]))
		pr.Prints = append(pr.Prints, Fingerprint(&kept[i]))
	}
	emitBQ(key, pr)
	if f.roller != nil {
		emitRollup(f.roller.BQRow(&rollup, schemas.Pane{Timing: pane.Timing.String(), Index: int64(pane.Index)}, now))
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
