package schemas

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/sensorpipe/sensorpipe/schemas/proto/readingpb"
)

// ProtoReadingFields are the JSON names a sensorpipe.v1.Reading carries, in
// the order ProtoReadingToJSON writes them.
var ProtoReadingFields = []string{"sensor_id", "timestamp", "heart_rate", "body_temperature", "spO2", "battery_level"}

// ProtoReadingToJSON decodes a sensorpipe.v1.Reading (schemas/proto/
// reading.proto) and returns the equivalent JSON object, one line, with
// absent fields omitted, so that the JSON validator (Parser) applies to it
// with the same reasons as to the JSON twin of the reading. Bytes that are
// not a Reading give an error wrapping ErrMalformed.
//
// A non-finite number (NaN, ±Inf), which JSON cannot carry, is written as a
// string ("NaN"), which the validator rejects as invalid_field.
func ProtoReadingToJSON(data []byte) ([]byte, error) {
	var r readingpb.Reading
	if err := proto.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: not a sensorpipe.v1.Reading protobuf: %w", ErrMalformed, err)
	}
	return AppendReadingJSON(make([]byte, 0, 160), &r), nil
}

// AppendReadingJSON appends r as a JSON object to b, absent fields omitted.
func AppendReadingJSON(b []byte, r *readingpb.Reading) []byte {
	b = append(b, '{')
	first := true
	key := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, name)
		b = append(b, ':')
	}
	if r.GetSensorId() != "" {
		key("sensor_id")
		b = appendJSONString(b, r.GetSensorId())
	}
	switch ts := r.GetTimestamp().(type) {
	case *readingpb.Reading_Rfc3339:
		key("timestamp")
		b = appendJSONString(b, ts.Rfc3339)
	case *readingpb.Reading_EpochMs:
		key("timestamp")
		b = strconv.AppendInt(b, ts.EpochMs, 10)
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{
		{"heart_rate", r.HeartRate},
		{"body_temperature", r.BodyTemperature},
		{"spO2", r.SpO2},
		{"battery_level", r.BatteryLevel},
	} {
		if f.v == nil {
			continue
		}
		key(f.name)
		b = appendJSONNumber(b, *f.v)
	}
	return append(b, '}')
}

// appendJSONNumber writes v in the shortest form that reads back as v; a
// non-finite v becomes a string.
func appendJSONNumber(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return appendJSONString(b, strconv.FormatFloat(v, 'g', -1, 64))
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendJSONString writes s as a JSON string. Protobuf has already checked
// that s is valid UTF-8.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == '\u2028' || r == '\u2029' {
				b = append(b, `\u202`...)
				b = append(b, hex[r&0xf])
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

// ProtoParser parses --format=proto payloads: each a sensorpipe.v1.Reading,
// rendered by ProtoReadingToJSON and validated by the JSON Parser, so the
// records and dead-letter reasons are those of the JSON twin. A record's Raw
// is the JSON rendering, readable in the dead letter. It is safe for
// concurrent use.
type ProtoParser struct {
	json *Parser
}

// NewProtoParser returns a ProtoParser for spec, or an error when spec
// reads a field a Reading does not carry (Reading is the vitals contract).
func NewProtoParser(spec *Spec) (*ProtoParser, error) {
	if spec.Explode != nil {
		return nil, fmt.Errorf("format proto: spec %s explodes %s, which sensorpipe.v1.Reading does not carry", spec.Name, spec.Explode.Path)
	}
	for _, f := range spec.Fields {
		path := f.Path
		if path == "" {
			path = f.Name
		}
		if !contains(ProtoReadingFields, path) {
			return nil, fmt.Errorf("format proto: spec %s reads field %s, which sensorpipe.v1.Reading does not carry (it has %s): use --format=json",
				spec.Name, path, strings.Join(ProtoReadingFields, ", "))
		}
	}
	return &ProtoParser{json: NewParser(spec)}, nil
}

// Parse appends the record of one protobuf payload to dst. Errors wrap the
// reason sentinels, as Parser.Parse's do.
func (p *ProtoParser) Parse(dst []Record, payload []byte, source string) ([]Record, error) {
	line, err := ProtoReadingToJSON(payload)
	if err != nil {
		return dst, err
	}
	return p.json.Parse(dst, line, source)
}

// ParseString is Parse for a payload held as a string.
func (p *ProtoParser) ParseString(dst []Record, payload, source string) ([]Record, error) {
	return p.Parse(dst, []byte(payload), source)
}
