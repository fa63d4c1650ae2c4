package hours

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
)

func TestWindowBounds(t *testing.T) {
	tests := []struct {
		name       string
		ms         int64
		size       time.Duration
		start, end int64
	}{
		{"start of an hour is in that hour", 1772359200000, time.Hour, 1772359200000, 1772362800000},
		{"last millisecond of an hour", 1772362799999, time.Hour, 1772359200000, 1772362800000},
		{"epoch", 0, time.Hour, 0, 3600000},
		{"before the epoch floors", -1, time.Hour, -3600000, 0},
		{"ten-second windows", 12345, 10 * time.Second, 10000, 20000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WindowStart(tt.ms, tt.size); got != tt.start {
				t.Errorf("WindowStart = %d; want %d", got, tt.start)
			}
			if got := WindowEnd(tt.ms, tt.size); got != tt.end {
				t.Errorf("WindowEnd = %d; want %d", got, tt.end)
			}
		})
	}
}

func TestTooLate(t *testing.T) {
	const hour = 1772359200000 // 2026-03-01T10:00Z
	end := int64(hour + 3600000)
	tests := []struct {
		name     string
		event    int64
		now      int64
		lateness time.Duration
		want     bool
	}{
		{"open window", hour + 10, hour + 20, 0, false},
		{"closed window, no lateness", hour + 10, end, 0, true},
		{"within allowed lateness", hour, end + 23*3600000, 24 * time.Hour, false},
		{"one millisecond before the close", hour, end + 24*3600000 - 1, 24 * time.Hour, false},
		{"exactly at the close", hour, end + 24*3600000, 24 * time.Hour, true},
		{"a day and more late", hour, end + 25*3600000, 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TooLate(tt.event, tt.now, time.Hour, tt.lateness); got != tt.want {
				t.Fatalf("TooLate = %v; want %v", got, tt.want)
			}
		})
	}
}

const rollupSpecYAML = `
name: vitals
event_time: timestamp
identity: [sensor_id]
fields:
  - {name: sensor_id, type: string, required: true}
  - {name: timestamp, type: timestamp, required: true}
  - {name: heart_rate, type: float}
  - {name: body_temperature, type: float, required: true}
  - {name: battery_level, type: float, required: true}
  - {name: charging, type: bool}
impute:
  - {field: heart_rate, flag: heart_rate_imputed}
bigtable:
  tables:
    - name: t
      row_key: "{sensor_id}#{timestamp|hour}"
      families:
        - name: v
          columns:
            - {qualifier: heart_rate, value: heart_rate}
bigquery:
  table: readings
  columns:
    - {name: sensor_id, type: STRING, value: sensor_id}
rollup:
  family: hourly
  stats: [heart_rate, body_temperature]
  last: [battery_level]
  count_true: [heart_rate_imputed, charging]
`

