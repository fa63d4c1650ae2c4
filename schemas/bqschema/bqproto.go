// Package bqschema is the BigQuery side of a spec: dataset and table names, and the rows of its tables for the Storage Write API and for insertAll.
package bqschema

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// BQRowMessageName is the name of the protobuf message that carries one
// BigQuery row to the Storage Write API.
const BQRowMessageName = "sensorpipe_bq_row"

// ErrBQValue marks a value that the column it is bound to cannot hold (for
// example a string bound to a FLOAT64 column). The spec allows such a
// binding, so it is reported per row rather than at launch.
var ErrBQValue = errors.New("value does not fit the bigquery column")

// BQEncoder encodes BigQuery rows as protobuf messages of the descriptor
// derived from a spec's BigQuery columns: field i+1 carries column i, with
// proto2 semantics (optional, or required for REQUIRED columns). It is
// built once per spec and safe for concurrent use.
//
// Type mapping: STRING → string, BYTES → bytes, INT64 → int64, FLOAT64 →
// double, BOOL → bool, TIMESTAMP → int64 microseconds since the epoch.
type BQEncoder struct {
	cols []bqCol
	desc *descriptorpb.DescriptorProto
	// cdc is desc with the change data capture pseudo-columns.
	cdc             *descriptorpb.DescriptorProto
	typeTag, seqTag uint64
}

// bqCol is one column's compiled encoding.
type bqCol struct {
	name string
	typ  string
	tag  uint64 // protowire tag: field number and wire type
}

// NewBQEncoder compiles the encoder of bq's columns.
func NewBQEncoder(bq *schemas.BigQuerySpec) (*BQEncoder, error) {
	if err := schemas.CheckBigQueryColumns(bq); err != nil {
		return nil, err
	}
	e := &BQEncoder{
		cols: make([]bqCol, len(bq.Columns)),
		desc: &descriptorpb.DescriptorProto{Name: proto.String(BQRowMessageName)},
	}
	for i, c := range bq.Columns {
		num := protowire.Number(i + 1)
		var (
			typ  descriptorpb.FieldDescriptorProto_Type
			wire protowire.Type
		)
		switch c.Type {
		case "STRING":
			typ, wire = descriptorpb.FieldDescriptorProto_TYPE_STRING, protowire.BytesType
		case "BYTES":
			typ, wire = descriptorpb.FieldDescriptorProto_TYPE_BYTES, protowire.BytesType
		case "INT64", "TIMESTAMP":
			typ, wire = descriptorpb.FieldDescriptorProto_TYPE_INT64, protowire.VarintType
		case "FLOAT64":
			typ, wire = descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, protowire.Fixed64Type
		case "BOOL":
			typ, wire = descriptorpb.FieldDescriptorProto_TYPE_BOOL, protowire.VarintType
		default:
			return nil, fmt.Errorf("bigquery column %s: unsupported type %q; use STRING, FLOAT64, INT64, BOOL, TIMESTAMP or BYTES", c.Name, c.Type)
		}
		label := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
		if c.Mode == "REQUIRED" {
			label = descriptorpb.FieldDescriptorProto_LABEL_REQUIRED
		}
		e.desc.Field = append(e.desc.Field, &descriptorpb.FieldDescriptorProto{
			Name:   proto.String(c.Name),
			Number: proto.Int32(int32(num)),
			Label:  label.Enum(),
			Type:   typ.Enum(),
		})
		e.cols[i] = bqCol{name: c.Name, typ: c.Type, tag: protowire.EncodeTag(num, wire)}
	}
	// The pseudo-columns follow the columns: field numbers len+1, len+2.
	e.cdc = proto.CloneOf(e.desc)
	typeNum, seqNum := protowire.Number(len(bq.Columns)+1), protowire.Number(len(bq.Columns)+2)
	for _, f := range []struct {
		name string
		num  protowire.Number
	}{{ChangeTypeColumn, typeNum}, {ChangeSequenceColumn, seqNum}} {
		e.cdc.Field = append(e.cdc.Field, &descriptorpb.FieldDescriptorProto{
			Name:   proto.String(f.name),
			Number: proto.Int32(int32(f.num)),
			Label:  descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:   descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
		})
	}
	e.typeTag = protowire.EncodeTag(typeNum, protowire.BytesType)
	e.seqTag = protowire.EncodeTag(seqNum, protowire.BytesType)
	return e, nil
}

// BigQuery's change data capture pseudo-columns and change types
// (https://cloud.google.com/bigquery/docs/change-data-capture).
const (
	ChangeTypeColumn     = "_CHANGE_TYPE"
	ChangeSequenceColumn = "_CHANGE_SEQUENCE_NUMBER"
	ChangeUpsert         = "UPSERT"
	ChangeDelete         = "DELETE"
)

