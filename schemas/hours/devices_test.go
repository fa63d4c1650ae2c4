package hours

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"google.golang.org/protobuf/encoding/protowire"
)

// devicesNow is the run start the BigQuery window is reckoned from.
var devicesNow = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC).UnixMilli()

func vitalsCompiled(t *testing.T, bigquery bool, edit func(*schemas.Spec)) *Compiled {
	t.Helper()
	s, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(s)
	}
	opts := CompileOptions{}
	if bigquery {
		opts.BigQueryAt = devicesNow
	}
	c, err := Compile(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func vitalsAt(ts string) string {
	return `{"sensor_id":"s","timestamp":` + ts + `,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`
}

func TestNumericTimestampsInTheirUnit(t *testing.T) {
	unit := func(u string) func(*schemas.Spec) { return func(s *schemas.Spec) { s.Field("timestamp").Unit = u } }
	mayDiffer := func(s *schemas.Spec) { s.BigQuery.StoresMayDiffer = true }
	tests := []struct {
		name     string
		bigquery bool
		edit     func(*schemas.Spec)
		ts       string
		wantMs   int64
		want     error
		wantText []string
	}{
		{"milliseconds by default", true, nil, "1772360130250", 1772360130250, nil, nil},
		{"seconds read as milliseconds: the hint names unit s", true, nil, "1772360130", 0, schemas.ErrBadTimestamp, []string{"1772360130 is 1970-01-21T12:19:20.13Z as milliseconds", "BigQuery's partitioned table readings", "set `unit: s` on field timestamp"}},
		{"0 is a clock never set", true, nil, "0", 0, schemas.ErrBadTimestamp, []string{"0 is 1970-01-01T00:00:00Z as milliseconds", "check the device's clock"}},
		{"86400 is a clock never set", true, nil, "86400", 0, schemas.ErrBadTimestamp, []string{"86400 is 1970-01-01T00:01:26.4Z as milliseconds", "check the device's clock"}},
		{"unit s", true, unit("s"), "1772360130", 1772360130000, nil, nil},
		{"unit s with a fraction", true, unit("s"), "1772360130.25", 1772360130250, nil, nil},
		{"unit us", true, unit("us"), "1772360130250999", 1772360130250, nil, nil},
		{"unit ns", true, unit("ns"), "1772360130250999999", 1772360130250, nil, nil},
		{"milliseconds sent to unit s: the hint names unit ms", true, unit("s"), "1772360130250", 0, schemas.ErrBadTimestamp, []string{"set `unit: ms`"}},
		{"a negative number is before 1970 in any unit: out_of_range", true, nil, "-1000", 0, schemas.ErrOutOfRange, nil},
		{"an RFC 3339 time outside BigQuery's window: out_of_range naming it", true, nil, `"2001-01-01T00:00:00Z"`, 0, schemas.ErrOutOfRange, []string{"BigQuery's partitioned table readings", "stores_may_differ"}},
		{"stores_may_differ: BigQuery's window does not narrow the range", true, mayDiffer, "1772360130", 1772360130, nil, nil},
		{"no BigQuery: the spec's range alone", false, nil, "1772360130", 1772360130, nil, nil},
		{"a spec range: seconds hinted", false, func(s *schemas.Spec) { s.EventTimeRange = &schemas.TimeRangeSpec{Min: "2000-01-01T00:00:00Z"} }, "1772360130", 0, schemas.ErrBadTimestamp, []string{"the spec's event_time_range", "set `unit: s`"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := vitalsCompiled(t, tt.bigquery, tt.edit)
			recs, err := c.Decoder().ParseString(nil, vitalsAt(tt.ts), "f")
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("err = %v; want %v", err, tt.want)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("reason %q does not say %q", err, w)
				}
			}
			if tt.want == nil && (len(recs) != 1 || recs[0].EventMs != tt.wantMs) {
				t.Errorf("records %+v; want one at %d", recs, tt.wantMs)
			}
		})
	}
}

func TestUnitOnlyOnTimestamps(t *testing.T) {
	s, _ := schemas.BuiltinSpec("vitals")
	s.Field("heart_rate").Unit = "s"
	if _, err := Compile(s, CompileOptions{}); err == nil || !strings.Contains(err.Error(), "fields[2].unit") {
		t.Errorf("unit on a float: %v", err)
	}
	s, _ = schemas.BuiltinSpec("vitals")
	s.Field("timestamp").Unit = "minutes"
	if _, err := Compile(s, CompileOptions{}); err == nil || !strings.Contains(err.Error(), "use ms (the default), s, us or ns") {
		t.Errorf("unknown unit: %v", err)
	}
}

