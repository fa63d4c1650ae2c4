package hours

import (
	"errors"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

const okLine = `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`

func TestParseVitalsReasons(t *testing.T) {
	p := codec.NewParser(spectest.Must(t, "vitals"))
	tests := []struct {
		name string
		line string
		want error // nil: valid
	}{
		{"valid", okLine, nil},
		{"heart_rate null is valid", `{"sensor_id":"s","timestamp":"2026-03-01T10:00:00Z","heart_rate":null,"body_temperature":36.8,"spO2":98,"battery_level":87}`, nil},
		{"heart_rate absent is valid", `{"sensor_id":"s","timestamp":"2026-03-01T10:00:00Z","body_temperature":36.8,"spO2":98,"battery_level":87}`, nil},
		{"epoch millis", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, nil},
		{"extra fields ignored", `{"sensor_id":"s","timestamp":1772360130250,"x":[1],"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, nil},
		{"range bounds inclusive", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":300,"body_temperature":25,"spO2":100,"battery_level":0}`, nil},
		{"not json", `hello`, schemas.ErrMalformed},
		{"truncated json", `{"sensor_id":"s"`, schemas.ErrMalformed},
		{"array", `[1,2]`, schemas.ErrMalformed},
		{"string", `"x"`, schemas.ErrMalformed},
		{"null line", `null`, schemas.ErrMalformed},
		{"sensor_id absent", `{"timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrMissingField},
		{"sensor_id null", `{"sensor_id":null,"timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrMissingField},
		{"sensor_id empty", `{"sensor_id":"","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrMissingField},
		{"timestamp absent", `{"sensor_id":"s","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrMissingField},
		{"battery null", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":null}`, schemas.ErrMissingField},
		{"spO2 absent", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"battery_level":9}`, schemas.ErrMissingField},
		{"sensor_id number", `{"sensor_id":7,"timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrInvalidField},
		{"sensor_id with delimiter", `{"sensor_id":"a#b","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrInvalidField},
		{"heart_rate string", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":"72","body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrInvalidField},
		{"temperature bool", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":72,"body_temperature":true,"spO2":98,"battery_level":87}`, schemas.ErrInvalidField},
		{"timestamp words", `{"sensor_id":"s","timestamp":"yesterday","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrBadTimestamp},
		{"timestamp no zone", `{"sensor_id":"s","timestamp":"2026-03-01T10:00:00","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrBadTimestamp},
		{"timestamp fractional millis", `{"sensor_id":"s","timestamp":1772360130250.5,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrBadTimestamp},
		{"timestamp exponent", `{"sensor_id":"s","timestamp":1.7e12,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrBadTimestamp},
		{"timestamp numeric string", `{"sensor_id":"s","timestamp":"1772360130250","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrBadTimestamp},
		{"timestamp bool", `{"sensor_id":"s","timestamp":true,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrBadTimestamp},
		{"heart_rate low", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":19.9,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrOutOfRange},
		{"heart_rate high", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":301,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrOutOfRange},
		{"temperature high", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":72,"body_temperature":45.1,"spO2":98,"battery_level":87}`, schemas.ErrOutOfRange},
		{"spO2 low", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":49,"battery_level":87}`, schemas.ErrOutOfRange},
		{"battery negative", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":-1}`, schemas.ErrOutOfRange},
		{"missing wins over range", `{"timestamp":1772360130250,"heart_rate":700,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrMissingField},
		{"invalid wins over timestamp", `{"sensor_id":"s","timestamp":"x","heart_rate":"1","body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrInvalidField},
		{"timestamp wins over range", `{"sensor_id":"s","timestamp":"x","heart_rate":1,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrBadTimestamp},
		// Every class of bad input ends in a reading or a reason.
		{"UTF-8 byte-order mark", "\ufeff" + okLine, nil},
		{"CRLF line end", okLine + "\r\n", nil},
		{"duplicate key", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":72,"heart_rate":73,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrMalformed},
		{"NaN literal (fastjson reads it as a number)", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":NaN,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrInvalidField},
		{"Infinity literal", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":Infinity,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrMalformed},
		{"1e309 overflows a float64", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":1e309,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrInvalidField},
		{"NaN as a string", `{"sensor_id":"s","timestamp":1772360130250,"heart_rate":"NaN","body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrInvalidField},
		{"sensor_id with a newline", `{"sensor_id":"a\nb","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, nil},
		{"sensor_id in Unicode", `{"sensor_id":"café-☃-日本","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, nil},
		{"sensor_id of 5 KB: the row key is over Bigtable's 4 KB", `{"sensor_id":"` + strings.Repeat("x", 5000) + `","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrInvalidField},
		{"year 1: before 1970", `{"sensor_id":"s","timestamp":"0001-01-01T00:00:00.000Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrOutOfRange},
		{"negative epoch", `{"sensor_id":"s","timestamp":-1000,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrOutOfRange},
		{"1969 with an offset", `{"sensor_id":"s","timestamp":"1969-12-31T23:59:59.999Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrOutOfRange},
		{"epoch zero", `{"sensor_id":"s","timestamp":0,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, nil},
		{"year 9999", `{"sensor_id":"s","timestamp":"9999-12-31T23:59:59.999Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, nil},
		{"past year 9999", `{"sensor_id":"s","timestamp":253402300800000,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`, schemas.ErrBadTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := p.Parse(nil, []byte(tt.line), "f")
			b, _ := NewBuilder(p.Spec())
			if err == nil && len(recs) == 1 {
				err = b.Check(&recs[0])
			}
			if tt.want == nil {
				if err != nil || len(recs) != 1 {
					t.Fatalf("Parse = %d records, %v; want one valid record", len(recs), err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse error = %v; want reason %v", err, tt.want)
			}
			if got := schemas.Reason(err); got != tt.want.Error() {
				t.Fatalf("Reason = %q; want %q", got, tt.want.Error())
			}
		})
	}
}

func TestParseBlankLines(t *testing.T) {
	p := codec.NewParser(spectest.Must(t, "vitals"))
	for _, line := range []string{"", "   ", "\t\r"} {
		recs, err := p.Parse(nil, []byte(line), "f")
		if err != nil || len(recs) != 0 {
			t.Errorf("Parse(%q) = %d records, %v; want none and no error", line, len(recs), err)
		}
	}
}

func TestParseTimestamp(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2026-03-01T10:15:30Z", 1772360130000, true},
		{"2026-03-01T10:15:30.250Z", 1772360130250, true},
		{"2026-03-01T10:15:30.2509999Z", 1772360130250, true},
		{"2026-03-01T12:15:30.25+02:00", 1772360130250, true},
		{"2026-03-01T05:45:30-04:30", 1772360130000, true},
		{"2026-03-01t10:15:30z", 1772360130000, true},
		{"1969-12-31T23:59:59.9995Z", -1, true},
		{"2026-03-01 10:15:30Z", 1772360130000, true}, // RFC 3339 section 5.6 allows a space for the T
		{"2026-03-01T10:15:30", 0, false},
		{"2026-13-01T10:15:30Z", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := timestamps.ParseTimestamp(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseTimestamp(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestParseKeepsSourceAndRaw(t *testing.T) {
	p := codec.NewParser(spectest.Must(t, "vitals"))
	recs, err := p.Parse(nil, []byte(okLine), "gs://b/f.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Raw != okLine || recs[0].Source != "gs://b/f.jsonl" || recs[0].EventMs != 1772360130250 {
		t.Fatalf("record = %+v", recs[0])
	}
}

func TestUTCTimestampFastPathAgreesWithTimeParse(t *testing.T) {
	inputs := []string{
		"2026-03-01T10:15:30Z", "2026-03-01T10:15:30.2Z", "2026-03-01T10:15:30.25Z", "2026-03-01T10:15:30.250Z",
		"2026-03-01T10:15:30.2509Z", "2026-03-01T10:15:30.123456789Z", "2026-03-01t10:15:30z", "0001-01-01T00:00:00Z",
		"9999-12-31T23:59:59.999Z", "1969-12-31T23:59:59.9995Z", "2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z",
		"2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z",
		"2026-01-01T24:00:00Z", "2026-01-01T23:60:00Z", "2026-01-01T23:59:60Z", "2026-01-01T10:15:30.Z",
		"2026-01-01T10:15:30.1234567890Z", "2026-01-01T10:15:30,5Z", "2026-01-01T10:15:3aZ", "+026-01-01T10:15:30Z",
		"2026-03-01T12:15:30+02:00", "2026-03-01 10:15:30Z",
	}
	for _, in := range inputs {
		t.Run(in, func(t *testing.T) {
			want, werr := timestamps.ParseTimestamp(in)
			got, ok := timestamps.ParseUTCTimestamp([]byte(in))
			if ok && (werr != nil || got != want) {
				t.Fatalf("fast path = %d; ParseTimestamp = %d, %v", got, want, werr)
			}
			if strings.HasPrefix(in, "2026-03-01T10:15:30") && strings.HasSuffix(in, "Z") && werr == nil && !ok {
				t.Fatalf("common UTC form %q missed the fast path", in)
			}
		})
	}
}

func FuzzUTCTimestampFastPath(f *testing.F) {
	f.Add("2026-03-01T10:15:30.250Z")
	f.Add("2024-02-29T23:59:59.9Z")
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := timestamps.ParseUTCTimestamp([]byte(in))
		if !ok {
			return
		}
		want, err := timestamps.ParseTimestamp(in)
		if err != nil || got != want {
			t.Fatalf("fast path(%q) = %d; ParseTimestamp = %d, %v", in, got, want, err)
		}
	})
}

func TestEventTimeRange(t *testing.T) {
	spec := func(rng string) (*schemas.Spec, error) {
		y := strings.Replace(vitalsYAML(t), "event_time: timestamp\n", "event_time: timestamp\n"+rng, 1)
		return schemas.ParseSpec("vitals.yaml", []byte(y))
	}
	t.Run("declared range", func(t *testing.T) {
		s, err := spec("event_time_range: {min: \"2020-01-01T00:00:00Z\", max: \"2030-01-01T00:00:00Z\"}\n")
		if err != nil {
			t.Fatal(err)
		}
		p := codec.NewParser(s)
		for ts, ok := range map[string]bool{"2019-12-31T23:59:59.999Z": false, "2020-01-01T00:00:00Z": true, "2030-01-01T00:00:00Z": true, "2030-01-01T00:00:00.001Z": false} {
			line := strings.Replace(okLine, "2026-03-01T10:15:30.250Z", ts, 1)
			_, err := p.Parse(nil, []byte(line), "f")
			if ok != (err == nil) || !ok && !errors.Is(err, schemas.ErrOutOfRange) {
				t.Errorf("%s: err %v; want accepted %v", ts, err, ok)
			}
			if err != nil && !strings.Contains(err.Error(), "event_time_range") {
				t.Errorf("%s: error %q does not name the spec key", ts, err)
			}
		}
	})
	for name, tc := range map[string]struct{ rng, want string }{
		"before 1970":   {"event_time_range: {min: \"1969-01-01T00:00:00Z\"}\n", "cannot be negative"},
		"not RFC 3339":  {"event_time_range: {max: \"tomorrow\"}\n", "event_time_range.max"},
		"min after max": {"event_time_range: {min: \"2030-01-01T00:00:00Z\", max: \"2020-01-01T00:00:00Z\"}\n", "is after max"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := spec(tc.rng); err == nil || !errors.Is(err, schemas.ErrSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want an invalid spec saying %q", err, tc.want)
			}
		})
	}
}

// vitalsYAML is the built-in vitals spec's text.
func vitalsYAML(t *testing.T) string {
	t.Helper()
	b, err := schemas.BuiltinSpecs.ReadFile("specs/vitals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
