package bigtableio

import (
	"fmt"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

func TestKeyRangeSplitAt(t *testing.T) {
	tests := []struct {
		name    string
		r       KeyRange
		samples []string
		want    string
	}{
		{"the whole table at its samples", KeyRange{}, []string{"m", "c", ""}, `[{ c} {c m} {m }]`},
		{"samples outside the range are ignored", KeyRange{"b", "k"}, []string{"a", "b", "d", "k", "z"}, `[{b d} {d k}]`},
		{"no samples", KeyRange{"b", "k"}, nil, `[{b k}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(tc.r.SplitAt(tc.samples)); got != tc.want {
				t.Errorf("%v.SplitAt(%q) = %s; want %s", tc.r, tc.samples, got, tc.want)
			}
		})
	}
}

func TestKeyRangeClip(t *testing.T) {
	plan := []rowkey.RowRange{{Start: "a", End: "c"}, {Start: "e", End: ""}}
	tests := []struct {
		r    KeyRange
		want string
	}{
		{KeyRange{}, `[["a", "c") ["e", "")]`},
		{KeyRange{"b", "f"}, `[["b", "c") ["e", "f")]`},
		{KeyRange{"c", "e"}, `[]`},
		{KeyRange{"x", ""}, `[["x", "")]`},
	}
	for _, tc := range tests {
		if got := fmt.Sprint(tc.r.Clip(plan)); got != tc.want {
			t.Errorf("%v.Clip(%v) = %s; want %s", tc.r, plan, got, tc.want)
		}
	}
	if got := fmt.Sprint(boundsOf(plan)); got != "{a }" {
		t.Errorf("boundsOf(%v) = %s; want {a }", plan, got)
	}
}

// TestKeyRangeTracker: claims in key order within the range, a split
// that leaves the claimed rows in the primary, and the end claim.
func TestKeyRangeTracker(t *testing.T) {
	tr := newKeyRangeTracker(KeyRange{"a", "z"})
	for _, k := range []string{"b", "c"} {
		if !tr.TryClaim(k) {
			t.Fatalf("TryClaim(%q) = false", k)
		}
	}
	primary, residual, err := tr.TrySplit(0)
	if err != nil || fmt.Sprint(primary) != "{a c\x00}" || fmt.Sprint(residual) != "{c\x00 z}" {
		t.Fatalf("TrySplit(0) = %q, %q, %v; want {a c\\x00}, {c\\x00 z}", primary, residual, err)
	}
	if tr.TryClaim("d") || !tr.IsDone() || tr.GetError() != nil {
		t.Errorf("a claim past the split: want it refused and the tracker done without error (err %v)", tr.GetError())
	}

	tr = newKeyRangeTracker(KeyRange{"a", ""})
	tr.TryClaim("b")
	_, residual, _ = tr.TrySplit(0.5)
	if r, ok := residual.(KeyRange); !ok || r.Start <= "b" || r.End != "" {
		t.Errorf("TrySplit(0.5) of [b..) gives residual %v; want one after b to the end", residual)
	}
	if tr.TryClaim("a") || tr.GetError() == nil {
		t.Errorf("a claim out of order: want an error")
	}

	tr = newKeyRangeTracker(KeyRange{"a", "m"})
	if tr.TryClaim(endOfRange{}) || !tr.IsDone() {
		t.Errorf("the end claim: want the tracker done")
	}
	if done, rem := tr.GetProgress(); done != 1 || rem != 0 {
		t.Errorf("progress when done = %v, %v; want 1, 0", done, rem)
	}
}
