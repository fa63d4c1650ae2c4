package rowkey

import (
	"errors"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

// TestChooseTablePicksTheServingKey runs the chooser on every named query of
// the built-in specs: each goes to the table whose key serves it.
func TestChooseTablePicksTheServingKey(t *testing.T) {
	want := map[string]map[string]string{
		"vitals": {"sensor_last_hour": "patient_vitals"},
		"traffic": {
			"speed_now": "traffic", "corridor_latest": "traffic", "corridor_speed": "traffic",
			"highway_speed": "traffic", "marker_recent": "traffic",
			"marker_day": "traffic_daily", // one day bucket row instead of one range per direction
		},
		"user_events": {
			"user_logins_last_day": "user_events", "user_events": "user_events", "user_logins": "user_events",
			"user_device_logins": "user_events", // device_id is checked on the column
			"time_in_vr":         "user_events",
			"device_events":      "user_events_by_device",
			"file_launches":      "user_events_by_type", // file_id is checked on the column
			"logins_last_day":    "user_events_by_type",
			"time_in_vr_all":     "user_events_by_type",
		},
		"heroic_metrics": {"series_last_hour": "heroic_metrics"},
	}
	for spec, queries := range want {
		s, err := spectest.Load(spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Queries) != len(queries) {
			t.Errorf("%s declares %d queries, the test expects %d: %v", spec, len(s.Queries), len(queries), s.QueryNames())
		}
		for _, q := range s.Queries {
			t.Run(spec+"/"+q.Name, func(t *testing.T) {
				plan, err := ChooseTable(s, KeyQueryFor(s, &q), NeedOf(&q))
				if err != nil {
					t.Fatal(err)
				}
				if plan.Table != queries[q.Name] {
					t.Errorf("table = %s, want %s (plan %+v)", plan.Table, queries[q.Name], plan)
				}
				if plan.Kind == ScanFull {
					t.Errorf("plan is a full scan: %+v", plan)
				}
			})
		}
	}
}

func TestChooseTableRefusesWhatNoKeyServes(t *testing.T) {
	s, err := spectest.Load("user_events")
	if err != nil {
		t.Fatal(err)
	}
	q := KeyQuery{Where: map[string]string{"file_id": "scene-3"}, FromMs: 1, ToMs: 2}
	_, err = ChooseTable(s, q, Need{})
	var nt *NoTableError
	if !errors.As(err, &nt) {
		t.Fatalf("err = %v, want a *NoTableError", err)
	}
	if want := "{file_id}#{epoch_ms|ms|pad:13}#{user_id}#{event_type}"; nt.Suggest != want {
		t.Errorf("suggested key = %q, want %q", nt.Suggest, want)
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "full scan") {
		t.Errorf("error %q: want one line saying each table would be a full scan", err)
	}
	// With the scan allowed, a table is chosen and the field is checked on
	// its rows (here every event type's window in every salt bucket).
	plan, err := ChooseTable(s, q, Need{AllowScan: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Narrowed) != 0 || strings.Join(plan.Unused, ",") != "file_id" {
		t.Errorf("plan = %+v, want a scan checking file_id on the rows", plan)
	}
}

func TestChooseTableLatestNeedsAReverseTimestamp(t *testing.T) {
	s, err := spectest.Load("user_events")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ChooseTable(s, KeyQuery{Where: map[string]string{"user_id": "u1"}}, Need{Latest: true})
	var nt *NoTableError
	if !errors.As(err, &nt) || !strings.Contains(err.Error(), "reverse timestamp") {
		t.Fatalf("err = %v, want a *NoTableError about the reverse timestamp", err)
	}
	if !strings.Contains(nt.Suggest, "{epoch_ms|reverse}") {
		t.Errorf("suggested key %q, want a reverse timestamp in it", nt.Suggest)
	}
}

func TestSuggestKeySaltsALowCardinalityFirstField(t *testing.T) {
	s, err := spectest.Load("user_events")
	if err != nil {
		t.Fatal(err)
	}
	got := SuggestKey(s, KeyQuery{Where: map[string]string{"event_type": "login"}}, Need{})
	if want := "{salt:8|user_id,event_type}#{event_type}#{epoch_ms|ms|pad:13}#{user_id}"; got != want {
		t.Errorf("SuggestKey = %q, want %q", got, want)
	}
}

func TestSplitAndDecodeKeys(t *testing.T) {
	tests := []struct {
		spec, table, key string
		want             map[string]string // field: decoded value text
		wantPrefix       string            // TimePrefix
	}{
		{"traffic", "traffic", "I-35#0347#N#" + schemas.ReverseTimestamp(1772349313450),
			map[string]string{"highway": "I-35", "milemarker": "347", "direction": "N", "timestamp": "1772349313450"}, "I-35#0347#N#"},
		{"user_events", "user_events_by_type", "3#login#1772352249523#3f2b8c1e-6a4d",
			map[string]string{"event_type": "login", "epoch_ms": "1772352249523", "user_id": "3f2b8c1e-6a4d"}, "3#login#"},
		{"vitals", "patient_vitals", "s-4f1a#2026-03-01T10",
			map[string]string{"sensor_id": "s-4f1a"}, "s-4f1a#"},
	}
	for _, tc := range tests {
		t.Run(tc.spec+"/"+tc.key, func(t *testing.T) {
			s, err := spectest.Load(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			parts, err := DecodeKey(s, tc.table, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for name, p := range parts {
				if v, ok := p.Decode(); ok {
					got[name] = string(schemas.AppendText(nil, v))
				}
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("decoded %v, want exactly %v (time buckets do not decode)", got, tc.want)
			}
			prefix, ok, err := TimePrefix(s, tc.table, tc.key)
			if err != nil || !ok || prefix != tc.wantPrefix {
				t.Errorf("TimePrefix = %q, %v, %v; want %q", prefix, ok, err, tc.wantPrefix)
			}
		})
	}
}

func TestSplitRejectsForeignKeys(t *testing.T) {
	s, err := spectest.Load("traffic")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"I-35", "I-35#347#N#1", "I-35#0347#N#" + schemas.ReverseTimestamp(5) + "x"} {
		if _, err := DecodeKey(s, "traffic", key); err == nil {
			t.Errorf("DecodeKey(%q) succeeded, want an error", key)
		}
	}
}

func TestQuerySpecValidation(t *testing.T) {
	base := `
name: q
event_time: ts
identity: [id]
fields:
  - {name: id, type: string, required: true}
  - {name: v, type: float}
  - {name: kind, type: string, enum: [a, b]}
  - {name: ts, type: timestamp, required: true}
bigtable:
  tables:
    - name: t
      row_key: "{id}#{ts|ms|pad:13}"
      families: [{name: f, columns: [{qualifier: v, value: v}]}]
queries:
`
	tests := []struct {
		name, query, want string
	}{
		{"good", `  - {name: ok, where: [id, kind=a], since: 1h, aggregate: {fn: avg, column: v, group_by: [kind]}}`, ""},
		{"unknown where field", `  - {name: x, where: [nope]}`, "not a declared field"},
		{"bad default", `  - {name: x, where: [ts=soon]}`, "default ts=soon"},
		{"duplicate name", "  - {name: x, where: [id]}\n  - {name: x, where: [id]}", "declared twice"},
		{"duration without interval", `  - {name: x, where: [id], aggregate: {fn: duration}}`, "interval"},
		{"avg of a string", `  - {name: x, where: [id], aggregate: {fn: avg, column: kind}}`, "numeric field"},
		{"unknown fn", `  - {name: x, where: [id], aggregate: {fn: median}}`, "use count"},
		{"latest without a reverse timestamp", `  - {name: x, where: [id], latest: true}`, "reverse timestamp"},
		{"name with a space", `  - {name: "a b", where: [id]}`, "give the query a name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schemas.ParseSpec("q.yaml", []byte(base+tc.query+"\n"))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseAggregate(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"count", "count", true},
		{"duration:5s", "duration:5s", true},
		{"avg:speed_mph", "avg:speed_mph", true},
		{"count:x", "", false},
		{"median:x", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			a, err := schemas.ParseAggregate(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if err == nil && a.String() != tc.want {
				t.Errorf("String() = %q, want %q", a.String(), tc.want)
			}
		})
	}
}

func TestQueryParams(t *testing.T) {
	q := schemas.QuerySpec{Where: []string{"highway", "milemarker=340..350"}}
	got := q.Params()
	want := []schemas.QueryParam{{Field: "highway"}, {Field: "milemarker", Default: "340..350", HasDefault: true}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Params() = %+v, want %+v", got, want)
	}
}