// rollupRoller is the test rollup spec, unedited, and its roller.
func rollupRoller(t *testing.T) (*schemas.Spec, *Roller) {
	t.Helper()
	s, err := rollupSpec(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRoller(s)
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

func rollupSpec(t *testing.T, edit func(string) string) (*schemas.Spec, error) {
	t.Helper()
	src := rollupSpecYAML
	if edit != nil {
		src = edit(src)
	}
	return schemas.ParseSpec("test.yaml", []byte(src))
}

func rollupReading(ts string, hr any, temp float64, batt float64, charging any) string {
	return fmt.Sprintf(`{"sensor_id":"s1","timestamp":%q,"heart_rate":%v,"body_temperature":%v,"battery_level":%v,"charging":%v}`, ts, hr, temp, batt, charging)
}

func TestRollupCompute(t *testing.T) {
	s, r := rollupRoller(t)
	const start, end = 1772359200000, 1772362800000
	tests := []struct {
		name  string
		lines []string
		cells string
	}{
		{"imputed values are not counted in the statistics",
			[]string{
				rollupReading("2026-03-01T10:00:00Z", "null", 36.5, 80, "null"),
				rollupReading("2026-03-01T10:10:00Z", 60, 37.5, 79, "true"),
				rollupReading("2026-03-01T10:20:00Z", 90, 36.0, 78, "false"),
				rollupReading("2026-03-01T10:30:00Z", "null", 37.0, 77, "true"),
			},
			"count=4 heart_rate_min=60 heart_rate_max=90 heart_rate_mean=75 body_temperature_min=36 body_temperature_max=37.5 " +
				"body_temperature_mean=36.75 battery_level_last=77 heart_rate_imputed_count=2 charging_count=2"},
		{"a field never observed has no statistics",
			[]string{
				rollupReading("2026-03-01T10:00:00Z", "null", 36.5, 80, "null"),
			},
			"count=1 body_temperature_min=36.5 body_temperature_max=36.5 body_temperature_mean=36.5 battery_level_last=80 " +
				"heart_rate_imputed_count=0 charging_count=0"},
		{"duplicates count once and last is by event time",
			[]string{
				rollupReading("2026-03-01T10:30:00Z", 70, 36.0, 50, "null"),
				rollupReading("2026-03-01T10:00:00Z", 80, 37.0, 60, "null"),
				rollupReading("2026-03-01T10:00:00Z", 80, 37.0, 60, "null"),
			},
			"count=2 heart_rate_min=70 heart_rate_max=80 heart_rate_mean=75 body_temperature_min=36 body_temperature_max=37 " +
				"body_temperature_mean=36.5 battery_level_last=50 heart_rate_imputed_count=0 charging_count=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ru := r.Compute(prepared(t, s, tt.lines...), start, end)
			var got []string
			for _, c := range r.Cells(&ru) {
				if c.Family != "hourly" || c.TsMicros != end*1000 {
					t.Errorf("cell %s:%s@%d; want family hourly at the window end %d", c.Family, c.Qualifier, c.TsMicros, end*1000)
				}
				got = append(got, c.Qualifier+"="+string(c.Value))
			}
			if g := strings.Join(got, " "); g != tt.cells {
				t.Fatalf("cells:\n got %s\nwant %s", g, tt.cells)
			}
			// Adding the readings one at a time, newest first (as a
			// stream's firings may), gives the same rollup.
			recs := prepared(t, s, tt.lines...)
			inc := r.Start(start, end)
			for i := len(recs) - 1; i >= 0; i-- {
				r.Add(&inc, recs[i:i+1])
			}
			if a, b := fmt.Sprint(r.Cells(&inc)), fmt.Sprint(r.Cells(&ru)); a != b {
				t.Fatalf("incremental rollup\n got %s\nwant %s", a, b)
			}
		})
	}
}

func TestRollupBigQuery(t *testing.T) {
	s, r := rollupRoller(t)
	bq := r.BigQuery()
	if bq.Table != "readings_hourly" {
		t.Errorf("table %q; want readings_hourly (the readings table's name + _hourly)", bq.Table)
	}
	if p := bq.TimePartitioning; p == nil || p.Type != "DAY" || p.Field != "window_start" {
		t.Errorf("partitioning %+v; want DAY on window_start", p)
	}
	if fmt.Sprint(bq.Clustering) != "[sensor_id]" {
		t.Errorf("clustering %v; want [sensor_id]", bq.Clustering)
	}
	if fmt.Sprint(bq.PrimaryKey) != "[sensor_id window_start]" || bq.Staleness() != schemas.DefaultMaxStaleness {
		t.Errorf("primary key %v, max_staleness %v; want [sensor_id window_start] and the default", bq.PrimaryKey, bq.Staleness())
	}
	var cols []string
	for _, c := range bq.Columns {
		cols = append(cols, c.Name+":"+c.Type)
	}
	wantCols := "sensor_id:STRING window_start:TIMESTAMP window_end:TIMESTAMP count:INT64 heart_rate_min:FLOAT64 heart_rate_max:FLOAT64 " +
		"heart_rate_mean:FLOAT64 body_temperature_min:FLOAT64 body_temperature_max:FLOAT64 body_temperature_mean:FLOAT64 " +
		"battery_level_last:FLOAT64 heart_rate_imputed_count:INT64 charging_count:INT64 pane_timing:STRING pane_index:INT64 fired_at:TIMESTAMP"
	if g := strings.Join(cols, " "); g != wantCols {
		t.Fatalf("columns:\n got %s\nwant %s", g, wantCols)
	}
	if err := schemas.CheckBigQueryColumns(bq); err != nil {
		t.Fatalf("the rollup table cannot be encoded: %v", err)
	}

	ru := r.Compute(prepared(t, s, rollupReading("2026-03-01T10:00:00Z", 60, 36.5, 80, "null")), 1772359200000, 1772362800000)
	row := r.BQRow(&ru, Pane{Timing: "late", Index: 3}, 1772370000000)
	if len(row.Values) != len(bq.Columns) {
		t.Fatalf("row has %d values for %d columns", len(row.Values), len(bq.Columns))
	}
	var vals []string
	for _, v := range row.Values {
		vals = append(vals, string(schemas.AppendText(nil, v)))
	}
	want := "s1,1772359200000,1772362800000,1,60,60,60,36.5,36.5,36.5,80,0,0,late,3,1772370000000"
	if g := strings.Join(vals, ","); g != want {
		t.Fatalf("row:\n got %s\nwant %s", g, want)
	}
	if row.Seq != (ChangeSeq{Micros: 1772370000000000, Pane: 3}) {
		t.Errorf("sequence %+v; want the firing's time and pane index", row.Seq)
	}
	if !strings.Contains(row.Origin.Raw, "s1") || !strings.Contains(row.Origin.Raw, "2026-03-01T10:00:00Z") {
		t.Errorf("origin %q does not name the sensor and window", row.Origin.Raw)
	}
}

func TestNewRollerErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(string) string
		want string
	}{
		{"no family", func(s string) string { return strings.Replace(s, "family: hourly", "family: \"\"", 1) }, "rollup.family"},
		{"family holds columns", func(s string) string { return strings.Replace(s, "family: hourly", "family: v", 1) }, "rollup.family"},
		{"stats on a string", func(s string) string { return strings.Replace(s, "stats: [heart_rate,", "stats: [sensor_id,", 1) }, "rollup.stats"},
		{"stats on an unknown field", func(s string) string { return strings.Replace(s, "stats: [heart_rate,", "stats: [pulse,", 1) }, "rollup.stats"},
		{"last of an unknown field", func(s string) string { return strings.Replace(s, "last: [battery_level]", "last: [nope]", 1) }, "rollup.last"},
		{"count_true on a float", func(s string) string {
			return strings.Replace(s, "count_true: [heart_rate_imputed, charging]", "count_true: [heart_rate]", 1)
		}, "rollup.count_true"},
		{"stat listed twice", func(s string) string {
			return strings.Replace(s, "stats: [heart_rate, body_temperature]", "stats: [heart_rate, heart_rate]", 1)
		}, "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := rollupSpec(t, tt.edit)
			if err == nil {
				_, err = NewRoller(s)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "test.yaml") {
				t.Fatalf("error %v; want one naming test.yaml and %q", err, tt.want)
			}
		})
	}
	t.Run("no rollup section", func(t *testing.T) {
		s, err := rollupSpec(t, func(s string) string { return s[:strings.Index(s, "rollup:")] })
		if err != nil {
			t.Fatal(err)
		}
		if r, err := NewRoller(s); r != nil || err != nil {
			t.Fatalf("NewRoller = %v, %v; want nil, nil", r, err)
		}
	})
}
