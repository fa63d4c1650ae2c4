package codec

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
	"github.com/valyala/fastjson"
	"github.com/valyala/fastjson/fastfloat"
)

// RowParser builds the records of a TableMap's rows straight from their
// cells, as Parser reads the JSON object AppendJSON renders of the row:
// the same values, the same checks and the same reasons, without
// rendering each value to text and parsing it back. A cell the fast
// paths below do not cover is rendered as its JSON value alone and read
// by the parser's own field check. A map whose rendered object the
// parser would read otherwise than field by field (paths that nest in
// one another) parses the whole rendered row.
//
// One difference is kept on purpose: a float column's value (Parquet or
// Avro DOUBLE, FLOAT) is the file's number exactly. The parser's fast
// float reading of the shortest text of a double written with an exponent
// (1.2345675e+06) can miss it by one unit in the last place; the number
// the JSON lines would carry for the same reading (1234567.5) is read
// exactly, and so is the column.
//
// A RowParser is not safe for concurrent use.
type RowParser struct {
	m *TableMap
	p *Parser
	// whole: parse the rendered row instead (see wholeRow).
	whole   bool
	jp      fastjson.Parser
	scratch []byte
}

// NewRowParser returns the parser of m's rows into p's records.
func (m *TableMap) NewRowParser(p *Parser) *RowParser {
	return &RowParser{m: m, p: p, whole: wholeRow(m, p)}
}

// wholeRow reports whether the parser could read the rendered object of
// m's rows otherwise than one field at one leaf: an exploding spec, a
// field whose parse path is not the path it is rendered at, a path that
// is another's or leads into it, or a mapped field the render leaves out.
func wholeRow(m *TableMap, p *Parser) bool {
	s := p.spec
	if p.explode != nil || m.spec != s || len(p.paths) != len(s.Fields) {
		return true
	}
	for i := range s.Fields {
		if p.paths[i] == nil || !slices.Equal(p.paths[i], m.fieldPath(&s.Fields[i])) {
			return true
		}
		for j := range s.Fields {
			if i != j && len(p.paths[i]) <= len(p.paths[j]) && slices.Equal(p.paths[i], p.paths[j][:len(p.paths[i])]) {
				return true
			}
		}
	}
	leaves := map[int]bool{}
	var walk func(n *jsonNode) bool
	walk = func(n *jsonNode) bool {
		for _, c := range n.children {
			if c.field >= 0 {
				if len(c.children) > 0 {
					return false
				}
				leaves[c.field] = true
				continue
			}
			if !walk(c) {
				return false
			}
		}
		return true
	}
	if !walk(m.root) {
		return true
	}
	for i, cell := range m.field {
		if cell >= 0 && !leaves[i] {
			return true
		}
	}
	return false
}

// Parse appends the record of row (one cell per m.Read) to dst, or
// returns the error Parser.ParseInput returns for raw, the row's rendered
// JSON object (AppendJSON), which becomes the record's Raw payload.
func (rp *RowParser) Parse(dst []schemas.Record, row []RowCell, raw, source string) ([]schemas.Record, error) {
	p, m := rp.p, rp.m
	if rp.whole {
		return p.ParseInput(dst, raw, source, Input{})
	}
	values := make([]schemas.Value, p.spec.NumValues())
	var errs [numClasses]error
	for i := range p.spec.Fields {
		f := &p.spec.Fields[i]
		var cell RowCell
		if c := m.field[i]; c >= 0 {
			cell = row[c]
			if fl := m.flag[i]; fl >= 0 && row[fl].Kind == CellBool && row[fl].Bool {
				cell = RowCell{}
			}
		}
		class, err, ok := rp.field(&values[i], f, cell)
		if !ok {
			// The rendered value is no JSON the parser reads (a
			// decimal's text that is no JSON number): the row is
			// malformed as a whole, as the parser says.
			return p.ParseInput(dst, raw, source, Input{})
		}
		if err != nil && errs[class] == nil {
			errs[class] = err
		}
	}
	if errs[classTimestamp] == nil {
		errs[classRange] = firstNonNil(errs[classRange], p.checkEventTime(values[p.eventIdx].Int))
	}
	if err := firstError(errs); err != nil {
		return dst, err
	}
	return append(dst, schemas.Record{Values: values, EventMs: values[p.eventIdx].Int, Raw: raw, Source: source}), nil
}

