package codec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

func TestMapColumnsRendersTheParsersObject(t *testing.T) {
	spec := spectest.Must(t, "vitals")
	// A BigQuery export's columns: event_timestamp holds the event time,
	// heart_rate_imputed blanks an imputed heart_rate.
	cols := []schemas.Column{
		{Name: "sensor_id", Kind: schemas.ColString, Type: "STRING"},
		{Name: "event_timestamp", Kind: schemas.ColTimestamp, Type: "TIMESTAMP"},
		{Name: "heart_rate", Kind: schemas.ColFloat, Type: "DOUBLE"},
		{Name: "body_temperature", Kind: schemas.ColFloat, Type: "DOUBLE"},
		{Name: "spO2", Kind: schemas.ColDecimal, Type: "DECIMAL(9,2)"},
		{Name: "battery_level", Kind: schemas.ColInt, Type: "INT64"},
		{Name: "heart_rate_imputed", Kind: schemas.ColBool, Type: "BOOLEAN"},
		{Name: "reading_id", Kind: schemas.ColString, Type: "STRING"},
	}
	m, err := MapColumns(spec, "f.parquet", cols)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range m.Read {
		names = append(names, c.Name)
	}
	if got, want := strings.Join(names, ","), "sensor_id,event_timestamp,heart_rate,body_temperature,spO2,battery_level,heart_rate_imputed"; got != want {
		t.Fatalf("read %s, want %s", got, want)
	}
	at := time.Date(2026, 3, 1, 10, 0, 1, 250_000_000, time.UTC).UnixMicro()
	for _, tc := range []struct {
		name    string
		imputed bool
		want    string
	}{
		{"observed", false, `{"sensor_id":"p-1","timestamp":"2026-03-01T10:00:01.25Z","heart_rate":72.5,"body_temperature":36.6,"spO2":98.10,"battery_level":80}`},
		{"imputed", true, `{"sensor_id":"p-1","timestamp":"2026-03-01T10:00:01.25Z","body_temperature":36.6,"spO2":98.10,"battery_level":80}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := []RowCell{{Kind: CellString, Str: "p-1"}, {Kind: CellTime, Int: at}, {Kind: CellFloat, Num: 72.5},
				{Kind: CellFloat, Num: 36.6}, {Kind: CellNumber, Str: "98.10"}, {Kind: CellInt, Int: 80}, {Kind: CellBool, Bool: tc.imputed}}
			got, err := m.AppendJSON(nil, row)
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %s, %v\nwant %s", got, err, tc.want)
			}
			if _, err := NewParser(spec).ParseString(nil, string(got), "f"); err != nil {
				t.Errorf("the parser rejects it: %v", err)
			}
		})
	}
}

func TestMapColumnsRefusesInOneLine(t *testing.T) {
	spec := spectest.Must(t, "vitals")
	base := func(kind schemas.ColumnKind, typ string) []schemas.Column {
		return []schemas.Column{{Name: "sensor_id", Kind: schemas.ColString, Type: "STRING"}, {Name: "timestamp", Kind: kind, Type: typ},
			{Name: "body_temperature", Kind: schemas.ColFloat}, {Name: "spO2", Kind: schemas.ColFloat}, {Name: "battery_level", Kind: schemas.ColFloat}}
	}
	for _, tc := range []struct {
		name string
		cols []schemas.Column
		want string
	}{
		{"a bool timestamp", base(schemas.ColBool, "BOOLEAN"), `column "timestamp" is BOOLEAN, which cannot hold field timestamp (timestamp)`},
		{"a float timestamp", base(schemas.ColFloat, "DOUBLE"), `column "timestamp" is DOUBLE`},
		{"no event time", base(schemas.ColBool, "BOOLEAN")[:1], "no column for required field timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MapColumns(spec, "f.parquet", tc.cols)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line with %q", err, tc.want)
			}
		})
	}
}

func TestCSVTextReadsAsTheFieldsType(t *testing.T) {
	spec := spectest.Must(t, "vitals")
	cols := []schemas.Column{{Name: "sensor_id"}, {Name: "timestamp"}, {Name: "heart_rate"}, {Name: "body_temperature"}, {Name: "spO2"}, {Name: "battery_level"}}
	m, err := MapColumns(spec, "f.csv", cols)
	if err != nil {
		t.Fatal(err)
	}
	text := func(s ...string) []RowCell {
		out := make([]RowCell, len(s))
		for i, v := range s {
			out[i] = RowCell{Kind: CellText, Str: v}
		}
		return out
	}
	for _, tc := range []struct {
		row  []RowCell
		want string
		err  error
	}{
		{text("p-1", "2026-03-01 10:00:01Z", "", "36.6", "98", "80"), `{"sensor_id":"p-1","timestamp":"2026-03-01 10:00:01Z","body_temperature":36.6,"spO2":98,"battery_level":80}`, nil},
		{text("p-1", "1772359201000", "72", "36.6", "98", "80"), `{"sensor_id":"p-1","timestamp":1772359201000,"heart_rate":72,"body_temperature":36.6,"spO2":98,"battery_level":80}`, nil},
		{text("p-1", "2026-03-01T10:00:01Z", "n/a", "36.6", "98", "80"), `{"sensor_id":"p-1","timestamp":"2026-03-01T10:00:01Z","heart_rate":"n/a","body_temperature":36.6,"spO2":98,"battery_level":80}`, schemas.ErrInvalidField},
	} {
		got, _ := m.AppendJSON(nil, tc.row)
		if string(got) != tc.want {
			t.Errorf("got %s\nwant %s", got, tc.want)
		}
		_, err := NewParser(spec).ParseString(nil, string(got), "f")
		if !errors.Is(err, tc.err) && !(err == nil && tc.err == nil) {
			t.Errorf("%s: parse error %v, want %v", got, err, tc.err)
		}
	}
}

func TestWallTimeCellsAcrossDaylightSaving(t *testing.T) {
	spec := yamlSpec(t, `
name: local
event_time: ts
identity: [id]
fields:
  - {name: id, type: string, required: true}
  - {name: ts, type: timestamp, required: true, timezone: Europe/Berlin}
bigtable:
  tables:
    - name: t
      row_key: "{id}#{ts|hour}"
      families: [{name: m}]
`)
	m, err := MapColumns(spec, "f.avro", []schemas.Column{{Name: "id", Kind: schemas.ColString}, {Name: "ts", Kind: schemas.ColLocalTimestamp}})
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Date(2026, 10, 25, 2, 30, 0, 0, time.UTC).UnixMicro()
	if _, err := m.AppendJSON(nil, []RowCell{{Kind: CellString, Str: "a"}, {Kind: CellWallTime, Int: wall}}); !errors.Is(err, schemas.ErrBadTimestamp) || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("got %v, want an ambiguous bad_timestamp", err)
	}
	wall = time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC).UnixMicro()
	got, err := m.AppendJSON(nil, []RowCell{{Kind: CellString, Str: "a"}, {Kind: CellWallTime, Int: wall}})
	if err != nil || string(got) != `{"id":"a","ts":"2026-03-01T10:00:00Z"}` {
		t.Fatalf("got %s, %v", got, err)
	}
}
