package hours

import (
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
)

// MergeHour builds an hour fired once (the batch windowing) whose
// identity already has readings stored in Bigtable for the hour (stored,
// rebuilt by ReadBack.Records): the batch's readings and the stored ones
// are prepared together (group.Prepare: duplicates dropped by the same
// content order whatever run brought them, missing values imputed from
// all of them), so the rows, the BigQuery rows and the rollup are what one
// batch over every reading of the hour builds.
//
// Every kept reading is written as a rewrite of its columns (each column
// written or cleared, Rewrites), since a stored reading's imputed values
// may move and a stored copy may lose to one the batch brings. The
// batch's own readings are its OriginReading writes (Readings); the stored
// ones that stay are OriginRewrite writes, counted in Merged. Dropped
// counts the batch's readings that were not kept: duplicates of one
// another or of a stored reading that wins. Every kept reading goes to
// BigQuery with the rollup row, which an upsert replaces by its key.
//
// With no stored reading it is BatchHour.
func MergeHour(c *Compiled, p HourPane, stored []schemas.Record, bigQuery bool, nowMs int64) Firing {
	if len(stored) == 0 {
		return BatchHour(c, p, bigQuery, nowMs)
	}
	all := make([]schemas.Record, 0, len(stored)+len(p.Records))
	all = append(append(all, stored...), p.Records...)
	kept, _ := group.Prepare(c.Spec, all)
	start, end := p.StartMs, p.EndMs
	if start == 0 && end == 0 && len(kept) > 0 {
		start, end = WindowStart(kept[0].EventMs, time.Hour), WindowEnd(kept[0].EventMs, time.Hour)
	}
	kinds := make([]OriginKind, len(kept))
	var out Firing
	for i := range kept {
		if deadletter.IsReadBack(&kept[i]) {
			kinds[i] = OriginRewrite
			out.Merged++
		} else {
			kinds[i] = OriginReading
			out.Readings++
		}
	}
	out.Dropped = int64(len(p.Records)) - out.Readings
	rollup := hourRollup(c, start, end, kept)
	cov := hourCoverage(c, p, start, end, kept)
	out.Rows, out.Dead = hourRows(c, kept, rollup, cov, true, nil, func(i int) OriginKind { return kinds[i] })
	out.Rows = withInventory(c, out.Rows, rollup, kept)
	if !bigQuery {
		return out
	}
	for i := range kept {
		row := c.Builder().BQRow(&kept[i], nowMs)
		row.Origin.Kind = kinds[i]
		out.BQ = append(out.BQ, row)
	}
	if rollup != nil {
		row := c.Roller().BQRow(rollup, p.Pane, nowMs)
		c.Roller().SetCoverage(&row, cov)
		out.Rollup = &row
	}
	return out
}
