// The Storage Write cases of goccy/bigquery-emulator's test suite
// (server/storage_test.go TestStorageWrite, server/storage_internal_test.go
// TestDecodeProtoWrapperValues and TestDefaultWriteStreamNameForms, at
// commit cb8555b), ported to this emulator's public API and official
// clients. Where goccy's emulator is more lenient than BigQuery, the port
// expects BigQuery's behaviour and says so.
//
// Those tests are under the MIT License:
//
// Copyright (c) 2022 Masaaki Goshima
//
// Permission is hereby granted, free of charge, to any person obtaining a copy
// of this software and associated documentation files (the "Software"), to deal
// in the Software without restriction, including without limitation the rights
// to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
// copies of the Software, and to permit persons to whom the Software is
// furnished to do so, subject to the following conditions:
//
// The above copyright notice and this permission notice shall be included in all
// copies or substantial portions of the Software.
//
// THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
// IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
// FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
// AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
// LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
// OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
// SOFTWARE.

package bqemu_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// goccySampleSchema is goccy's SampleData table: every scalar type, an
// array, a record and an array of records (plus row_num, which goccy's
// message carries as a required field).
func goccySampleSchema() bigquery.Schema {
	sub := bigquery.Schema{{Name: "sub_int_col", Type: bigquery.IntegerFieldType}}
	return bigquery.Schema{
		{Name: "bool_col", Type: bigquery.BooleanFieldType},
		{Name: "bytes_col", Type: bigquery.BytesFieldType},
		{Name: "float64_col", Type: bigquery.FloatFieldType},
		{Name: "int64_col", Type: bigquery.IntegerFieldType},
		{Name: "string_col", Type: bigquery.StringFieldType},
		{Name: "date_col", Type: bigquery.DateFieldType},
		{Name: "datetime_col", Type: bigquery.DateTimeFieldType},
		{Name: "geography_col", Type: bigquery.GeographyFieldType},
		{Name: "numeric_col", Type: bigquery.NumericFieldType},
		{Name: "bignumeric_col", Type: bigquery.BigNumericFieldType},
		{Name: "time_col", Type: bigquery.TimeFieldType},
		{Name: "timestamp_col", Type: bigquery.TimestampFieldType},
		{Name: "int64_list", Type: bigquery.IntegerFieldType, Repeated: true},
		{Name: "struct_col", Type: bigquery.RecordFieldType, Schema: sub},
		{Name: "struct_list", Type: bigquery.RecordFieldType, Schema: sub, Repeated: true},
		{Name: "row_num", Type: bigquery.IntegerFieldType, Required: true},
	}
}

// goccyDescriptor is the writer schema of goccy's SampleData message: as
// managedwriter/adapt derives it from the table, but with DATETIME, TIME,
// NUMERIC and BIGNUMERIC sent as strings, as goccy's example proto does.
func goccyDescriptor(t *testing.T) (*descriptorpb.DescriptorProto, protoreflect.MessageDescriptor) {
	t.Helper()
	dp, _ := protoFor(t, goccySampleSchema())
	dp = proto.CloneOf(dp)
	for _, f := range dp.Field {
		switch f.GetName() {
		case "datetime_col", "time_col", "numeric_col", "bignumeric_col":
			f.Type = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
		}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:        proto.String("goccy_sample.proto"),
		Syntax:      proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{dp},
	}, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	return dp, fd.Messages().Get(0)
}

