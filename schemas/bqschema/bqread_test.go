package bqschema

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

func TestReadPlanVitals(t *testing.T) {
	spec, err := spectest.Load("vitals")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewReadPlan(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(p.Columns()), "[sensor_id event_timestamp heart_rate body_temperature spO2 battery_level heart_rate_imputed]"; got != want {
		t.Errorf("Columns = %s, want %s ($reading_id and $ingested_at are not fields)", got, want)
	}
	if p.EventTimeColumn() != "event_timestamp" {
		t.Errorf("EventTimeColumn = %s", p.EventTimeColumn())
	}
	at := time.Date(2026, 3, 1, 10, 15, 0, 250e6, time.UTC)
	for _, tc := range []struct {
		name string
		vals []any
		want string
		bad  bool
	}{
		{"observed", []any{"p-1", at, 72.0, 36.6, 98.0, 80.0, false},
			`{"sensor_id":"p-1","timestamp":"2026-03-01T10:15:00.250Z","heart_rate":72,"body_temperature":36.6,"spO2":98,"battery_level":80}`, false},
		{"imputed value dropped", []any{"p-1", at, 72.0, 36.6, 98.0, 80.0, true},
			`{"sensor_id":"p-1","timestamp":"2026-03-01T10:15:00.250Z","body_temperature":36.6,"spO2":98,"battery_level":80}`, false},
		{"nulls left out", []any{"p-1", at, nil, 36.6, 98.0, 80.0, nil},
			`{"sensor_id":"p-1","timestamp":"2026-03-01T10:15:00.250Z","body_temperature":36.6,"spO2":98,"battery_level":80}`, false},
		{"int64 into a float field", []any{"p-1", at, int64(72), 36.6, 98.0, 80.0, false},
			`{"sensor_id":"p-1","timestamp":"2026-03-01T10:15:00.250Z","heart_rate":72,"body_temperature":36.6,"spO2":98,"battery_level":80}`, false},
		{"text into a float field", []any{"p-1", at, "72.5", 36.6, 98.0, 80.0, "false"},
			`{"sensor_id":"p-1","timestamp":"2026-03-01T10:15:00.250Z","heart_rate":72.5,"body_temperature":36.6,"spO2":98,"battery_level":80}`, false},
		{"no event time", []any{"p-1", nil, 72.0, 36.6, 98.0, 80.0, false}, "", true},
		{"a bool into a float field", []any{"p-1", at, true, 36.6, 98.0, 80.0, false}, "", true},
		{"bad text", []any{"p-1", at, "fast", 36.6, 98.0, 80.0, false}, "", true},
		{"too few values", []any{"p-1", at}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Line(tc.vals)
			if tc.bad {
				if !errors.Is(err, ErrBQRead) {
					t.Fatalf("Line = %q, %v; want an ErrBQRead", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Line = %s, %v\nwant   %s", got, err, tc.want)
			}
		})
	}
}

func TestReadPlanRoundTripsWhatTheSinkWrites(t *testing.T) {
	spec, err := spectest.Load("vitals")
	if err != nil {
		t.Fatal(err)
	}
	c, err := hours.Compile(spec, hours.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewReadPlan(spec)
	if err != nil {
		t.Fatal(err)
	}
	line := `{"sensor_id":"p-7","timestamp":"2026-03-01T10:15:00.001Z","heart_rate":61.25,"body_temperature":37,"spO2":99.5,"battery_level":12}`
	recs, err := c.Decoder().ParseInput(nil, line, "test", codec.Input{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("ParseInput = %v, %v", recs, err)
	}
	row := c.Builder().BQRow(&recs[0], 1)
	byName := map[string]any{}
	for i, col := range spec.BigQuery.Columns {
		if row.Values[i].Null() {
			continue // the flag, set when the hour is imputed
		}
		v, err := BQJSONValue(col, row.Values[i])
		if err != nil {
			t.Fatalf("column %s: %v", col.Name, err)
		}
		byName[col.Name] = v
	}
	var vals []any
	for _, col := range p.Columns() {
		vals = append(vals, byName[col])
	}
	got, err := p.Line(vals)
	if want := codec.CanonicalJSON(spec, &recs[0]); err != nil || got != want {
		t.Errorf("Line = %s, %v\nwant   %s", got, err, want)
	}
}

func TestReadPlanRowRestriction(t *testing.T) {
	spec, err := spectest.Load("vitals")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewReadPlan(spec)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	to := time.Date(2026, 3, 1, 12, 30, 0, 5e6, time.UTC).UnixMilli()
	for _, tc := range []struct {
		name     string
		from, to int64
		want     string
	}{
		{"unbounded", 0, 0, ""},
		{"from", from, 0, "`event_timestamp` >= TIMESTAMP '2026-03-01 10:00:00.000000+00'"},
		{"to", 0, to, "`event_timestamp` < TIMESTAMP '2026-03-01 12:30:00.005000+00'"},
		{"both", from, to, "`event_timestamp` >= TIMESTAMP '2026-03-01 10:00:00.000000+00' AND `event_timestamp` < TIMESTAMP '2026-03-01 12:30:00.005000+00'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.RowRestriction(tc.from, tc.to); got != tc.want {
				t.Errorf("RowRestriction = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewReadPlanRefusesASpecWithoutItsTable(t *testing.T) {
	spec, err := spectest.Load("vitals")
	if err != nil {
		t.Fatal(err)
	}
	noBQ := *spec
	noBQ.BigQuery = nil
	if _, err := NewReadPlan(&noBQ); err == nil {
		t.Error("a spec with no bigquery section was planned")
	}
	noEvent := *spec
	bq := *spec.BigQuery
	bq.Columns = []schemas.BQColumnSpec{{Name: "sensor_id", Type: "STRING", Value: "sensor_id"}}
	noEvent.BigQuery = &bq
	if _, err := NewReadPlan(&noEvent); err == nil {
		t.Error("a table with no event-time column was planned")
	}
	noFlag := *spec
	bq2 := *spec.BigQuery
	bq2.Columns = nil
	for _, c := range spec.BigQuery.Columns {
		if c.Value != "heart_rate_imputed" {
			bq2.Columns = append(bq2.Columns, c)
		}
	}
	noFlag.BigQuery = &bq2
	if _, err := NewReadPlan(&noFlag); err == nil || !strings.Contains(err.Error(), "no column holds its flag heart_rate_imputed") {
		t.Errorf("a table with an imputed field and no flag column: %v; want it refused naming the flag", err)
	}
}

func TestEveryBuiltinSpecWithATableReadsBack(t *testing.T) {
	for _, name := range schemas.BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			spec, err := spectest.Load(name)
			if err != nil {
				t.Fatal(err)
			}
			if spec.BigQuery == nil {
				t.Skip("no bigquery section")
			}
			p, err := NewReadPlan(spec)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Columns()) < 2 || p.EventTimeColumn() == "" {
				t.Errorf("columns %v, event-time column %q", p.Columns(), p.EventTimeColumn())
			}
		})
	}
}
