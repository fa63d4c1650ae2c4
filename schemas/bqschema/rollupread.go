package bqschema

import (
	"fmt"
	"strings"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// RollupReadPlan reads rows of a spec's hourly rollup table
// (hours.Roller.BigQuery) back into what the hour's rollup cells in
// Bigtable hold: each aggregate or coverage column is the cell of the same
// name, its value as hours.EncodeValue writes it, and a NULL column is no
// cell. keys compare compares a table's rollups with BigQuery's through
// it.
type RollupReadPlan struct {
	spec     *schemas.Spec
	columns  []string
	identity []int // per column: its identity field's index, or -1
	start    int   // the window_start column
	pane     int   // the pane_index column
	values   []rollupColumn
}

// rollupColumn is an aggregate or coverage column: its place, name and
// value kind, and the field whose values it holds (a last value), or -1.
type rollupColumn struct {
	col   int
	name  string
	kind  schemas.Kind
	field int
}

// RollupRow is one row of the rollup table read back.
type RollupRow struct {
	// Identity holds the row's identity fields (group.IdentityKey).
	Identity schemas.Record
	StartMs  int64
	// PaneIndex orders the firings of one hour: the latest is the
	// hour's rollup.
	PaneIndex int64
	// Cells are the rollup's cells (Family left empty), by qualifier.
	Cells []hours.Cell
}

// NewRollupReadPlan plans the read of the rollup table bq describes
// (hours.Roller.BigQuery) of spec.
func NewRollupReadPlan(spec *schemas.Spec, bq *schemas.BigQuerySpec) (*RollupReadPlan, error) {
	p := &RollupReadPlan{spec: spec, start: -1, pane: -1}
	identity := map[string]bool{}
	for _, name := range spec.Identity {
		identity[name] = true
	}
	for _, c := range bq.Columns {
		i := len(p.columns)
		p.columns = append(p.columns, c.Name)
		p.identity = append(p.identity, -1)
		switch {
		case identity[c.Name]:
			p.identity[i] = spec.FieldIndex(c.Name)
		case c.Name == hours.RollupWindowStart:
			p.start = i
		case c.Name == hours.RollupPaneIndex:
			p.pane = i
		case c.Name == hours.RollupWindowEnd || c.Name == hours.RollupPaneTiming || c.Name == hours.RollupFiredAt:
		default:
			field := -1
			if name, ok := strings.CutSuffix(c.Name, "_last"); ok {
				field = spec.FieldIndex(name)
			}
			p.values = append(p.values, rollupColumn{col: i, name: c.Name, kind: columnKind(c.Type), field: field})
		}
	}
	if p.start < 0 || p.pane < 0 {
		return nil, fmt.Errorf("rollup table %s has no %s or %s column", bq.Table, hours.RollupWindowStart, hours.RollupPaneIndex)
	}
	return p, nil
}

// Columns are the columns the plan reads, in the order Row takes their
// values.
func (p *RollupReadPlan) Columns() []string { return p.columns }

// Row reads one row back: vals are its values of Columns, as
// ReadPlan.Record takes them.
func (p *RollupReadPlan) Row(vals []any) (RollupRow, error) {
	s := p.spec
	if len(vals) != len(p.columns) {
		return RollupRow{}, fmt.Errorf("%w: %d values for %d columns", ErrBQRead, len(vals), len(p.columns))
	}
	out := RollupRow{Identity: schemas.Record{Values: make([]schemas.Value, s.NumValues())}}
	for i, fi := range p.identity {
		if fi < 0 || vals[i] == nil {
			continue
		}
		v, err := readValue(s, fi, kindOf(s.Fields[fi].Type), vals[i])
		if err != nil {
			return RollupRow{}, fmt.Errorf("%w: column %s: %v", ErrBQRead, p.columns[i], err)
		}
		out.Identity.Values[fi] = v
	}
	start, err := readValue(s, -1, schemas.KindTime, vals[p.start])
	if err != nil {
		return RollupRow{}, fmt.Errorf("%w: column %s: %v", ErrBQRead, p.columns[p.start], err)
	}
	out.StartMs = start.Int
	if pane, ok := vals[p.pane].(int64); ok {
		out.PaneIndex = pane
	}
	for _, c := range p.values {
		v := vals[c.col]
		if v == nil {
			continue
		}
		var got schemas.Value
		switch x := v.(type) {
		case string:
			if c.field >= 0 {
				got, err = readValue(s, c.field, kindOf(s.Fields[c.field].Type), v)
			} else {
				got = schemas.Value{Kind: schemas.KindString, Str: x}
			}
		default:
			got, err = readValue(s, -1, c.kind, v)
		}
		if err != nil {
			return RollupRow{}, fmt.Errorf("%w: column %s: %v", ErrBQRead, c.name, err)
		}
		out.Cells = append(out.Cells, hours.Cell{Qualifier: c.name, Value: hours.EncodeValue(got, false)})
	}
	return out, nil
}

// columnKind is the value kind a rollup column of BigQuery type typ
// holds; hours.Roller names its columns' types as the specs do (STRING,
// BYTES, INT64, FLOAT64, BOOL, TIMESTAMP).
func columnKind(typ string) schemas.Kind {
	switch typ {
	case "INT64":
		return schemas.KindInt
	case "FLOAT64":
		return schemas.KindFloat
	case "BOOL":
		return schemas.KindBool
	case "TIMESTAMP":
		return schemas.KindTime
	case "BYTES":
		return schemas.KindBytes
	}
	return schemas.KindString
}