func TestAttributesFillFields(t *testing.T) {
	withSite := func(wins bool) func(*schemas.Spec) {
		return func(s *schemas.Spec) {
			s.Fields = append(s.Fields, schemas.FieldSpec{Name: "site", Type: schemas.TypeString, Attribute: "site", AttributeWins: wins}, schemas.FieldSpec{Name: "floor", Type: schemas.TypeInt, Attribute: "floor"})
		}
	}
	tests := []struct {
		name      string
		wins      bool
		payload   string
		attrs     map[string]string
		wantSite  string
		wantFloor any
		want      error
	}{
		{"from the attribute", false, vitalsAt("1772360130250"), map[string]string{"site": "ward-3", "floor": "2"}, "ward-3", int64(2), nil},
		{"the payload's value wins", false, strings.Replace(vitalsAt("1772360130250"), "{", `{"site":"ward-9",`, 1), map[string]string{"site": "ward-3"}, "ward-9", nil, nil},
		{"attribute_wins", true, strings.Replace(vitalsAt("1772360130250"), "{", `{"site":"ward-9",`, 1), map[string]string{"site": "ward-3"}, "ward-3", nil, nil},
		{"no attribute: absent", false, vitalsAt("1772360130250"), nil, "", nil, nil},
		{"a non-numeric attribute for an int field is invalid", false, vitalsAt("1772360130250"), map[string]string{"floor": "two"}, "", nil, schemas.ErrInvalidField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := vitalsCompiled(t, false, withSite(tt.wins))
			recs, err := c.Decoder().ParseInput(nil, tt.payload, "sub", codec.Input{Attributes: tt.attrs})
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("err = %v; want %v", err, tt.want)
			}
			if tt.want != nil {
				return
			}
			site := recs[0].Values[c.FieldIndex("site")]
			floor := recs[0].Values[c.FieldIndex("floor")]
			if site.Str != tt.wantSite {
				t.Errorf("site = %q; want %q", site.Str, tt.wantSite)
			}
			if tt.wantFloor != nil && (floor.Kind != schemas.KindInt || floor.Int != tt.wantFloor) {
				t.Errorf("floor = %+v; want %v", floor, tt.wantFloor)
			}
		})
	}
}

func TestUnknownFields(t *testing.T) {
	payload := strings.Replace(vitalsAt("1772360130250"), "{", `{"firmware_version":"2.1","rssi":-70,`, 1)
	for _, tt := range []struct {
		mode    string
		want    error
		counted []string
	}{
		{"", nil, []string{"firmware_version", "rssi"}},
		{schemas.UnknownCount, nil, []string{"firmware_version", "rssi"}},
		{schemas.UnknownIgnore, nil, nil},
		{schemas.UnknownReject, schemas.ErrUnknownField, nil},
	} {
		t.Run("unknown_fields="+tt.mode, func(t *testing.T) {
			c := vitalsCompiled(t, false, func(s *schemas.Spec) { s.UnknownFields = tt.mode })
			var got []string
			_, err := c.Decoder().ParseInput(nil, payload, "f", codec.Input{Unknown: func(k string) { got = append(got, k) }})
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("err = %v; want %v", err, tt.want)
			}
			if !reflect.DeepEqual(got, tt.counted) {
				t.Errorf("counted %v; want %v", got, tt.counted)
			}
		})
	}
	s, _ := schemas.BuiltinSpec("vitals")
	s.UnknownFields = "drop"
	if _, err := Compile(s, CompileOptions{}); err == nil || !strings.Contains(err.Error(), "unknown_fields") {
		t.Errorf("unknown_fields: drop: %v", err)
	}
}

