package bqemu

import (
	"bytes"
	"fmt"
	"math/big"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	bq "google.golang.org/api/bigquery/v2"
)

// arrowSchema is the Arrow schema of a read session's fields, as the
// Storage Read API maps BigQuery types
// (https://cloud.google.com/bigquery/docs/reference/storage#arrow_schema_details):
// TIMESTAMP is timestamp[us, tz=UTC], DATETIME timestamp[us], DATE date32,
// TIME time64[us], NUMERIC decimal128(38, 9), BIGNUMERIC
// decimal256(76, 38), RECORD a struct, REPEATED a list; GEOGRAPHY, JSON,
// INTERVAL and RANGE are their text.
func arrowSchema(fields []*bq.TableFieldSchema) *arrow.Schema {
	out := make([]arrow.Field, len(fields))
	for i, f := range fields {
		out[i] = arrowField(f)
	}
	return arrow.NewSchema(out, nil)
}

func arrowField(f *bq.TableFieldSchema) arrow.Field {
	typ := arrowScalarType(f)
	if f.Mode == "REPEATED" {
		typ = arrow.ListOfField(arrow.Field{Name: "item", Type: typ, Nullable: false})
	}
	return arrow.Field{Name: f.Name, Type: typ, Nullable: f.Mode == "NULLABLE"}
}

func arrowScalarType(f *bq.TableFieldSchema) arrow.DataType {
	switch f.Type {
	case "INTEGER":
		return arrow.PrimitiveTypes.Int64
	case "FLOAT":
		return arrow.PrimitiveTypes.Float64
	case "BOOLEAN":
		return arrow.FixedWidthTypes.Boolean
	case "BYTES":
		return arrow.BinaryTypes.Binary
	case "TIMESTAMP":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	case "DATETIME":
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	case "DATE":
		return arrow.FixedWidthTypes.Date32
	case "TIME":
		return arrow.FixedWidthTypes.Time64us
	case "NUMERIC":
		return &arrow.Decimal128Type{Precision: 38, Scale: 9}
	case "BIGNUMERIC":
		return &arrow.Decimal256Type{Precision: 76, Scale: 38}
	case "RECORD":
		sub := make([]arrow.Field, len(f.Fields))
		for i, sf := range f.Fields {
			sub[i] = arrowField(sf)
		}
		return arrow.StructOf(sub...)
	}
	return arrow.BinaryTypes.String // STRING, GEOGRAPHY, JSON, INTERVAL, RANGE
}

// serializedSchema is the schema as the IPC message a ReadSession's
// arrow_schema carries.
func serializedSchema(schema *arrow.Schema) ([]byte, error) {
	p := ipc.GetSchemaPayload(schema, memory.DefaultAllocator)
	defer p.Release()
	var buf bytes.Buffer
	if _, err := p.WritePayload(&buf); err != nil {
		return nil, fmt.Errorf("serializing the arrow schema: %w", err)
	}
	return buf.Bytes(), nil
}

// arrowBatch encodes rows (aligned with fields) as one serialized Arrow
// record batch message, the body of an ArrowRecordBatch.
func arrowBatch(schema *arrow.Schema, fields []*bq.TableFieldSchema, rows [][]any) ([]byte, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, row := range rows {
		for i, f := range fields {
			var v any
			if i < len(row) {
				v = row[i]
			}
			if err := appendArrow(b.Field(i), f, v); err != nil {
				return nil, err
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	p, err := ipc.GetRecordBatchPayload(rec)
	if err != nil {
		return nil, fmt.Errorf("encoding an arrow record batch: %w", err)
	}
	defer p.Release()
	var buf bytes.Buffer
	if _, err := p.WritePayload(&buf); err != nil {
		return nil, fmt.Errorf("serializing an arrow record batch: %w", err)
	}
	return buf.Bytes(), nil
}

// appendArrow appends the stored value v of field f to b.
func appendArrow(b array.Builder, f *bq.TableFieldSchema, v any) error {
	if f.Mode == "REPEATED" {
		lb, ok := b.(*array.ListBuilder)
		if !ok {
			return fmt.Errorf("column %s: arrow builder %T for a REPEATED value", f.Name, b)
		}
		arr, _ := v.([]any) // NULL reads as an empty array, as in BigQuery
		lb.Append(true)
		elem := *f
		elem.Mode = "REQUIRED"
		for _, e := range arr {
			if err := appendArrow(lb.ValueBuilder(), &elem, e); err != nil {
				return err
			}
		}
		return nil
	}
	if v == nil {
		b.AppendNull()
		return nil
	}
	bad := func() error { return fmt.Errorf("column %s: stored %T for a %s", f.Name, v, f.Type) }
	switch f.Type {
	case "RECORD":
		sb, ok1 := b.(*array.StructBuilder)
		rec, ok2 := v.([]any)
		if !ok1 || !ok2 {
			return bad()
		}
		sb.Append(true)
		for i, sf := range f.Fields {
			var x any
			if i < len(rec) {
				x = rec[i]
			}
			if err := appendArrow(sb.FieldBuilder(i), sf, x); err != nil {
				return err
			}
		}
		return nil
	case "INTEGER":
		x, ok := v.(int64)
		if !ok {
			return bad()
		}
		b.(*array.Int64Builder).Append(x)
	case "FLOAT":
		x, ok := v.(float64)
		if !ok {
			return bad()
		}
		b.(*array.Float64Builder).Append(x)
	case "BOOLEAN":
		x, ok := v.(bool)
		if !ok {
			return bad()
		}
		b.(*array.BooleanBuilder).Append(x)
	case "BYTES":
		x, ok := v.([]byte)
		if !ok {
			return bad()
		}
		b.(*array.BinaryBuilder).Append(x)
	case "TIMESTAMP":
		x, ok := v.(int64)
		if !ok {
			return bad()
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(x))
	case "DATE":
		x, ok := v.(int64)
		if !ok {
			return bad()
		}
		b.(*array.Date32Builder).Append(arrow.Date32(x))
	case "DATETIME":
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		t, err := valueTime("DATETIME", s)
		if err != nil {
			return fmt.Errorf("column %s: %w", f.Name, err)
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
	case "TIME":
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		t, err := time.Parse("15:04:05.999999", s)
		if err != nil {
			return fmt.Errorf("column %s: %w", f.Name, err)
		}
		day := t.Sub(time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC))
		b.(*array.Time64Builder).Append(arrow.Time64(day.Microseconds()))
	case "NUMERIC":
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		n, err := decimal128.FromString(s, 38, 9)
		if err != nil {
			return fmt.Errorf("column %s: %w", f.Name, err)
		}
		b.(*array.Decimal128Builder).Append(n)
	case "BIGNUMERIC":
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		if _, ok := new(big.Rat).SetString(s); !ok {
			return bad()
		}
		n, err := decimal256.FromString(s, 76, 38)
		if err != nil {
			return fmt.Errorf("column %s: %w", f.Name, err)
		}
		b.(*array.Decimal256Builder).Append(n)
	default:
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		b.(*array.StringBuilder).Append(s)
	}
	return nil
}
