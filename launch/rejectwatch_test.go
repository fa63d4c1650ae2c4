package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
)

// TestRejectWatchWarnsOnceAMinuteWhileAllIsRejected: the watch warns once
// a minute at most, only for a minute in which records were read and all
// rejected, and names the top reasons, most first, with the first one's
// likely cause.
func TestRejectWatchWarnsOnceAMinuteWhileAllIsRejected(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	counters := func(read, rejected, tooLate int64, letters map[string]int64) ledger.Counters {
		c := ledger.Counters{ledger.InputRecords: read, ledger.InputRejected: rejected, ledger.TooLate: tooLate}
		for k, n := range letters {
			sink, reason, _ := strings.Cut(k, ".")
			c[ledger.DeadLetterKey(sink, reason)] = n
		}
		return c
	}
	type step struct {
		at   time.Duration
		c    ledger.Counters
		want []string // substrings of the warning; nil: none
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"all malformed", []step{
			{0, counters(0, 0, 0, nil), nil},
			{30 * time.Second, counters(500, 500, 0, map[string]int64{"parse.malformed": 500}), nil}, // within the minute
			{time.Minute, counters(1000, 1000, 0, map[string]int64{"parse.malformed": 990, "parse.missing_field": 10}),
				[]string{"every record read in the last 1m0s was rejected (1000 records)", "malformed 990 (parse), missing_field 10 (parse)", "--format"}},
			{90 * time.Second, counters(1500, 1500, 0, map[string]int64{"parse.malformed": 1490, "parse.missing_field": 10}), nil}, // once a minute
			{2 * time.Minute, counters(2000, 2000, 0, map[string]int64{"parse.malformed": 1990, "parse.missing_field": 10}),
				[]string{"(1000 records): malformed 1000 (parse);"}},
		}},
		{"some accepted", []step{
			{0, counters(0, 0, 0, nil), nil},
			{time.Minute, counters(1000, 999, 0, map[string]int64{"parse.malformed": 999}), nil},
		}},
		{"nothing read", []step{
			{0, counters(100, 0, 0, nil), nil},
			{time.Minute, counters(100, 0, 0, nil), nil},
			{2 * time.Minute, counters(100, 0, 0, nil), nil},
		}},
		{"all too late or out of range", []step{
			{0, counters(10, 0, 0, nil), nil},
			{time.Minute, counters(210, 50, 150, map[string]int64{"window.too_late": 150, "parse.out_of_range": 50}),
				[]string{"(200 records): too_late 150 (window), out_of_range 50 (parse)", "--allowed_lateness"}},
		}},
		{"accepted, then all rejected", []step{
			{0, counters(0, 0, 0, nil), nil},
			{time.Minute, counters(100, 0, 0, nil), nil},
			{2 * time.Minute, counters(300, 200, 0, map[string]int64{"parse.bad_timestamp": 200}),
				[]string{"(200 records): bad_timestamp 200 (parse)", "unit"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := rejectWatch{every: time.Minute}
			for i, s := range tt.steps {
				got, ok := w.observe(s.c, t0.Add(s.at))
				if ok != (s.want != nil) {
					t.Fatalf("step %d (%v): warned %v (%q); want %v", i, s.at, ok, got, s.want != nil)
				}
				for _, want := range s.want {
					if !strings.Contains(got, want) {
						t.Errorf("step %d: warning %q lacks %q", i, got, want)
					}
				}
				if strings.Contains(got, "\n") {
					t.Errorf("step %d: warning is not one line: %q", i, got)
				}
			}
		})
	}
}
