package readpath

import (
	"encoding/binary"
	"fmt"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// cond is an equality or an inclusive range on one field's values.
type cond struct {
	field  string
	lo, hi schemas.Value // equal for an equality
}

func (c cond) match(v schemas.Value) bool {
	return schemas.CompareValues(v, c.lo) >= 0 && schemas.CompareValues(v, c.hi) <= 0
}

// colCheck is a condition read from a column, one cell per reading.
type colCheck struct {
	cond
	family, qualifier, encoding string
	spec                        *schemas.FieldSpec
}

// checker keeps the rows and readings that match the query's fields the
// key could not narrow: from the decoded key (per row) or from a column
// (per reading, the cells at one timestamp).
type checker struct {
	spec  *schemas.Spec
	table string
	key   []cond
	col   []colCheck
}

func newChecker(spec *schemas.Spec, plan *rowkey.ScanPlan, q Query) (*checker, error) {
	c := &checker{spec: spec, table: plan.Table}
	for _, name := range plan.Unused {
		f := spec.Field(name)
		lo, hi := q.Where[name], q.Where[name]
		if r, ok := q.Ranges[name]; ok {
			lo, hi = r.Lo, r.Hi
		}
		a, err := schemas.ParseValue(f, lo)
		if err != nil {
			return nil, fmt.Errorf("where %s: %w", name, err)
		}
		b, err := schemas.ParseValue(f, hi)
		if err != nil {
			return nil, fmt.Errorf("where %s: %w", name, err)
		}
		cd := cond{field: name, lo: a, hi: b}
		src, ok := rowkey.SourceOf(spec, plan.Table, name)
		switch {
		case !ok:
			return nil, fmt.Errorf("where %s: table %s holds it neither in its key nor in a column", name, plan.Table)
		case src.Key:
			c.key = append(c.key, cd)
		case src.Column():
			c.col = append(c.col, colCheck{cond: cd, family: src.Family, qualifier: src.Qualifier, encoding: src.Encoding, spec: f})
		}
	}
	return c, nil
}

// any reports whether rows may be dropped.
func (c *checker) any() bool { return len(c.key)+len(c.col) > 0 }

// Filters describes the checks, for the summary: field and where its
// values are read.
func (c *checker) Filters() []string {
	var out []string
	for _, k := range c.key {
		out = append(out, k.field+" (key)")
	}
	for _, k := range c.col {
		out = append(out, fmt.Sprintf("%s (column %s:%s)", k.field, k.family, k.qualifier))
	}
	return out
}

// cells returns the cells of row key that pass the checks.
func (c *checker) cells(key string, cells []Cell) []Cell {
	if len(c.key) > 0 {
		parts, err := rowkey.DecodeKey(c.spec, c.table, key)
		if err != nil {
			return nil
		}
		for _, k := range c.key {
			v, ok := parts[k.field].Decode()
			if !ok || !k.match(v) {
				return nil
			}
		}
	}
	if len(c.col) == 0 {
		return cells
	}
	// A reading is the cells at one timestamp; it passes when each
	// checked column has a cell at that timestamp whose value matches.
	pass := map[int64]bool{}
	for _, cl := range cells {
		pass[cl.TimestampMicros] = true
	}
	for _, k := range c.col {
		ok := map[int64]bool{}
		for _, cl := range cells {
			if cl.Family == k.family && cl.Qualifier == k.qualifier {
				if v, good := columnValue(k.spec, k.encoding, cl.Value); good && k.match(v) {
					ok[cl.TimestampMicros] = true
				}
			}
		}
		for ts := range pass {
			pass[ts] = pass[ts] && ok[ts]
		}
	}
	var out []Cell
	for _, cl := range cells {
		if pass[cl.TimestampMicros] {
			out = append(out, cl)
		}
	}
	return out
}

// columnValue reads a cell's value as the field's type: text (the
// pipeline's default) or an 8-byte big-endian integer.
func columnValue(f *schemas.FieldSpec, encoding, text string) (schemas.Value, bool) {
	if encoding == "int64be" {
		if len(text) != 8 {
			return schemas.Value{}, false
		}
		return schemas.Value{Kind: schemas.KindInt, Int: int64(binary.BigEndian.Uint64([]byte(text)))}, true
	}
	v, err := schemas.ParseValue(f, text)
	return v, err == nil
}
