package lines

import (
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
