package readpath

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

func loadSpec(t *testing.T, name string) *schemas.Spec {
	t.Helper()
	s, err := schemas.BuiltinSpec(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// trafficCells are two readings at each of two markers, as the traffic
// table holds them.
func trafficCells() []Cell {
	cell := func(key, q, v string, ms int64) Cell {
		return Cell{RowKey: key, Family: "speed", Qualifier: q, TimestampMicros: ms * 1000, Value: v}
	}
	k := func(m, d string, ms int64) string {
		return "I-35#" + m + "#" + d + "#" + schemas.ReverseTimestamp(ms)
	}
	return []Cell{
		cell(k("0345", "N", 1), "speed_mph", "40", 1), cell(k("0345", "N", 1), "vehicle_count", "3", 1),
		cell(k("0345", "S", 2), "speed_mph", "60", 2), cell(k("0345", "S", 2), "vehicle_count", "5", 2),
		cell(k("0346", "N", 3), "speed_mph", "20", 3),
		cell(k("0346", "N", 4), "speed_mph", "30.5", 4), cell(k("0346", "N", 4), "vehicle_count", "9", 4),
	}
}

func TestAggregate(t *testing.T) {
	spec := loadSpec(t, "traffic")
	tests := []struct {
		name string
		agg  schemas.AggregateSpec
		want string // group=value;...
	}{
		{"count: one per speed cell", schemas.AggregateSpec{Fn: schemas.AggCount}, "=4"},
		{"avg", schemas.AggregateSpec{Fn: schemas.AggAvg, Column: "speed_mph"}, "=37.625"},
		{"sum", schemas.AggregateSpec{Fn: schemas.AggSum, Column: "speed_mph"}, "=150.5"},
		{"min", schemas.AggregateSpec{Fn: schemas.AggMin, Column: "speed_mph"}, "=20"},
		{"max of a column some readings lack", schemas.AggregateSpec{Fn: schemas.AggMax, Column: "vehicle_count"}, "=9"},
		{"duration: count x interval", schemas.AggregateSpec{Fn: schemas.AggDuration, Interval: "5s"}, "=20"},
		{"group by a key field", schemas.AggregateSpec{Fn: schemas.AggAvg, Column: "speed_mph", GroupBy: []string{"milemarker"}}, "345=50;346=25.25"},
		{"group by two key fields", schemas.AggregateSpec{Fn: schemas.AggCount, GroupBy: []string{"milemarker", "direction"}}, "345,N=1;345,S=1;346,N=2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := aggregate(spec, "traffic", &tc.agg, trafficCells())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range a.Groups {
				v, _ := g.Value(a)
				got = append(got, strings.Join(g.Key, ",")+"="+trimFloat(v))
			}
			if strings.Join(got, ";") != tc.want {
				t.Errorf("groups = %s, want %s", strings.Join(got, ";"), tc.want)
			}
		})
	}
}

