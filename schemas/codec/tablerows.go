package codec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
	"github.com/valyala/fastjson"
)

// Cell kinds.
const (
	CellNull CellKind = iota
	// CellText is CSV text, read as its field's type reads it.
	CellText
	CellString
	CellBytes
	CellInt
	CellFloat
	// CellNumber is a decimal's exact text.
	CellNumber
	CellBool
	// CellTime is an instant in Int microseconds since the epoch;
	// CellWallTime a wall time (Int microseconds of it read as UTC), read
	// in the field's timezone; CellDate Int days since 1970-01-01.
	CellTime
	CellWallTime
	CellDate
	// CellMap is a map of strings (Pairs).
	CellMap
)

// TableMap is how the columns of one file fill a spec's fields: the
// columns to read, and for each field the one it takes its value from.
// Its rows render as the JSON object the spec's parser reads (AppendJSON),
// which is also the row a dead letter carries.
type TableMap struct {
	spec *schemas.Spec
	// Read are the columns a reader reads, in the order of a row's cells.
	Read []schemas.Column
	// field[i] is the cell of field i (-1: the file has no column for it);
	// flag[i] the cell of the impute flag that blanks field i when true.
	field, flag []int
	root        *jsonNode
}

// jsonNode is a key of the rendered object: a field's value, or an object
// of further keys (a dotted path).
type jsonNode struct {
	key      string
	field    int
	children []*jsonNode
}

// columnsFor lists the names field f may be found under, in order of
// preference: its column, its name, its JSON path, and the bigquery
// column that holds it.
func columnsFor(s *schemas.Spec, f *schemas.FieldSpec) []string {
	if f.Column != "" {
		return []string{f.Column}
	}
	names := []string{f.Name}
	if f.Path != "" && f.Path != f.Name {
		names = append(names, f.Path)
	}
	if s.BigQuery != nil {
		for _, c := range s.BigQuery.Columns {
			if c.Value == f.Name || (c.Value == schemas.ValueEventTime && f.Name == s.EventTime) {
				names = append(names, c.Name)
			}
		}
	}
	return names
}

// MapColumns maps a file's columns (file names the file, for errors) to
// the spec's fields. A field found in no column is null in every row; an
// error, one line naming the column or field, refuses the file: a
// required field without a column, a column that cannot hold its field's
// type, or a spec that explodes points (which a table cannot hold).
func MapColumns(s *schemas.Spec, file string, cols []schemas.Column) (*TableMap, error) {
	if s.Explode != nil {
		return nil, fmt.Errorf("spec %s explodes %s into points, which a CSV, Parquet or Avro row cannot hold; give its readings as JSON lines", s.Name, s.Explode.Path)
	}
	byName := map[string]int{}
	for i, c := range cols {
		if _, dup := byName[c.Name]; !dup {
			byName[c.Name] = i
		}
	}
	m := &TableMap{spec: s, field: make([]int, len(s.Fields)), flag: make([]int, len(s.Fields)), root: &jsonNode{field: -1}}
	picked := map[int]int{} // file column -> cell
	cell := func(col int) int {
		if c, ok := picked[col]; ok {
			return c
		}
		picked[col] = len(m.Read)
		m.Read = append(m.Read, cols[col])
		return picked[col]
	}
	for i := range s.Fields {
		f := &s.Fields[i]
		m.field[i], m.flag[i] = -1, -1
		col := -1
		for _, name := range columnsFor(s, f) {
			if c, ok := byName[name]; ok {
				col = c
				break
			}
		}
		switch {
		case col < 0 && f.Column != "":
			return nil, fmt.Errorf("%s has no column %q, which field %s names (column:); its columns: %s", file, f.Column, f.Name, columnList(cols))
		case col < 0 && f.Required:
			return nil, fmt.Errorf("%s has no column for required field %s; name it with column: (its columns: %s)", file, f.Name, columnList(cols))
		case col < 0:
			continue
		case !schemas.CanHold(cols[col].Kind, f.Type):
			return nil, fmt.Errorf("%s: column %q is %s, which cannot hold field %s (%s)", file, cols[col].Name, cols[col].Type, f.Name, f.Type)
		}
		m.field[i] = cell(col)
		m.root.add(m.fieldPath(f), i)
	}
	for _, im := range s.Impute {
		fi := s.FieldIndex(im.Field)
		if fi < 0 || m.field[fi] < 0 {
			continue
		}
		names := []string{im.Flag}
		if s.BigQuery != nil {
			for _, c := range s.BigQuery.Columns {
				if c.Value == im.Flag {
					names = append(names, c.Name)
				}
			}
		}
		for _, name := range names {
			if c, ok := byName[name]; ok && cols[c].Kind == schemas.ColBool {
				// A value imputed before (a BigQuery export's) is
				// imputed again, not read as observed.
				m.flag[fi] = cell(c)
				break
			}
		}
	}
	return m, nil
}

