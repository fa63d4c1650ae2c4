package rowkey

import (
	"fmt"
	"github.com/sensorpipe/sensorpipe/schemas"
	"sort"
	"strings"
)

// KeyQueryFor is q with placeholder values for its parameters (their
// defaults when given) and its since window, for checking keys against it.
func KeyQueryFor(s *schemas.Spec, q *schemas.QuerySpec) KeyQuery {
	kq := KeyQuery{Table: q.Table, Where: map[string]string{}, Ranges: map[string]schemas.Range{}}
	for _, p := range q.Params() {
		f := s.Field(p.Field)
		switch {
		case p.HasDefault:
			if r, ok := schemas.ParseRange(p.Default); ok {
				kq.Ranges[p.Field] = r
			} else {
				kq.Where[p.Field] = p.Default
			}
		case f != nil:
			kq.Where[p.Field] = placeholder(f)
		}
	}
	if q.Since != "" {
		d, _ := schemas.ParseSince(q.Since)
		kq.ToMs = 1772359200000
		kq.FromMs = kq.ToMs - d.Milliseconds()
	}
	return kq
}

// NeedOf is what q asks of a table beyond its ranges.
func NeedOf(q *schemas.QuerySpec) Need {
	n := Need{Latest: q.Latest, NewestFirst: q.NewestFirst}
	if a := q.Aggregate; a != nil {
		n.Fields = append(n.Fields, a.GroupBy...)
		if a.Column != "" {
			n.Values = append(n.Values, a.Column)
		}
	}
	return n
}

// QueryTable is the table q reads: its pinned table, else the one
// ChooseTable picks for it (the spec's first when none serves it).
func QueryTable(s *schemas.Spec, q *schemas.QuerySpec) *schemas.TableSpec {
	if q.Table != "" {
		return s.Table(q.Table)
	}
	if plan, err := ChooseTable(s, KeyQueryFor(s, q), NeedOf(q)); err == nil {
		return s.Table(plan.Table)
	}
	return &s.Bigtable.Tables[0]
}

// Need is what a query asks of a table beyond row ranges.
type Need struct {
	// Latest reads the newest row per key prefix: the key must order time
	// newest first (a reverse timestamp).
	Latest bool
	// NewestFirst wants rows newest first: a reverse timestamp too.
	NewestFirst bool
	// Fields must be readable per row or reading (group_by): from the key
	// or a column with a plain qualifier.
	Fields []string
	// Values must be held in a column (aggregated values).
	Values []string
	// AllowScan accepts a table only a full scan can serve.
	AllowScan bool
}

// FieldSource is where a reader finds a field's value in a table's rows.
type FieldSource struct {
	// Key: the field has a key segment that can be decoded (KeyPart.Decode).
	Key bool
	// Time: the field is the event time, the cells' timestamps.
	Time bool
	// Family and Qualifier name a column holding the field, one cell per
	// reading at the reading's event time; Encoding is its encoding.
	Family, Qualifier, Encoding string
}

// Column reports whether the source is a column.
func (f FieldSource) Column() bool { return f.Family != "" }

// SourceOf says where a row of table holds field: a decodable key segment
// first, else a column with a plain qualifier, else the cell timestamps for
// the event time.
func SourceOf(spec *schemas.Spec, table, field string) (FieldSource, bool) {
	tmpl, err := schemas.TableTemplate(spec, table)
	if err != nil {
		return FieldSource{}, false
	}
	if spec.Field(field) == nil {
		return FieldSource{}, false
	}
	for i := range tmpl.Segs {
		s := &tmpl.Segs[i]
		if s.Kind == schemas.SegField && s.Name == field && splittableAt(tmpl, i) && invertible(s) {
			return FieldSource{Key: true}, true
		}
	}
	for _, c := range ValueColumns(spec, table, field) {
		if c.Plain {
			return FieldSource{Family: c.Family, Qualifier: c.Qualifier, Encoding: c.Encoding}, true
		}
	}
	if field == spec.EventTime {
		return FieldSource{Time: true}, true
	}
	return FieldSource{}, false
}

// ColumnRef is a column of a table: its family, its qualifier (a template
// when Plain is false) and encoding.
type ColumnRef struct {
	Family, Qualifier, Encoding string
	Plain                       bool
}

