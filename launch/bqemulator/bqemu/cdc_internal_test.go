package bqemu

import (
	"testing"
)

func TestChangeSequenceNumbers(t *testing.T) {
	// The four comparisons of BigQuery's CDC documentation, plus edges.
	for _, tc := range []struct {
		name string
		a, b string
		want int // compare(a, b)
	}{
		{"docs example 1: 7B beats 77", "77", "7B", -1},
		{"docs example 2: FFF/ABC beats FFF/B", "FFF/B", "FFF/ABC", -1},
		{"docs example 3: ABC beats BA/FFFFFFFF", "BA/FFFFFFFF", "ABC", -1},
		{"docs example 4: FFF/ABC beats ABC", "FFF/ABC", "ABC", 1},
		{"equal", "18F2EBB6480/0", "18f2ebb6480/0", 0},
		{"a prefix is smaller", "A", "A/0", -1},
		{"unsigned 64-bit sections", "FFFFFFFFFFFFFFFF", "7FFFFFFFFFFFFFFF", 1},
		{"four sections", "1/2/3/4", "1/2/3/5", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseChangeSeq(tc.a)
			if err != nil {
				t.Fatalf("parse %q: %v", tc.a, err)
			}
			b, err := parseChangeSeq(tc.b)
			if err != nil {
				t.Fatalf("parse %q: %v", tc.b, err)
			}
			if got := compareChangeSeq(a, b); got != tc.want {
				t.Errorf("compare(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := compareChangeSeq(b, a); got != -tc.want {
				t.Errorf("compare(%s, %s) = %d, want %d", tc.b, tc.a, got, -tc.want)
			}
		})
	}
	t.Run("no sequence number ties", func(t *testing.T) {
		a, _ := parseChangeSeq("FF")
		if got := compareChangeSeq(a, changeSeq{}); got != 0 {
			t.Errorf("compare(FF, none) = %d, want 0", got)
		}
	})
	for _, bad := range []string{"", "/", "1//2", "G", "1/2/3/4/5", "11111111111111111", " 1", "-1", "0x1"} {
		t.Run("rejects "+bad, func(t *testing.T) {
			if _, err := parseChangeSeq(bad); err == nil {
				t.Errorf("parseChangeSeq(%q) succeeded", bad)
			}
		})
	}
	t.Run("round trip", func(t *testing.T) {
		cs, err := parseChangeSeq("18f2ebb6480/a")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cs.String(), "18F2EBB6480/A"; got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	})
}

func TestApplyKeepsOneRowPerKey(t *testing.T) {
	// A table keyed on column 0, partitioned by column 1's value.
	seq := func(s string) changeSeq {
		cs, err := parseChangeSeq(s)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	type change struct {
		typ  string
		key  string
		part string
		val  int64
		seq  string
	}
	for _, tc := range []struct {
		name    string
		changes []change
		want    map[string]int64 // key -> value of its one row
	}{
		{
			name:    "upsert replaces",
			changes: []change{{changeUpsert, "a", "p1", 1, "1"}, {changeUpsert, "a", "p1", 2, "2"}},
			want:    map[string]int64{"a": 2},
		},
		{
			name:    "an older change arriving later loses",
			changes: []change{{changeUpsert, "a", "p1", 2, "2"}, {changeUpsert, "a", "p1", 1, "1"}},
			want:    map[string]int64{"a": 2},
		},
		{
			name:    "equal sequence numbers: the later arrival wins",
			changes: []change{{changeUpsert, "a", "p1", 1, "5"}, {changeUpsert, "a", "p1", 2, "5"}},
			want:    map[string]int64{"a": 2},
		},
		{
			name:    "upsert moving to another partition",
			changes: []change{{changeUpsert, "a", "p1", 1, ""}, {changeUpsert, "b", "p1", 7, ""}, {changeUpsert, "a", "p2", 2, ""}},
			want:    map[string]int64{"a": 2, "b": 7},
		},
		{
			name:    "delete removes and keeps its place in the order",
			changes: []change{{changeUpsert, "a", "p1", 1, "1"}, {changeUpsert, "b", "p1", 2, "1"}, {changeUpsert, "c", "p1", 3, "1"}, {changeDelete, "a", "", 0, "2"}, {changeUpsert, "a", "p1", 9, "1"}},
			want:    map[string]int64{"b": 2, "c": 3},
		},
		{
			name:    "a delete before any upsert holds off older upserts",
			changes: []change{{changeDelete, "a", "", 0, "5"}, {changeUpsert, "a", "p1", 1, "4"}, {changeUpsert, "b", "p1", 2, "4"}},
			want:    map[string]int64{"b": 2},
		},
		{
			name:    "a newer upsert after a delete brings the row back",
			changes: []change{{changeUpsert, "a", "p1", 1, "1"}, {changeDelete, "a", "", 0, "2"}, {changeUpsert, "a", "p1", 3, "3"}},
			want:    map[string]int64{"a": 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := &table{pk: []int{0}}
			for _, c := range tc.changes {
				var cs changeSeq
				if c.seq != "" {
					cs = seq(c.seq)
				}
				tbl.applyLocked([][]any{{c.key, c.val}}, []string{c.part}, []rowChange{{typ: c.typ, seq: cs}})
			}
			got := map[string]int64{}
			for _, r := range tbl.allRowsLocked() {
				k := r.values[0].(string)
				if _, dup := got[k]; dup {
					t.Errorf("key %s has more than one row", k)
				}
				got[k] = r.values[1].(int64)
			}
			if len(got) != len(tc.want) {
				t.Errorf("rows = %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("key %s = %d, want %d (rows %v)", k, got[k], v, got)
				}
			}
			if tbl.numRows != int64(len(tc.want)) {
				t.Errorf("numRows = %d, want %d", tbl.numRows, len(tc.want))
			}
			// Every live key's index entry points at its row.
			for k, e := range tbl.keys {
				if e.idx < 0 {
					continue
				}
				r := tbl.partitions[e.part].rows[e.idx]
				if keyString(r.values, tbl.pk) != k {
					t.Errorf("index entry of %q points at row %v", k, r.values)
				}
			}
		})
	}
}
