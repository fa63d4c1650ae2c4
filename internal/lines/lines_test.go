package lines

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name, in string
		max      int
		want     []string // line|length|size
	}{
		{"LF", "ab\ncd\n", 10, []string{"ab|2|3", "cd|2|3"}},
		{"CRLF", "ab\r\ncd\r\n", 10, []string{"ab|2|4", "cd|2|4"}},
		{"no end on the last line", "ab\ncd", 10, []string{"ab|2|3", "cd|2|2"}},
		{"empty lines", "\n\r\n", 10, []string{"|0|1", "|0|2"}},
		{"exactly the limit", "abcd\n", 4, []string{"abcd|4|5"}},
		{"exactly the limit with CRLF", "abcd\r\n", 4, []string{"abcd|4|6"}},
		{"over the limit: cut, its length told", "abcde\nok\n", 4, []string{"abcd|5|6", "ok|2|3"}},
		{"longer than the read buffer", long + "\nok\n", 10, []string{long[:10] + "|100|101", "ok|2|3"}},
		{"longer than the buffer, under the limit", long + "\r\n", 200, []string{long + "|100|102"}},
		{"a lone CR stays", "a\rb\n", 10, []string{"a\rb|3|4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lr := NewReader(strings.NewReader(tc.in), 16, tc.max)
			var got []string
			for {
				line, length, size, err := lr.Next()
				if size > 0 {
					got = append(got, fmt.Sprintf("%s|%d|%d", line, length, size))
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("lines %q; want %q", got, tc.want)
			}
		})
	}
}

// TestHashLong shows that a line longer than max is hashed whole, end
// excluded, whichever way the buffer cuts it and however it ends, and
// that the lines kept whole are not.
func TestHashLong(t *testing.T) {
	long := strings.Repeat("abcdefghij", 7) // 70 bytes
	tests := []struct {
		name, input string
		want        []string // each line's hashed text, "-" for none
	}{
		{"LF", "short\n" + long + "\nx\n", []string{"-", long, "-"}},
		{"CRLF", long + "\r\n" + long + "1\r\n", []string{long, long + "1"}},
		{"no end", "ok\n" + long, []string{"-", long}},
		{"CR inside", long + "\rz\n", []string{long + "\rz"}},
		{"max and CRLF", "0123456789\r\n", []string{"-"}},
		{"just past max", "0123456789a\n", []string{"0123456789a"}},
	}
	for _, tt := range tests {
		for _, bufSize := range []int{16, 17, 33, 4096} {
			t.Run(fmt.Sprintf("%s/buffer %d", tt.name, bufSize), func(t *testing.T) {
				lr := NewReader(strings.NewReader(tt.input), bufSize, 10)
				lr.HashLong()
				for i, want := range tt.want {
					_, _, _, err := lr.Next()
					got := "-"
					if s := lr.Sum(); s != nil {
						got = hex.EncodeToString(s)
					}
					if want != "-" {
						h := sha256.Sum256([]byte(want))
						want = hex.EncodeToString(h[:])
					}
					if got != want {
						t.Errorf("line %d: sum %s; want %s", i+1, got, want)
					}
					if err != nil && err != io.EOF {
						t.Fatal(err)
					}
				}
			})
		}
	}
}
