package hours

import (
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// readingDesc is sensorpipe.v1.Reading (docs/proto/reading.proto) built
// as a descriptor, so protobuf's own encoder and decoder, through
// dynamicpb, are the oracle the spec-driven codec must match byte for byte.
var readingDesc = func() protoreflect.MessageDescriptor {
	opt := func(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, oneof int32, jsonName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{
			Name: proto.String(name), Number: proto.Int32(num), Type: typ.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String(jsonName),
		}
		if oneof >= 0 {
			f.OneofIndex = proto.Int32(oneof)
			if oneof > 0 {
				f.Proto3Optional = proto.Bool(true)
			}
		}
		return f
	}
	dbl := descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
	fd := &descriptorpb.FileDescriptorProto{
		Name: proto.String("reading.proto"), Package: proto.String("sensorpipe.v1"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Reading"),
			Field: []*descriptorpb.FieldDescriptorProto{
				opt("sensor_id", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING, -1, "sensor_id"),
				opt("rfc3339", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING, 0, "rfc3339"),
				opt("epoch_ms", 3, descriptorpb.FieldDescriptorProto_TYPE_INT64, 0, "epochMs"),
				opt("heart_rate", 4, dbl, 1, "heart_rate"),
				opt("body_temperature", 5, dbl, 2, "body_temperature"),
				opt("sp_o2", 6, dbl, 3, "spO2"),
				opt("battery_level", 7, dbl, 4, "battery_level"),
			},
			OneofDecl: []*descriptorpb.OneofDescriptorProto{
				{Name: proto.String("timestamp")}, {Name: proto.String("_heart_rate")},
				{Name: proto.String("_body_temperature")}, {Name: proto.String("_sp_o2")}, {Name: proto.String("_battery_level")},
			},
		}},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		panic(err)
	}
	return f.Messages().Get(0)
}()

// vreading is a vitals reading as the test tables build it; nil is absent.
type vreading struct {
	SensorID                                       string
	RFC3339                                        *string
	EpochMs                                        *int64
	HeartRate, BodyTemperature, SpO2, BatteryLevel *float64
}

func ptr[T any](v T) *T { return &v }

// message is r as a dynamicpb Reading.
func (r *vreading) message() *dynamicpb.Message {
	m := dynamicpb.NewMessage(readingDesc)
	fs := readingDesc.Fields()
	if r.SensorID != "" {
		m.Set(fs.ByNumber(1), protoreflect.ValueOfString(r.SensorID))
	}
	if r.RFC3339 != nil {
		m.Set(fs.ByNumber(2), protoreflect.ValueOfString(*r.RFC3339))
	}
	if r.EpochMs != nil {
		m.Set(fs.ByNumber(3), protoreflect.ValueOfInt64(*r.EpochMs))
	}
	for i, v := range []*float64{r.HeartRate, r.BodyTemperature, r.SpO2, r.BatteryLevel} {
		if v != nil {
			m.Set(fs.ByNumber(protowire.Number(4+i)), protoreflect.ValueOfFloat64(*v))
		}
	}
	return m
}

// protoReading builds a complete valid vitals reading, changed by opts.
func protoReading(t testing.TB, opts ...func(*vreading)) *vreading {
	t.Helper()
	r := &vreading{SensorID: "s-1", RFC3339: ptr("2026-03-01T10:15:30.250Z"),
		HeartRate: ptr(72.0), BodyTemperature: ptr(36.8), SpO2: ptr(98.0), BatteryLevel: ptr(87.0)}
	for _, o := range opts {
		o(r)
	}
	return r
}

func epochMs(ms int64) func(*vreading) {
	return func(r *vreading) { r.RFC3339, r.EpochMs = nil, &ms }
}

func rfc3339(s string) func(*vreading) {
	return func(r *vreading) { r.RFC3339, r.EpochMs = &s, nil }
}

// recordParser is what ParseFn needs of a parser (codec.Decoder).
type recordParser interface {
	Parse(dst []schemas.Record, payload []byte, source string) ([]schemas.Record, error)
}

