package rowkey

import (
	"fmt"
	"github.com/sensorpipe/sensorpipe/schemas"
	"slices"
	"sort"
	"strings"
)

// RowRange is a half-open range of row keys [Start, End). An empty End
// means "to the end of the table"; an empty Start "from the beginning".
type RowRange struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// String renders the range as [start, end).
func (r RowRange) String() string { return fmt.Sprintf("[%q, %q)", r.Start, r.End) }

// Scan kinds of a ScanPlan.
const (
	ScanRange  = "range"  // the where fields form a key prefix, then a time range
	ScanPrefix = "prefix" // the where fields form a key prefix, no time range
	ScanFull   = "full"   // nothing narrows the scan: the whole table
)

// KeyQuery is a query to plan: equality values for some fields, inclusive
// ranges for others, and an optional event-time range [FromMs, ToMs] (both
// 0: no time range).
type KeyQuery struct {
	Table  string              // the spec's first table when empty
	Where  map[string]string   // field name to value text
	Ranges map[string]schemas. // field name to an inclusive range of values
		Range
	FromMs int64
	ToMs   int64
	// NoFanOut keeps the plan from fanning a prefix out over an enum
	// field's values (a latest-per-prefix read finds the prefixes itself).
	NoFanOut bool
}

// maxFanOut bounds the ranges an enum fan-out may produce.
const maxFanOut = 64

// ScanPlan is how a query reads a table: one or more row ranges (one per
// salt bucket when the salt's fields are not all fixed by the query).
type ScanPlan struct {
	Table  string
	Ranges []RowRange
	Kind   string
	// Reversed is true when the time component is a reverse timestamp:
	// the rows of a range come newest first.
	Reversed bool
	// Used lists the where fields that narrowed the scan, in key order;
	// Unused those that could not (they come after a field the query does
	// not fix, or are not in the key at all).
	Used   []string
	Unused []string
	// Narrowed lists the where and range fields rendered into the ranges
	// as key segments of their own (a salt over a field does not count:
	// it narrows to a bucket, not to the field's rows).
	Narrowed []string
	// TimeRanged is true when the event-time window is part of the ranges;
	// otherwise a window is applied to the cells read.
	TimeRanged bool
	// FanOut lists the enum fields whose values the prefix was fanned out
	// over, so a later field or the time could narrow each.
	FanOut []string
	// Stop explains where the fixed prefix ends, when it ends before the
	// key does.
	Stop string
}