func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func TestAggregateOfNothing(t *testing.T) {
	spec := loadSpec(t, "traffic")
	a, err := aggregate(spec, "traffic", &schemas.AggregateSpec{Fn: schemas.AggAvg, Column: "speed_mph"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Groups) != 1 {
		t.Fatalf("groups = %v, want one empty group", a.Groups)
	}
	if _, ok := a.Groups[0].Value(a); ok {
		t.Errorf("avg of nothing reported a value")
	}
	c, _ := aggregate(spec, "traffic", &schemas.AggregateSpec{Fn: schemas.AggCount}, nil)
	if v, ok := c.Groups[0].Value(c); !ok || v != 0 {
		t.Errorf("count of nothing = %v, %v; want 0", v, ok)
	}
}

func TestCheckerKeepsMatchingRowsAndReadings(t *testing.T) {
	spec := loadSpec(t, "traffic")
	cells := trafficCells()
	tests := []struct {
		name   string
		plan   *rowkey.ScanPlan
		q      Query
		wantTs []int64 // timestamps (ms) of the cells kept
	}{
		{"key field equality", &rowkey.ScanPlan{Table: "traffic", Unused: []string{"direction"}},
			Query{Where: map[string]string{"direction": "S"}}, []int64{2, 2}},
		{"key field range", &rowkey.ScanPlan{Table: "traffic", Unused: []string{"milemarker"}},
			Query{Ranges: map[string]schemas.Range{"milemarker": {Lo: "346", Hi: "400"}}}, []int64{3, 4, 4}},
		{"column per reading: a reading without the column does not match", &rowkey.ScanPlan{Table: "traffic", Unused: []string{"vehicle_count"}},
			Query{Ranges: map[string]schemas.Range{"vehicle_count": {Lo: "4", Hi: "10"}}}, []int64{2, 2, 4, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newChecker(spec, tc.plan, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			byRow := map[string][]Cell{}
			var order []string
			for _, cl := range cells {
				if _, ok := byRow[cl.RowKey]; !ok {
					order = append(order, cl.RowKey)
				}
				byRow[cl.RowKey] = append(byRow[cl.RowKey], cl)
			}
			var got []int64
			for _, k := range order {
				for _, cl := range c.cells(k, byRow[k]) {
					got = append(got, cl.TimestampMicros/1000)
				}
			}
			if fmt.Sprintf("%v", got) != fmt.Sprintf("%v", tc.wantTs) {
				t.Errorf("kept cells at %v, want %v", got, tc.wantTs)
			}
		})
	}
}

func TestWindow(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	april := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		q        Query
		from, to int64
	}{
		{"none", Query{Now: now}, 0, 0},
		{"since", Query{Now: now, Since: time.Hour}, now.UnixMilli() - 3600_000, now.UnixMilli()},
		{"from, to exclusive", Query{Now: now, From: march, To: april}, march.UnixMilli(), april.UnixMilli() - 1},
		{"from to now", Query{Now: now, From: march}, march.UnixMilli(), now.UnixMilli()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if f, to := tc.q.Window(); f != tc.from || to != tc.to {
				t.Errorf("Window() = %d, %d; want %d, %d", f, to, tc.from, tc.to)
			}
		})
	}
}

func TestFromNamed(t *testing.T) {
	spec := loadSpec(t, "traffic")
	q := spec.Query("corridor_speed")
	got, err := FromNamed(spec, q, map[string]string{"highway": "I-35"}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.Where["highway"] != "I-35" || got.Ranges["milemarker"] != (schemas.Range{Lo: "340", Hi: "350"}) || got.Since != time.Hour || got.Aggregate == nil {
		t.Errorf("query = %+v, want highway, the default marker range, since 1h and the aggregate", got)
	}
	over, err := FromNamed(spec, q, map[string]string{"highway": "I-35", "milemarker": "347"}, time.Unix(0, 0))
	if err != nil || over.Where["milemarker"] != "347" || len(over.Ranges) != 0 {
		t.Errorf("override: %+v, %v; want milemarker=347 in place of the default range", over, err)
	}
	if _, err := FromNamed(spec, q, nil, time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), "--param highway") {
		t.Errorf("missing parameter: err %v", err)
	}
}

func TestNormalizeMovesTheEventTimeIntoTheWindow(t *testing.T) {
	spec := loadSpec(t, "vitals")
	q := Query{Where: map[string]string{"sensor_id": "s1"}, Ranges: map[string]schemas.Range{"timestamp": {Lo: "2026-03-01T10:00:00Z", Hi: "2026-03-01T11:30:00Z"}}}
	got, err := Normalize(spec, q)
	if err != nil {
		t.Fatal(err)
	}
	from, to := got.Window()
	if len(got.Ranges) != 0 || got.Where["sensor_id"] != "s1" ||
		fmtMs(from) != "2026-03-01T10:00:00Z" || fmtMs(to) != "2026-03-01T11:30:00Z" {
		t.Errorf("normalized %+v, window %s..%s; want the range as the window, both ends inclusive", got, fmtMs(from), fmtMs(to))
	}
	q.Since = time.Hour
	if _, err := Normalize(spec, q); err == nil || !strings.Contains(err.Error(), "once") {
		t.Errorf("a range and --since: err %v, want a refusal", err)
	}
}