// goccySampleRows builds n rows the way goccy's generateExampleMessages
// does, deterministically.
func goccySampleRows(t *testing.T, md protoreflect.MessageDescriptor, n int) [][]byte {
	t.Helper()
	now := time.Now()
	out := make([][]byte, n)
	for i := range out {
		m := dynamicpb.NewMessage(md)
		set := func(name string, v protoreflect.Value) { m.Set(md.Fields().ByName(protoreflect.Name(name)), v) }
		set("bool_col", protoreflect.ValueOfBool(true))
		set("bytes_col", protoreflect.ValueOfBytes([]byte("some bytes")))
		set("float64_col", protoreflect.ValueOfFloat64(3.14))
		set("int64_col", protoreflect.ValueOfInt64(123))
		set("string_col", protoreflect.ValueOfString("example string value"))
		set("date_col", protoreflect.ValueOfInt32(int32(now.Unix()/86400)))
		set("datetime_col", protoreflect.ValueOfString("2022-01-01 12:13:14.000000"))
		set("geography_col", protoreflect.ValueOfString("POINT(-122.350220 47.649154)"))
		set("numeric_col", protoreflect.ValueOfString("99999999999999999999999999999.999999999"))
		set("bignumeric_col", protoreflect.ValueOfString("578960446186580977117854925043439539266.34992332820282019728792003956564819967"))
		set("time_col", protoreflect.ValueOfString("12:13:14.000000"))
		set("timestamp_col", protoreflect.ValueOfInt64(now.UnixMicro()))
		list := m.Mutable(md.Fields().ByName("int64_list")).List()
		for _, x := range []int64{2, 4, 6, 8} {
			list.Append(protoreflect.ValueOfInt64(x))
		}
		set("row_num", protoreflect.ValueOfInt64(23))
		sfd := md.Fields().ByName("struct_col")
		sub := dynamicpb.NewMessage(sfd.Message())
		sub.Set(sfd.Message().Fields().ByName("sub_int_col"), protoreflect.ValueOfInt64(int64(i)))
		set("struct_col", protoreflect.ValueOfMessage(sub))
		lfd := md.Fields().ByName("struct_list")
		sl := m.Mutable(lfd).List()
		for k := 0; k <= i%5; k++ {
			e := dynamicpb.NewMessage(lfd.Message())
			e.Set(lfd.Message().Fields().ByName("sub_int_col"), protoreflect.ValueOfInt64(int64(k)))
			sl.Append(protoreflect.ValueOfMessage(e))
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// TestGoccyStorageWrite is goccy's TestStorageWrite: three appends of 1, 3
// and 2 rows, the rows visible after each, then finalize and commit.
// goccy's emulator also accepts offsets, Finalize and BatchCommit on the
// _default stream; BigQuery refuses them, so the port expects that.
func TestGoccyStorageWrite(t *testing.T) {
	for _, tc := range []struct {
		name                                string
		typ                                 managedwriter.StreamType
		afterFirst, afterSecond, afterThird int
		afterCommit                         int
		offsets, finalize                   bool
	}{
		{"pending", managedwriter.PendingStream, 0, 0, 0, 6, true, true},
		{"committed", managedwriter.CommittedStream, 1, 4, 6, 6, true, true},
		{"default", managedwriter.DefaultStream, 1, 4, 6, 6, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ds := e.bq.Dataset("test")
			if err := ds.Create(ctx, nil); err != nil {
				t.Fatal(err)
			}
			tbl := ds.Table("sample")
			if err := tbl.Create(ctx, &bigquery.TableMetadata{Schema: goccySampleSchema()}); err != nil {
				t.Fatal(err)
			}
			dp, md := goccyDescriptor(t)
			ms, err := e.mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(managedwriter.TableParentFromParts(project, "test", "sample")),
				managedwriter.WithType(tc.typ), managedwriter.WithSchemaDescriptor(dp))
			if err != nil {
				t.Fatal(err)
			}
			defer ms.Close()
			offset := int64(0)
			for i, step := range []struct{ rows, want int }{{1, tc.afterFirst}, {3, tc.afterSecond}, {2, tc.afterThird}} {
				var opts []managedwriter.AppendOption
				if tc.offsets {
					opts = append(opts, managedwriter.WithOffset(offset))
				}
				res, err := ms.AppendRows(ctx, goccySampleRows(t, md, step.rows), opts...)
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
				if _, err := res.GetResult(ctx); err != nil {
					t.Fatalf("append %d result: %v", i, err)
				}
				offset += int64(step.rows)
				if got := len(readAll(t, tbl)); got != step.want {
					t.Errorf("after append %d: %d rows, want %d", i, got, step.want)
				}
			}
			rowCount, err := ms.Finalize(ctx)
			if !tc.finalize {
				if status.Code(err) != codes.InvalidArgument {
					t.Errorf("Finalize of the default stream = %v, want InvalidArgument", err)
				}
				return
			}
			if err != nil || rowCount != 6 {
				t.Fatalf("Finalize = %d, %v", rowCount, err)
			}
			resp, err := e.mw.BatchCommitWriteStreams(ctx, &storagepb.BatchCommitWriteStreamsRequest{
				Parent:       managedwriter.TableParentFromStreamName(ms.StreamName()),
				WriteStreams: []string{ms.StreamName()},
			})
			switch {
			case tc.typ == managedwriter.PendingStream && (err != nil || len(resp.GetStreamErrors()) > 0):
				t.Fatalf("BatchCommit = %v, %v", resp, err)
			case tc.typ == managedwriter.CommittedStream && len(resp.GetStreamErrors()) == 0:
				t.Errorf("BatchCommit of a COMMITTED stream reported no stream error")
			}
			rows := readByName(t, tbl)
			if len(rows) != tc.afterCommit {
				t.Fatalf("after commit: %d rows, want %d", len(rows), tc.afterCommit)
			}
			// The values survive the trip (goccy's test only counts rows).
			r := rows[0]
			if r["bool_col"] != true || fmt.Sprint(r["bytes_col"]) != fmt.Sprint([]byte("some bytes")) || r["int64_col"] != int64(123) ||
				fmt.Sprint(r["int64_list"]) != "[2 4 6 8]" || r["row_num"] != int64(23) {
				t.Errorf("row = %v", r)
			}
		})
	}
}

// TestGoccyProtoWrapperValues is goccy's TestDecodeProtoWrapperValues
// (its issue 364): a field of a google.protobuf wrapper type carries the
// bare scalar, not a one-field record.
func TestGoccyProtoWrapperValues(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cols := []struct {
		name, wrapper string
		typ           bigquery.FieldType
		msg           proto.Message
		want          any
	}{
		{"double_v", "DoubleValue", bigquery.FloatFieldType, wrapperspb.Double(1.5), 1.5},
		{"float_v", "FloatValue", bigquery.FloatFieldType, wrapperspb.Float(2.5), 2.5},
		{"int64_v", "Int64Value", bigquery.IntegerFieldType, wrapperspb.Int64(7), int64(7)},
		{"int32_v", "Int32Value", bigquery.IntegerFieldType, wrapperspb.Int32(8), int64(8)},
		{"uint64_v", "UInt64Value", bigquery.IntegerFieldType, wrapperspb.UInt64(9), int64(9)},
		{"uint32_v", "UInt32Value", bigquery.IntegerFieldType, wrapperspb.UInt32(10), int64(10)},
		{"bool_v", "BoolValue", bigquery.BooleanFieldType, wrapperspb.Bool(true), true},
		{"string_v", "StringValue", bigquery.StringFieldType, wrapperspb.String("hi"), "hi"},
		{"bytes_v", "BytesValue", bigquery.BytesFieldType, wrapperspb.Bytes([]byte("ab")), "ab"},
	}
	var schema bigquery.Schema
	dp := &descriptorpb.DescriptorProto{Name: proto.String("wrapped")}
	for i, c := range cols {
		schema = append(schema, &bigquery.FieldSchema{Name: c.name, Type: c.typ})
		dp.Field = append(dp.Field, &descriptorpb.FieldDescriptorProto{
			Name:     proto.String(c.name),
			Number:   proto.Int32(int32(i + 1)),
			Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:     descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(),
			TypeName: proto.String(".google.protobuf." + c.wrapper),
		})
	}
	ds := e.bq.Dataset("test")
	if err := ds.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	tbl := ds.Table("wrapped")
	if err := tbl.Create(ctx, &bigquery.TableMetadata{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	// The row: each field a wrapper message, marshalled by hand (tag, length,
	// message) so no generated type is needed.
	var row []byte
	for i, c := range cols {
		b, err := proto.Marshal(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		row = append(row, byte((i+1)<<3|2), byte(len(b)))
		row = append(row, b...)
	}
	ms, err := e.mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(managedwriter.TableParentFromParts(project, "test", "wrapped")),
		managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(dp))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	res, err := ms.AppendRows(ctx, [][]byte{row})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.GetResult(ctx); err != nil {
		t.Fatalf("append: %v", err)
	}
	rows := readByName(t, tbl)
	if len(rows) != 1 {
		t.Fatalf("rows = %v", rows)
	}
	for _, c := range cols {
		got := rows[0][c.name]
		if b, ok := got.([]byte); ok {
			got = string(b)
		}
		if got != c.want {
			t.Errorf("%s (%s) = %T(%v), want %T(%v): the wrapper was not unwrapped", c.name, c.wrapper, got, got, c.want, c.want)
		}
	}
}

// TestGoccyDefaultStreamResolution is goccy's
// TestDefaultWriteStreamNameForms and TestDefaultWriteStreamLazyResolverConsumers:
// GetWriteStream resolves the _default stream of a table (a COMMITTED
// stream with the table's schema) and FinalizeWriteStream of it fails.
// goccy also accepts "tables/t/_default" without "streams/"; BigQuery's
// stream names always have it, so the port does not.
func TestGoccyDefaultStreamResolution(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ds := e.bq.Dataset("dataset")
	if err := ds.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := ds.Table("sample").Create(ctx, &bigquery.TableMetadata{Schema: bigquery.Schema{{Name: "name", Type: bigquery.StringFieldType}}}); err != nil {
		t.Fatal(err)
	}
	name := "projects/" + project + "/datasets/dataset/tables/sample/streams/_default"
	ms, err := e.mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(managedwriter.TableParentFromParts(project, "dataset", "sample")),
		managedwriter.WithType(managedwriter.DefaultStream))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	if _, err := ms.Finalize(ctx); status.Code(err) != codes.InvalidArgument {
		t.Errorf("FinalizeWriteStream(_default) = %v, want InvalidArgument", err)
	}
	for i := 0; i < 2; i++ { // resolving twice gives the same stream
		ws, err := e.mw.GetWriteStream(ctx, &storagepb.GetWriteStreamRequest{Name: name, View: storagepb.WriteStreamView_FULL})
		if err != nil {
			t.Fatal(err)
		}
		if ws.GetName() != name || ws.GetType() != storagepb.WriteStream_COMMITTED || len(ws.GetTableSchema().GetFields()) != 1 {
			t.Errorf("GetWriteStream = %v", ws)
		}
	}
	if _, err := e.mw.GetWriteStream(ctx, &storagepb.GetWriteStreamRequest{Name: "projects/" + project + "/datasets/dataset/tables/nope/streams/_default"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetWriteStream of a missing table's default stream = %v, want NotFound", err)
	}
}