// ChangeDescriptor is Descriptor with the pseudo-columns _CHANGE_TYPE and
// _CHANGE_SEQUENCE_NUMBER after the columns: the writer schema of a change
// data capture (upsert) stream. The caller must not modify it.
func (e *BQEncoder) ChangeDescriptor() *descriptorpb.DescriptorProto { return e.cdc }

// AppendChange appends the pseudo-columns of a row of ChangeDescriptor's
// message (change type typ, sequence number seq) to dst, an encoded row.
func (e *BQEncoder) AppendChange(dst []byte, typ string, seq hours.ChangeSeq) []byte {
	dst = protowire.AppendVarint(dst, e.typeTag)
	dst = protowire.AppendString(dst, typ)
	dst = protowire.AppendVarint(dst, e.seqTag)
	var buf [40]byte
	s := seq.Append(buf[:0])
	dst = protowire.AppendVarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Descriptor returns the row message's descriptor, self-contained (no
// imports), as an AppendRows request's ProtoSchema takes it. The caller must
// not modify it; clone it first.
func (e *BQEncoder) Descriptor() *descriptorpb.DescriptorProto { return e.desc }

// NumColumns is the number of values Append expects.
func (e *BQEncoder) NumColumns() int { return len(e.cols) }

// Append appends the wire encoding of the row vals (aligned to the spec's
// BigQuery columns, as BQRow.Values is) to dst. Null values are left out,
// REQUIRED or not: BigQuery itself rejects a row that lacks a REQUIRED
// column, with its own message. A value the column cannot hold is an error
// wrapping ErrBQValue, and dst is returned unchanged.
func (e *BQEncoder) Append(dst []byte, vals []schemas.Value) ([]byte, error) {
	if len(vals) != len(e.cols) {
		return dst, fmt.Errorf("%w: row has %d values for %d columns", ErrBQValue, len(vals), len(e.cols))
	}
	start := len(dst)
	for i := range vals {
		v := &vals[i]
		if v.Kind == schemas.KindNull {
			continue
		}
		c := &e.cols[i]
		switch c.typ {
		case "STRING", "BYTES":
			switch v.Kind {
			case schemas.KindString, schemas.KindBytes:
				dst = protowire.AppendVarint(dst, c.tag)
				dst = protowire.AppendString(dst, v.Str)
				continue
			}
			if c.typ == "STRING" && v.Kind != schemas.KindTags {
				dst = protowire.AppendVarint(dst, c.tag)
				dst = protowire.AppendBytes(dst, schemas.AppendText(nil, *v))
				continue
			}
		case "FLOAT64":
			switch v.Kind {
			case schemas.KindFloat:
				dst = protowire.AppendVarint(dst, c.tag)
				dst = protowire.AppendFixed64(dst, math.Float64bits(v.Num))
				continue
			case schemas.KindInt:
				dst = protowire.AppendVarint(dst, c.tag)
				dst = protowire.AppendFixed64(dst, math.Float64bits(float64(v.Int)))
				continue
			}
		case "INT64":
			switch v.Kind {
			case schemas.KindInt, schemas.KindTime:
				dst = protowire.AppendVarint(dst, c.tag)
				dst = protowire.AppendVarint(dst, uint64(v.Int))
				continue
			case schemas.KindFloat:
				if v.Num == math.Trunc(v.Num) && math.Abs(v.Num) < 1<<63 {
					dst = protowire.AppendVarint(dst, c.tag)
					dst = protowire.AppendVarint(dst, uint64(int64(v.Num)))
					continue
				}
			}
		case "BOOL":
			if v.Kind == schemas.KindBool {
				dst = protowire.AppendVarint(dst, c.tag)
				dst = protowire.AppendVarint(dst, protowire.EncodeBool(v.Bool))
				continue
			}
		case "TIMESTAMP":
			if v.Kind == schemas.KindTime {
				dst = protowire.AppendVarint(dst, c.tag)
				dst = protowire.AppendVarint(dst, uint64(TimestampMicros(v.Int)))
				continue
			}
		}
		return dst[:start], fmt.Errorf("%w: column %s (%s) cannot hold %s value %s", ErrBQValue, c.name, c.typ, kindName(v.Kind), strconv.Quote(string(schemas.AppendText(nil, *v))))
	}
	return dst, nil
}

// kindNames names the value kinds for messages, as the spec's types do.
var kindNames = map[schemas.Kind]string{schemas.KindString: "string", schemas.KindFloat: "float", schemas.KindInt: "int", schemas.KindBool: "bool", schemas.KindTime: "timestamp", schemas.KindTags: "tags", schemas.KindBytes: "bytes"}

// kindName names a value kind for messages.
func kindName(k schemas.Kind) string {
	if n, ok := kindNames[k]; ok {
		return "a " + n
	}
	return "a null"
}

// TimestampMicros converts epoch milliseconds (a KindTime value) to the
// epoch microseconds of a BigQuery TIMESTAMP.
func TimestampMicros(ms int64) int64 { return ms * 1000 }
