package coverage

import (
	"math"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
)

func TestComputeCoverage(t *testing.T) {
	const h = int64(1772359200000) // 2026-03-01T10:00Z
	const end = h + 3600000
	min := func(m float64) int64 { return h + int64(m*60000) }
	every := func(from, to, step float64) []int64 {
		var ms []int64
		for m := from; m < to; m += step {
			ms = append(ms, min(m))
		}
		return ms
	}
	tests := []struct {
		name      string
		ms        []int64
		cadence   time.Duration
		firstSeen int64
		want      Coverage
	}{
		{"every 20 minutes under a 20-minute cadence", every(0, 60, 20), 20 * time.Minute, h - 3600000,
			Coverage{Expected: 3, Coverage: 1}},
		{"complete hour at 30s", every(0, 60, 0.5), 30 * time.Second, h - 1,
			Coverage{Expected: 120, Coverage: 1}},
		{"skipped readings: one interval over 2x cadence", append(every(0, 10, 0.5), every(12, 60, 0.5)...), 30 * time.Second, h - 1,
			Coverage{Expected: 120, Coverage: 116.0 / 120, Gaps: 1, LongestGapS: 150}},
		{"stops mid-hour: the end edge is a gap", every(0, 30, 0.5), 30 * time.Second, h - 1,
			Coverage{Expected: 120, Coverage: 0.5, Gaps: 1, LongestGapS: 1830}},
		{"late start while already reporting: the start edge is a gap", every(5, 60, 0.5), 30 * time.Second, h - 3600000,
			Coverage{Expected: 120, Coverage: 110.0 / 120, Gaps: 1, LongestGapS: 300}},
		{"first hour is prorated and has no start edge", every(15, 60, 1), time.Minute, 0,
			Coverage{Expected: 45, Coverage: 1}},
		{"first seen inside the hour is the first hour", every(15, 60, 2), time.Minute, min(15),
			Coverage{Expected: 45, Coverage: 23.0 / 45}},
		{"an interval of exactly 2x cadence is no gap", []int64{h, min(2), min(4)}, time.Minute, h - 1,
			Coverage{Expected: 60, Coverage: 3.0 / 60, Gaps: 1, LongestGapS: 3360}},
		{"one reading", []int64{min(59)}, time.Minute, h - 1,
			Coverage{Expected: 60, Coverage: 1.0 / 60, Gaps: 1, LongestGapS: 3540}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ComputeCoverage(tt.ms, h, end, tt.cadence, tt.firstSeen)
			if !ok {
				t.Fatal("no coverage")
			}
			if got != tt.want {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
	if _, ok := ComputeCoverage(nil, h, end, time.Minute, 0); ok {
		t.Error("an hour without readings has a coverage")
	}
	if _, ok := ComputeCoverage([]int64{h}, h, end, 0, 0); ok {
		t.Error("no cadence has a coverage")
	}
}

// TestCadenceOf: a cadence field's value is a Go duration string or a
// number of seconds (int, float, or a string holding one), in whole
// milliseconds; anything else, or under 1 ms, is no interval.
func TestCadenceOf(t *testing.T) {
	tests := []struct {
		name string
		v    schemas.Value
		want time.Duration
		ok   bool
	}{
		{"duration string", schemas.Value{Kind: schemas.KindString, Str: "30s"}, 30 * time.Second, true},
		{"compound duration", schemas.Value{Kind: schemas.KindString, Str: "1m30s"}, 90 * time.Second, true},
		{"duration with spaces", schemas.Value{Kind: schemas.KindString, Str: " 20m "}, 20 * time.Minute, true},
		{"seconds as a string", schemas.Value{Kind: schemas.KindString, Str: "90"}, 90 * time.Second, true},
		{"fractional seconds as a string", schemas.Value{Kind: schemas.KindString, Str: "1.5"}, 1500 * time.Millisecond, true},
		{"int seconds", schemas.Value{Kind: schemas.KindInt, Int: 20}, 20 * time.Second, true},
		{"float seconds", schemas.Value{Kind: schemas.KindFloat, Num: 1.5}, 1500 * time.Millisecond, true},
		{"sub-millisecond digits truncated (float)", schemas.Value{Kind: schemas.KindFloat, Num: 0.0015}, time.Millisecond, true},
		{"sub-millisecond digits truncated (string)", schemas.Value{Kind: schemas.KindString, Str: "1500500us"}, 1500 * time.Millisecond, true},
		{"one millisecond", schemas.Value{Kind: schemas.KindString, Str: "1ms"}, time.Millisecond, true},
		{"under a millisecond (string)", schemas.Value{Kind: schemas.KindString, Str: "500us"}, 0, false},
		{"under a millisecond (float)", schemas.Value{Kind: schemas.KindFloat, Num: 0.0005}, 0, false},
		{"zero int", schemas.Value{Kind: schemas.KindInt, Int: 0}, 0, false},
		{"negative int", schemas.Value{Kind: schemas.KindInt, Int: -5}, 0, false},
		{"negative duration", schemas.Value{Kind: schemas.KindString, Str: "-1s"}, 0, false},
		{"zero duration", schemas.Value{Kind: schemas.KindString, Str: "0s"}, 0, false},
		{"negative seconds string", schemas.Value{Kind: schemas.KindString, Str: "-30"}, 0, false},
		{"not a duration", schemas.Value{Kind: schemas.KindString, Str: "soon"}, 0, false},
		{"empty string", schemas.Value{Kind: schemas.KindString, Str: ""}, 0, false},
		{"NaN", schemas.Value{Kind: schemas.KindFloat, Num: math.NaN()}, 0, false},
		{"infinite", schemas.Value{Kind: schemas.KindFloat, Num: math.Inf(1)}, 0, false},
		{"int too long for a duration", schemas.Value{Kind: schemas.KindInt, Int: math.MaxInt64 / 1000}, 0, false},
		{"float too long for a duration", schemas.Value{Kind: schemas.KindFloat, Num: 1e10}, 0, false},
		{"null", schemas.Value{}, 0, false},
		{"bool", schemas.Value{Kind: schemas.KindBool, Bool: true}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := CadenceOf(tt.v)
			if got != tt.want || ok != tt.ok {
				t.Errorf("CadenceOf(%+v) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.ok)
			}
		})
	}
}
