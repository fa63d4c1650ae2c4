// Package hours compiles a spec and builds one identity's event-time hour from its records, prepared by package group: cells and rows, rollups with their coverage, the inventory row, a batch's hour, a stream's early and final firings, the merge with the readings already stored, their read-back from Bigtable, the BigQuery marks of what a merge need not send again, and a local stream's hour state on disk.
package hours

import (
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
)

// The per-hour rules: how one identity's readings in one event-time window
// (an hour) become Bigtable mutations, BigQuery rows and the rollup, in the
// batch pipeline (BatchHour: every reading at once) and in the stream
// (EarlyFiring, then FinalFiring for the on-time and every late firing).
// The stream's rules converge: once the last firing of an hour is built,
// what its firings wrote equals what BatchHour writes for all its readings
// (hour_test.go checks it, in and out of order and with duplicates).
//
// They are pure: no Beam, no I/O, the firing time passed in. The DoFns keep
// the state, timers, emitters and counters (dofns.BuildRowsFn,
// dofns.StreamRowsFn).

// The pane timings, as Beam's typex.PaneTiming renders them (Pane.Timing).
const (
	PaneEarly  = "early"
	PaneOnTime = "ontime"
	PaneLate   = "late"
)

// HourPane is one firing of one identity's hour: the window's bounds in
// epoch milliseconds, the pane's timing and index, and the readings it
// brings (a stream's panes discard: those that arrived since the window's
// previous firing).
type HourPane struct {
	StartMs, EndMs int64
	Pane           Pane
	Records        []schemas.Record
	// FirstSeenMs is the identity's earliest event time known beyond the
	// hour's own readings (the inventory's first seen, a batch's earliest
	// reading of the identity), for the rollup's coverage; 0 when none is
	// known: the hour's first reading is then taken as the sensor's first.
	FirstSeenMs int64
}

// EarlyState is the summary of the early firings of one identity and
// hour: the window's bounds, how many early firings there were, the
// duplicates they dropped (each within its own firing), the observed values
// that impute the next firing's readings, and the rollup so far. Its size
// does not grow with the hour.
type EarlyState struct {
	StartMs, EndMs int64
	Firings        int64
	Dropped        int64
	Seen           group.Seen
	Rollup         Rollup
}

// FinalState is what the on-time and late firings of one identity and
// hour built: each reading's event millisecond (its identity, within the
// key) and fingerprint, in event-time order, and the duplicates dropped.
type FinalState struct {
	Ms      []int64
	Prints  []uint64
	Dropped int64
}

// Firing is what one firing of an hour builds.
type Firing struct {
	Rows   []RowMutation
	Dead   []Rejected
	BQ     []BQRow
	Rollup *BQRow
	// Keep are the readings that join the hour's state, for the firings
	// to come (the stream's; BatchHour leaves it empty).
	Keep []schemas.Record
	// Readings counts the distinct readings this firing built for the
	// first time with their final values (the run's ledger counts them
	// here); Dropped the duplicates found in this firing; Sent, Resent and
	// Suppressed the BigQuery rows sent for the first time, sent again
	// because they changed, and not sent again; SentRecovered the rows of
	// read-back readings sent for the first time (not in Sent).
	Readings, Dropped, Sent, Resent, Suppressed, SentRecovered int64
	// Recovered counts the read-back readings that joined the hour;
	// Superseded the read-back readings this firing brought from the
	// source after all.
	Recovered, Superseded int64
	// Merged counts the readings stored by earlier runs that a batch's
	// hour was merged with and wrote again (MergeHour).
	Merged int64
	// Rewritten counts the readings a final firing writes (FinalFiring):
	// none when every reading was built before with the values it has.
	Rewritten int64
}

// hourRollup is the rollup of the prepared readings in the window [start,
// end), or nil when the spec has none.
func hourRollup(c *Compiled, start, end int64, kept []schemas.Record) *Rollup {
	if c.Roller() == nil {
		return nil
	}
	ru := c.Roller().Compute(kept, start, end)
	return &ru
}

