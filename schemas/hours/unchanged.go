package hours

import (
	"bytes"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
)

// StoredHour is what Bigtable holds of one identity's hour that a batch
// merges with (MergeChanges).
type StoredHour struct {
	// Records are the hour's readings rebuilt from their cells
	// (ReadBack.Records).
	Records []schemas.Record
	// Rollup holds, by row key of the spec's first table (the rows the
	// rollup's cells ride in), the rollup family's cells at the hour's
	// end: qualifier to value. RollupRead says it was read; an hour whose
	// stored rollup was not read has its rollup written.
	Rollup     map[string]map[string][]byte
	RollupRead bool
	// Marks are the hour's BigQuery marks (see MarksTable): BigQuery
	// table reference to fingerprint. MarksRead says they were read; an
	// hour whose marks were not read has every BigQuery row sent.
	Marks     map[string][]byte
	MarksRead bool
}

// Unchanged counts what MergeChanges left out because the stores hold it
// already.
type Unchanged struct {
	// Bigtable counts, by table, the writes left out: each reading whose
	// cells in the table are all as stored (by its kind), each row whose
	// rollup cells are, and the inventory row (OriginRollup).
	Bigtable []UnchangedWrites
	// BigQuery counts, by table, the BigQuery rows left out because the
	// hour's marks say the table holds them.
	BigQuery []UnchangedRows
	// Hour is set when nothing was written to Bigtable for the hour.
	Hour bool
}

// UnchangedWrites counts the writes of one kind to one Bigtable table
// that were left out.
type UnchangedWrites struct {
	Table string
	Kind  OriginKind
	N     int64
}

// MergeChanges is MergeHour that writes only what changes. The merged
// hour is compared with what Bigtable holds of it (stored):
//
//   - A kept reading with the same values (observed, imputed and their
//     flags) as the stored reading of its millisecond writes nothing: a
//     reading's cells in every table, and its BigQuery row but for
//     $ingested_at, are functions of its values and event time alone.
//   - Any other kept reading (new, or changed by the batch or by an
//     imputation that moved) writes the cells that differ from those its
//     stored version gives (the same builder over the stored reading, so a
//     cell is compared with the one that reading's write left), and its
//     BigQuery row when that differs from the stored version's.
//   - The rollup's cells are compared, row by row, with the stored ones.
//   - The inventory row is written when the hour's first or last reading
//     moved.
//   - With bigQuery, every kept reading's row and the rollup's row are
//     sent, as BatchHour sends them: what Bigtable's readings hold says
//     nothing of what a BigQuery table holds (the hour may have been
//     written by a run without BigQuery, or to another dataset). With
//     marks, the hour's BigQuery marks decide instead (markedBQ): a
//     table that holds the merged hour's rows is sent none, one that
//     holds the stored readings' rows only the changed readings' rows;
//     the rows sent carry the new mark.
//
// The comparison is exact where the read-back is lossless (ReadBack: every
// field in a column or the row key, each imputed value with its flag) and
// the stored hour was written by this spec: the readings' cells then hold
// what the stored readings give. Unchanged counts what was left out.
func MergeChanges(c *Compiled, p HourPane, stored StoredHour, bigQuery bool, marks *BQMarks, nowMs int64) (Firing, Unchanged) {
	if len(stored.Records) == 0 {
		out, h := batchHour(c, p, bigQuery, nowMs)
		var un Unchanged
		if bigQuery && marks != nil {
			// Nothing stored: no reading is unchanged.
			markedBQ(c, &out, marks, stored, nil, nil, h.rollup, h.cov, p.Pane, h.end, &un)
		}
		return out, un
	}
	// group.Prepare re-imputes in place: keep the stored values apart.
	before := make(map[int64]*schemas.Record, len(stored.Records))
	olds := make([]schemas.Record, len(stored.Records))
	for i := range stored.Records {
		olds[i] = stored.Records[i]
		olds[i].Values = append([]schemas.Value(nil), stored.Records[i].Values...)
		before[olds[i].EventMs] = &olds[i]
	}
	all := make([]schemas.Record, 0, len(stored.Records)+len(p.Records))
	all = append(append(all, stored.Records...), p.Records...)
	kept, _ := group.Prepare(c.Spec, all)
	start, end := p.StartMs, p.EndMs
	if start == 0 && end == 0 && len(kept) > 0 {
		start, end = WindowStart(kept[0].EventMs, time.Hour), WindowEnd(kept[0].EventMs, time.Hour)
	}
	var out Firing
	var un Unchanged
	var total [OriginRollup + 1]int64
	var changed, changedOld []schemas.Record
	var changedKinds []OriginKind
	isChanged := make([]bool, 0, len(kept))
	for i := range kept {
		r := &kept[i]
		kind := OriginReading
		if deadletter.IsReadBack(r) {
			kind = OriginRewrite
			out.Merged++
		} else {
			out.Readings++
		}
		total[kind]++
		if bigQuery {
			row := c.Builder().BQRow(r, nowMs)
			row.Origin.Kind = kind
			out.BQ = append(out.BQ, row)
		}
		old := before[r.EventMs]
		same := old != nil && SameValues(old.Values, r.Values)
		isChanged = append(isChanged, !same)
		if same {
			continue
		}
		changed = append(changed, *r)
		changedKinds = append(changedKinds, kind)
		if old != nil {
			changedOld = append(changedOld, *old)
		}
	}
	out.Dropped = int64(len(p.Records)) - out.Readings

	rows, dead := c.Builder().Build(changed, true, func(i int) OriginKind { return changedKinds[i] })
	oldRows, _ := c.Builder().Build(changedOld, true, nil)
	rows = withoutStoredCells(rows, oldRows)
	out.Dead = dead
	// Per table, the readings that write nothing there are unchanged in it.
	for _, t := range c.Bigtable.Tables {
		left := total
		for i := range rows {
			if rows[i].Table == t.Name {
				for _, o := range rows[i].Origins {
					left[o.Kind]--
				}
			}
		}
		for _, rj := range dead {
			if rj.Table == t.Name {
				left[rj.Origin.Kind]--
			}
		}
		for kind, n := range left {
			if n > 0 {
				un.Bigtable = append(un.Bigtable, UnchangedWrites{Table: t.Name, Kind: OriginKind(kind), N: n})
			}
		}
	}

	rollup := hourRollup(c, start, end, kept)
	cov := hourCoverage(c, p, start, end, kept)
	if rollup != nil {
		rows = withChangedRollup(c, rows, rollup, cov, kept, stored, &un)
	}
	rows = withChangedInventory(c, rows, rollup, kept, olds, &un)
	out.Rows = rows

	if bigQuery && rollup != nil {
		row := c.Roller().BQRow(rollup, p.Pane, nowMs)
		c.Roller().SetCoverage(&row, cov)
		out.Rollup = &row
	}
	if bigQuery && marks != nil {
		markedBQ(c, &out, marks, stored, olds, isChanged, rollup, cov, p.Pane, end, &un)
	}
	un.Hour = len(out.Rows) == 0 && len(out.Dead) == 0
	return out, un
}

