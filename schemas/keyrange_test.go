package schemas

import (
	"strings"
	"testing"
	"time"
)

func ms(t *testing.T, s string) int64 {
	t.Helper()
	v, err := ParseTimestamp(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPlanScan(t *testing.T) {
	now := ms(t, "2026-03-01T10:20:00Z")
	hour := time.Hour.Milliseconds()
	tests := []struct {
		name, spec, table string
		where             map[string]string
		from, to          int64
		wantKind          string
		wantRanges        []RowRange
		wantReversed      bool
		wantUnused        string
	}{
		{
			name: "vitals last hour: two hour buckets", spec: "vitals",
			where: map[string]string{"sensor_id": "s1"}, from: now - hour, to: now,
			wantKind:   ScanRange,
			wantRanges: []RowRange{{"s1#2026-03-01T09", "s1#2026-03-01T11"}},
		},
		{
			name: "vitals without a window: prefix", spec: "vitals",
			where:    map[string]string{"sensor_id": "s1"},
			wantKind: ScanPrefix, wantRanges: []RowRange{{"s1#", "s1$"}},
		},
		{
			name: "vitals with no where: whole table", spec: "vitals",
			where:    map[string]string{},
			wantKind: ScanFull, wantRanges: []RowRange{{"", ""}},
		},
		{
			name: "traffic newest first: reversed bounds", spec: "traffic",
			where: map[string]string{"highway": "I-35", "milemarker": "347"}, from: now - hour, to: now,
			wantKind: ScanRange, wantReversed: true,
			wantRanges: []RowRange{{"I-35#0347#" + ReverseTimestamp(now), PrefixSuccessor("I-35#0347#" + ReverseTimestamp(now-hour))}},
		},
		{
			name: "traffic by highway only: prefix, the time cannot narrow", spec: "traffic",
			where: map[string]string{"highway": "I-35"}, from: now - hour, to: now,
			wantKind: ScanPrefix, wantRanges: []RowRange{{"I-35#", "I-35$"}},
		},
		{
			name: "user events by user and type: epoch range", spec: "user_events",
			where: map[string]string{"user_id": "u1", "event_type": "login"}, from: now - 24*hour, to: now,
			wantKind:   ScanRange,
			wantRanges: []RowRange{{"u1#login#1772274000000", "u1#login#1772360400001"}},
		},
		{
			name: "user events unknown where field is reported", spec: "user_events",
			where:    map[string]string{"user_id": "u1", "device_id": "d1"},
			wantKind: ScanPrefix, wantRanges: []RowRange{{"u1#", "u1$"}}, wantUnused: "device_id",
		},
		{
			name: "heroic series: base range", spec: "heroic_metrics",
			where: map[string]string{"key": "system", "tags": "site=gew,cpu-type=idle"}, from: 1300000000000 - hour, to: 1300000000000,
			wantKind:   ScanRange,
			wantRanges: []RowRange{{"system,cpu-type=idle,site=gew,1297080123392", "system,cpu-type=idle,site=gew,1297080123393"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := LoadSpec(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			p, err := PlanScan(s, KeyQuery{Table: tc.table, Where: tc.where, FromMs: tc.from, ToMs: tc.to})
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != tc.wantKind {
				t.Errorf("kind = %s, want %s", p.Kind, tc.wantKind)
			}
			if len(p.Ranges) != len(tc.wantRanges) {
				t.Fatalf("ranges = %v, want %v", p.Ranges, tc.wantRanges)
			}
			for i := range p.Ranges {
				if p.Ranges[i] != tc.wantRanges[i] {
					t.Errorf("range %d = %v, want %v", i, p.Ranges[i], tc.wantRanges[i])
				}
			}
			if p.Reversed != tc.wantReversed {
				t.Errorf("reversed = %v, want %v", p.Reversed, tc.wantReversed)
			}
			if got := strings.Join(p.Unused, ","); got != tc.wantUnused {
				t.Errorf("unused = %q, want %q", got, tc.wantUnused)
			}
		})
	}
}

func TestPlanScanSaltFansOut(t *testing.T) {
	s, err := LoadSpec("user_events")
	if err != nil {
		t.Fatal(err)
	}
	now := ms(t, "2026-03-01T12:00:00Z")
	p, err := PlanScan(s, KeyQuery{Table: "user_events_by_type", Where: map[string]string{"event_type": "login"}, FromMs: now - 1000, ToMs: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ranges) != 8 {
		t.Fatalf("ranges = %d, want 8, one per salt bucket", len(p.Ranges))
	}
	for b, r := range p.Ranges {
		want := SaltText(b, 8) + "#login#"
		if !strings.HasPrefix(r.Start, want) || !strings.HasPrefix(r.End, want) {
			t.Errorf("range %d = %v, want both bounds under %q", b, r, want)
		}
	}
	// With the salt's field fixed, the bucket is recomputed: one range.
	p, err = PlanScan(s, KeyQuery{Table: "user_events_by_type", Where: map[string]string{"event_type": "login", "user_id": "u1"}, FromMs: now - 1000, ToMs: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ranges) != 1 || !strings.HasPrefix(p.Ranges[0].Start, SaltText(SaltBucket(8, []byte("u1")), 8)+"#login#") {
		t.Errorf("ranges = %v, want one under u1's bucket", p.Ranges)
	}
}

func TestPlanScanErrors(t *testing.T) {
	s, err := LoadSpec("traffic")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    KeyQuery
		want string
	}{
		{"unknown field", KeyQuery{Where: map[string]string{"nope": "1"}}, "not a field"},
		{"not an int", KeyQuery{Where: map[string]string{"highway": "I-35", "milemarker": "x"}}, "int"},
		{"unknown table", KeyQuery{Table: "nope"}, "no table"},
		{"window backwards", KeyQuery{FromMs: 2, ToMs: 1}, "after"},
		{"value holding the delimiter", KeyQuery{Where: map[string]string{"highway": "I#35"}}, "delimiter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PlanScan(s, tc.q)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("PlanScan = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseSince(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1h", time.Hour, true}, {"90m", 90 * time.Minute, true}, {"7d", 7 * 24 * time.Hour, true},
		{"0h", 0, false}, {"-1h", 0, false}, {"1x", 0, false}, {"d", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSince(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("ParseSince(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}
