package schemas

import (
	"fmt"
	"sort"
	"strconv"
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
	Table  string            // the spec's first table when empty
	Where  map[string]string // field name to value text
	Ranges map[string]Range  // field name to an inclusive range of values
	FromMs int64
	ToMs   int64
	// NoFanOut keeps the plan from fanning a prefix out over an enum
	// field's values (a latest-per-prefix read finds the prefixes itself).
	NoFanOut bool
}

// Range is an inclusive range of a field's values, as text: "340".."350".
type Range struct {
	Lo, Hi string
}

// String renders the range as lo..hi, the query tools' syntax.
func (r Range) String() string { return r.Lo + ".." + r.Hi }

// ParseRange reads "lo..hi" (both inclusive). ok is false when text is not
// a range, so it is an equality value.
func ParseRange(text string) (r Range, ok bool) {
	lo, hi, ok := strings.Cut(text, "..")
	if !ok || lo == "" || hi == "" {
		return Range{}, false
	}
	return Range{Lo: lo, Hi: hi}, true
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
func PlanScan(spec *Spec, q KeyQuery) (*ScanPlan, error) {
	ts := &spec.Bigtable.Tables[0]
	if q.Table != "" {
		if ts = spec.Table(q.Table); ts == nil {
			return nil, fmt.Errorf("spec %s has no table %q", spec.Name, q.Table)
		}
	}
	tmpl, err := CompileTemplate(ts.RowKey, spec)
	if err != nil {
		return nil, err
	}
	tmpl.WithEscape(ts.Escape)
	for name := range q.Where {
		if spec.Field(name) == nil {
			return nil, fmt.Errorf("where %s: not a field of %s; fields are %s", name, spec.Name, fieldNames(spec))
		}
	}
	ranges := map[int][2]Value{}
	for name, r := range q.Ranges {
		f := spec.Field(name)
		if f == nil {
			return nil, fmt.Errorf("where %s: not a field of %s; fields are %s", name, spec.Name, fieldNames(spec))
		}
		if _, dup := q.Where[name]; dup {
			return nil, fmt.Errorf("where %s: give a value or a range, not both", name)
		}
		lo, err := ParseValue(f, r.Lo)
		if err != nil {
			return nil, fmt.Errorf("where %s=%s: %w", name, r, err)
		}
		hi, err := ParseValue(f, r.Hi)
		if err != nil {
			return nil, fmt.Errorf("where %s=%s: %w", name, r, err)
		}
		if compareValues(lo, hi) > 0 {
			return nil, fmt.Errorf("where %s=%s: the range is empty (%s is after %s)", name, r, r.Lo, r.Hi)
		}
		ranges[spec.FieldIndex(name)] = [2]Value{lo, hi}
	}
	values := map[int]Value{}
	for name, text := range q.Where {
		v, err := ParseValue(spec.Field(name), text)
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
		for j := i + 1; j < len(tmpl.segs); j++ {
			s := &tmpl.segs[j]
			if s.kind != segField {
				continue
			}
			if _, ok := values[s.field]; ok {
				return true
			}
			if _, ok := ranges[s.field]; ok {
				return true
			}
			if hasTime && s.field == eventIdx {
				return true
			}
		}
		return false
	}
walk:
	for i := range tmpl.segs {
		s := &tmpl.segs[i]
		switch s.kind {
		case segLiteral:
			appendAll(s.literal)
			continue
		case segSalt, segHash:
			texts, ok := fixedTexts(s, values)
			if ok {
				if s.kind == segHash {
					// A hash of the fields picks their rows (a salt only
					// picks a bucket of many series: the fields still
					// need checking on the rows read).
					for _, n := range s.names {
						used[n] = true
					}
				}
				appendAll(string(s.appendMultiText(nil, texts)))
				fixed = true
				continue
			}
			if s.kind == segHash {
				plan.Stop = fmt.Sprintf("{%s|%s} needs %s fixed by the query", s.name, strings.Join(s.names, ","), strings.Join(s.names, ", "))
				break walk
			}
			var fanned []string
			for _, p := range prefixes {
				for b := 0; b < s.buckets; b++ {
					fanned = append(fanned, p+SaltText(b, s.buckets))
				}
			}
			prefixes = fanned
			continue
		}
		if hasTime && s.field == eventIdx {
			dir := orderUp
			for _, o := range s.ops {
				switch {
				case o.order == orderNone:
					dir = orderNone
				case o.order == orderDown && dir == orderUp:
					dir = orderDown
				case o.order == orderDown && dir == orderDown:
					dir = orderUp
				}
			}
			if dir == orderNone {
				plan.Stop = fmt.Sprintf("{%s} does not keep time order, so a time range is not a key range", segSource(s))
				break walk
			}
			lo, err := tmpl.appendField(nil, s, Value{Kind: KindTime, Int: q.FromMs})
			if err != nil {
				return nil, fmt.Errorf("time range start: %w", err)
			}
			hi, err := tmpl.appendField(nil, s, Value{Kind: KindTime, Int: q.ToMs})
			if err != nil {
				return nil, fmt.Errorf("time range end: %w", err)
			}
			if dir == orderDown {
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
		if r, ok := ranges[s.field]; ok {
			ordered, up := s.keepsOrder()
			if !ordered {
				plan.Stop = fmt.Sprintf("{%s} does not sort as its values do, so a range of %s is not a key range", segSource(s), s.name)
				break walk
			}
			lo, err := tmpl.appendField(nil, s, r[0])
			if err != nil {
				return nil, fmt.Errorf("where %s range start: %w", s.name, err)
			}
			hi, err := tmpl.appendField(nil, s, r[1])
			if err != nil {
				return nil, fmt.Errorf("where %s range end: %w", s.name, err)
			}
			if !up {
				lo, hi = hi, lo
			}
			// The end covers every key whose segment is hi: up to the
			// literal that follows it, when there is one.
			next := ""
			if i+1 < len(tmpl.segs) && tmpl.segs[i+1].kind == segLiteral {
				next = tmpl.segs[i+1].literal
			}
			for _, p := range prefixes {
				out = append(out, RowRange{Start: p + string(lo), End: PrefixSuccessor(p + string(hi) + next)})
			}
			used[s.name], narrowed[s.name] = true, true
			plan.Kind = ScanRange
			plan.Stop = fmt.Sprintf("{%s} is a range, so the segments after it cannot narrow", segSource(s))
			break walk
		}
		v, ok := values[s.field]
		if !ok {
			if f := spec.Field(s.name); f != nil && len(f.Enum) > 0 && !q.NoFanOut && later(i) && len(prefixes)*len(f.Enum) <= maxFanOut {
				if fanned, err := fanOut(tmpl, s, f, prefixes); err == nil {
					prefixes = fanned
					plan.FanOut = append(plan.FanOut, s.name)
					continue
				}
			}
			plan.Stop = fmt.Sprintf("{%s} is not fixed by the query", segSource(s))
			if s.field == eventIdx && !hasTime {
				plan.Stop = fmt.Sprintf("{%s} needs a time range (since)", segSource(s))
			}
			break walk
		}
		b, err := tmpl.appendField(nil, s, v)
		if err != nil {
			return nil, fmt.Errorf("where %s: %w", s.name, err)
		}
		used[s.name], narrowed[s.name] = true, true
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
	for i := range tmpl.segs {
		s := &tmpl.segs[i]
		for _, n := range append([]string{s.name}, s.names...) {
			if used[n] && !contains(plan.Used, n) {
				plan.Used = append(plan.Used, n)
			}
		}
	}
	for i := range tmpl.segs {
		if n := tmpl.segs[i].name; narrowed[n] && !contains(plan.Narrowed, n) {
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
func fanOut(tmpl *Template, s *segment, f *FieldSpec, prefixes []string) ([]string, error) {
	var out []string
	for _, p := range prefixes {
		for _, e := range f.Enum {
			b, err := tmpl.appendField(nil, s, Value{Kind: KindString, Str: e})
			if err != nil {
				return nil, err
			}
			out = append(out, p+string(b))
		}
	}
	return out, nil
}

// compareValues orders two values of the same kind: numbers numerically,
// strings by bytes.
func compareValues(a, b Value) int {
	switch a.Kind {
	case KindInt, KindTime:
		return cmpInt(a.Int, b.Int)
	case KindFloat:
		switch {
		case a.Num < b.Num:
			return -1
		case a.Num > b.Num:
			return 1
		}
		return 0
	case KindBool:
		return cmpInt(boolInt(a.Bool), boolInt(b.Bool))
	}
	return strings.Compare(string(AppendText(nil, a)), string(AppendText(nil, b)))
}

// CompareValues orders two values of one field: numbers numerically,
// strings and tag sets by their text.
func CompareValues(a, b Value) int { return compareValues(a, b) }

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func fixedTexts(s *segment, values map[int]Value) ([][]byte, bool) {
	texts := make([][]byte, len(s.fields))
	for i, f := range s.fields {
		v, ok := values[f]
		if !ok {
			return nil, false
		}
		texts[i] = AppendText(nil, v)
	}
	return texts, true
}

// segSource is a segment's template text, without braces.
func segSource(s *segment) string {
	parts := []string{s.name}
	for _, o := range s.ops {
		if o.arg != "" {
			parts = append(parts, o.name+":"+o.arg)
		} else {
			parts = append(parts, o.name)
		}
	}
	return strings.Join(parts, "|")
}

func fieldNames(spec *Spec) string {
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

// ParseValue reads a field's value from text, as a query gives it: strings
// as they are, numbers and booleans in Go syntax, timestamps as RFC 3339 or
// epoch milliseconds, tags as k=v,k=v (sorted on reading).
func ParseValue(f *FieldSpec, text string) (Value, error) {
	switch f.Type {
	case TypeString:
		return Value{Kind: KindString, Str: text}, nil
	case TypeBytes:
		return Value{Kind: KindBytes, Str: text}, nil
	case TypeInt:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return Value{}, fmt.Errorf("%s is an int: %w", f.Name, err)
		}
		return Value{Kind: KindInt, Int: n}, nil
	case TypeFloat:
		n, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return Value{}, fmt.Errorf("%s is a float: %w", f.Name, err)
		}
		return Value{Kind: KindFloat, Num: n}, nil
	case TypeBool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return Value{}, fmt.Errorf("%s is a bool: %w", f.Name, err)
		}
		return Value{Kind: KindBool, Bool: b}, nil
	case TypeTimestamp:
		if ms, err := strconv.ParseInt(text, 10, 64); err == nil {
			return Value{Kind: KindTime, Int: ms}, nil
		}
		ms, err := ParseTimestamp(text)
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindTime, Int: ms}, nil
	case TypeTags:
		v, err := parseTags(text)
		if err != nil {
			return Value{}, fmt.Errorf("%s is a tag set: %w", f.Name, err)
		}
		return v, nil
	}
	return Value{}, fmt.Errorf("%s: unknown type %q", f.Name, f.Type)
}

// parseTags reads a tag set written k=v,k=v (AppendText's form), sorted on
// reading.
func parseTags(text string) (Value, error) {
	var pairs []Pair
	if text != "" {
		for _, kv := range strings.Split(text, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return Value{}, fmt.Errorf("give k=v,k=v, not %q", kv)
			}
			pairs = append(pairs, Pair{K: k, V: v})
		}
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].K < pairs[j].K })
	return Value{Kind: KindTags, Pairs: pairs}, nil
}
