package packed

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
)

func TestRecordCodecRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		r    schemas.Record
	}{
		{"empty", schemas.Record{}},
		{"every kind", everyKind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeRecord(AppendBinary(&tt.r, nil))
			if err != nil {
				t.Fatal(err)
			}
			want := tt.r
			if want.Values == nil {
				want.Values = []schemas.Value{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip = %+v; want %+v", got, want)
			}
		})
	}
}

func TestRecordCodecRejectsDamage(t *testing.T) {
	r := schemas.Record{Values: []schemas.Value{{Kind: schemas.KindString, Str: "abc"}, {Kind: schemas.KindFloat, Num: 1}}, EventMs: 5, Raw: "raw", Source: "src"}
	b := AppendBinary(&r, nil)
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
var everyKind = schemas.Record{
	Values: []schemas.Value{
		{}, {Kind: schemas.KindString, Str: "s-1#x"}, {Kind: schemas.KindFloat, Num: 36.8}, {Kind: schemas.KindFloat, Num: math.Inf(-1)},
		{Kind: schemas.KindInt, Int: -42}, {Kind: schemas.KindTime, Int: 1772360130250}, {Kind: schemas.KindBool, Bool: true}, {Kind: schemas.KindBool},
		{Kind: schemas.KindTags, Pairs: []schemas.Pair{{K: "a", V: "1"}, {K: "b", V: ""}}}, {Kind: schemas.KindBytes, Str: "\x00\xff"},
	},
	EventMs: -1, Raw: `{"sensor_id":"s-1"}`, Source: "gs://b/f.jsonl.gz",
}

// TestRecordsCodecRoundTrip: a batch of records comes back as it went,
// whatever their sources (the same, changing, empty) and values (none,
// every kind).
func TestRecordsCodecRoundTrip(t *testing.T) {
	a := schemas.Record{Values: []schemas.Value{{Kind: schemas.KindString, Str: "s-2"}, {Kind: schemas.KindFloat, Num: 98}}, EventMs: 7, Raw: "line a", Source: "a.jsonl"}
	b := schemas.Record{Values: []schemas.Value{{Kind: schemas.KindString, Str: "s-2"}, {}}, EventMs: 8, Raw: "line b", Source: "b.jsonl"}
	noValues := schemas.Record{Values: []schemas.Value{}, EventMs: 9, Raw: "", Source: ""}
	tests := []struct {
		name string
		recs []schemas.Record
	}{
		{"none", []schemas.Record{}},
		{"one", []schemas.Record{everyKind}},
		{"one source", []schemas.Record{a, a, a}},
		{"sources change", []schemas.Record{a, b, b, a, everyKind, a}},
		{"empty source first and after", []schemas.Record{noValues, a, noValues, noValues}},
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
	a := schemas.Record{Values: []schemas.Value{{Kind: schemas.KindString, Str: "s-2"}, {Kind: schemas.KindFloat, Num: 98}}, EventMs: 7, Raw: "line a", Source: "gs://b/a.jsonl"}
	body := len(appendBody(&a, nil))
	want := 2 + 3*body + 1 + 1 + len(a.Source) + 2
	if got := len(AppendRecords(nil, []schemas.Record{a, a, a})); got != want {
		t.Errorf("three records of one source take %d bytes; want %d", got, want)
	}
}

func TestRecordsCodecRejectsDamage(t *testing.T) {
	b := AppendRecords(nil, []schemas.Record{everyKind, everyKind, {Values: []schemas.Value{{Kind: schemas.KindString, Str: "x"}}, Raw: "r", Source: "other"}})
	for cut := 0; cut < len(b); cut++ {
		if _, err := DecodeRecords(b[:cut]); !errors.Is(err, ErrCodec) {
			t.Fatalf("decoding %d of %d bytes: err = %v; want ErrCodec", cut, len(b), err)
		}
	}
	if _, err := DecodeRecords(append(b, 0)); !errors.Is(err, ErrCodec) {
		t.Fatalf("trailing byte: err = %v; want ErrCodec", err)
	}
	// A first record that claims its predecessor's source.
	first := AppendRecords(nil, []schemas.Record{{Raw: "r"}})
	first[len(first)-2] = 0
	if _, err := DecodeRecords(first[:len(first)-1]); !errors.Is(err, ErrCodec) {
		t.Fatalf("first record without a source: err = %v; want ErrCodec", err)
	}
	// More values claimed by the records than the batch's count.
	more := AppendRecords(nil, []schemas.Record{everyKind})
	more[1]--
	if _, err := DecodeRecords(more); !errors.Is(err, ErrCodec) {
		t.Fatalf("values over the batch's count: err = %v; want ErrCodec", err)
	}
	fewer := AppendRecords(nil, []schemas.Record{everyKind})
	fewer[1]++
	if _, err := DecodeRecords(fewer); !errors.Is(err, ErrCodec) {
		t.Fatalf("values under the batch's count: err = %v; want ErrCodec", err)
	}
}
