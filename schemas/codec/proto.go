package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sensorpipe/sensorpipe/schemas"
	"google.golang.org/protobuf/encoding/protowire"
)

// The --format=proto input: one protobuf message per payload, declared by
// the spec's proto section (a message name and a map from field numbers to
// the spec's fields), not by generated code. A payload is decoded with
// protowire, the protobuf module's low-level wire reader, rather than with
// generated Go types or dynamicpb: a dataset needs no .proto file, no
// protoc run and no Go package of its own, and the decoder writes the JSON
// twin of the message straight from the wire. The JSON validator (Parser)
// then checks the twin, so a protobuf payload and its JSON twin give the
// same record or the same dead-letter reason.

// protoField is one declared protobuf field, compiled.
type protoField struct {
	num      protowire.Number
	typ      string
	wire     protowire.Type
	slot     int    // index of the spec field in ProtoCodec.keys
	key      string // the JSON twin's key
	explicit bool   // a zero value is present (optional, or a oneof member)
	oneof    bool   // one of two numbers carrying one field
}

// ProtoCodec converts between a spec's protobuf message and its JSON twin.
// It is safe for concurrent use.
type ProtoCodec struct {
	message string
	fields  []protoField // in encoding order
	byNum   map[protowire.Number]*protoField
	keys    []string // the twin's keys, in declaration order
}

// NewProtoCodec compiles spec's proto declaration. It fails (naming the
// YAML path and the fix) when the spec declares none, or reads what a flat
// message cannot carry: nested paths, exploded arrays, required fields
// without a number.
func NewProtoCodec(spec *schemas.Spec) (*ProtoCodec, error) {
	p := spec.Proto
	if p == nil {
		return nil, spec.Errorf("proto", "missing: --format=proto needs the spec to declare its protobuf message (proto: {message: ..., fields: [{number: 1, field: ..., type: ...}]}, see schemas/README.md); add it, or use --format=json")
	}
	if spec.Explode != nil {
		return nil, spec.Errorf("explode", "the spec explodes %s, which a flat protobuf message does not carry: use --format=json", spec.Explode.Path)
	}
	c := &ProtoCodec{message: p.Message, byNum: map[protowire.Number]*protoField{}}
	slots := map[string]int{}
	count := map[string]int{}
	for _, pf := range p.Fields {
		count[pf.Field]++
	}
	for i, pf := range p.Fields {
		f := spec.Field(pf.Field)
		if f.Path != "" && f.Path != f.Name {
			return nil, spec.Errorf(fmt.Sprintf("proto.fields[%d].field", i), "%q is read from the JSON path %s, which a flat protobuf message does not carry: use --format=json", pf.Field, f.Path)
		}
		slot, ok := slots[pf.Field]
		if !ok {
			slot = len(c.keys)
			slots[pf.Field] = slot
			c.keys = append(c.keys, pf.Field)
		}
		c.fields = append(c.fields, protoField{
			num: protowire.Number(pf.Number), typ: pf.Type, wire: schemas.ProtoTypes[pf.Type],
			slot: slot, key: pf.Field, explicit: pf.Optional || count[pf.Field] > 1, oneof: count[pf.Field] > 1,
		})
	}
	for _, f := range spec.Fields {
		if _, carried := slots[f.Name]; f.Required && !carried {
			return nil, spec.Errorf("proto.fields", "required field %q has no protobuf number, so every payload would miss it: add {number: N, field: %s, type: %s}, or use --format=json", f.Name, f.Name, schemas.ProtoTypesFor[f.Type][0])
		}
	}
	// The order protobuf-go's encoder writes: by number, oneof members
	// after the other fields.
	sort.Slice(c.fields, func(i, j int) bool {
		a, b := &c.fields[i], &c.fields[j]
		if a.oneof != b.oneof {
			return b.oneof
		}
		return a.num < b.num
	})
	for i := range c.fields {
		c.byNum[c.fields[i].num] = &c.fields[i]
	}
	return c, nil
}

// Message is the declared message's name.
func (c *ProtoCodec) Message() string { return c.message }

// protoValue is the last value of a field seen on the wire.
type protoValue struct {
	f   *protoField
	v   uint64
	s   []byte
	set bool
}

