package dofns

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*hours.RowMutation)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*hours.BQRow)(nil)).Elem())
	register.Emitter1[hours.RowMutation]()
	register.Emitter1[hours.BQRow]()
}

// BuildRowsFn is the batch's hour builder, which BuildBatchedRowsFn runs
// on each grouped window: it takes all the readings of one identity in one
// event-time window, fired once (the batch windowing), drops duplicates,
// imputes, and emits one mutation per Bigtable row, the BigQuery rows and
// the rollup.
// The rollup cells ride in the first table's rows, at the window's end.
// Windows that fire more than once take PaneBatchFn and StreamRowsFn.
//
// With Merge on, each window is first read back from Bigtable (see
// hours.ReadBack) and built with the readings stored there by earlier
// runs (hours.Compiled.MergeHour), so that batches that each bring part
// of an hour, in any order, or a batch after a stream, leave what one
// batch over all of them leaves. A window with nothing stored costs one
// empty read. A read is retried as the writes are (Retry). One that still
// fails means Bigtable is unreachable: the windows built for the next
// retry deadline are then built from their own readings (counted as group.merge_failed, with a warning),
// and their writes, which fail too, become write_failed dead letters,
// whose replay merges them. Failing the bundle instead would fail the
// run, where a store that stays down must end in dead letters and exit 3.
type BuildRowsFn struct {
	Spec *hours.Compiled
	// BigQuery turns the BigQuery outputs on.
	BigQuery bool
	// Merge turns the read-back of stored readings on (the instance to
	// read); the zero value builds each window from its readings alone.
	Merge Recovery
	// Retry bounds each read back as it bounds a write.
	Retry retry.Settings
	// BQMarks, with a Table (hours.MarksTable), has each merged hour's
	// BigQuery marks read with it, and the BigQuery rows its tables hold
	// left out (hours.MergeChanges); its RowKey is set per hour. Zero:
	// every BigQuery row of a merged hour is sent.
	BQMarks hours.BQMarks

	hour        hourBuilder
	reader      *readBacker
	merged      beam.Counter
	mergedHours beam.Counter
	mergeFailed beam.Counter
	// downUntil is set when a read back failed: until then, windows
	// are built without one.
	downUntil time.Time
}

// Setup takes the compiled spec's builders and, with Merge on, opens the
// read-back's Bigtable client. A spec with no table to read back from
// builds from the batch's readings alone (the launcher says so once).
func (f *BuildRowsFn) Setup(ctx context.Context) error {
	if err := f.hour.setup(f.Spec); err != nil {
		return err
	}
	f.merged = beam.NewCounter("group", "merged_stored")
	f.mergedHours = beam.NewCounter("group", "merged_hours")
	f.mergeFailed = beam.NewCounter("group", "merge_failed")
	if !f.Merge.On() {
		return nil
	}
	r, err := openReadBacker(ctx, f.Spec, f.Merge)
	if errors.Is(err, hours.ErrNoReadBack) {
		return nil
	}
	f.reader = r
	return err
}

// Teardown closes the read-back's client.
func (f *BuildRowsFn) Teardown() error {
	if f.reader != nil {
		return f.reader.close()
	}
	return nil
}

// build builds the rows of a window fired once with recs, merged with the
// identity's stored readings of the window when Merge is on.
func (f *BuildRowsFn) build(ctx context.Context, pane beam.PaneInfo, w beam.Window, key string, recs []schemas.Record,
	emitRow func(hours.RowMutation), emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), dead func(deadletter.DeadLetter)) error {
	return f.buildFirstSeen(ctx, pane, w, key, recs, 0, emitRow, emitBQ, emitRollup, dead)
}

