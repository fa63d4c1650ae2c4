package dofns

import "testing"

func TestParseEventTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1795312276318", 1795312276318, true},
		{"2026-11-22T10:15:30.123Z", 1795342530123, true},
		{"2026-11-22T11:15:30+01:00", 1795342530000, true},
		{"", 0, false},
		{"yesterday", 0, false},
		{"99999999999999999", 0, false},
	} {
		got, err := ParseEventTime(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseEventTime(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}
