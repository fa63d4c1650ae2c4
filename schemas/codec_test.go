package schemas

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestRecordCodecRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		r    Record
	}{
		{"empty", Record{}},
		{"every kind", Record{
			Values: []Value{
				{}, {Kind: KindString, Str: "s-1#x"}, {Kind: KindFloat, Num: 36.8}, {Kind: KindFloat, Num: math.Inf(-1)},
				{Kind: KindInt, Int: -42}, {Kind: KindTime, Int: 1772360130250}, {Kind: KindBool, Bool: true}, {Kind: KindBool},
				{Kind: KindTags, Pairs: []Pair{{"a", "1"}, {"b", ""}}}, {Kind: KindBytes, Str: "\x00\xff"},
			},
			EventMs: -1, Raw: `{"sensor_id":"s-1"}`, Source: "gs://b/f.jsonl.gz",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeRecord(tt.r.AppendBinary(nil))
			if err != nil {
				t.Fatal(err)
			}
			want := tt.r
			if want.Values == nil {
				want.Values = []Value{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip = %+v; want %+v", got, want)
			}
		})
	}
}

func TestRecordCodecRejectsDamage(t *testing.T) {
	r := Record{Values: []Value{{Kind: KindString, Str: "abc"}, {Kind: KindFloat, Num: 1}}, EventMs: 5, Raw: "raw", Source: "src"}
	b := r.AppendBinary(nil)
	for cut := 0; cut < len(b); cut++ {
		if _, err := DecodeRecord(b[:cut]); !errors.Is(err, ErrCodec) {
			t.Fatalf("decoding %d of %d bytes: err = %v; want ErrCodec", cut, len(b), err)
		}
	}
	if _, err := DecodeRecord(append(b, 0)); !errors.Is(err, ErrCodec) {
		t.Fatalf("trailing byte: err = %v; want ErrCodec", err)
	}
	bad := append([]byte{1, 99}, b[2:]...)
	if _, err := DecodeRecord(bad); !errors.Is(err, ErrCodec) {
		t.Fatalf("unknown kind: err = %v; want ErrCodec", err)
	}
}

func BenchmarkRecordCodec(b *testing.B) {
	s := mustSpec(b, "vitals")
	recs, err := NewParser(s).ParseString(nil, okLine, "testdata/vitals/readings-001.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = recs[0].AppendBinary(buf[:0])
		if _, err := DecodeRecord(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes/record")
}