// PlanScan derives the row ranges that serve q from the table's row-key
// template. It walks the key's segments in order: literals and fields fixed
// by q.Where extend the prefix; a salt over fixed fields adds its bucket,
// over other fields fans the prefix out into one per bucket; the event-time
// field, when q has a time range, turns the prefix into a range (with the
// bounds swapped for a reverse timestamp) and ends the walk, as does a
// field with a range in q.Ranges (its text must sort as its values do:
// strings, padded integers, reverse timestamps). An enum field the query
// does not fix fans the prefix out over its values when a later segment
// narrows (a fixed field or the time). Any other field ends the walk,
// leaving a prefix scan.
func PlanScan(spec *schemas.Spec, q KeyQuery) (*ScanPlan, error) {
	ts := &spec.Bigtable.Tables[0]
	if q.Table != "" {
		if ts = spec.Table(q.Table); ts == nil {
			return nil, fmt.Errorf("spec %s has no table %q", spec.Name, q.Table)
		}
	}
	tmpl, err := schemas.CompileTemplate(ts.RowKey, spec)
	if err != nil {
		return nil, err
	}
	tmpl.WithEscape(ts.Escape)
	for name := range q.Where {
		if spec.Field(name) == nil {
			return nil, fmt.Errorf("where %s: not a field of %s; fields are %s", name, spec.Name, fieldNames(spec))
		}
	}
	ranges := map[int][2]schemas.Value{}
	for name, r := range q.Ranges {
		f := spec.Field(name)
		if f == nil {
			return nil, fmt.Errorf("where %s: not a field of %s; fields are %s", name, spec.Name, fieldNames(spec))
		}
		if _, dup := q.Where[name]; dup {
			return nil, fmt.Errorf("where %s: give a value or a range, not both", name)
		}
		lo, err := schemas.ParseValue(f, r.Lo)
		if err != nil {
			return nil, fmt.Errorf("where %s=%s: %w", name, r, err)
		}
		hi, err := schemas.ParseValue(f, r.Hi)
		if err != nil {
			return nil, fmt.Errorf("where %s=%s: %w", name, r, err)
		}
		if schemas.CompareValues(lo, hi) > 0 {
			return nil, fmt.Errorf("where %s=%s: the range is empty (%s is after %s)", name, r, r.Lo, r.Hi)
		}
		ranges[spec.FieldIndex(name)] = [2]schemas.Value{lo, hi}
	}
	values := map[int]schemas.Value{}
	for name, text := range q.Where {
		v, err := schemas.ParseValue(spec.Field(name), text)
		if err != nil {
			return nil, fmt.Errorf("where %s=%s: %w", name, text, err)
		}
		values[spec.FieldIndex(name)] = v
	}
	hasTime := q.FromMs != 0 || q.ToMs != 0
	if hasTime && q.FromMs > q.ToMs {
		return nil, fmt.Errorf("time range from %d is after to %d", q.FromMs, q.ToMs)
	}
	eventIdx := spec.FieldIndex(spec.EventTime)
	plan := &ScanPlan{Table: ts.Name, Kind: ScanPrefix}
	used := map[string]bool{}
	prefixes := []string{""}
	appendAll := func(s string) {
		for i := range prefixes {
			prefixes[i] += s
		}
	}
	var out []RowRange
	narrowed := map[string]bool{}
	fixed := false // something the query gave narrowed the prefix
	// later reports whether a segment after i narrows the scan, which is
	// what makes fanning out over an enum worth its ranges.
	later := func(i int) bool {
		for j := i + 1; j < len(tmpl.Segs); j++ {
			s := &tmpl.Segs[j]
			if s.Kind != schemas.SegField {
				continue
			}
			if _, ok := values[s.Field]; ok {
				return true
			}
			if _, ok := ranges[s.Field]; ok {
				return true
			}
			if hasTime && s.Field == eventIdx {
				return true
			}
		}
		return false
	}
walk:
	for i := range tmpl.Segs {
		s := &tmpl.Segs[i]
		switch s.Kind {
		case schemas.SegLiteral:
			appendAll(s.Literal)
			continue
		case schemas.SegSalt, schemas.SegHash:
			texts, ok := fixedTexts(s, values)
			if ok {
				if s.Kind == schemas.SegHash {
					// A hash of the fields picks their rows (a salt only
					// picks a bucket of many series: the fields still
					// need checking on the rows read).
					for _, n := range s.Names {
						used[n] = true
					}
				}
				appendAll(string(appendMultiText(s, nil, texts)))
				fixed = true
				continue
			}
			if s.Kind == schemas.SegHash {
				plan.Stop = fmt.Sprintf("{%s|%s} needs %s fixed by the query", s.Name, strings.Join(s.Names, ","), strings.Join(s.Names, ", "))
				break walk
			}
			var fanned []string
			for _, p := range prefixes {
				for b := 0; b < s.Buckets; b++ {
					fanned = append(fanned, p+schemas.SaltText(b, s.Buckets))
				}
			}
			prefixes = fanned
			continue
		}
		if hasTime && s.Field == eventIdx {
			dir := schemas.OrderUp
			for _, o := range s.Ops {
				switch {
				case o.Order == schemas.OrderNone:
					dir = schemas.OrderNone
				case o.Order == schemas.OrderDown && dir == schemas.OrderUp:
					dir = schemas.OrderDown
				case o.Order == schemas.OrderDown && dir == schemas.OrderDown:
					dir = schemas.OrderUp
				}
			}
			if dir == schemas.OrderNone {
				plan.Stop = fmt.Sprintf("{%s} does not keep time order, so a time range is not a key range", segSource(s))
				break walk
			}
			lo, err := appendField(tmpl, nil, s, schemas.Value{Kind: schemas.KindTime, Int: q.FromMs})
			if err != nil {
				return nil, fmt.Errorf("time range start: %w", err)
			}
			hi, err := appendField(tmpl, nil, s, schemas.Value{Kind: schemas.KindTime, Int: q.ToMs})
			if err != nil {
				return nil, fmt.Errorf("time range end: %w", err)
			}
			if dir == schemas.OrderDown {
				lo, hi = hi, lo
				plan.Reversed = true
			}
			for _, p := range prefixes {
				out = append(out, RowRange{Start: p + string(lo), End: PrefixSuccessor(p + string(hi))})
			}
			plan.Kind = ScanRange
			plan.TimeRanged = true
			break walk
		}
		if r, ok := ranges[s.Field]; ok {
			ordered, up := s.KeepsOrder()
			if !ordered {
				plan.Stop = fmt.Sprintf("{%s} does not sort as its values do, so a range of %s is not a key range", segSource(s), s.Name)
				break walk
			}
			lo, err := appendField(tmpl, nil, s, r[0])
			if err != nil {
				return nil, fmt.Errorf("where %s range start: %w", s.Name, err)
			}
			hi, err := appendField(tmpl, nil, s, r[1])
			if err != nil {
				return nil, fmt.Errorf("where %s range end: %w", s.Name, err)
			}
			if !up {
				lo, hi = hi, lo
			}
			// The end covers every key whose segment is hi: up to the
			// literal that follows it, when there is one.
			next := ""
			if i+1 < len(tmpl.Segs) && tmpl.Segs[i+1].Kind == schemas.SegLiteral {
				next = tmpl.Segs[i+1].Literal
			}
			for _, p := range prefixes {
				out = append(out, RowRange{Start: p + string(lo), End: PrefixSuccessor(p + string(hi) + next)})
			}
			used[s.Name], narrowed[s.Name] = true, true
			plan.Kind = ScanRange
			plan.Stop = fmt.Sprintf("{%s} is a range, so the segments after it cannot narrow", segSource(s))
			break walk
		}
		v, ok := values[s.Field]
		if !ok {
			if f := spec.Field(s.Name); f != nil && len(f.Enum) > 0 && !q.NoFanOut && later(i) && len(prefixes)*len(f.Enum) <= maxFanOut {
				if fanned, err := fanOut(tmpl, s, f, prefixes); err == nil {
					prefixes = fanned
					plan.FanOut = append(plan.FanOut, s.Name)
					continue
				}
			}
			plan.Stop = fmt.Sprintf("{%s} is not fixed by the query", segSource(s))
			if s.Field == eventIdx && !hasTime {
				plan.Stop = fmt.Sprintf("{%s} needs a time range (since)", segSource(s))
			}
			break walk
		}
		b, err := appendField(tmpl, nil, s, v)
		if err != nil {
			return nil, fmt.Errorf("where %s: %w", s.Name, err)
		}
		used[s.Name], narrowed[s.Name] = true, true
		appendAll(string(b))
		fixed = true
	}
	if out == nil {
		for _, p := range prefixes {
			out = append(out, RowRange{Start: p, End: PrefixSuccessor(p)})
		}
		if !fixed {
			// Nothing the query gave narrowed the scan: the ranges are the
			// whole table (or every salt bucket, or a constant prefix).
			plan.Kind = ScanFull
		}
	}
	plan.Ranges = out
	for i := range tmpl.Segs {
		s := &tmpl.Segs[i]
		for _, n := range append([]string{s.Name}, s.Names...) {
			if used[n] && !slices.Contains(plan.Used, n) {
				plan.Used = append(plan.Used, n)
			}
		}
	}
	for i := range tmpl.Segs {
		if n := tmpl.Segs[i].Name; narrowed[n] && !slices.Contains(plan.Narrowed, n) {
			plan.Narrowed = append(plan.Narrowed, n)
		}
	}
	for name := range q.Where {
		if !used[name] {
			plan.Unused = append(plan.Unused, name)
		}
	}
	for name := range q.Ranges {
		if !used[name] {
			plan.Unused = append(plan.Unused, name)
		}
	}
	sort.Strings(plan.Unused)
	return plan, nil
}

