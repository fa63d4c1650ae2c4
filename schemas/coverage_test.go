package schemas

import (
	"errors"
	"strings"
	"testing"
	"time"
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

func TestCadenceValidation(t *testing.T) {
	base := string(mustRead(t, "vitals"))
	tests := []struct {
		name, add, want string
	}{
		{"bad cadence", "cadence: often\n", "cadence"},
		{"zero cadence", "cadence: 0s\n", "cadence"},
		{"negative cadence", "cadence: -30s\n", "cadence"},
		{"both cadence and cadence_field", "cadence: 30s\ncadence_field: sensor_id\n", "cadence_field"},
		{"cadence_field naming no field", "cadence_field: interval\n", "cadence_field"},
		{"cadence_field of a bool", "cadence_field: timestamp\n", "cadence_field"},
		{"silent_after without cadence", "silent_after: 90s\n", "silent_after"},
		{"bad silent_after", "cadence: 30s\nsilent_after: soon\n", "silent_after"},
		{"non-positive silent_after", "cadence: 30s\nsilent_after: 0s\n", "silent_after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSpec("vitals.yaml", []byte(base+tt.add))
			if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tt.want+":") || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v; want a one-line spec error at %s", err, tt.want)
			}
		})
	}
	for _, ok := range []string{"cadence: 30s\n", "cadence: 30s\nsilent_after: 2m\n", "cadence_field: sensor_id\nsilent_after: 2m\n"} {
		s, err := ParseSpec("vitals.yaml", []byte(base+ok))
		if err != nil {
			t.Errorf("%q: %v", ok, err)
			continue
		}
		if !s.HasCadence() {
			t.Errorf("%q: no cadence", ok)
		}
	}
	s, _ := ParseSpec("vitals.yaml", []byte(base+"cadence: 30s\n"))
	if s.CadenceDuration() != 30*time.Second || s.SilentAfterDuration() != 90*time.Second {
		t.Errorf("cadence %v, silent after %v; want 30s, 1m30s", s.CadenceDuration(), s.SilentAfterDuration())
	}
}

func TestReadingCadence(t *testing.T) {
	tests := []struct {
		v    Value
		want time.Duration
		ok   bool
	}{
		{Value{Kind: KindString, Str: "30s"}, 30 * time.Second, true},
		{Value{Kind: KindString, Str: "90"}, 90 * time.Second, true},
		{Value{Kind: KindInt, Int: 20}, 20 * time.Second, true},
		{Value{Kind: KindFloat, Num: 1.5}, 1500 * time.Millisecond, true},
		{Value{Kind: KindString, Str: "-1s"}, 0, false},
		{Value{Kind: KindString, Str: "soon"}, 0, false},
		{Value{}, 0, false},
	}
	for _, tt := range tests {
		got, ok := parseCadenceValue(tt.v)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseCadenceValue(%+v) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

// mustRead is the YAML of a built-in spec.
func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := BuiltinSpecs.ReadFile("specs/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