// ValueColumns lists table's columns whose value is field.
func ValueColumns(spec *schemas.Spec, table, field string) []ColumnRef {
	ts := spec.Table(table)
	if ts == nil {
		return nil
	}
	var out []ColumnRef
	for _, fam := range ts.Families {
		for _, c := range fam.Columns {
			if c.Value == field {
				out = append(out, ColumnRef{Family: fam.Name, Qualifier: c.Qualifier, Encoding: c.Encoding, Plain: !strings.Contains(c.Qualifier, "{")})
			}
		}
	}
	return out
}

// CountColumn is the column whose cells count a table's readings: the
// first holding a required field (every reading writes it), else the first.
func CountColumn(spec *schemas.Spec, table string) (ColumnRef, bool) {
	ts := spec.Table(table)
	if ts == nil {
		return ColumnRef{}, false
	}
	var first *ColumnRef
	for _, fam := range ts.Families {
		for _, c := range fam.Columns {
			ref := ColumnRef{Family: fam.Name, Qualifier: c.Qualifier, Encoding: c.Encoding, Plain: !strings.Contains(c.Qualifier, "{")}
			if f := spec.Field(c.Value); f != nil && f.Required {
				return ref, true
			}
			if first == nil {
				first = &ref
			}
		}
	}
	if first == nil {
		return ColumnRef{}, false
	}
	return *first, true
}

// splittableAt reports whether Split can find segment i's end.
func splittableAt(t *schemas.Template, i int) bool {
	s := &t.Segs[i]
	if fixedWidth(s) > 0 || i+1 == len(t.Segs) {
		return true
	}
	if t.Segs[i+1].Kind != schemas.SegLiteral {
		return false
	}
	return !(s.Out == schemas.KindTags && strings.ContainsAny(t.Segs[i+1].Literal, ",="))
}

// invertible reports whether KeyPart.Decode can undo s.
func invertible(s *schemas.Segment) bool {
	for _, o := range s.Ops {
		switch o.Name {
		case "pad", "reverse", "ms", "hex", "revdomain":
		default:
			return false
		}
	}
	return s.In != schemas.KindTags
}

// NoTableError says that no table of a spec serves a query with a key
// prefix or range, and which key would.
type NoTableError struct {
	Spec    string
	Fields  []string // the query's fields
	Why     string   // what every table lacks
	Suggest string   // a row key that would serve the query
}

func (e *NoTableError) Error() string {
	return fmt.Sprintf("no table of %s serves where %s with a key prefix or range (%s); a table keyed %q would: add it to the spec's bigtable.tables",
		e.Spec, strings.Join(e.Fields, ", "), e.Why, e.Suggest)
}

// candidate is one table's plan and how well it serves the query.
type candidate struct {
	plan  *ScanPlan
	index int
}

// better orders candidates: more fields narrowed in the key, then the
// window in the key, then fewer fields left to check on the rows read,
// then fewer ranges, then the spec's order.
func (c candidate) better(o candidate) bool {
	a, b := c.plan, o.plan
	switch {
	case len(a.Narrowed) != len(b.Narrowed):
		return len(a.Narrowed) > len(b.Narrowed)
	case a.TimeRanged != b.TimeRanged:
		return a.TimeRanged
	case len(a.Unused) != len(b.Unused):
		return len(a.Unused) < len(b.Unused)
	case len(a.Ranges) != len(b.Ranges):
		return len(a.Ranges) < len(b.Ranges)
	}
	return c.index < o.index
}

