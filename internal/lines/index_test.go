package lines

import (
	"path/filepath"
	"testing"
)

func TestShare(t *testing.T) {
	for _, tc := range []struct {
		h      byte
		shares int
		want   int
	}{
		{0, 1, 0}, {255, 1, 0}, {255, 0, 0}, // one share (or none asked): all
		{0, 8, 0}, {31, 8, 0}, {32, 8, 1}, {255, 8, 7},
		{127, 2, 0}, {128, 2, 1},
		{0, 3, 0}, {85, 3, 0}, {86, 3, 1}, {170, 3, 1}, {171, 3, 2}, {255, 3, 2},
		{200, 256, 200}, {200, 1000, 200}, // at most one share per byte
	} {
		if got := Share(tc.h, tc.shares); got != tc.want {
			t.Errorf("Share(%d, %d) = %d, want %d", tc.h, tc.shares, got, tc.want)
		}
	}
	// Every byte falls in exactly one share, and each share gets bytes.
	for shares := 1; shares <= MaxShares; shares++ {
		seen := make([]int, shares)
		for h := range 256 {
			s := Share(byte(h), shares)
			if s < 0 || s >= shares {
				t.Fatalf("Share(%d, %d) = %d, out of range", h, shares, s)
			}
			seen[s]++
		}
		for s, n := range seen {
			if n == 0 {
				t.Fatalf("no byte falls in share %d of %d", s, shares)
			}
		}
	}
}

// TestIndex writes a file's line index and reads it back at increasing
// offsets, some at no line's start, as a reader of each block does.
func TestIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.index")
	w, err := CreateIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int64{3, 200, 1, 70000, 5}
	var offs []int64
	var off int64
	for i, n := range sizes {
		offs = append(offs, off)
		if err := w.Add(n, byte(10*i+1)); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	type ask struct {
		off int64
		b   byte
		ok  bool
	}
	for _, tc := range []struct {
		name string
		asks []ask
	}{
		{"every line", []ask{{offs[0], 1, true}, {offs[1], 11, true}, {offs[2], 21, true}, {offs[3], 31, true}, {offs[4], 41, true}, {off, 0, false}}},
		{"from the middle (a block's first line)", []ask{{offs[3], 31, true}, {offs[4], 41, true}}},
		{"offsets inside lines have none", []ask{{1, 0, false}, {offs[2], 21, true}, {offs[3] + 1, 0, false}, {offs[4], 41, true}}},
		{"past the end", []ask{{off + 100, 0, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := OpenIndex(path)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			for _, a := range tc.asks {
				b, ok, err := x.Byte(a.off)
				if err != nil || b != a.b || ok != a.ok {
					t.Fatalf("Byte(%d) = %d, %v, %v; want %d, %v", a.off, b, ok, err, a.b, a.ok)
				}
			}
		})
	}
}
