package hours

import (
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
)

// HourRows builds the mutations of an hour's recs, as Mutations (or
// Rewrites when rewrite is set) with kind(i) the kind of recs[i]'s writes
// (nil: each an OriginReading), and the records that cannot be built for a
// table. The rollup's cells travel with the last reading of each
// first-table row, so they are written (or dead-lettered) with it; each row
// of rollupRows that recs do not touch gets a mutation of the rollup cells
// alone.
func HourRows(c *Compiled, recs []schemas.Record, rollup *Rollup, rewrite bool, rollupRows []string, kind func(int) OriginKind) ([]RowMutation, []Rejected) {
	return hourRows(c, recs, rollup, nil, rewrite, rollupRows, kind)
}

// hourRows is HourRows with the hour's coverage cells (a spec with a
// cadence) among the rollup's.
func hourRows(c *Compiled, recs []schemas.Record, rollup *Rollup, cov *coverage.Coverage, rewrite bool, rollupRows []string, kind func(int) OriginKind) ([]RowMutation, []Rejected) {
	first := c.Bigtable.Tables[0].Name
	muts, rejected := c.Builder().Build(recs, rewrite, kind)
	if rollup == nil {
		return muts, rejected
	}
	cells, dels := c.Roller().Cells(rollup), []Cell(nil)
	if rewrite {
		cells, dels = c.Roller().RewriteCells(rollup)
	}
	if cov != nil || rewrite {
		covCells, covDels := c.Roller().CoverageCells(rollup, cov, rewrite)
		cells, dels = append(cells, covCells...), append(dels, covDels...)
	}
	touched := map[string]bool{}
	for i := range muts {
		if m := &muts[i]; m.Table == first && len(m.Origins) > 0 {
			m.Cells = append(m.Cells, cells...)
			m.Deletes = append(m.Deletes, dels...)
			last := &m.Origins[len(m.Origins)-1]
			last.Cells += len(cells)
			last.Deletes += len(dels)
			touched[m.RowKey] = true
		}
	}
	for _, key := range rollupRows {
		if !touched[key] {
			o := c.Roller().Origin(rollup)
			o.Cells, o.Deletes = len(cells), len(dels)
			muts = append(muts, RowMutation{Table: first, RowKey: key, Cells: cells, Deletes: dels, Origins: []Origin{o}})
		}
	}
	return muts, rejected
}