// marshal encodes r with protobuf's own encoder.
func marshal(t testing.TB, r *vreading) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.message())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func vitalsCodec(t testing.TB) *codec.ProtoCodec {
	t.Helper()
	c, err := codec.NewProtoCodec(spectest.Must(t, "vitals"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProtoCodec: the spec-declared codec renders protobuf's encoding of a
// reading as the reading's JSON twin, and encodes the twin back to the very
// bytes protobuf's encoder writes (the vitals wire format is unchanged).
func TestProtoCodec(t *testing.T) {
	c := vitalsCodec(t)
	tests := []struct {
		name string
		in   *vreading
		want string
	}{
		{"complete, RFC 3339", protoReading(t),
			`{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`},
		{"epoch millis", protoReading(t, epochMs(1772360130250)),
			`{"sensor_id":"s-1","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`},
		{"epoch millis zero is present (oneof)", protoReading(t, epochMs(0)),
			`{"sensor_id":"s-1","timestamp":0,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`},
		{"absent optionals omitted, an optional 0 kept", &vreading{SensorID: "s-1", SpO2: ptr(0.0)},
			`{"sensor_id":"s-1","spO2":0}`},
		{"empty message", &vreading{}, `{}`},
		{"string escapes", protoReading(t, func(r *vreading) { r.SensorID = "a\"b\\c\n\x01é\u2028" }),
			`{"sensor_id":"a\"b\\c\n\u0001é\u2028","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`},
		{"shortest round-trip numbers", protoReading(t, func(r *vreading) {
			r.HeartRate = ptr(math.Nextafter(0.3, 1))
			r.BatteryLevel = ptr(1e21)
		}),
			`{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":0.30000000000000004,"body_temperature":36.8,"spO2":98,"battery_level":1e+21}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire := marshal(t, tt.in)
			got, err := c.AppendJSON(nil, wire)
			if err != nil {
				t.Fatalf("AppendJSON error: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("AppendJSON =\n %s\nwant\n %s", got, tt.want)
			}
			enc, err := c.AppendProto(nil, []byte(tt.want))
			if err != nil {
				t.Fatalf("AppendProto error: %v", err)
			}
			if string(enc) != string(wire) {
				t.Errorf("AppendProto = %x; protobuf encodes %x", enc, wire)
			}
		})
	}
}

// TestProtoCodecGolden: the bytes the generated Go code of reading.proto
// (protoc-gen-go, removed since) wrote for two readings; the codec writes
// the same.
func TestProtoCodecGolden(t *testing.T) {
	c := vitalsCodec(t)
	for _, tt := range []struct{ json, hex string }{
		{`{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			"0a03732d31210000000000005240296666666666664240310000000000805840390000000000c055401218323032362d30332d30315431303a31353a33302e3235305a"},
		{`{"sensor_id":"s-1","timestamp":1772360130250,"heart_rate":null,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			"0a03732d31296666666666664240310000000000805840390000000000c0554018cabd95c7ca33"},
	} {
		got, err := c.AppendProto(nil, []byte(tt.json))
		if err != nil || hex.EncodeToString(got) != tt.hex {
			t.Errorf("AppendProto(%s) = %x, %v; want %s", tt.json, got, err, tt.hex)
		}
	}
}

func TestProtoCodecNonFinite(t *testing.T) {
	wire := marshal(t, protoReading(t, func(r *vreading) {
		r.HeartRate = ptr(math.NaN())
		r.SpO2 = ptr(math.Inf(-1))
	}))
	got, err := vitalsCodec(t).AppendJSON(nil, wire)
	want := `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":"NaN","body_temperature":36.8,"spO2":"-Inf","battery_level":87}`
	if err != nil || string(got) != want {
		t.Errorf("AppendJSON = %s, %v; want %s", got, err, want)
	}
}

// TestProtoCodecWire: what protobuf's decoder does with repeated, unknown
// and mistyped fields, the codec does too.
func TestProtoCodecWire(t *testing.T) {
	c := vitalsCodec(t)
	tag := func(n protowire.Number, wt protowire.Type) []byte { return protowire.AppendTag(nil, n, wt) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	str := func(n protowire.Number, s string) []byte {
		return protowire.AppendString(tag(n, protowire.BytesType), s)
	}
	i64 := func(n protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(n, protowire.VarintType), v)
	}
	for _, tt := range []struct {
		name string
		in   []byte
		want string
	}{
		{"last of a repeated field wins", cat(str(1, "a"), str(1, "b")), `{"sensor_id":"b"}`},
		{"last oneof member wins", cat(str(2, "2026-03-01T10:00:00Z"), i64(3, 5)), `{"timestamp":5}`},
		{"last oneof member wins, the other way", cat(i64(3, 5), str(2, "x")), `{"timestamp":"x"}`},
		{"implicit empty string is absent", str(1, ""), `{}`},
		{"unknown fields skipped", cat(str(99, "x"), i64(100, 1), str(1, "a")), `{"sensor_id":"a"}`},
		{"a mistyped known field is unknown", cat(i64(1, 7), str(4, "x")), `{}`},
		{"negative epoch millis", i64(3, uint64(1<<64-1000)), `{"timestamp":-1000}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.AppendJSON(nil, tt.in)
			if err != nil || string(got) != tt.want {
				t.Errorf("AppendJSON(%x) = %s, %v; want %s", tt.in, got, err, tt.want)
			}
			if err := checkProtoOracle(c, tt.in); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestProtoCodecMalformed(t *testing.T) {
	full := marshal(t, protoReading(t))
	tests := []struct {
		name string
		in   []byte
	}{
		{"truncated", full[:len(full)/2]},
		{"junk appended to a truncated message, as the publisher's bad records", append(append([]byte(nil), full[:len(full)/2]...), `,"oops":}`...)},
		{"a JSON line", []byte(`{"sensor_id":"s-1"}`)},
		{"invalid UTF-8 in a string", []byte{0x0a, 0x02, 0xff, 0xfe}},
		{"field number 0", []byte{0x02, 0x00}},
		{"an end group out of place", []byte{0x0c}},
	}
	c := vitalsCodec(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.AppendJSON(nil, tt.in)
			if !errors.Is(err, schemas.ErrMalformed) {
				t.Fatalf("AppendJSON = %q, %v; want an error wrapping ErrMalformed", got, err)
			}
			if schemas.Reason(err) != "malformed" || !strings.Contains(err.Error(), "sensorpipe.v1.Reading") {
				t.Errorf("error %v: want reason malformed, naming the message", err)
			}
			if perr := proto.Unmarshal(tt.in, dynamicpb.NewMessage(readingDesc)); perr == nil {
				t.Errorf("protobuf decodes %x, the codec does not", tt.in)
			}
		})
	}
}

// checkProtoOracle decodes payload with protobuf's decoder and with the
// codec: both fail, or the codec's JSON is the one the decoded message has.
func checkProtoOracle(c *codec.ProtoCodec, payload []byte) error {
	got, err := c.AppendJSON(nil, payload)
	m := dynamicpb.NewMessage(readingDesc)
	perr := proto.Unmarshal(payload, m)
	if (err == nil) != (perr == nil) {
		return errors.New("codec error " + strconv.Quote(errString(err)) + ", protobuf error " + strconv.Quote(errString(perr)) + " for " + strconv.Quote(string(payload)))
	}
	if perr != nil {
		return nil
	}
	want := []byte{'{'}
	key := func(k string) {
		if len(want) > 1 {
			want = append(want, ',')
		}
		want = codec.AppendJSONString(want, k)
		want = append(want, ':')
	}
	fs := readingDesc.Fields()
	if f := fs.ByNumber(1); m.Has(f) {
		key("sensor_id")
		want = codec.AppendJSONString(want, m.Get(f).String())
	}
	if f := fs.ByNumber(2); m.Has(f) {
		key("timestamp")
		want = codec.AppendJSONString(want, m.Get(f).String())
	}
	if f := fs.ByNumber(3); m.Has(f) {
		key("timestamp")
		want = strconv.AppendInt(want, m.Get(f).Int(), 10)
	}
	for i, name := range []string{"heart_rate", "body_temperature", "spO2", "battery_level"} {
		if f := fs.ByNumber(protowire.Number(4 + i)); m.Has(f) {
			key(name)
			want = codec.AppendJSONNumber(want, m.Get(f).Float())
		}
	}
	want = append(want, '}')
	if string(got) != string(want) {
		return errors.New("codec renders " + string(got) + ", protobuf decodes " + string(want) + " from " + strconv.Quote(string(payload)))
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestProtoFuzzSeeds: the proto fuzz seeds are what their names say, so the
// fuzzer starts from meaningful readings.
func TestProtoFuzzSeeds(t *testing.T) {
	c := vitalsCodec(t)
	p, err := codec.NewProtoParser(spectest.Must(t, "vitals"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		seed string
		want string // reason, or "" for a valid record
	}{
		{"reading-ok", ""},
		{"reading-missing", "missing_field"},
		{"garbage", "malformed"},
		{"truncated", "malformed"},
		{"empty", "missing_field"},
	} {
		t.Run(tt.seed, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fuzz", "FuzzParseProto", tt.seed))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 0 && b[0] == 'g' { // "go test fuzz v1" corpus file
				t.Skipf("seed %s is in the go test fuzz format", tt.seed)
			}
			if err := checkProtoOracle(c, b); err != nil {
				t.Error(err)
			}
			_, err = p.Parse(nil, b, "seed")
			if got := schemas.Reason(err); (err == nil) != (tt.want == "") || (err != nil && got != tt.want) {
				t.Errorf("seed %s: reason %q (%v); want %q", tt.seed, got, err, tt.want)
			}
		})
	}
}

// TestProtoAndJSONGiveTheSameRecords shows a proto reading and its JSON twin
// parse to the same record or fail with the same reason.
func TestProtoAndJSONGiveTheSameRecords(t *testing.T) {
	spec := spectest.Must(t, "vitals")
	jp := codec.NewParser(spec)
	pp, err := codec.NewProtoParser(spec)
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
		{"valid", okLine, marshal(t, protoReading(t)), nil},
		{"epoch millis", `{"sensor_id":"s-1","timestamp":1772360130250,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, epochMs(1772360130250))), nil},
		{"offset and fraction", `{"sensor_id":"s-1","timestamp":"2026-03-01T12:30:00.5+02:00","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, rfc3339("2026-03-01T12:30:00.5+02:00"))), nil},
		{"heart_rate absent (null)", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":null,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, func(r *vreading) { r.HeartRate = nil })), nil},
		{"range bounds inclusive", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":300,"body_temperature":25,"spO2":100,"battery_level":0}`,
			marshal(t, protoReading(t, func(r *vreading) {
				r.HeartRate, r.BodyTemperature, r.SpO2, r.BatteryLevel = ptr(float64(300)), ptr(float64(25)), ptr(float64(100)), ptr(float64(0))
			})), nil},
		{"not decodable", `not json`, []byte{0xff, 0xff, 0xff}, schemas.ErrMalformed},
		{"sensor_id absent", `{"timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, func(r *vreading) { r.SensorID = "" })), schemas.ErrMissingField},
		{"timestamp absent", `{"sensor_id":"s-1","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, func(r *vreading) { r.RFC3339, r.EpochMs = nil, nil })), schemas.ErrMissingField},
		{"battery_level absent", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98}`,
			marshal(t, protoReading(t, func(r *vreading) { r.BatteryLevel = nil })), schemas.ErrMissingField},
		{"empty message", `{}`, []byte{}, schemas.ErrMissingField},
		{"sensor_id with delimiter", `{"sensor_id":"a#b","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, func(r *vreading) { r.SensorID = "a#b" })), schemas.ErrInvalidField},
		{"non-finite heart_rate", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":"NaN","body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, func(r *vreading) { r.HeartRate = ptr(float64(math.NaN())) })), schemas.ErrInvalidField},
		{"timestamp words", `{"sensor_id":"s-1","timestamp":"yesterday","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, rfc3339("yesterday"))), schemas.ErrBadTimestamp},
		{"timestamp without zone", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:00:00","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, rfc3339("2026-03-01T10:00:00"))), schemas.ErrBadTimestamp},
		{"epoch millis beyond year 9999", `{"sensor_id":"s-1","timestamp":253402300800000,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, epochMs(253402300800000))), schemas.ErrBadTimestamp},
		{"body_temperature high", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":99,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, func(r *vreading) { r.BodyTemperature = ptr(float64(99)) })), schemas.ErrOutOfRange},
		{"spO2 high", `{"sensor_id":"s-1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":101,"battery_level":87}`,
			marshal(t, protoReading(t, func(r *vreading) { r.SpO2 = ptr(float64(101)) })), schemas.ErrOutOfRange},
		{"missing wins over range", `{"timestamp":"2026-03-01T10:15:30.250Z","heart_rate":700,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
			marshal(t, protoReading(t, func(r *vreading) { r.SensorID = ""; r.HeartRate = ptr(float64(700)) })), schemas.ErrMissingField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// As ParseFn does: parse, then check each record for the keys.
			parse := func(p recordParser, payload []byte) ([]schemas.Record, error) {
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
			if schemas.Reason(jerr) != schemas.Reason(perr) {
				t.Errorf("reasons differ: json %q (%v), proto %q (%v)", schemas.Reason(jerr), jerr, schemas.Reason(perr), perr)
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

// TestNewProtoParserNeedsADeclaration: only specs that declare a protobuf
// message decode --format=proto, and the error says how to fix it.
func TestNewProtoParserNeedsADeclaration(t *testing.T) {
	for _, name := range schemas.BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			spec := spectest.Must(t, name)
			_, err := codec.NewProtoParser(spec)
			if got, want := err == nil, spec.Proto != nil; got != want {
				t.Fatalf("NewProtoParser(%s) error %v; want accepted only with a proto declaration", name, err)
			}
			if err != nil && (!strings.Contains(err.Error(), "proto") || !strings.Contains(err.Error(), "--format=json")) {
				t.Errorf("error %q does not name the proto section and the alternative", err)
			}
		})
	}
}
