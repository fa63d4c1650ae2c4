package bqschema

import (
	"errors"
	"math"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

func vitalsBQ(t testing.TB) (*schemas.Spec, *BQEncoder) {
	t.Helper()
	spec, err := spectest.Load("vitals")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewBQEncoder(spec.BigQuery)
	if err != nil {
		t.Fatal(err)
	}
	return spec, enc
}

// messageType turns the encoder's descriptor into a dynamic message type,
// the way BigQuery reads a writer schema: a proto2 file holding only it.
func messageType(t testing.TB, dp *descriptorpb.DescriptorProto) protoreflect.MessageType {
	t.Helper()
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:        proto.String("bqproto_test.proto"),
		Package:     proto.String("test"),
		Syntax:      proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{proto.CloneOf(dp)},
	}, nil)
	if err != nil {
		t.Fatalf("descriptor does not build a proto2 file: %v", err)
	}
	return dynamicpb.NewMessageType(fd.Messages().Get(0))
}

func TestBQDescriptorFollowsTheSpecColumns(t *testing.T) {
	_, enc := vitalsBQ(t)
	type field struct {
		name  string
		num   int32
		label descriptorpb.FieldDescriptorProto_Label
		typ   descriptorpb.FieldDescriptorProto_Type
	}
	const (
		opt = descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
		req = descriptorpb.FieldDescriptorProto_LABEL_REQUIRED
	)
	want := []field{
		{"sensor_id", 1, req, descriptorpb.FieldDescriptorProto_TYPE_STRING},
		{"event_timestamp", 2, req, descriptorpb.FieldDescriptorProto_TYPE_INT64},
		{"heart_rate", 3, opt, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE},
		{"body_temperature", 4, opt, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE},
		{"spO2", 5, opt, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE},
		{"battery_level", 6, opt, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE},
		{"heart_rate_imputed", 7, opt, descriptorpb.FieldDescriptorProto_TYPE_BOOL},
		{"reading_id", 8, req, descriptorpb.FieldDescriptorProto_TYPE_STRING},
		{"ingested_at", 9, opt, descriptorpb.FieldDescriptorProto_TYPE_INT64},
	}
	dp := enc.Descriptor()
	if dp.GetName() != BQRowMessageName {
		t.Errorf("message name = %q, want %q", dp.GetName(), BQRowMessageName)
	}
	if len(dp.Field) != len(want) {
		t.Fatalf("descriptor has %d fields, want %d", len(dp.Field), len(want))
	}
	for i, w := range want {
		f := dp.Field[i]
		got := field{f.GetName(), f.GetNumber(), f.GetLabel(), f.GetType()}
		if got != w {
			t.Errorf("field %d = %+v, want %+v", i, got, w)
		}
	}
	mt := messageType(t, dp)
	if s := mt.Descriptor().ParentFile().Syntax(); s != protoreflect.Proto2 {
		t.Errorf("syntax = %v, want proto2", s)
	}
}