// Identity reads the identity fields of row (as Parse reads them) into
// vals, a record's values (NumValues of them), leaving the other fields
// as they are; it reports false, with vals unfinished, where Parse would
// read the row otherwise: a whole-row map, or an identity field whose cell
// is in error or is no JSON value the parser reads. What it reads is the
// identity Parse gives the row's reading when the reading parses.
func (rp *RowParser) Identity(vals []schemas.Value, row []RowCell) bool {
	if rp.whole {
		return false
	}
	s, m := rp.p.spec, rp.m
	for _, name := range s.Identity {
		i := s.FieldIndex(name)
		if i < 0 || i >= len(s.Fields) {
			return false
		}
		var cell RowCell
		if c := m.field[i]; c >= 0 {
			cell = row[c]
			if fl := m.flag[i]; fl >= 0 && row[fl].Kind == CellBool && row[fl].Bool {
				cell = RowCell{}
			}
		}
		if _, err, ok := rp.field(&vals[i], &s.Fields[i], cell); !ok || err != nil {
			return false
		}
	}
	return true
}

// field reads cell as field f's value into out, as Parser.field reads
// the JSON value appendValue renders of it; ok is false when that value
// is no JSON.
func (rp *RowParser) field(out *schemas.Value, f *schemas.FieldSpec, c RowCell) (class int, err error, ok bool) {
	plainString := f.MaxLength == 0 && len(f.Enum) == 0
	switch c.Kind {
	case CellNull:
		class, err = rp.p.field(out, f, nil)
		return class, err, true
	case CellText:
		if c.Str == "" {
			class, err = rp.p.field(out, f, nil)
			return class, err, true
		}
		switch f.Type {
		case schemas.TypeFloat:
			if jsonNumber(c.Str) {
				if n, err := fastfloat.Parse(c.Str); err == nil && !math.IsInf(n, 0) && !math.IsNaN(n) {
					*out = schemas.Value{Kind: schemas.KindFloat, Num: n}
					return classRange, checkRange(f, n), true
				}
			}
		case schemas.TypeInt:
			if jsonNumber(c.Str) {
				if n, err := fastfloat.ParseInt64(c.Str); err == nil {
					*out = schemas.Value{Kind: schemas.KindInt, Int: n}
					return classRange, checkRange(f, float64(n)), true
				}
			}
		case schemas.TypeString, schemas.TypeBytes:
			if plainString {
				*out = stringValue(f, lossy(c.Str))
				return 0, nil, true
			}
		case schemas.TypeTimestamp:
			if !jsonNumber(c.Str) && utf8.ValidString(c.Str) {
				if ms, ok := textTime(f, c.Str); ok {
					*out = schemas.Value{Kind: schemas.KindTime, Int: ms}
					return 0, nil, true
				}
			}
		case schemas.TypeBool:
			switch strings.ToLower(c.Str) {
			case "true":
				*out = schemas.Value{Kind: schemas.KindBool, Bool: true}
				return 0, nil, true
			case "false":
				*out = schemas.Value{Kind: schemas.KindBool}
				return 0, nil, true
			}
		}
	case CellString, CellBytes:
		switch f.Type {
		case schemas.TypeString, schemas.TypeBytes:
			if plainString && (c.Str != "" || !f.Required) {
				*out = stringValue(f, lossy(c.Str))
				return 0, nil, true
			}
		case schemas.TypeTimestamp:
			if utf8.ValidString(c.Str) {
				if ms, ok := textTime(f, c.Str); ok {
					*out = schemas.Value{Kind: schemas.KindTime, Int: ms}
					return 0, nil, true
				}
			}
		}
	case CellInt:
		switch f.Type {
		case schemas.TypeInt:
			*out = schemas.Value{Kind: schemas.KindInt, Int: c.Int}
			return classRange, checkRange(f, float64(c.Int)), true
		case schemas.TypeFloat:
			// The integer's decimal text reads as its nearest float.
			n := float64(c.Int)
			*out = schemas.Value{Kind: schemas.KindFloat, Num: n}
			return classRange, checkRange(f, n), true
		}
	case CellFloat:
		if f.Type == schemas.TypeFloat && !math.IsInf(c.Num, 0) && !math.IsNaN(c.Num) {
			*out = schemas.Value{Kind: schemas.KindFloat, Num: c.Num}
			return classRange, checkRange(f, c.Num), true
		}
	case CellNumber:
		if !jsonNumber(c.Str) {
			return 0, nil, false
		}
		switch f.Type {
		case schemas.TypeFloat:
			if n, err := fastfloat.Parse(c.Str); err == nil && !math.IsInf(n, 0) && !math.IsNaN(n) {
				*out = schemas.Value{Kind: schemas.KindFloat, Num: n}
				return classRange, checkRange(f, n), true
			}
		case schemas.TypeInt:
			if n, err := fastfloat.ParseInt64(c.Str); err == nil {
				*out = schemas.Value{Kind: schemas.KindInt, Int: n}
				return classRange, checkRange(f, float64(n)), true
			}
		}
	case CellBool:
		if f.Type == schemas.TypeBool {
			*out = schemas.Value{Kind: schemas.KindBool, Bool: c.Bool}
			return 0, nil, true
		}
	case CellTime:
		if f.Type == schemas.TypeTimestamp && f.Layout == "" {
			// Rendered in RFC 3339 to the nanosecond and read back to the
			// millisecond, toward the past, for the four-digit years the
			// text form has.
			if t := time.UnixMicro(c.Int).UTC(); t.Year() >= 0 && t.Year() <= 9999 {
				*out = schemas.Value{Kind: schemas.KindTime, Int: floorDiv(c.Int, 1000)}
				return 0, nil, true
			}
		}
	}
	return rp.slow(out, f, c)
}