// fieldPath is the path the parser reads field f at.
func (m *TableMap) fieldPath(f *schemas.FieldSpec) []string {
	if f.Path != "" {
		return strings.Split(f.Path, ".")
	}
	return []string{f.Name}
}

func (n *jsonNode) add(path []string, field int) {
	for _, c := range n.children {
		if c.key == path[0] {
			if len(path) > 1 {
				c.add(path[1:], field)
			}
			return
		}
	}
	c := &jsonNode{key: path[0], field: -1}
	n.children = append(n.children, c)
	if len(path) == 1 {
		c.field = field
		return
	}
	c.add(path[1:], field)
}

func columnList(cols []schemas.Column) string {
	names := make([]string, 0, len(cols))
	for i, c := range cols {
		if i == 12 {
			names = append(names, fmt.Sprintf("and %d more", len(cols)-i))
			break
		}
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// CellKind is what one cell of a row holds.
type CellKind uint8

// RowCell is one value of a row, as its reader decoded it.
type RowCell struct {
	Kind  CellKind
	Str   string
	Int   int64
	Num   float64
	Bool  bool
	Pairs []schemas.Pair
}

// AppendJSON appends row (one cell per m.Read) as the JSON object the
// spec's parser reads: each field at its path, a null or absent cell left
// out. A cell that can be no value of its field (a wall time a
// daylight-saving change skips or repeats) is an error naming the field,
// wrapping the reason's sentinel; the row is still rendered, for its dead
// letter.
func (m *TableMap) AppendJSON(dst []byte, row []RowCell) ([]byte, error) {
	var bad error
	dst = m.appendNode(dst, m.root, row, &bad)
	return dst, bad
}

func (m *TableMap) appendNode(dst []byte, n *jsonNode, row []RowCell, bad *error) []byte {
	dst = append(dst, '{')
	first := true
	for _, c := range n.children {
		mark := len(dst)
		if !first {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, c.key)
		dst = append(dst, ':')
		if c.field < 0 {
			dst = m.appendNode(dst, c, row, bad)
			first = false
			continue
		}
		cell := row[m.field[c.field]]
		if fl := m.flag[c.field]; fl >= 0 && row[fl].Kind == CellBool && row[fl].Bool {
			cell = RowCell{}
		}
		var ok bool
		dst, ok = m.appendValue(dst, &m.spec.Fields[c.field], cell, bad)
		if !ok {
			dst = dst[:mark]
			continue
		}
		first = false
	}
	return append(dst, '}')
}

// appendValue appends c as the JSON value field f reads; ok is false for
// a null.
func (m *TableMap) appendValue(dst []byte, f *schemas.FieldSpec, c RowCell, bad *error) ([]byte, bool) {
	switch c.Kind {
	case CellNull:
		return dst, false
	case CellText:
		return appendText(dst, f, c.Str)
	case CellString, CellBytes:
		if f.Type == schemas.TypeTags && strings.HasPrefix(strings.TrimSpace(c.Str), "{") && fastjson.Validate(c.Str) == nil {
			return append(dst, c.Str...), true
		}
		return appendJSONStringLossy(dst, c.Str), true
	case CellInt:
		if f.Type == schemas.TypeString {
			return strconv.AppendQuote(dst, strconv.FormatInt(c.Int, 10)), true
		}
		return strconv.AppendInt(dst, c.Int, 10), true
	case CellFloat:
		if math.IsNaN(c.Num) || math.IsInf(c.Num, 0) {
			return AppendJSONString(dst, strconv.FormatFloat(c.Num, 'g', -1, 64)), true
		}
		return strconv.AppendFloat(dst, c.Num, 'g', -1, 64), true
	case CellNumber:
		if f.Type == schemas.TypeString {
			return AppendJSONString(dst, c.Str), true
		}
		return append(dst, c.Str...), true
	case CellBool:
		return strconv.AppendBool(dst, c.Bool), true
	case CellTime:
		return appendInstant(dst, f, time.UnixMicro(c.Int).UTC()), true
	case CellWallTime:
		w := time.UnixMicro(c.Int).UTC()
		loc, err := timestamps.Zone(f.Timezone)
		var t time.Time
		if err == nil {
			t, err = timestamps.WallTime(w, loc)
		}
		if err != nil {
			if *bad == nil {
				*bad = schemas.Reject(schemas.ErrBadTimestamp, "%s: %v", f.Name, err)
			}
			return AppendJSONString(dst, w.Format("2006-01-02T15:04:05.999999999")), true
		}
		return appendInstant(dst, f, t), true
	case CellDate:
		d := time.Unix(c.Int*86400, 0).UTC()
		if f.Type == schemas.TypeString {
			return AppendJSONString(dst, d.Format(time.DateOnly)), true
		}
		return appendInstant(dst, f, d), true
	case CellMap:
		dst = append(dst, '{')
		for i, p := range c.Pairs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONStringLossy(dst, p.K)
			dst = append(dst, ':')
			dst = appendJSONStringLossy(dst, p.V)
		}
		return append(dst, '}'), true
	}
	return dst, false
}

// appendInstant renders an instant as RFC 3339 in UTC, to the nanosecond:
// the parser reads it exactly, whatever the field's unit or layout.
func appendInstant(dst []byte, f *schemas.FieldSpec, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// appendText renders CSV text as the JSON value field f reads: a number
// for a numeric field (and an integer for a timestamp, in the field's
// unit) where the text is a JSON number, true or false for a bool, an
// object for tags written as a JSON object, else the text as a string,
// which the parser then rejects or reads as the field's type says. Empty
// text is null.
func appendText(dst []byte, f *schemas.FieldSpec, s string) ([]byte, bool) {
	if s == "" {
		return dst, false
	}
	switch f.Type {
	case schemas.TypeFloat, schemas.TypeInt:
		if jsonNumber(s) {
			return append(dst, s...), true
		}
	case schemas.TypeTimestamp:
		if jsonNumber(s) && (f.Unit == timestamps.UnitSeconds || !strings.ContainsAny(s, ".eE")) {
			return append(dst, s...), true
		}
	case schemas.TypeBool:
		switch strings.ToLower(s) {
		case "true":
			return append(dst, "true"...), true
		case "false":
			return append(dst, "false"...), true
		}
	case schemas.TypeTags:
		if strings.HasPrefix(s, "{") && fastjson.Validate(s) == nil {
			return append(dst, s...), true
		}
	}
	return appendJSONStringLossy(dst, s), true
}

// jsonNumber reports whether s is a number as JSON writes one.
func jsonNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	start := i
	if n := digits(); n == 0 || (n > 1 && s[start] == '0') {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// appendJSONStringLossy is appendJSONString for text that may not be
// valid UTF-8 (a CSV cell, a Parquet byte array): invalid bytes become
// U+FFFD.
func appendJSONStringLossy(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return AppendJSONString(dst, s)
}