// ChooseTable plans q on every table of spec (or q.Table alone when set)
// and returns the plan of the table whose key serves it best: the most
// query fields narrowed by key segments, the time window in the key, the
// fewest fields left to check on the rows and the fewest ranges. A table
// qualifies when every field the key cannot narrow can still be checked on
// its rows (SourceOf) and need's fields can be read; a full scan qualifies
// only with need.AllowScan. When none qualifies the error is a
// *NoTableError naming a key that would serve the query.
func ChooseTable(spec *schemas.Spec, q KeyQuery, need Need) (*ScanPlan, error) {
	var (
		best    *candidate
		reasons []string
		full    bool
	)
	for i, t := range spec.Bigtable.Tables {
		if q.Table != "" && t.Name != q.Table {
			continue
		}
		kq := q
		kq.Table = t.Name
		kq.NoFanOut = kq.NoFanOut || need.Latest
		plan, err := PlanScan(spec, kq)
		if err != nil {
			return nil, err
		}
		why := servesNot(spec, t.Name, plan, need)
		// A query that fixes fields is served only when one of them
		// narrows the key: the window alone would read every series in it.
		scan := plan.Kind == ScanFull || (len(q.Where)+len(q.Ranges) > 0 && len(plan.Narrowed) == 0)
		if why == "" && scan && !need.AllowScan {
			why, full = "a full scan", true
		}
		if why != "" {
			reasons = append(reasons, t.Name+": "+why)
			continue
		}
		c := candidate{plan: plan, index: i}
		if best == nil || c.better(*best) {
			best = &c
		}
	}
	if q.Table != "" && best == nil && len(reasons) == 0 {
		return nil, fmt.Errorf("spec %s has no table %q", spec.Name, q.Table)
	}
	if best != nil {
		return best.plan, nil
	}
	fields := queryFields(q)
	why := strings.Join(reasons, "; ")
	if full && len(reasons) == len(spec.Bigtable.Tables) && allFull(reasons) {
		why = "on each, the query's fields narrow no key prefix: a full scan"
	}
	return nil, &NoTableError{Spec: spec.Name, Fields: fields, Why: why, Suggest: SuggestKey(spec, q, need)}
}

func allFull(reasons []string) bool {
	for _, r := range reasons {
		if !strings.HasSuffix(r, ": a full scan") {
			return false
		}
	}
	return true
}

// servesNot says why table cannot answer the query planned as plan, or "".
func servesNot(spec *schemas.Spec, table string, plan *ScanPlan, need Need) string {
	if need.Latest || need.NewestFirst {
		if rev, _ := schemas.ReverseTimeKey(spec, table); !rev {
			return "its key has no reverse timestamp, so it cannot read newest first"
		}
	}
	for _, f := range plan.Unused {
		if _, ok := SourceOf(spec, table, f); !ok {
			return fmt.Sprintf("%s is neither a decodable key segment nor a column, so rows cannot be checked against it", f)
		}
	}
	for _, f := range need.Fields {
		if src, ok := SourceOf(spec, table, f); !ok || src.Time {
			return fmt.Sprintf("%s is neither a decodable key segment nor a column", f)
		}
	}
	for _, f := range need.Values {
		if len(ValueColumns(spec, table, f)) == 0 {
			return fmt.Sprintf("no column holds %s", f)
		}
	}
	return ""
}

// queryFields lists the fields a query fixes, sorted.
func queryFields(q KeyQuery) []string {
	var out []string
	for f := range q.Where {
		out = append(out, f)
	}
	for f, r := range q.Ranges {
		out = append(out, f+"="+r.String())
	}
	sort.Strings(out)
	if len(out) == 0 {
		out = []string{"(nothing)"}
	}
	return out
}

// SuggestKey is a row key that would serve q: its equality fields, then its
// range fields, then the event time (a reverse timestamp when need reads
// newest first), then the rest of the identity so each reading has its own
// row. A low-cardinality first field is salted over the identity.
func SuggestKey(spec *schemas.Spec, q KeyQuery, need Need) string {
	var eq, rng []string
	for f := range q.Where {
		if f != spec.EventTime {
			eq = append(eq, f)
		}
	}
	for f := range q.Ranges {
		if f != spec.EventTime {
			rng = append(rng, f)
		}
	}
	sort.Strings(eq)
	sort.Strings(rng)
	seen := map[string]bool{}
	var segs []string
	add := func(src, field string) {
		segs = append(segs, "{"+src+"}")
		seen[field] = true
	}
	for _, f := range append(eq, rng...) {
		fs := spec.Field(f)
		src := f
		if fs != nil && fs.Type == schemas.TypeInt {
			src = f + "|pad:10"
		}
		add(src, f)
	}
	timeSrc := spec.EventTime + "|ms|pad:13"
	if need.Latest || need.NewestFirst {
		timeSrc = spec.EventTime + "|reverse"
	}
	add(timeSrc, spec.EventTime)
	for _, id := range spec.Identity {
		if !seen[id] {
			add(id, id)
		}
	}
	if len(eq)+len(rng) > 0 {
		first := spec.Field(append(eq, rng...)[0])
		if first != nil && (first.Cardinality == "low" || (len(first.Enum) > 0 && first.Cardinality != "high") || first.Type == schemas.TypeBool) {
			segs = append([]string{"{salt:8|" + strings.Join(spec.Identity, ",") + "}"}, segs...)
		}
	}
	return strings.Join(segs, spec.KeyDelimiter)
}