// slow renders c as the JSON value appendValue gives it and reads that
// value with the parser's field check.
func (rp *RowParser) slow(out *schemas.Value, f *schemas.FieldSpec, c RowCell) (int, error, bool) {
	var bad error
	var rendered bool
	rp.scratch, rendered = rp.m.appendValue(rp.scratch[:0], f, c, &bad)
	if !rendered {
		class, err := rp.p.field(out, f, nil)
		return class, err, true
	}
	v, err := rp.jp.ParseBytes(rp.scratch)
	if err != nil {
		return 0, nil, false
	}
	class, err := rp.p.field(out, f, v)
	return class, err, true
}

// textTime reads a timestamp's text as Parser.timestamp reads a JSON
// string, where that succeeds: in the field's layout, else RFC 3339.
func textTime(f *schemas.FieldSpec, s string) (int64, bool) {
	if f.Layout != "" {
		ms, err := timestamps.ParseLayout(s, f.Layout, f.Timezone)
		return ms, err == nil
	}
	if ms, ok := timestamps.ParseUTCTimestamp([]byte(s)); ok {
		return ms, true
	}
	ms, err := timestamps.ParseTimestamp(s)
	return ms, err == nil
}

// stringValue is s as a string or bytes field's value, copied: a
// reader's cell may share its buffers.
func stringValue(f *schemas.FieldSpec, s string) schemas.Value {
	kind := schemas.KindString
	if f.Type == schemas.TypeBytes {
		kind = schemas.KindBytes
	}
	return schemas.Value{Kind: kind, Str: strings.Clone(s)}
}

// lossy is s with invalid UTF-8 as U+FFFD, as appendJSONStringLossy
// renders it.
func lossy(s string) string {
	if !utf8.ValidString(s) {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