func TestSplitMessages(t *testing.T) {
	a, b := vitalsAt("1772360130250"), vitalsAt("1772360190250")
	tests := []struct {
		name string
		data string
		want []string
	}{
		{"one reading, unchanged", a, []string{a}},
		{"one reading with a newline, unchanged", a + "\n", []string{a + "\n"}},
		{"NDJSON", a + "\n" + b + "\r\n\n", []string{a, b}},
		{"a JSON array", "[" + a + " , " + b + "]", []string{a, b}},
		{"an empty array", "[]", []string{}},
		{"one object over several lines", "{\n\"x\": 1\n}", []string{"{\n\"x\": 1\n}"}},
		{"a broken array stays whole", "[" + a + ",", []string{"[" + a + ","}},
		{"a bad line beside good ones", a + "\nnot json\n" + b, []string{a, "not json", b}},
		{"blank", " \n ", nil},
	}
	c := vitalsCompiled(t, false, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Decoder().Split([]byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestProtoBatchSplit(t *testing.T) {
	s, _ := schemas.BuiltinSpec("vitals")
	c, err := Compile(s, CompileOptions{Format: "proto"})
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := codec.NewProtoCodec(s)
	var readings [][]byte
	var batch []byte
	for _, ts := range []string{"1772360130250", "1772360190250"} {
		r, err := pc.AppendProto(nil, []byte(vitalsAt(ts)))
		if err != nil {
			t.Fatal(err)
		}
		readings = append(readings, r)
		batch = protowire.AppendTag(batch, 1, protowire.BytesType)
		batch = protowire.AppendBytes(batch, r)
	}
	batch = protowire.AppendTag(batch, 9, protowire.VarintType) // an unknown field is skipped
	batch = protowire.AppendVarint(batch, 7)
	parts, err := c.Decoder().Split(batch)
	if err != nil || len(parts) != 2 || parts[0] != string(readings[0]) || parts[1] != string(readings[1]) {
		t.Fatalf("Split = %d parts, %v; want the two readings", len(parts), err)
	}
	for i, p := range parts {
		recs, err := c.Decoder().ParseInput(nil, p, "sub", codec.Input{})
		if err != nil || len(recs) != 1 {
			t.Fatalf("reading %d: %v", i, err)
		}
	}
	if _, err := c.Decoder().Split([]byte{0x0a, 0x10, 1}); !errors.Is(err, schemas.ErrMalformed) {
		t.Errorf("a truncated batch: %v; want malformed", err)
	}
}

func TestColumnTypesMustFit(t *testing.T) {
	tests := []struct {
		name string
		edit func(*schemas.Spec)
		want []string
	}{
		{"float into INT64", func(s *schemas.Spec) { s.BigQuery.Columns[2].Type = "INT64" },
			[]string{"bigquery.columns[2].type", "column heart_rate is INT64 but its value heart_rate is a float", "make the column type FLOAT64 or STRING", "field type: int"}},
		{"string into FLOAT64", func(s *schemas.Spec) { s.BigQuery.Columns[0].Type = "FLOAT64" },
			[]string{"bigquery.columns[0].type", "column sensor_id is FLOAT64 but its value sensor_id is a string"}},
		{"float into an int64be cell", func(s *schemas.Spec) { s.Bigtable.Tables[0].Families[0].Columns[0].Encoding = "int64be" },
			[]string{"bigtable.tables[0].families[0].columns[0].encoding", "field heart_rate is a float", "drop encoding: int64be"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := schemas.BuiltinSpec("vitals")
			tt.edit(s)
			_, err := Compile(s, CompileOptions{})
			if !errors.Is(err, schemas.ErrSpec) {
				t.Fatalf("err = %v; want a spec error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
	for _, name := range schemas.BuiltinSpecNames() {
		if _, err := schemas.BuiltinSpec(name); err != nil {
			t.Errorf("built-in spec %s: %v", name, err)
		}
	}
}

// TestDevicesGuideSpec compiles the example spec of docs/guide/devices.md,
// for json and proto, with and without BigQuery.
func TestDevicesGuideSpec(t *testing.T) {
	b, err := os.ReadFile("../../docs/guide/devices.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/guide/devices.md has no yaml block")
	}
	s, err := schemas.ParseSpec("devices.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []CompileOptions{{Format: "json"}, {Format: "proto", BigQueryAt: devicesNow}} {
		c, err := Compile(s, opts)
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		if _, err := c.Decoder().Split([]byte("x")); err != nil && opts.Format == "json" {
			t.Error(err)
		}
	}
	c := MustCompile(s, CompileOptions{})
	recs, err := c.Decoder().ParseInput(nil, `{"sensor_id":"a","timestamp":1772360130,"heart_rate":70,"firmware":"old"}`, "m", codec.Input{Attributes: map[string]string{"site": "w3", "firmware": "2.1"}})
	if err != nil || len(recs) != 1 {
		t.Fatalf("%v %v", recs, err)
	}
	if got := recs[0].Values[c.FieldIndex("firmware")].Str; got != "2.1" || recs[0].EventMs != 1772360130000 {
		t.Errorf("firmware %q at %d; want the attribute's 2.1 at 1772360130000", got, recs[0].EventMs)
	}
}
