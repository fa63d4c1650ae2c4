package hours

import (
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
)

// coverageValues are the coverage columns and their values (null without
// a coverage).
func coverageValues(cov *coverage.Coverage) []namedValue {
	if cov == nil {
		return []namedValue{{coverage.RollupExpected, schemas.Value{}}, {coverage.RollupCoverage, schemas.Value{}}, {coverage.RollupGaps, schemas.Value{}}, {coverage.RollupLongestGapS, schemas.Value{}}}
	}
	return []namedValue{
		{coverage.RollupExpected, schemas.Value{Kind: schemas.KindFloat, Num: cov.Expected}},
		{coverage.RollupCoverage, schemas.Value{Kind: schemas.KindFloat, Num: cov.Coverage}},
		{coverage.RollupGaps, schemas.Value{Kind: schemas.KindInt, Int: cov.Gaps}},
		{coverage.RollupLongestGapS, schemas.Value{Kind: schemas.KindFloat, Num: cov.LongestGapS}},
	}
}

// addCoverageColumns adds the coverage columns to the rollup table of a
// spec with a cadence, after the firing's columns.
func (r *Roller) addCoverageColumns(add func(name, typ, mode string)) {
	if !r.spec.HasCadence() {
		return
	}
	add(coverage.RollupExpected, "FLOAT64", "")
	add(coverage.RollupCoverage, "FLOAT64", "")
	add(coverage.RollupGaps, "INT64", "")
	add(coverage.RollupLongestGapS, "FLOAT64", "")
}

// appendCoverage appends null coverage values to a rollup row of a spec
// with a cadence (SetCoverage fills them).
func (r *Roller) appendCoverage(vals []schemas.Value) []schemas.Value {
	if !r.spec.HasCadence() {
		return vals
	}
	return append(vals, schemas.Value{}, schemas.Value{}, schemas.Value{}, schemas.Value{})
}

// SetCoverage fills the coverage columns of a rollup row that BQRow built;
// it does nothing for a spec without a cadence.
func (r *Roller) SetCoverage(row *BQRow, cov *coverage.Coverage) {
	if !r.spec.HasCadence() || cov == nil || len(row.Values) < 4 {
		return
	}
	vals := row.Values[len(row.Values)-4:]
	for i, nv := range coverageValues(cov) {
		vals[i] = nv.v
	}
}

// CoverageCells renders an hour's coverage as cells of the rollup family
// at the window's end, as Cells does the aggregates; with withDeletes a
// null coverage (none applies to the hour) clears the columns instead.
// A spec without a cadence has none.
func (r *Roller) CoverageCells(ru *Rollup, cov *coverage.Coverage, withDeletes bool) (cells, deletes []Cell) {
	if !r.spec.HasCadence() {
		return nil, nil
	}
	ts := ru.EndMs * 1000
	for _, nv := range coverageValues(cov) {
		switch {
		case nv.v.Kind != schemas.KindNull:
			cells = append(cells, Cell{Family: r.family, Qualifier: nv.name, TsMicros: ts, Value: EncodeValue(nv.v, false)})
		case withDeletes:
			deletes = append(deletes, Cell{Family: r.family, Qualifier: nv.name, TsMicros: ts})
		}
	}
	return cells, deletes
}
