package schemas

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// ProtoSpec declares the protobuf message a dataset's --format=proto
// payloads carry.
type ProtoSpec struct {
	// Message is the message's full name, e.g. sensorpipe.v1.Reading; it
	// names the message in errors.
	Message string `yaml:"message" jsonschema:"required,example=sensorpipe.v1.Reading"`
	// Fields maps field numbers to the spec's fields.
	Fields []ProtoFieldSpec `yaml:"fields" jsonschema:"required,minItems=1"`
	// Batch, if set, declares the wrapper message a Pub/Sub message
	// carries: its repeated field Number holds the readings, each a
	// Message. A file's line is always one Message.
	Batch *ProtoBatchSpec `yaml:"batch,omitempty"`
}

// ProtoBatchSpec is a message with a repeated field of readings, e.g.
//
//	message Readings { repeated Reading readings = 1; }
type ProtoBatchSpec struct {
	// Message is the wrapper message's full name, e.g. sensorpipe.v1.Readings.
	Message string `yaml:"message" jsonschema:"required,example=sensorpipe.v1.Readings"`
	// Number is the wrapper's repeated field that holds the readings.
	Number int `yaml:"number" jsonschema:"required,minimum=1"`
}

// ProtoFieldSpec carries one spec field in one protobuf field.
type ProtoFieldSpec struct {
	Number int    `yaml:"number" jsonschema:"required,minimum=1,maximum=536870911"`
	Field  string `yaml:"field" jsonschema:"required"`
	// Type is the protobuf scalar type (string, double, int64, bool, ...).
	// A timestamp field is carried as a string (RFC 3339) or an int64
	// (epoch milliseconds), or both as a oneof: two entries for the field.
	Type string `yaml:"type" jsonschema:"required,enum=string,enum=double,enum=float,enum=int32,enum=int64,enum=uint32,enum=uint64,enum=sint32,enum=sint64,enum=fixed32,enum=fixed64,enum=sfixed32,enum=sfixed64,enum=bool"`
	// Optional is proto3's explicit presence (an optional field, or a
	// oneof member): a zero value on the wire is present. Without it a zero
	// value ("" or 0 or false) is absent, as proto3 does not tell them apart.
	Optional bool `yaml:"optional,omitempty"`
}

// ProtoTypes are the protobuf scalar types a declaration may use, with
// their wire types.
var ProtoTypes = map[string]protowire.Type{
	"string": protowire.BytesType,
	"double": protowire.Fixed64Type, "float": protowire.Fixed32Type,
	"int32": protowire.VarintType, "int64": protowire.VarintType,
	"uint32": protowire.VarintType, "uint64": protowire.VarintType,
	"sint32": protowire.VarintType, "sint64": protowire.VarintType,
	"fixed32": protowire.Fixed32Type, "fixed64": protowire.Fixed64Type,
	"sfixed32": protowire.Fixed32Type, "sfixed64": protowire.Fixed64Type,
	"bool": protowire.VarintType,
}

// ProtoTypesFor lists, per spec field type, the protobuf types that carry
// it; the first is the usual one.
var ProtoTypesFor = map[string][]string{
	TypeString:    {"string"},
	TypeTimestamp: {"string", "int64", "sint64", "sfixed64"},
	TypeFloat:     {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64"},
	TypeInt:       {"int64", "int32", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64"},
	TypeBool:      {"bool"},
}

func protoTypeNames() string {
	names := make([]string, 0, len(ProtoTypes))
	for n := range ProtoTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// validateProto checks the proto declaration, when there is one: numbers,
// fields and types. Whether the format can decode the spec at all (nested
// paths, explode, required fields not carried) is NewProtoCodec's check,
// made only for --format=proto.
func (s *Spec) validateProto() error {
	p := s.Proto
	if p == nil {
		return nil
	}
	if p.Message == "" {
		return s.Errorf("proto.message", "missing; name the protobuf message, e.g. sensorpipe.v1.Reading")
	}
	if len(p.Fields) == 0 {
		return s.Errorf("proto.fields", "missing; map each field number to a field, e.g. {number: 1, field: %s, type: string}", s.Identity[0])
	}
	if b := p.Batch; b != nil {
		if b.Message == "" {
			return s.Errorf("proto.batch.message", "missing; name the wrapper message, e.g. sensorpipe.v1.Readings")
		}
		if n := protowire.Number(b.Number); !n.IsValid() || (n >= protowire.FirstReservedNumber && n <= protowire.LastReservedNumber) {
			return s.Errorf("proto.batch.number", "%d; give the number of the wrapper's repeated %s field (1 to %d)", b.Number, p.Message, protowire.MaxValidNumber)
		}
	}
	byNumber := map[int]int{}
	byField := map[string]int{}
	for i, pf := range p.Fields {
		where := fmt.Sprintf("proto.fields[%d]", i)
		n := protowire.Number(pf.Number)
		if !n.IsValid() || (n >= protowire.FirstReservedNumber && n <= protowire.LastReservedNumber) {
			return s.Errorf(where+".number", "%d; use a field number from 1 to %d, outside %d-%d (reserved by protobuf)",
				pf.Number, protowire.MaxValidNumber, protowire.FirstReservedNumber, protowire.LastReservedNumber)
		}
		if j, ok := byNumber[pf.Number]; ok {
			return s.Errorf(where+".number", "%d is also proto.fields[%d]'s; give each protobuf field its own number", pf.Number, j)
		}
		byNumber[pf.Number] = i
		f := s.Field(pf.Field)
		if f == nil {
			return s.Errorf(where+".field", "%q is not a declared field; name one of fields[].name", pf.Field)
		}
		if _, ok := ProtoTypes[pf.Type]; !ok {
			return s.Errorf(where+".type", "unknown protobuf type %q; use one of %s", pf.Type, protoTypeNames())
		}
		ok := ProtoTypesFor[f.Type]
		if len(ok) == 0 {
			return s.Errorf(where+".field", "%s field %q cannot be declared in protobuf yet; drop it from proto.fields, or use --format=json", f.Type, pf.Field)
		}
		if !slices.Contains(ok, pf.Type) {
			return s.Errorf(where+".type", "a protobuf %s (wire type %s) cannot carry %s field %q; use %s", pf.Type, wireName(ProtoTypes[pf.Type]), f.Type, pf.Field, strings.Join(ok, " or "))
		}
		if j, dup := byField[pf.Field]; dup {
			other := p.Fields[j]
			if f.Type != TypeTimestamp || (other.Type == "string") == (pf.Type == "string") {
				return s.Errorf(where+".field", "%q is already carried by proto.fields[%d]; a field has one number, or two only for a timestamp's oneof of a string (RFC 3339) and an integer (epoch ms)", pf.Field, j)
			}
		}
		byField[pf.Field] = i
	}
	return nil
}

func wireName(t protowire.Type) string {
	switch t {
	case protowire.VarintType:
		return "varint"
	case protowire.Fixed32Type:
		return "fixed32"
	case protowire.Fixed64Type:
		return "fixed64"
	default:
		return "length-delimited"
	}
}