// buildFirstSeen is build with the identity's first-seen time as the
// batch knows it (FirstSeen; 0: unknown), for the rollup's coverage; with
// Merge on it is merged with the inventory's.
func (f *BuildRowsFn) buildFirstSeen(ctx context.Context, pane beam.PaneInfo, w beam.Window, key string, recs []schemas.Record, firstSeenMs int64,
	emitRow func(hours.RowMutation), emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), dead func(deadletter.DeadLetter)) error {
	if len(recs) == 0 {
		return nil
	}
	p := hours.HourPane{Pane: hours.Pane{Timing: pane.Timing.String(), Index: int64(pane.Index)}, FirstSeenMs: firstSeenMs}
	p.StartMs, p.EndMs = windowBounds(w, recs[0].EventMs)
	// A replay writes only the sinks its records' dead letters name (a
	// write's dead letter, the sink that failed it), and a rollup's
	// rebuild probe brings no reading.
	allow, rebuild, replay := deadletter.SinkSet(0), false, false
	kept := recs[:0]
	for i := range recs {
		r := &recs[i]
		if !deadletter.IsReplay(r) {
			allow |= deadletter.AllSinks
			kept = append(kept, *r)
			continue
		}
		replay = true
		allow |= deadletter.ReplaySinks(r)
		if deadletter.IsRebuild(r) {
			rebuild = true
			continue
		}
		kept = append(kept, *r)
	}
	recs = kept
	var stored []schemas.Record
	// A replay rewrites its hours whole: a dead letter's write failed, so
	// the store may lack what the read-back table holds.
	changesOnly := !replay && f.reader != nil
	var marks *hours.BQMarks
	if changesOnly && f.BigQuery && f.BQMarks.Table != "" {
		m := f.BQMarks
		m.RowKey = hours.MarkRowKey(key, p.StartMs)
		marks = &m
	}
	var sh hours.StoredHour
	if f.reader != nil && time.Now().Before(f.downUntil) {
		f.mergeFailed.Inc(ctx, 1)
	} else if f.reader != nil {
		var skipped int
		var err error
		policy := f.Retry.Policy()
		policy.MaxAttempts = 4
		if changesOnly {
			sh, skipped, err = f.reader.storedHour(ctx, policy, f.Spec, key, p.StartMs, p.EndMs, marks)
			stored = sh.Records
		} else {
			stored, skipped, err = f.reader.windowWithin(ctx, policy, key, p.StartMs, p.EndMs)
		}
		if err != nil {
			changesOnly = false
			f.downUntil = time.Now().Add(policy.Deadline)
			f.mergeFailed.Inc(ctx, 1)
			log.Warnf(ctx, "Bigtable cannot be read back (%v): the hours built in the next %v are built from the batch's readings alone; if their writes fail too, replay their write_failed dead letters once it is back", err, policy.Deadline)
		}
		if skipped > 0 {
			log.Warnf(ctx, "hour %s: %d readings in Bigtable could not be rebuilt from their cells", key, skipped)
		}
		if err == nil && f.Spec.HasCadence() && f.Spec.Rollup != nil {
			policy := f.Retry.Policy()
			policy.MaxAttempts = 4
			first, err := f.reader.firstSeen(ctx, f.Spec.Spec, key, policy)
			if err != nil {
				log.Warnf(ctx, "hour %s: the sensor's first-seen time is not in the coverage: %v", key, err)
			}
			p.FirstSeenMs = earliest(p.FirstSeenMs, first)
		}
	}
	if len(recs) == 0 && len(stored) == 0 {
		if rebuild {
			log.Warnf(ctx, "hour %s [%s, %s): nothing stored to rebuild its rollup from", key,
				time.UnixMilli(p.StartMs).UTC().Format(time.RFC3339), time.UnixMilli(p.EndMs).UTC().Format(time.RFC3339))
		}
		return nil
	}
	p.Records = recs
	var out hours.Firing
	var un hours.Unchanged
	now := time.Now().UnixMilli()
	if err := ledger.Guard(func() {
		if changesOnly {
			out, un = hours.MergeChanges(f.Spec, p, sh, f.BigQuery, marks, now)
		} else {
			out = hours.MergeHour(f.Spec, p, stored, f.BigQuery, now)
		}
	}); err != nil {
		f.hour.reject(ctx, recs, err, dead)
		return nil
	}
	f.countUnchanged(ctx, un)
	f.hour.firings.Inc(ctx, 1)
	f.hour.ctrs.Inc(ctx, ledger.Readings, out.Readings)
	f.hour.ctrs.Inc(ctx, ledger.Duplicates, out.Dropped)
	if out.Merged > 0 {
		f.merged.Inc(ctx, out.Merged)
		f.mergedHours.Inc(ctx, 1)
	}
	f.hour.emitTo(ctx, out, allow, emitRow, emitBQ, emitRollup, dead)
	return nil
}

// hourBuilder is what BuildRowsFn and StreamRowsFn share around the
// per-hour rules (hours.Compiled.BatchHour, EarlyFiring, FinalFiring):
// their counters, and the emitting of a firing's outputs.
type hourBuilder struct {
	rowCount beam.Counter
	firings  beam.Counter
	ctrs     ledger.Recorder
}

func (h *hourBuilder) setup(spec *hours.Compiled) error {
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
func (h *hourBuilder) emit(ctx context.Context, out hours.Firing, emitRow func(hours.RowMutation),
	emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), emitDead func(deadletter.DeadLetter)) {
	h.emitTo(ctx, out, deadletter.AllSinks, emitRow, emitBQ, emitRollup, emitDead)
}

// emitTo is emit to the sinks of allow only (a replay's); the firing's
// readings not routed to a sink are counted as the replay's skipped
// (ledger.ReplaySkipped).
func (h *hourBuilder) emitTo(ctx context.Context, out hours.Firing, allow deadletter.SinkSet, emitRow func(hours.RowMutation),
	emitBQ func(hours.BQRow), emitRollup func(hours.BQRow), emitDead func(deadletter.DeadLetter)) {
	if allow != deadletter.AllSinks {
		for _, sink := range []string{deadletter.SinkBigtable, deadletter.SinkBigQuery} {
			if !allow.Has(sink) {
				h.ctrs.Inc(ctx, ledger.ReplaySkipped(sink), out.Readings)
			}
		}
		if !allow.Has(deadletter.SinkBigtable) {
			out.Rows, out.Dead = nil, nil
		}
		if !allow.Has(deadletter.SinkBigQuery) {
			out.BQ = nil
		}
		if !allow.Has(deadletter.SinkBigQueryRollups) {
			out.Rollup = nil
		}
	}
	for _, rj := range out.Dead {
		h.ctrs.Sink(ctx, deadletter.SinkBigtable, rj.Table, rj.Origin.Kind, ledger.Routed, 1)
		h.ctrs.Sink(ctx, deadletter.SinkBigtable, rj.Table, rj.Origin.Kind, ledger.Failed, 1)
		emitDead(deadLetter(deadletter.SinkBigtable, rj.Origin.Raw, rj.Origin.Source, fmt.Errorf("table %s: %w", rj.Table, rj.Err)))
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
func (h *hourBuilder) reject(ctx context.Context, recs []schemas.Record, err error, dead func(deadletter.DeadLetter)) {
	h.ctrs.Inc(ctx, ledger.GroupRejected, int64(len(recs)))
	for _, r := range recs {
		dead(deadLetter(deadletter.SinkWindow, r.Raw, r.Source, err))
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
	return hours.WindowStart(eventMs, time.Hour), hours.WindowEnd(eventMs, time.Hour)
}
