package schemas

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

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

// CompareValues orders two values of one field (of the same kind):
// numbers numerically, strings and tag sets by their text.
func CompareValues(a, b Value) int {
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
		ms, err := timestamps.ParseTimestamp(text)
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: KindTime, Int: ms}, nil
	case TypeTags:
		v, err := ParseTags(text)
		if err != nil {
			return Value{}, fmt.Errorf("%s is a tag set: %w", f.Name, err)
		}
		return v, nil
	}
	return Value{}, fmt.Errorf("%s: unknown type %q", f.Name, f.Type)
}

// ParseTags reads a tag set written k=v,k=v (AppendText's form), sorted on
// reading.
func ParseTags(text string) (Value, error) {
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
