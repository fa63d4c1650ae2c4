package readpath

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// Answer is an aggregate over the cells a query kept: one group, or one per
// distinct value of the group_by fields.
type Answer struct {
	Fn       string
	Column   string        // sum, min, max, avg: the field aggregated
	Interval time.Duration // duration: what each reading stands for
	GroupBy  []string
	Groups   []Group
}

// Group is one group's aggregate.
type Group struct {
	Key []string // the group_by fields' values, in order
	// N is the readings counted (count, duration) or the values
	// aggregated (sum, min, max, avg).
	N   int
	Sum float64
	Min float64
	Max float64
}

// Value is the group's answer: the count, the duration in seconds, or the
// sum, min, max or mean. ok is false for min, max and avg of no values.
func (g Group) Value(a *Answer) (v float64, ok bool) {
	switch a.Fn {
	case schemas.AggCount:
		return float64(g.N), true
	case schemas.AggDuration:
		return (time.Duration(g.N) * a.Interval).Seconds(), true
	case schemas.AggSum:
		return g.Sum, true
	case schemas.AggAvg:
		if g.N == 0 {
			return 0, false
		}
		return g.Sum / float64(g.N), true
	case schemas.AggMin:
		return g.Min, g.N > 0
	case schemas.AggMax:
		return g.Max, g.N > 0
	}
	return 0, false
}

// Duration is the group's duration (duration only).
func (g Group) Duration(a *Answer) time.Duration { return time.Duration(g.N) * a.Interval }

// aggregate computes a over cells of table. Readings are counted on the
// table's count column (one cell per reading, rowkey.CountColumn); sum,
// min, max and avg take the cells of the columns holding a.Column. A
// group_by field is read from the row's key, or from its column at the
// reading's timestamp.
func aggregate(spec *schemas.Spec, table string, a *schemas.AggregateSpec, cells []Cell) (*Answer, error) {
	ans := &Answer{Fn: a.Fn, Column: a.Column, Interval: a.IntervalDuration(), GroupBy: a.GroupBy}
	var cols []rowkey.ColumnRef
	var field *schemas.FieldSpec
	switch a.Fn {
	case schemas.AggCount, schemas.AggDuration:
		c, ok := rowkey.CountColumn(spec, table)
		if !ok {
			return nil, fmt.Errorf("table %s has no column to count readings on", table)
		}
		cols = []rowkey.ColumnRef{c}
	default:
		cols = rowkey.ValueColumns(spec, table, a.Column)
		field = spec.Field(a.Column)
		if len(cols) == 0 || field == nil {
			return nil, fmt.Errorf("table %s has no column holding %s", table, a.Column)
		}
	}
	sources := make([]rowkey.FieldSource, len(a.GroupBy))
	for i, g := range a.GroupBy {
		src, ok := rowkey.SourceOf(spec, table, g)
		if !ok || src.Time {
			return nil, fmt.Errorf("group_by %s: table %s holds it neither in its key nor in a column", g, table)
		}
		sources[i] = src
	}
	groups := map[string]*Group{}
	keys := map[string]map[string]rowkey.KeyPart{} // row key: decoded parts
	for _, c := range cells {
		if !matchesColumn(c, cols) {
			continue
		}
		gk := make([]string, len(a.GroupBy))
		for i, src := range sources {
			switch {
			case src.Key:
				parts, ok := keys[c.RowKey]
				if !ok {
					parts, _ = rowkey.DecodeKey(spec, table, c.RowKey)
					keys[c.RowKey] = parts
				}
				if v, ok := parts[a.GroupBy[i]].Decode(); ok {
					gk[i] = string(schemas.AppendText(nil, v))
				}
			case src.Column():
				gk[i] = cellValue(cells, c.RowKey, src.Family, src.Qualifier, c.TimestampMicros)
			}
		}
		id := strings.Join(gk, "\x00")
		g, ok := groups[id]
		if !ok {
			g = &Group{Key: gk, Min: math.Inf(1), Max: math.Inf(-1)}
			groups[id] = g
		}
		if field == nil {
			g.N++
			continue
		}
		v, ok := columnValue(field, encodingOf(cols, c), c.Value)
		if !ok {
			continue
		}
		x := v.Float()
		g.N++
		g.Sum += x
		g.Min = math.Min(g.Min, x)
		g.Max = math.Max(g.Max, x)
	}
	for _, g := range groups {
		ans.Groups = append(ans.Groups, *g)
	}
	sort.Slice(ans.Groups, func(i, j int) bool {
		return strings.Join(ans.Groups[i].Key, "\x00") < strings.Join(ans.Groups[j].Key, "\x00")
	})
	if len(a.GroupBy) == 0 && len(ans.Groups) == 0 {
		ans.Groups = []Group{{Min: math.Inf(1), Max: math.Inf(-1)}}
	}
	return ans, nil
}

func matchesColumn(c Cell, cols []rowkey.ColumnRef) bool {
	for _, col := range cols {
		if c.Family == col.Family && (!col.Plain || c.Qualifier == col.Qualifier) {
			return true
		}
	}
	return false
}

func encodingOf(cols []rowkey.ColumnRef, c Cell) string {
	for _, col := range cols {
		if c.Family == col.Family && (!col.Plain || c.Qualifier == col.Qualifier) {
			return col.Encoding
		}
	}
	return ""
}

// cellValue is the value of family:qualifier in row at ts, or "".
func cellValue(cells []Cell, row, family, qualifier string, ts int64) string {
	for _, c := range cells {
		if c.RowKey == row && c.Family == family && c.Qualifier == qualifier && c.TimestampMicros == ts {
			return c.Value
		}
	}
	return ""
}