// cellKey names one version of one cell.
type cellKey struct {
	table, row, family, qualifier string
	ts                            int64
}

// withoutStoredCells drops from rows the cells that oldRows (the stored
// versions' rewrites) write with the same value, and the deletions of
// versions oldRows also deletes (a column that had no value), keeping
// each origin's counts; an origin left with nothing, and a row left with
// no origin, go.
func withoutStoredCells(rows, oldRows []RowMutation) []RowMutation {
	if len(oldRows) == 0 {
		return rows
	}
	cells := map[cellKey][]byte{}
	deleted := map[cellKey]bool{}
	for _, m := range oldRows {
		for _, c := range m.Cells {
			cells[cellKey{m.Table, m.RowKey, c.Family, c.Qualifier, c.TsMicros}] = c.Value
		}
		for _, c := range m.Deletes {
			deleted[cellKey{m.Table, m.RowKey, c.Family, c.Qualifier, c.TsMicros}] = true
		}
	}
	out := rows[:0]
	for _, m := range rows {
		var keepCells, keepDels []Cell
		var origins []Origin
		ci, di := 0, 0
		for _, o := range m.Origins {
			nc, nd := len(keepCells), len(keepDels)
			for _, c := range m.Cells[ci : ci+o.Cells] {
				if v, ok := cells[cellKey{m.Table, m.RowKey, c.Family, c.Qualifier, c.TsMicros}]; !ok || !bytes.Equal(v, c.Value) {
					keepCells = append(keepCells, c)
				}
			}
			for _, c := range m.Deletes[di : di+o.Deletes] {
				if !deleted[cellKey{m.Table, m.RowKey, c.Family, c.Qualifier, c.TsMicros}] {
					keepDels = append(keepDels, c)
				}
			}
			ci, di = ci+o.Cells, di+o.Deletes
			o.Cells, o.Deletes = len(keepCells)-nc, len(keepDels)-nd
			if o.Cells+o.Deletes > 0 {
				origins = append(origins, o)
			}
		}
		if len(origins) > 0 {
			m.Cells, m.Deletes, m.Origins = keepCells, keepDels, origins
			out = append(out, m)
		}
	}
	return out
}