func TestNewBQEncoderRejectsBadColumns(t *testing.T) {
	tests := []struct {
		name string
		cols []schemas.BQColumnSpec
	}{
		{"no columns", nil},
		{"unknown type", []schemas.BQColumnSpec{{Name: "a", Type: "NUMERIC"}}},
		{"bad name", []schemas.BQColumnSpec{{Name: "1a", Type: "STRING"}}},
		{"duplicate", []schemas.BQColumnSpec{{Name: "a", Type: "STRING"}, {Name: "a", Type: "INT64"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewBQEncoder(&schemas.BigQuerySpec{Columns: tc.cols}); err == nil {
				t.Error("NewBQEncoder succeeded, want an error")
			}
		})
	}
}

func TestBQEncoderAppendDecodesWithDynamicpb(t *testing.T) {
	spec, enc := vitalsBQ(t)
	mt := messageType(t, enc.Descriptor())
	b, err := hours.NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	const eventMs = 1_714_560_000_123 // 2024-05-01T10:40:00.123Z
	const ingestedMs = 1_714_563_600_000
	rec := schemas.Record{
		Values: []schemas.Value{
			{Kind: schemas.KindString, Str: "sensor-7"},
			{Kind: schemas.KindTime, Int: eventMs},
			{}, // heart_rate not observed
			{Kind: schemas.KindFloat, Num: 36.8},
			{Kind: schemas.KindFloat, Num: 98},
			{Kind: schemas.KindFloat, Num: -0.5},
			{Kind: schemas.KindBool, Bool: false},
		},
		EventMs: eventMs,
	}
	row := b.BQRow(&rec, ingestedMs)

	tests := []struct {
		name string
		vals []schemas.Value
		want map[string]any // absent keys must be unset
	}{
		{
			name: "vitals row with a null heart rate",
			vals: row.Values,
			want: map[string]any{
				"sensor_id":          "sensor-7",
				"event_timestamp":    int64(eventMs * 1000),
				"body_temperature":   36.8,
				"spO2":               98.0,
				"battery_level":      -0.5,
				"heart_rate_imputed": false,
				"reading_id":         group.ReadingID(spec, &rec),
				"ingested_at":        int64(ingestedMs * 1000),
			},
		},
		{
			name: "every optional column null",
			vals: []schemas.Value{{Kind: schemas.KindString, Str: ""}, {Kind: schemas.KindTime, Int: -1}, {}, {}, {}, {}, {}, {Kind: schemas.KindString, Str: "id"}, {}},
			want: map[string]any{"sensor_id": "", "event_timestamp": int64(-1000), "reading_id": "id"},
		},
		{
			name: "ints widen to float, extreme floats survive",
			vals: []schemas.Value{{Kind: schemas.KindString, Str: "s"}, {Kind: schemas.KindTime, Int: 0}, {Kind: schemas.KindInt, Int: 72}, {Kind: schemas.KindFloat, Num: math.Inf(1)}, {Kind: schemas.KindFloat, Num: math.SmallestNonzeroFloat64}, {Kind: schemas.KindFloat, Num: math.MaxFloat64}, {Kind: schemas.KindBool, Bool: true}, {Kind: schemas.KindString, Str: "ü✓"}, {Kind: schemas.KindTime, Int: 253402300799999}},
			want: map[string]any{"sensor_id": "s", "event_timestamp": int64(0), "heart_rate": 72.0, "body_temperature": math.Inf(1), "spO2": math.SmallestNonzeroFloat64, "battery_level": math.MaxFloat64, "heart_rate_imputed": true, "reading_id": "ü✓", "ingested_at": int64(253402300799999000)},
		},
		{
			name: "a null REQUIRED column is left for BigQuery to reject",
			vals: []schemas.Value{{}, {Kind: schemas.KindTime, Int: 5}, {}, {}, {}, {}, {}, {Kind: schemas.KindString, Str: "id"}, {}},
			want: map[string]any{"event_timestamp": int64(5000), "reading_id": "id"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("keep")
			got, err := enc.Append(prefix, tc.vals)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if string(got[:4]) != "keep" {
				t.Fatalf("Append overwrote dst: %q", got[:4])
			}
			msg := mt.New()
			if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(got[4:], msg.Interface()); err != nil {
				t.Fatalf("dynamicpb cannot decode the row: %v", err)
			}
			fields := msg.Descriptor().Fields()
			for i := 0; i < fields.Len(); i++ {
				fd := fields.Get(i)
				want, set := tc.want[string(fd.Name())]
				if msg.Has(fd) != set {
					t.Errorf("%s: set = %v, want %v", fd.Name(), msg.Has(fd), set)
					continue
				}
				if !set {
					continue
				}
				if got := msg.Get(fd).Interface(); got != want {
					t.Errorf("%s = %#v, want %#v", fd.Name(), got, want)
				}
			}
		})
	}
}

func TestBQEncoderAppendRejectsValuesTheColumnCannotHold(t *testing.T) {
	_, enc := vitalsBQ(t)
	good := func() []schemas.Value {
		return []schemas.Value{{Kind: schemas.KindString, Str: "s"}, {Kind: schemas.KindTime, Int: 1}, {}, {}, {}, {}, {}, {Kind: schemas.KindString, Str: "id"}, {}}
	}
	tests := []struct {
		name string
		col  int
		v    schemas.Value
	}{
		{"string in FLOAT64", 2, schemas.Value{Kind: schemas.KindString, Str: "72"}},
		{"float in BOOL", 6, schemas.Value{Kind: schemas.KindFloat, Num: 1}},
		{"int in TIMESTAMP", 1, schemas.Value{Kind: schemas.KindInt, Int: 1}},
		{"tags in STRING", 0, schemas.Value{Kind: schemas.KindTags, Pairs: []schemas.Pair{{K: "a", V: "b"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vals := good()
			vals[tc.col] = tc.v
			got, err := enc.Append([]byte("x"), vals)
			if !errors.Is(err, ErrBQValue) {
				t.Fatalf("err = %v, want ErrBQValue", err)
			}
			if string(got) != "x" {
				t.Errorf("dst = %q after an error, want it unchanged", got)
			}
		})
	}
	t.Run("wrong number of values", func(t *testing.T) {
		if _, err := enc.Append(nil, good()[:3]); !errors.Is(err, ErrBQValue) {
			t.Errorf("err = %v, want ErrBQValue", err)
		}
	})
}

// benchBQRecord is the vitals encoder and builder, and one prepared record,
// for the BigQuery row benchmarks.
func benchBQRecord(b *testing.B) (*BQEncoder, *hours.Builder, schemas.Record) {
	spec, enc := vitalsBQ(b)
	bld, err := hours.NewBuilder(spec)
	if err != nil {
		b.Fatal(err)
	}
	rec := schemas.Record{
		Values: []schemas.Value{
			{Kind: schemas.KindString, Str: "sensor-000123"},
			{Kind: schemas.KindTime, Int: 1_714_560_000_123},
			{Kind: schemas.KindFloat, Num: 72.5},
			{Kind: schemas.KindFloat, Num: 36.8},
			{Kind: schemas.KindFloat, Num: 98},
			{Kind: schemas.KindFloat, Num: 87},
			{Kind: schemas.KindBool, Bool: false},
		},
		EventMs: 1_714_560_000_123,
	}
	return enc, bld, rec
}

// BenchmarkBQRowEncode encodes one vitals BigQuery row into a reused buffer.
func BenchmarkBQRowEncode(b *testing.B) {
	enc, bld, rec := benchBQRecord(b)
	var err error
	row := bld.BQRow(&rec, 1_714_563_600_000)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf, err = enc.Append(buf[:0], row.Values)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkBQRowBuildAndEncode is the sink's whole per-row cost: building
// the row from a record (with its SHA-256 reading id) and encoding it.
func BenchmarkBQRowBuildAndEncode(b *testing.B) {
	enc, bld, rec := benchBQRecord(b)
	var err error
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		row := bld.BQRow(&rec, 1_714_563_600_000)
		buf, err = enc.Append(buf[:0], row.Values)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func TestChangeSeqOrdersFirings(t *testing.T) {
	for _, tc := range []struct {
		seq  hours.ChangeSeq
		want string
	}{
		{hours.ChangeSeq{Micros: 1714475984000, Pane: 0}, "18F2EBB6480/0"},
		{hours.ChangeSeq{Micros: 1714475984000, Pane: 11}, "18F2EBB6480/B"},
		{hours.ChangeSeq{Micros: 0, Pane: 0}, "0/0"},
		{hours.ChangeSeq{Micros: -5, Pane: -1}, "0/0"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.seq.String(); got != tc.want {
				t.Errorf("%+v.String() = %q, want %q", tc.seq, got, tc.want)
			}
		})
	}
}

func TestBQEncoderAppendChange(t *testing.T) {
	spec, enc := vitalsBQ(t)
	dp := enc.ChangeDescriptor()
	n := len(spec.BigQuery.Columns)
	if len(dp.Field) != n+2 || dp.Field[n].GetName() != ChangeTypeColumn || dp.Field[n+1].GetName() != ChangeSequenceColumn ||
		dp.Field[n].GetNumber() != int32(n+1) || dp.Field[n+1].GetType() != descriptorpb.FieldDescriptorProto_TYPE_STRING {
		t.Fatalf("change descriptor fields = %v", dp.Field)
	}
	if len(enc.Descriptor().Field) != n {
		t.Fatalf("ChangeDescriptor changed Descriptor: %d fields", len(enc.Descriptor().Field))
	}
	vals := make([]schemas.Value, n)
	vals[0] = schemas.Value{Kind: schemas.KindString, Str: "s1"}
	b, err := enc.Append(nil, vals)
	if err != nil {
		t.Fatal(err)
	}
	b = enc.AppendChange(b, ChangeUpsert, hours.ChangeSeq{Micros: 1714475984000, Pane: 2})
	msg := messageType(t, dp).New()
	if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(b, msg.Interface()); err != nil {
		t.Fatal(err)
	}
	fields := msg.Descriptor().Fields()
	if got := msg.Get(fields.ByName(ChangeTypeColumn)).String(); got != "UPSERT" {
		t.Errorf("_CHANGE_TYPE = %q", got)
	}
	if got := msg.Get(fields.ByName(ChangeSequenceColumn)).String(); got != "18F2EBB6480/2" {
		t.Errorf("_CHANGE_SEQUENCE_NUMBER = %q", got)
	}
	if got := msg.Get(fields.ByName("sensor_id")).String(); got != "s1" {
		t.Errorf("sensor_id = %q", got)
	}
}
