package schemas

import (
	"math"
	"testing"
)

// TestValueSame: the same kind and member is the same value; a float is
// compared by its bits.
func TestValueSame(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		a, b Value
		same bool
	}{
		{"nulls", Value{}, Value{}, true},
		{"null and empty string", Value{}, Value{Kind: KindString}, false},
		{"strings", Value{Kind: KindString, Str: "a"}, Value{Kind: KindString, Str: "a"}, true},
		{"string and bytes of the same text", Value{Kind: KindString, Str: "a"}, Value{Kind: KindBytes, Str: "a"}, false},
		{"different strings", Value{Kind: KindString, Str: "a"}, Value{Kind: KindString, Str: "b"}, false},
		{"floats", Value{Kind: KindFloat, Num: 36.6}, Value{Kind: KindFloat, Num: 36.6}, true},
		{"NaN is itself", Value{Kind: KindFloat, Num: nan}, Value{Kind: KindFloat, Num: nan}, true},
		{"-0 is not 0", Value{Kind: KindFloat, Num: math.Copysign(0, -1)}, Value{Kind: KindFloat}, false},
		{"a float ignores Int", Value{Kind: KindFloat, Num: 1, Int: 2}, Value{Kind: KindFloat, Num: 1}, true},
		{"ints", Value{Kind: KindInt, Int: 7}, Value{Kind: KindInt, Int: 7}, true},
		{"int and time of the same number", Value{Kind: KindInt, Int: 7}, Value{Kind: KindTime, Int: 7}, false},
		{"times", Value{Kind: KindTime, Int: 1772359200000}, Value{Kind: KindTime, Int: 1772359200001}, false},
		{"bools", Value{Kind: KindBool, Bool: true}, Value{Kind: KindBool, Bool: true}, true},
		{"bools differ", Value{Kind: KindBool, Bool: true}, Value{Kind: KindBool}, false},
		{"tags", Value{Kind: KindTags, Pairs: []Pair{{"a", "1"}}}, Value{Kind: KindTags, Pairs: []Pair{{"a", "1"}}}, true},
		{"tags in another order", Value{Kind: KindTags, Pairs: []Pair{{"a", "1"}, {"b", "2"}}}, Value{Kind: KindTags, Pairs: []Pair{{"b", "2"}, {"a", "1"}}}, false},
	} {
		if got := tc.a.Same(&tc.b); got != tc.same {
			t.Errorf("%s: %+v.Same(%+v) = %v, want %v", tc.name, tc.a, tc.b, got, tc.same)
		}
		if got := tc.b.Same(&tc.a); got != tc.same {
			t.Errorf("%s, the other way: %v, want %v", tc.name, got, tc.same)
		}
	}
}