// hourCoverage is the coverage of the prepared readings in the window
// [start, end), or nil when the spec has no rollup or no cadence applies.
func hourCoverage(c *Compiled, p HourPane, start, end int64, kept []schemas.Record) *coverage.Coverage {
	if c.Roller() == nil {
		return nil
	}
	return coverage.HourCoverage(c.Spec, kept, start, end, p.FirstSeenMs)
}

// BatchHour builds an hour fired once with all its readings (the batch
// windowing): duplicates dropped, missing values imputed, one mutation per
// Bigtable row with the rollup's cells, and with bigQuery the BigQuery rows
// and the rollup row, stamped nowMs. Zero bounds (outside an interval
// window) mean the UTC hour of the first reading kept.
func BatchHour(c *Compiled, p HourPane, bigQuery bool, nowMs int64) Firing {
	out, _ := batchHour(c, p, bigQuery, nowMs)
	return out
}

// builtHour is what an hour was built from: its prepared readings, its
// window, rollup and coverage.
type builtHour struct {
	kept       []schemas.Record
	start, end int64
	rollup     *Rollup
	cov        *coverage.Coverage
}

// batchHour is BatchHour, which also returns what it built the hour from.
func batchHour(c *Compiled, p HourPane, bigQuery bool, nowMs int64) (Firing, builtHour) {
	kept, dropped := group.Prepare(c.Spec, p.Records)
	start, end := p.StartMs, p.EndMs
	if start == 0 && end == 0 && len(kept) > 0 {
		start, end = WindowStart(kept[0].EventMs, time.Hour), WindowEnd(kept[0].EventMs, time.Hour)
	}
	out := Firing{Readings: int64(len(kept)), Dropped: int64(dropped)}
	rollup := hourRollup(c, start, end, kept)
	cov := hourCoverage(c, p, start, end, kept)
	h := builtHour{kept: kept, start: start, end: end, rollup: rollup, cov: cov}
	out.Rows, out.Dead = hourRows(c, kept, rollup, cov, false, nil, nil)
	out.Rows = withInventory(c, out.Rows, rollup, kept)
	if !bigQuery {
		return out, h
	}
	for i := range kept {
		out.BQ = append(out.BQ, c.Builder().BQRow(&kept[i], nowMs))
	}
	if rollup != nil {
		row := c.Roller().BQRow(rollup, p.Pane, nowMs)
		c.Roller().SetCoverage(&row, cov)
		out.Rollup = &row
	}
	return out, h
}

// EarlyFiring builds an early firing of an hour from its early state,
// which it updates: the firing's readings are prepared on their own
// (PrepareEarly: duplicates within the firing dropped, missing values
// imputed from the readings seen so far) and written with the provisional
// rollup. Earlier readings are not rewritten.
//
// arrivalWritten says each reading's observed cells were written on
// arrival (ArrivalRecord, a local stream's dofns.ArrivalRowsFn): the
// firing then writes only the readings whose cells it adds to (an imputed
// value) or that came with a copy in the same firing, and the rollup
// cells, not every reading a second time.
func EarlyFiring(c *Compiled, p HourPane, es *EarlyState, arrivalWritten bool) Firing {
	// Every reading joins the state, duplicates too: the on-time firing
	// must know which readings had more than one copy written (locally,
	// WriteOnArrival writes each copy).
	keep := append([]schemas.Record(nil), p.Records...)
	var copies map[int64]int
	if arrivalWritten {
		copies = make(map[int64]int, len(p.Records))
		for i := range p.Records {
			copies[p.Records[i].EventMs]++
		}
	}
	kept, dropped := group.PrepareEarly(c.Spec, p.Records, &es.Seen)
	es.StartMs, es.EndMs, es.Firings = p.StartMs, p.EndMs, max(es.Firings, p.Pane.Index+1)
	es.Dropped += int64(dropped)
	var rollup *Rollup
	if r := c.Roller(); r != nil {
		if es.Rollup.Stats == nil {
			es.Rollup = r.Start(p.StartMs, p.EndMs)
		}
		r.Add(&es.Rollup, kept)
		rollup = &es.Rollup
	}
	out := Firing{Keep: keep, Dropped: int64(dropped)}
	provisional := func(int) OriginKind { return OriginProvisional }
	if !arrivalWritten {
		out.Rows, out.Dead = HourRows(c, kept, rollup, false, nil, provisional)
		out.Rows = withInventory(c, out.Rows, rollup, kept)
		return out
	}
	// The arrival write stored every other reading's cells as this firing
	// would write them; the rollup cells go to each row regardless.
	var write []schemas.Record
	for i := range kept {
		if copies[kept[i].EventMs] > 1 || !ArrivalComplete(c.Spec, &kept[i]) {
			write = append(write, kept[i])
		}
	}
	var rollupRows []string
	if rollup != nil {
		rollupRows = c.Builder().RowKeys(c.Bigtable.Tables[0].Name, kept)
	}
	out.Rows, out.Dead = HourRows(c, write, rollup, false, rollupRows, provisional)
	out.Rows = withInventory(c, out.Rows, rollup, kept)
	return out
}

