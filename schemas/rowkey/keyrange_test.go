package rowkey

import (
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

func ms(t *testing.T, s string) int64 {
	t.Helper()
	v, err := timestamps.ParseTimestamp(s)
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
		ranges            map[string]schemas.Range
		from, to          int64
		wantKind          string
		wantRanges        []RowRange
		wantReversed      bool
		wantUnused        string
		wantNarrowed      string
		wantTimeRanged    bool
	}{
		{
			name: "vitals last hour: two hour buckets", spec: "vitals",
			where: map[string]string{"sensor_id": "s1"}, from: now - hour, to: now,
			wantKind: ScanRange, wantTimeRanged: true,
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
			name: "traffic marker and direction newest first: reversed bounds", spec: "traffic",
			where: map[string]string{"highway": "I-35", "milemarker": "347", "direction": "N"}, from: now - hour, to: now,
			wantKind: ScanRange, wantReversed: true, wantNarrowed: "highway,milemarker,direction", wantTimeRanged: true,
			wantRanges: []RowRange{{"I-35#0347#N#" + schemas.ReverseTimestamp(now), PrefixSuccessor("I-35#0347#N#" + schemas.ReverseTimestamp(now-hour))}},
		},
		{
			name: "traffic marker without direction: one reversed range per direction", spec: "traffic",
			where: map[string]string{"highway": "I-35", "milemarker": "347"}, from: now - hour, to: now,
			wantKind: ScanRange, wantReversed: true, wantNarrowed: "highway,milemarker", wantTimeRanged: true,
			wantRanges: []RowRange{
				{"I-35#0347#N#" + schemas.ReverseTimestamp(now), PrefixSuccessor("I-35#0347#N#" + schemas.ReverseTimestamp(now-hour))},
				{"I-35#0347#S#" + schemas.ReverseTimestamp(now), PrefixSuccessor("I-35#0347#S#" + schemas.ReverseTimestamp(now-hour))},
				{"I-35#0347#E#" + schemas.ReverseTimestamp(now), PrefixSuccessor("I-35#0347#E#" + schemas.ReverseTimestamp(now-hour))},
				{"I-35#0347#W#" + schemas.ReverseTimestamp(now), PrefixSuccessor("I-35#0347#W#" + schemas.ReverseTimestamp(now-hour))},
			},
		},
		{
			name: "traffic corridor: a range of padded markers is one row range", spec: "traffic",
			where: map[string]string{"highway": "I-35"}, ranges: map[string]schemas.Range{"milemarker": {Lo: "340", Hi: "350"}}, from: now - hour, to: now,
			wantKind: ScanRange, wantNarrowed: "highway,milemarker",
			wantRanges: []RowRange{{"I-35#0340", "I-35#0350$"}},
		},
		{
			name: "traffic by highway only: prefix, the time cannot narrow", spec: "traffic",
			where: map[string]string{"highway": "I-35"}, from: now - hour, to: now,
			wantKind: ScanPrefix, wantRanges: []RowRange{{"I-35#", "I-35$"}}, wantNarrowed: "highway",
		},
		{
			name: "user events by user in a window: one range per event type", spec: "user_events", table: "user_events",
			where: map[string]string{"user_id": "u1"}, from: now - 24*hour, to: now,
			wantKind: ScanRange, wantNarrowed: "user_id", wantTimeRanged: true,
			wantRanges: []RowRange{
				{"u1#login#1772274000000", "u1#login#1772360400001"},
				{"u1#logout#1772274000000", "u1#logout#1772360400001"},
				{"u1#heartbeat#1772274000000", "u1#heartbeat#1772360400001"},
				{"u1#file-launched#1772274000000", "u1#file-launched#1772360400001"},
				{"u1#file-closed#1772274000000", "u1#file-closed#1772360400001"},
			},
		},
		{
			name: "user events by user without a window: one prefix, no fan-out", spec: "user_events", table: "user_events",
			where:    map[string]string{"user_id": "u1"},
			wantKind: ScanPrefix, wantRanges: []RowRange{{"u1#", "u1$"}}, wantNarrowed: "user_id",
		},
		{
			name: "user events by user and type: epoch range", spec: "user_events",
			where: map[string]string{"user_id": "u1", "event_type": "login"}, from: now - 24*hour, to: now,
			wantKind: ScanRange, wantNarrowed: "user_id,event_type", wantTimeRanged: true,
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
			wantKind: ScanRange, wantTimeRanged: true,
			wantRanges: []RowRange{{"system,cpu-type=idle,site=gew,1297080123392", "system,cpu-type=idle,site=gew,1297080123393"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := spectest.Load(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			p, err := PlanScan(s, KeyQuery{Table: tc.table, Where: tc.where, Ranges: tc.ranges, FromMs: tc.from, ToMs: tc.to})
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
			if tc.wantNarrowed != "" {
				if got := strings.Join(p.Narrowed, ","); got != tc.wantNarrowed {
					t.Errorf("narrowed = %q, want %q", got, tc.wantNarrowed)
				}
			}
			if p.TimeRanged != tc.wantTimeRanged {
				t.Errorf("time ranged = %v, want %v", p.TimeRanged, tc.wantTimeRanged)
			}
		})
	}
}

// rangeSpec has an unpadded integer, a reversed one and a padded one in its
// keys, to show which ranges become key ranges.
const rangeSpec = `
name: ranges
event_time: ts
identity: [site, n]
fields:
  - {name: site, type: string, required: true}
  - {name: n, type: int, required: true, min: 0}
  - {name: ts, type: timestamp, required: true}
bigtable:
  tables:
    - name: plain
      row_key: "{site}#{n}#{ts|ms|pad:13}"
      families: [{name: f, columns: [{qualifier: n, value: n}]}]
    - name: padded
      row_key: "{site}#{n|pad:6}#{ts|ms|pad:13}"
      families: [{name: f, columns: [{qualifier: n, value: n}]}]
    - name: reversed
      row_key: "{site}#{n|reverse}#{ts|ms|pad:13}"
      families: [{name: f, columns: [{qualifier: n, value: n}]}]
`

func TestPlanScanRanges(t *testing.T) {
	s, err := schemas.ParseSpec("ranges.yaml", []byte(rangeSpec))
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]string{"site": "a"}
	tests := []struct {
		name, table string
		r           schemas.Range
		wantRanges  []RowRange
		wantUnused  string
	}{
		{"padded: one range", "padded", schemas.Range{Lo: "9", Hi: "10"}, []RowRange{{"a#000009", "a#000010$"}}, ""},
		{"reversed: bounds swapped", "reversed", schemas.Range{Lo: "9", Hi: "10"}, []RowRange{{"a#" + schemas.ReverseTimestamp(10), "a#" + schemas.ReverseTimestamp(9) + "$"}}, ""},
		{"plain decimal: not a key range, checked on the rows", "plain", schemas.Range{Lo: "9", Hi: "10"}, []RowRange{{"a#", "a$"}}, "n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanScan(s, KeyQuery{Table: tc.table, Where: where, Ranges: map[string]schemas.Range{"n": tc.r}})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Ranges) != len(tc.wantRanges) || p.Ranges[0] != tc.wantRanges[0] {
				t.Errorf("ranges = %v, want %v", p.Ranges, tc.wantRanges)
			}
			if got := strings.Join(p.Unused, ","); got != tc.wantUnused {
				t.Errorf("unused = %q, want %q (stop: %s)", got, tc.wantUnused, p.Stop)
			}
		})
	}
	if _, err := PlanScan(s, KeyQuery{Table: "padded", Where: where, Ranges: map[string]schemas.Range{"n": {Lo: "10", Hi: "9"}}}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("backwards range: err = %v, want it called empty", err)
	}
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		in     string
		want   schemas.Range
		wantOK bool
	}{
		{"340..350", schemas.Range{Lo: "340", Hi: "350"}, true},
		{"2026-03-01T00:00:00Z..2026-03-02T00:00:00Z", schemas.Range{Lo: "2026-03-01T00:00:00Z", Hi: "2026-03-02T00:00:00Z"}, true},
		{"347", schemas.Range{}, false},
		{"..350", schemas.Range{}, false},
		{"340..", schemas.Range{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := schemas.ParseRange(tc.in)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ParseRange(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestPlanScanSaltFansOut(t *testing.T) {
	s, err := spectest.Load("user_events")
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
		want := schemas.SaltText(b, 8) + "#login#"
		if !strings.HasPrefix(r.Start, want) || !strings.HasPrefix(r.End, want) {
			t.Errorf("range %d = %v, want both bounds under %q", b, r, want)
		}
	}
	// With the salt's field fixed, the bucket is recomputed: one range.
	p, err = PlanScan(s, KeyQuery{Table: "user_events_by_type", Where: map[string]string{"event_type": "login", "user_id": "u1"}, FromMs: now - 1000, ToMs: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ranges) != 1 || !strings.HasPrefix(p.Ranges[0].Start, schemas.SaltText(schemas.SaltBucket(8, []byte("u1")), 8)+"#login#") {
		t.Errorf("ranges = %v, want one under u1's bucket", p.Ranges)
	}
	// The bucket holds other users too: user_id is still checked on the rows.
	if strings.Join(p.Unused, ",") != "user_id" {
		t.Errorf("unused = %v, want [user_id]: a salt picks a bucket, not the user's rows", p.Unused)
	}
}

func TestPlanScanErrors(t *testing.T) {
	s, err := spectest.Load("traffic")
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
			got, err := schemas.ParseSince(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("ParseSince(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}
