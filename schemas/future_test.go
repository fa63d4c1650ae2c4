package schemas

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckFutureRejectsAClockFarAhead(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	ms := func(d time.Duration) int64 { return now + d.Milliseconds() }
	tests := []struct {
		name      string
		eventMs   int64
		maxFuture time.Duration
		want      []string // substrings of the reason; nil: accepted
	}{
		{"now", now, time.Hour, nil},
		{"in the past", ms(-72 * time.Hour), time.Hour, nil},
		{"a minute ahead", ms(time.Minute), time.Hour, nil},
		{"exactly max_future ahead", ms(time.Hour), time.Hour, nil},
		{"a millisecond past max_future", ms(time.Hour + time.Millisecond), time.Hour,
			[]string{"out_of_range", "1h0m0s ahead of the wall clock", "max_future 1h0m0s", "clock is ahead"}},
		{"3 days ahead", ms(72 * time.Hour), time.Hour,
			[]string{"timestamp 2026-03-04T10:00:00Z is 72h0m0s ahead", "at arrival (2026-03-01T10:00:00Z)", "max_future 1h0m0s"}},
		{"a minute ahead with a max_future of 30s", ms(time.Minute), 30 * time.Second,
			[]string{"1m0s ahead", "max_future 30s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckFuture("timestamp", tt.eventMs, now, tt.maxFuture)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckFuture: %v; want accepted", err)
				}
				return
			}
			if !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("CheckFuture: %v; want out_of_range", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("reason %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestSpecFutureLimit(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want time.Duration
		err  string
	}{
		{"", DefaultMaxFuture, ""},
		{"max_future: 15m\n", 15 * time.Minute, ""},
		{"max_future: 48h\n", 48 * time.Hour, ""},
		{"max_future: soon\n", 0, "max_future"},
		{"max_future: 0s\n", 0, "positive duration"},
		{"max_future: -1h\n", 0, "positive duration"},
	} {
		t.Run(tt.yaml, func(t *testing.T) {
			y := strings.Replace(string(mustRead(t, "vitals")), "event_time: timestamp\n", "event_time: timestamp\n"+tt.yaml, 1)
			s, err := ParseSpec("vitals.yaml", []byte(y))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("spec with %q: %v; want an error naming %q", tt.yaml, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := FutureLimit(s); got != tt.want {
				t.Errorf("FutureLimit() = %v; want %v", got, tt.want)
			}
		})
	}
}
