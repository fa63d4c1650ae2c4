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

// KeyQuery is a query to plan: equality values for some fields and an
// optional event-time range [FromMs, ToMs] (both 0: no time range).
type KeyQuery struct {
	Table  string            // the spec's first table when empty
	Where  map[string]string // field name to value text
	FromMs int64
	ToMs   int64
}

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
	// Stop explains where the fixed prefix ends, when it ends before the
	// key does.
	Stop string
}

// PlanScan derives the row ranges that serve q from the table's row-key
// template. It walks the key's segments in order: literals and fields fixed
// by q.Where extend the prefix; a salt over fixed fields adds its bucket,
// over other fields fans the prefix out into one per bucket; the event-time
// field, when q has a time range, turns the prefix into a range (with the
// bounds swapped for a reverse timestamp) and ends the walk. Any other field
// ends it too, leaving a prefix scan.
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
	var ranges []RowRange
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
				for _, n := range s.names {
					used[n] = true
				}
				appendAll(string(s.appendMultiText(nil, texts)))
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
				ranges = append(ranges, RowRange{Start: p + string(lo), End: PrefixSuccessor(p + string(hi))})
			}
			plan.Kind = ScanRange
			break walk
		}
		v, ok := values[s.field]
		if !ok {
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
		used[s.name] = true
		appendAll(string(b))
	}
	if ranges == nil {
		for _, p := range prefixes {
			ranges = append(ranges, RowRange{Start: p, End: PrefixSuccessor(p)})
		}
		if len(prefixes) == 1 && prefixes[0] == "" {
			plan.Kind = ScanFull
		}
	}
	plan.Ranges = ranges
	for i := range tmpl.segs {
		s := &tmpl.segs[i]
		for _, n := range append([]string{s.name}, s.names...) {
			if used[n] && !contains(plan.Used, n) {
				plan.Used = append(plan.Used, n)
			}
		}
	}
	for name := range q.Where {
		if !used[name] {
			plan.Unused = append(plan.Unused, name)
		}
	}
	sort.Strings(plan.Unused)
	return plan, nil
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
		var pairs []Pair
		if text != "" {
			for _, kv := range strings.Split(text, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return Value{}, fmt.Errorf("%s is a tag set: give k=v,k=v, not %q", f.Name, kv)
				}
				pairs = append(pairs, Pair{K: k, V: v})
			}
		}
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].K < pairs[j].K })
		return Value{Kind: KindTags, Pairs: pairs}, nil
	}
	return Value{}, fmt.Errorf("%s: unknown type %q", f.Name, f.Type)
}