// AppendJSON decodes msg and appends its JSON twin to dst: one object, the
// declared fields in declaration order, absent ones omitted; of repeated
// or oneof fields the last on the wire wins, unknown fields are skipped,
// as protobuf's own decoder does. A non-finite number (NaN, ±Inf), which
// JSON cannot carry, is written as a string ("NaN"), which the validator
// rejects as invalid_field. Bytes that are not such a message give an
// error wrapping ErrMalformed.
func (c *ProtoCodec) AppendJSON(dst, msg []byte) ([]byte, error) {
	var small [16]protoValue
	vals := small[:0]
	if len(c.keys) <= len(small) {
		vals = small[:len(c.keys)]
	} else {
		vals = make([]protoValue, len(c.keys))
	}
	for b := msg; len(b) > 0; {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return dst, c.malformed(protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			return dst, c.malformed(fmt.Errorf("field number %d is out of range", num))
		}
		b = b[n:]
		f := c.byNum[num]
		if f == nil || f.wire != wt {
			// Unknown, or not of the declared wire type: protobuf keeps
			// such a field among the unknown ones; it carries nothing here.
			n = protowire.ConsumeFieldValue(num, wt, b)
			if n < 0 {
				return dst, c.malformed(protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		val := protoValue{f: f, set: true}
		switch wt {
		case protowire.VarintType:
			val.v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			val.v = uint64(v)
		case protowire.Fixed64Type:
			val.v, n = protowire.ConsumeFixed64(b)
		default:
			val.s, n = protowire.ConsumeBytes(b)
			if n >= 0 && !utf8.Valid(val.s) {
				return dst, c.malformed(fmt.Errorf("field %d (%s) is not valid UTF-8", num, f.key))
			}
		}
		if n < 0 {
			return dst, c.malformed(protowire.ParseError(n))
		}
		b = b[n:]
		vals[f.slot] = val
	}
	dst = append(dst, '{')
	first := true
	for i := range vals {
		v := &vals[i]
		if !v.set || (!v.f.explicit && v.zero()) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = AppendJSONString(dst, v.f.key)
		dst = append(dst, ':')
		dst = v.appendJSON(dst)
	}
	return append(dst, '}'), nil
}

func (c *ProtoCodec) malformed(err error) error {
	return fmt.Errorf("%w: not a %s protobuf: %w", schemas.ErrMalformed, c.message, err)
}

// zero reports whether v is its type's zero value (absent in proto3 without
// explicit presence).
func (v *protoValue) zero() bool {
	switch v.f.wire {
	case protowire.BytesType:
		return len(v.s) == 0
	case protowire.Fixed32Type:
		return uint32(v.v) == 0
	case protowire.VarintType:
		switch v.f.typ {
		case "int32", "uint32", "sint32":
			return uint32(v.v) == 0
		}
	}
	return v.v == 0
}

// appendJSON writes v as JSON, converted as protobuf's decoder converts it.
func (v *protoValue) appendJSON(b []byte) []byte {
	switch v.f.typ {
	case "string":
		return AppendJSONString(b, string(v.s))
	case "double":
		return AppendJSONNumber(b, math.Float64frombits(v.v))
	case "float":
		f := math.Float32frombits(uint32(v.v))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return AppendJSONNumber(b, float64(f))
		}
		return strconv.AppendFloat(b, float64(f), 'g', -1, 32)
	case "int32", "sfixed32":
		return strconv.AppendInt(b, int64(int32(v.v)), 10)
	case "int64", "sfixed64":
		return strconv.AppendInt(b, int64(v.v), 10)
	case "uint32", "fixed32":
		return strconv.AppendUint(b, uint64(uint32(v.v)), 10)
	case "sint32":
		return strconv.AppendInt(b, int64(int32(protowire.DecodeZigZag(v.v&math.MaxUint32))), 10)
	case "sint64":
		return strconv.AppendInt(b, protowire.DecodeZigZag(v.v), 10)
	case "bool":
		return strconv.AppendBool(b, v.v != 0)
	default: // uint64, fixed64
		return strconv.AppendUint(b, v.v, 10)
	}
}

// AppendProto encodes the JSON object obj (a record's JSON twin: the
// spec's fields by name) as the declared message and appends it to dst:
// fields in number order with oneof members last, absent or null ones
// omitted, and zero values of fields without explicit presence omitted,
// byte for byte as protobuf-go's encoder writes them. A timestamp carried by a oneof goes in its string member when the
// JSON holds a string, in its integer member when it holds a number. Keys
// the declaration does not carry are ignored; a value the declared type
// cannot hold is an error.
func (c *ProtoCodec) AppendProto(dst, obj []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return dst, fmt.Errorf("encode %s: %w", c.message, err)
	}
	for i := range c.fields {
		f := &c.fields[i]
		v, ok := m[f.key]
		if !ok || v == nil {
			continue
		}
		if _, isStr := v.(string); isStr != (f.typ == "string") {
			if c.hasOther(f) {
				continue // the oneof's other member carries it
			}
		}
		var err error
		if dst, err = f.appendProto(dst, v); err != nil {
			return dst, fmt.Errorf("encode %s field %d (%s): %w", c.message, f.num, f.key, err)
		}
	}
	return dst, nil
}

// hasOther reports whether another number carries f's field.
func (c *ProtoCodec) hasOther(f *protoField) bool {
	for i := range c.fields {
		if c.fields[i].key == f.key && c.fields[i].num != f.num {
			return true
		}
	}
	return false
}

func (f *protoField) appendProto(b []byte, v any) ([]byte, error) {
	tag := func(b []byte) []byte { return protowire.AppendTag(b, f.num, f.wire) }
	switch f.typ {
	case "string":
		s, ok := v.(string)
		if !ok {
			return b, fmt.Errorf("%v is not a string", v)
		}
		if s == "" && !f.explicit {
			return b, nil
		}
		return protowire.AppendString(tag(b), s), nil
	case "bool":
		t, ok := v.(bool)
		if !ok {
			return b, fmt.Errorf("%v is not a bool", v)
		}
		if !t && !f.explicit {
			return b, nil
		}
		return protowire.AppendVarint(tag(b), protowire.EncodeBool(t)), nil
	}
	num, ok := v.(json.Number)
	if !ok {
		return b, fmt.Errorf("%v is not a number", v)
	}
	switch f.typ {
	case "double", "float":
		x, err := num.Float64()
		if err != nil {
			return b, err
		}
		if x == 0 && !math.Signbit(x) && !f.explicit {
			return b, nil
		}
		if f.typ == "float" {
			return protowire.AppendFixed32(tag(b), math.Float32bits(float32(x))), nil
		}
		return protowire.AppendFixed64(tag(b), math.Float64bits(x)), nil
	}
	var u uint64
	switch f.typ {
	case "uint32", "uint64", "fixed32", "fixed64":
		x, err := strconv.ParseUint(num.String(), 10, 64)
		if err != nil || (strings.HasSuffix(f.typ, "32") && x > math.MaxUint32) {
			return b, fmt.Errorf("%s is not a %s", num, f.typ)
		}
		u = x
	default:
		x, err := strconv.ParseInt(num.String(), 10, 64)
		if err != nil || (strings.HasSuffix(f.typ, "32") && int64(int32(x)) != x) {
			return b, fmt.Errorf("%s is not a %s", num, f.typ)
		}
		switch f.typ {
		case "sint32", "sint64":
			u = protowire.EncodeZigZag(x)
		case "sfixed32":
			u = uint64(uint32(int32(x)))
		default:
			u = uint64(x)
		}
	}
	if u == 0 && !f.explicit {
		return b, nil
	}
	switch f.wire {
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(tag(b), uint32(u)), nil
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(tag(b), u), nil
	}
	return protowire.AppendVarint(tag(b), u), nil
}

// AppendJSONNumber writes v in the shortest form that reads back as v; a
// non-finite v becomes a string.
func AppendJSONNumber(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return AppendJSONString(b, strconv.FormatFloat(v, 'g', -1, 64))
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// AppendJSONString writes s as a JSON string. Protobuf has already checked
// that s is valid UTF-8.
func AppendJSONString(b []byte, s string) []byte {
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

// ProtoParser parses --format=proto payloads: each the spec's declared
// message, rendered as its JSON twin by ProtoCodec.AppendJSON and validated
// by the JSON Parser, so the records and dead-letter reasons are those of
// the JSON twin. A record's Raw is the JSON rendering, readable in the dead
// letter. It is safe for concurrent use.
type ProtoParser struct {
	codec *ProtoCodec
	json  *Parser
	batch *schemas.ProtoBatchSpec
}

// NewProtoParser returns a ProtoParser for spec, or NewProtoCodec's error.
func NewProtoParser(spec *schemas.Spec) (*ProtoParser, error) {
	lo, hi := spec.EventTimeBounds()
	return NewProtoParserLimited(spec, EventTimeLimits{MinMs: lo, MaxMs: hi, Why: "the spec's event_time_range sets them"})
}

// NewProtoParserLimited is NewProtoParser accepting the event times of lim.
func NewProtoParserLimited(spec *schemas.Spec, lim EventTimeLimits) (*ProtoParser, error) {
	c, err := NewProtoCodec(spec)
	if err != nil {
		return nil, err
	}
	return &ProtoParser{codec: c, json: NewParserLimited(spec, lim), batch: spec.Proto.Batch}, nil
}

// Split cuts a Pub/Sub message's data into its readings, copied (see
// Readings).
func (p *ProtoParser) Split(data []byte) ([]string, error) { return splitReadings(p, data) }

// ParseInput is Parse with a message's attributes (see Parser.ParseInput).
func (p *ProtoParser) ParseInput(dst []schemas.Record, payload, source string, in Input) ([]schemas.Record, error) {
	line, err := p.codec.AppendJSON(make([]byte, 0, 160), []byte(payload))
	if err != nil {
		return dst, err
	}
	return p.json.ParseInput(dst, string(line), source, in)
}

// Parse appends the record of one protobuf payload to dst. Errors wrap the
// reason sentinels, as Parser.Parse's do.
func (p *ProtoParser) Parse(dst []schemas.Record, payload []byte, source string) ([]schemas.Record, error) {
	line, err := p.codec.AppendJSON(make([]byte, 0, 160), payload)
	if err != nil {
		return dst, err
	}
	return p.json.Parse(dst, line, source)
}

// ParseString is Parse for a payload held as a string.
func (p *ProtoParser) ParseString(dst []schemas.Record, payload, source string) ([]schemas.Record, error) {
	return p.Parse(dst, []byte(payload), source)
}
