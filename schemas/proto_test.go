package schemas

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sensorpipe/sensorpipe/schemas/proto/readingpb"
)

// protoReading builds a complete valid vitals Reading, changed by opts.
func protoReading(opts ...func(*readingpb.Reading)) *readingpb.Reading {
	r := &readingpb.Reading{
		SensorId:        "s-1",
		Timestamp:       &readingpb.Reading_Rfc3339{Rfc3339: "2026-03-01T10:15:30.250Z"},
		HeartRate:       proto.Float64(72),
		BodyTemperature: proto.Float64(36.8),
		SpO2:            proto.Float64(98),
		BatteryLevel:    proto.Float64(87),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func epochMs(ms int64) func(*readingpb.Reading) {
	return func(r *readingpb.Reading) { r.Timestamp = &readingpb.Reading_EpochMs{EpochMs: ms} }
}

func rfc3339(s string) func(*readingpb.Reading) {
	return func(r *readingpb.Reading) { r.Timestamp = &readingpb.Reading_Rfc3339{Rfc3339: s} }
}

// recordParser is what ParseFn needs of a parser (dofns.Decoder).
type recordParser interface {
	Parse(dst []Record, payload []byte, source string) ([]Record, error)
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProtoReadingToJSON(t *testing.T) {
	tests := []struct {
		name string
		in   *readingpb.Reading
		want string
	}{
		{"complete, RFC 3339", protoReading(),
			`{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`},
		{"epoch millis", protoReading(epochMs(1772360130250)),
			`{"sensor_id":"s-1","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`},
		{"absent optionals omitted", &readingpb.Reading{SensorId: "s-1", SpO2: proto.Float64(0)},
			`{"sensor_id":"s-1","spO2":0}`},
		{"empty message", &readingpb.Reading{}, `{}`},
		{"string escapes", protoReading(func(r *readingpb.Reading) { r.SensorId = "a\"b\\c\n\x01é\u2028" }),
			`{"sensor_id":"a\"b\\c\n\u0001é\u2028","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`},
		{"shortest round-trip numbers", protoReading(func(r *readingpb.Reading) {
			r.HeartRate = proto.Float64(math.Nextafter(0.3, 1))
			r.BatteryLevel = proto.Float64(1e21)
		}),
			`{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":0.30000000000000004,"body_temperature":36.8,"spO2":98,"battery_level":1e+21}`},
		{"non-finite as strings", protoReading(func(r *readingpb.Reading) {
			r.HeartRate = proto.Float64(math.NaN())
			r.SpO2 = proto.Float64(math.Inf(-1))
		}),
			`{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":"NaN","body_temperature":36.8,"spO2":"-Inf","battery_level":87}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ProtoReadingToJSON(marshal(t, tt.in))
			if err != nil {
				t.Fatalf("ProtoReadingToJSON error: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("ProtoReadingToJSON =\n %s\nwant\n %s", got, tt.want)
			}
		})
	}
}

func TestProtoReadingToJSONMalformed(t *testing.T) {
	full := marshal(t, protoReading())
	tests := []struct {
		name string
		in   []byte
	}{
		{"truncated", full[:len(full)/2]},
		{"junk appended to a truncated message, as the publisher's bad records", append(append([]byte(nil), full[:len(full)/2]...), `,"oops":}`...)},
		{"a JSON line", []byte(`{"sensor_id":"s-1"}`)},
		{"invalid UTF-8 in a string", []byte{0x0a, 0x02, 0xff, 0xfe}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ProtoReadingToJSON(tt.in)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ProtoReadingToJSON = %q, %v; want an error wrapping ErrMalformed", got, err)
			}
			if Reason(err) != "malformed" {
				t.Errorf("Reason = %q; want malformed", Reason(err))
			}
		})
	}
}

// TestProtoAndJSONGiveTheSameRecords shows a proto reading and its JSON twin
// parse to the same record or fail with the same reason.
func TestProtoAndJSONGiveTheSameRecords(t *testing.T) {
	spec := mustSpec(t, "vitals")
	jp := NewParser(spec)
	pp, err := NewProtoParser(spec)
	if err != nil {
		t.Fatal(err)
	}
	builder, err := NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		json  string
		proto []byte
		want  error // nil: valid
	}{
		{"valid", okLine, marshal(t, protoReading()), nil},
		{"epoch millis", `{"sensor_id":"s-1","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(epochMs(1772360130250))), nil},
		{"offset and fraction", `{"sensor_id":"s-1","timestamp":"2026-03-01T12:30:00.5+02:00","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(rfc3339("2026-03-01T12:30:00.5+02:00"))), nil},
		{"heart_rate absent (null)", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":null,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(func(r *readingpb.Reading) { r.HeartRate = nil })), nil},
		{"range bounds inclusive", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":300,"body_temperature":25,"spO2":100,"battery_level":0}`,
			marshal(t, protoReading(func(r *readingpb.Reading) {
				r.HeartRate, r.BodyTemperature, r.SpO2, r.BatteryLevel = proto.Float64(300), proto.Float64(25), proto.Float64(100), proto.Float64(0)
			})), nil},
		{"not decodable", `not json`, []byte{0xff, 0xff, 0xff}, ErrMalformed},
		{"sensor_id absent", `{"timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(func(r *readingpb.Reading) { r.SensorId = "" })), ErrMissingField},
		{"timestamp absent", `{"sensor_id":"s-1","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(func(r *readingpb.Reading) { r.Timestamp = nil })), ErrMissingField},
		{"battery_level absent", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98}`,
			marshal(t, protoReading(func(r *readingpb.Reading) { r.BatteryLevel = nil })), ErrMissingField},
		{"empty message", `{}`, []byte{}, ErrMissingField},
		{"sensor_id with delimiter", `{"sensor_id":"a#b","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(func(r *readingpb.Reading) { r.SensorId = "a#b" })), ErrInvalidField},
		{"non-finite heart_rate", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":"NaN","body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(func(r *readingpb.Reading) { r.HeartRate = proto.Float64(math.NaN()) })), ErrInvalidField},
		{"timestamp words", `{"sensor_id":"s-1","timestamp":"yesterday","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(rfc3339("yesterday"))), ErrBadTimestamp},
		{"timestamp without zone", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:00:00","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(rfc3339("2026-03-01T10:00:00"))), ErrBadTimestamp},
		{"epoch millis beyond year 9999", `{"sensor_id":"s-1","timestamp":253402300800000,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(epochMs(253402300800000))), ErrBadTimestamp},
		{"body_temperature high", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":99,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(func(r *readingpb.Reading) { r.BodyTemperature = proto.Float64(99) })), ErrOutOfRange},
		{"spO2 high", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":101,"battery_level":87}`,
			marshal(t, protoReading(func(r *readingpb.Reading) { r.SpO2 = proto.Float64(101) })), ErrOutOfRange},
		{"missing wins over range", `{"timestamp":"2026-03-01T10:15:30.250Z","heart_rate":700,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(func(r *readingpb.Reading) { r.SensorId = ""; r.HeartRate = proto.Float64(700) })), ErrMissingField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// As ParseFn does: parse, then check each record for the keys.
			parse := func(p recordParser, payload []byte) ([]Record, error) {
				recs, err := p.Parse(nil, payload, "src")
				for i := range recs {
					if err == nil {
						err = builder.Check(&recs[i])
					}
				}
				return recs, err
			}
			fromJSON, jerr := parse(jp, []byte(tt.json))
			fromProto, perr := parse(pp, tt.proto)
			for _, c := range []struct {
				format string
				err    error
			}{{"json", jerr}, {"proto", perr}} {
				if tt.want == nil && c.err != nil {
					t.Errorf("%s: unexpected error %v", c.format, c.err)
				}
				if tt.want != nil && !errors.Is(c.err, tt.want) {
					t.Errorf("%s: error %v; want reason %v", c.format, c.err, tt.want)
				}
			}
			if Reason(jerr) != Reason(perr) {
				t.Errorf("reasons differ: json %q (%v), proto %q (%v)", Reason(jerr), jerr, Reason(perr), perr)
			}
			if len(fromJSON) != len(fromProto) {
				t.Fatalf("json gave %d records, proto %d", len(fromJSON), len(fromProto))
			}
			for i := range fromJSON {
				j, p := fromJSON[i], fromProto[i]
				if !reflect.DeepEqual(j.Values, p.Values) || j.EventMs != p.EventMs || j.Source != p.Source {
					t.Errorf("record %d differs:\n json  %+v\n proto %+v", i, j, p)
				}
			}
		})
	}
}

func TestNewProtoParserRejectsOtherSpecs(t *testing.T) {
	for _, name := range BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			_, err := NewProtoParser(mustSpec(t, name))
			if got, want := err == nil, name == "vitals"; got != want {
				t.Fatalf("NewProtoParser(%s) error %v; want accepted only for vitals", name, err)
			}
		})
	}
}