// FinalFiring builds an on-time or late firing of an hour from its
// earlier readings (prev), the readings read back from Bigtable (recovered:
// a restarted local stream's) and the state the firing before left, if
// final. counted is how many duplicates earlier firings counted. It returns
// the state to leave. nowMs stamps the BigQuery rows' ingestion time.
//
// Every reading it finalizes for the first time (not in fin: all of them
// at the hour's first on-time or late firing) is written with its final
// values: that is the write the run's ledger counts as the reading's, and
// it replaces whatever the early firings wrote provisionally (Rewrites:
// each column written or cleared, so a losing duplicate's column goes).
// A reading finalized before is rewritten only when its values changed,
// or a copy of it arrived again, or its cells read back differ.
//
// The readings of this run win over read-back ones with the same
// millisecond: a read-back reading that this run holds too is left out
// (here, or later from prev, where it stays once it joined the hour).
// A read-back reading that joins is finalized like the others, but as a
// rewrite (the killed run read it, not this one) and counted as
// recovered; if this run brings it later, it is then finalized as this
// run's reading.
//
// An early pane that comes after the on-time one is handled, and its
// rollup row labelled, as a late one.
func FinalFiring(c *Compiled, p HourPane, prev, recovered []schemas.Record, fin FinalState, final bool, counted int64, bigQuery bool, nowMs int64) (FinalState, Firing) {
	out := Firing{Keep: p.Records}
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
	// held are the milliseconds of the readings this run brought: before
	// (heldBefore) or now.
	heldBefore := make(map[int64]bool, len(prev))
	for i := range prev {
		if !deadletter.IsReadBack(&prev[i]) {
			heldBefore[prev[i].EventMs] = true
		}
	}
	held := make(map[int64]bool, len(prev)+len(p.Records))
	for ms := range heldBefore {
		held[ms] = true
	}
	for ms := range arrived {
		held[ms] = true
	}
	// own are read-back readings this firing brings from the source for
	// the first time.
	own := map[int64]bool{}
	kept := prev[:0:0]
	for i := range prev {
		r := &prev[i]
		if deadletter.IsReadBack(r) && held[r.EventMs] {
			if arrived[r.EventMs] && !heldBefore[r.EventMs] && !own[r.EventMs] {
				own[r.EventMs] = true
				out.Superseded++
			}
			continue
		}
		kept = append(kept, *r)
	}
	prev = kept
	inPrev := make(map[int64]bool, len(prev))
	for i := range prev {
		inPrev[prev[i].EventMs] = true
	}
	// fromBigtable are the read-back readings that join; stale the
	// finalized readings whose cells read back are not what was written.
	fromBigtable := make(map[int64]bool, len(recovered))
	stale := map[int64]bool{}
	var joined []schemas.Record
	for i := range recovered {
		r := &recovered[i]
		if held[r.EventMs] || inPrev[r.EventMs] {
			if old, had := sent[r.EventMs]; had && old != r.Fingerprint() {
				stale[r.EventMs] = true
			}
			continue
		}
		fromBigtable[r.EventMs] = true
		joined = append(joined, *r)
	}
	out.Recovered = int64(len(joined))
	out.Keep = append(append([]schemas.Record(nil), p.Records...), joined...)
	// group.Prepare re-imputes prev's values in place.
	all := make([]schemas.Record, 0, len(prev)+len(joined)+len(p.Records))
	all = append(append(append(all, prev...), joined...), p.Records...)
	kept, dropped := group.Prepare(c.Spec, all)
	out.Dropped = int64(dropped) - counted

	next := FinalState{Ms: make([]int64, len(kept)), Prints: make([]uint64, len(kept)), Dropped: int64(dropped)}
	if len(kept) == 0 {
		return next, out
	}
	var (
		rewrite []schemas.Record
		kinds   []OriginKind
	)
	for i := range kept {
		r := &kept[i]
		fp := r.Fingerprint()
		next.Ms[i], next.Prints[i] = r.EventMs, fp
		old, had := sent[r.EventMs]
		first := !had || own[r.EventMs]
		if r.Raw == "" && (first || old != fp || arrived[r.EventMs] || stale[r.EventMs]) {
			// A reading from the hour's held state, which keeps no raw
			// payload (AppendHeld): the rows it is written with carry its
			// canonical form, the payload of a dead letter should their
			// write fail.
			r.Raw = codec.CanonicalJSON(c.Spec, r)
		}
		switch {
		case first && fromBigtable[r.EventMs]:
			rewrite, kinds = append(rewrite, *r), append(kinds, OriginRewrite)
		case first:
			out.Readings++
			rewrite, kinds = append(rewrite, *r), append(kinds, OriginReading)
		case old != fp || arrived[r.EventMs] || stale[r.EventMs]:
			rewrite, kinds = append(rewrite, *r), append(kinds, OriginRewrite)
		}
		if !bigQuery {
			continue
		}
		switch {
		case first && fromBigtable[r.EventMs]:
			out.SentRecovered++
			row := c.Builder().BQRow(r, nowMs)
			row.Origin.Kind = OriginRewrite
			out.BQ = append(out.BQ, row)
		case first:
			out.Sent++
			out.BQ = append(out.BQ, c.Builder().BQRow(r, nowMs))
		case old != fp:
			out.Resent++
			row := c.Builder().BQRow(r, nowMs)
			row.Origin.Kind = OriginRewrite
			out.BQ = append(out.BQ, row)
		default:
			out.Suppressed++
		}
	}
	rollup := hourRollup(c, p.StartMs, p.EndMs, kept)
	cov := hourCoverage(c, p, p.StartMs, p.EndMs, kept)
	var rollupRows []string
	if rollup != nil {
		rollupRows = c.Builder().RowKeys(c.Bigtable.Tables[0].Name, kept)
		if bigQuery {
			pane := p.Pane
			if pane.Timing == PaneEarly {
				pane.Timing = PaneLate
			}
			row := c.Roller().BQRow(rollup, pane, nowMs)
			c.Roller().SetCoverage(&row, cov)
			out.Rollup = &row
		}
	}
	out.Rewritten = int64(len(rewrite))
	out.Rows, out.Dead = hourRows(c, rewrite, rollup, cov, true, rollupRows, func(i int) OriginKind { return kinds[i] })
	out.Rows = withInventory(c, out.Rows, rollup, kept)
	return next, out
}

// Sequence stamps the firing's BigQuery rows with their sequence number
// (ChangeSeq): the microsecond the firing was built, then its pane index,
// so that the rows of the firing built later win in BigQuery.
func (out *Firing) Sequence(micros, pane int64) {
	seq := ChangeSeq{Micros: micros, Pane: pane}
	for i := range out.BQ {
		out.BQ[i].Seq = seq
	}
	if out.Rollup != nil {
		out.Rollup.Seq = seq
	}
}
