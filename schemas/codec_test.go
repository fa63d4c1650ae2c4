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
		{"every kind", everyKind},
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

// everyKind is a record with a value of every kind.
var everyKind = Record{
	Values: []Value{
		{}, {Kind: KindString, Str: "s-1#x"}, {Kind: KindFloat, Num: 36.8}, {Kind: KindFloat, Num: math.Inf(-1)},
		{Kind: KindInt, Int: -42}, {Kind: KindTime, Int: 1772360130250}, {Kind: KindBool, Bool: true}, {Kind: KindBool},
		{Kind: KindTags, Pairs: []Pair{{"a", "1"}, {"b", ""}}}, {Kind: KindBytes, Str: "\x00\xff"},
	},
	EventMs: -1, Raw: `{"sensor_id":"s-1"}`, Source: "gs://b/f.jsonl.gz",
}

// TestRecordsCodecRoundTrip: a batch of records comes back as it went,
// whatever their sources (the same, changing, empty) and values (none,
// every kind).
func TestRecordsCodecRoundTrip(t *testing.T) {
	a := Record{Values: []Value{{Kind: KindString, Str: "s-2"}, {Kind: KindFloat, Num: 98}}, EventMs: 7, Raw: "line a", Source: "a.jsonl"}
	b := Record{Values: []Value{{Kind: KindString, Str: "s-2"}, {}}, EventMs: 8, Raw: "line b", Source: "b.jsonl"}
	noValues := Record{Values: []Value{}, EventMs: 9, Raw: "", Source: ""}
	tests := []struct {
		name string
		recs []Record
	}{
		{"none", []Record{}},
		{"one", []Record{everyKind}},
		{"one source", []Record{a, a, a}},
		{"sources change", []Record{a, b, b, a, everyKind, a}},
		{"empty source first and after", []Record{noValues, a, noValues, noValues}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := AppendRecords([]byte("kept"), tt.recs)
			if string(enc[:4]) != "kept" {
				t.Fatalf("AppendRecords overwrote dst: %q", enc[:4])
			}
			got, err := DecodeRecords(enc[4:])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.recs) {
				t.Fatalf("round trip = %+v; want %+v", got, tt.recs)
			}
		})
	}
}

// TestRecordsCodecWritesASharedSourceOnce: three records of one source
// take their counts, their bodies, the source once and two marks.
func TestRecordsCodecWritesASharedSourceOnce(t *testing.T) {
	a := Record{Values: []Value{{Kind: KindString, Str: "s-2"}, {Kind: KindFloat, Num: 98}}, EventMs: 7, Raw: "line a", Source: "gs://b/a.jsonl"}
	body := len(a.appendBody(nil))
	want := 2 + 3*body + 1 + 1 + len(a.Source) + 2
	if got := len(AppendRecords(nil, []Record{a, a, a})); got != want {
		t.Errorf("three records of one source take %d bytes; want %d", got, want)
	}
}

func TestRecordsCodecRejectsDamage(t *testing.T) {
	b := AppendRecords(nil, []Record{everyKind, everyKind, {Values: []Value{{Kind: KindString, Str: "x"}}, Raw: "r", Source: "other"}})
	for cut := 0; cut < len(b); cut++ {
		if _, err := DecodeRecords(b[:cut]); !errors.Is(err, ErrCodec) {
			t.Fatalf("decoding %d of %d bytes: err = %v; want ErrCodec", cut, len(b), err)
		}
	}
	if _, err := DecodeRecords(append(b, 0)); !errors.Is(err, ErrCodec) {
		t.Fatalf("trailing byte: err = %v; want ErrCodec", err)
	}
	// A first record that claims its predecessor's source.
	first := AppendRecords(nil, []Record{{Raw: "r"}})
	first[len(first)-2] = 0
	if _, err := DecodeRecords(first[:len(first)-1]); !errors.Is(err, ErrCodec) {
		t.Fatalf("first record without a source: err = %v; want ErrCodec", err)
	}
	// More values claimed by the records than the batch's count.
	more := AppendRecords(nil, []Record{everyKind})
	more[1]--
	if _, err := DecodeRecords(more); !errors.Is(err, ErrCodec) {
		t.Fatalf("values over the batch's count: err = %v; want ErrCodec", err)
	}
	fewer := AppendRecords(nil, []Record{everyKind})
	fewer[1]++
	if _, err := DecodeRecords(fewer); !errors.Is(err, ErrCodec) {
		t.Fatalf("values under the batch's count: err = %v; want ErrCodec", err)
	}
}

// BenchmarkRecordsCodec is AppendRecords and DecodeRecords of a sensor's
// minute of vitals readings from one file.
func BenchmarkRecordsCodec(b *testing.B) {
	p := NewParser(mustSpec(b, "vitals"))
	var recs []Record
	for _, l := range vitalsLines(7, groupSize) {
		var err error
		if recs, err = p.ParseString(recs, string(l), benchSource); err != nil {
			b.Fatal(err)
		}
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendRecords(buf[:0], recs)
		if _, err := DecodeRecords(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/reading")
	b.ReportMetric(float64(len(buf))/float64(len(recs)), "bytes/reading")
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