// withChangedRollup adds the rollup's cells (its rewrite and coverage) to
// each row of the first table whose stored rollup cells differ: those that
// differ, and the deletions of stored ones, to the row's mutation when it
// has one, else as a mutation of its own. The rows left alone are counted
// in un. changed says whether any row was written.
func withChangedRollup(c *Compiled, rows []RowMutation, rollup *Rollup, cov *coverage.Coverage, kept []schemas.Record,
	stored StoredHour, un *Unchanged) []RowMutation {
	first := c.Bigtable.Tables[0].Name
	cells, dels := c.Roller().RewriteCells(rollup)
	covCells, covDels := c.Roller().CoverageCells(rollup, cov, true)
	cells, dels = append(cells, covCells...), append(dels, covDels...)
	var left int64
	for _, key := range c.Builder().RowKeys(first, kept) {
		rowCells, rowDels := cells, dels
		if stored.RollupRead {
			rowCells, rowDels = rollupChanges(stored.Rollup[key], cells, dels)
		}
		if len(rowCells)+len(rowDels) == 0 {
			left++
			continue
		}
		found := false
		for i := range rows {
			if m := &rows[i]; m.Table == first && m.RowKey == key && len(m.Origins) > 0 {
				m.Cells = append(m.Cells, rowCells...)
				m.Deletes = append(m.Deletes, rowDels...)
				last := &m.Origins[len(m.Origins)-1]
				last.Cells += len(rowCells)
				last.Deletes += len(rowDels)
				found = true
				break
			}
		}
		if !found {
			o := c.Roller().Origin(rollup)
			o.Cells, o.Deletes = len(rowCells), len(rowDels)
			rows = append(rows, RowMutation{Table: first, RowKey: key, Cells: rowCells, Deletes: rowDels, Origins: []Origin{o}})
		}
	}
	if left > 0 {
		un.Bigtable = append(un.Bigtable, UnchangedWrites{Table: first, Kind: OriginRollup, N: left})
	}
	return rows
}

// rollupChanges are the rollup cells a row's stored ones (qualifier to
// value) do not hold, and the deletions of columns it holds.
func rollupChanges(stored map[string][]byte, cells, dels []Cell) (changedCells, changedDels []Cell) {
	for _, c := range cells {
		if v, ok := stored[c.Qualifier]; !ok || !bytes.Equal(v, c.Value) {
			changedCells = append(changedCells, c)
		}
	}
	for _, d := range dels {
		if _, ok := stored[d.Qualifier]; ok {
			changedDels = append(changedDels, d)
		}
	}
	return changedCells, changedDels
}

// withChangedInventory adds the hour's inventory mutation (withInventory)
// when the hour's first or last reading differs from the stored
// readings' (olds), which wrote the same cells; else it counts the row in
// un.
func withChangedInventory(c *Compiled, rows []RowMutation, rollup *Rollup, kept, olds []schemas.Record, un *Unchanged) []RowMutation {
	if c.Bigtable.Inventory == "" || len(kept) == 0 {
		return rows
	}
	if len(olds) > 0 {
		nf, nl := eventSpan(kept)
		of, ol := eventSpan(olds)
		if nf == of && nl == ol {
			un.Bigtable = append(un.Bigtable, UnchangedWrites{Table: c.Bigtable.Inventory, Kind: OriginRollup, N: 1})
			return rows
		}
	}
	return withInventory(c, rows, rollup, kept)
}

// eventSpan is the earliest and latest event time of recs (not empty).
func eventSpan(recs []schemas.Record) (first, last int64) {
	first, last = recs[0].EventMs, recs[0].EventMs
	for i := range recs {
		first, last = min(first, recs[i].EventMs), max(last, recs[i].EventMs)
	}
	return first, last
}

// SameValues reports whether two readings' values (fields and imputed
// flags) are the same: of the same kind and content, a float bit for bit.
func SameValues(a, b []schemas.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Same(&b[i]) {
			return false
		}
	}
	return true
}