// fanOut renders every value of an enum field after each prefix.
func fanOut(tmpl *schemas.Template, s *schemas.Segment, f *schemas.FieldSpec, prefixes []string) ([]string, error) {
	var out []string
	for _, p := range prefixes {
		for _, e := range f.Enum {
			b, err := appendField(tmpl, nil, s, schemas.Value{Kind: schemas.KindString, Str: e})
			if err != nil {
				return nil, err
			}
			out = append(out, p+string(b))
		}
	}
	return out, nil
}

func fixedTexts(s *schemas.Segment, values map[int]schemas.Value) ([][]byte, bool) {
	texts := make([][]byte, len(s.Fields))
	for i, f := range s.Fields {
		v, ok := values[f]
		if !ok {
			return nil, false
		}
		texts[i] = schemas.AppendText(nil, v)
	}
	return texts, true
}

// segSource is a segment's template text, without braces.
func segSource(s *schemas.Segment) string {
	parts := []string{s.Name}
	for _, o := range s.Ops {
		if o.Arg != "" {
			parts = append(parts, o.Name+":"+o.Arg)
		} else {
			parts = append(parts, o.Name)
		}
	}
	return strings.Join(parts, "|")
}

func fieldNames(spec *schemas.Spec) string {
	var names []string
	for _, f := range spec.Fields {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// PrefixSuccessor is the smallest key greater than every key that starts
// with prefix ("" when there is none: the end of the table).
func PrefixSuccessor(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
