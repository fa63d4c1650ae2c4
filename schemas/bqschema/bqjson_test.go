package bqschema

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
)

func TestBQJSONValue(t *testing.T) {
	col := func(typ string) schemas.BQColumnSpec { return schemas.BQColumnSpec{Name: "c", Type: typ} }
	for _, tc := range []struct {
		name string
		col  schemas.BQColumnSpec
		v    schemas.Value
		want any
		bad  bool
	}{
		{"string", col("STRING"), schemas.Value{Kind: schemas.KindString, Str: "p-1"}, "p-1", false},
		{"number as string", col("STRING"), schemas.Value{Kind: schemas.KindFloat, Num: 36.5}, "36.5", false},
		{"bytes", col("BYTES"), schemas.Value{Kind: schemas.KindString, Str: "\x00\xff"}, []byte("\x00\xff"), false},
		{"float", col("FLOAT64"), schemas.Value{Kind: schemas.KindFloat, Num: 98.5}, 98.5, false},
		{"int as float", col("FLOAT64"), schemas.Value{Kind: schemas.KindInt, Int: 7}, 7.0, false},
		{"NaN", col("FLOAT64"), schemas.Value{Kind: schemas.KindFloat, Num: math.NaN()}, "NaN", false},
		{"-Inf", col("FLOAT64"), schemas.Value{Kind: schemas.KindFloat, Num: math.Inf(-1)}, "-Infinity", false},
		{"int", col("INT64"), schemas.Value{Kind: schemas.KindInt, Int: -3}, int64(-3), false},
		{"whole float as int", col("INT64"), schemas.Value{Kind: schemas.KindFloat, Num: 4}, int64(4), false},
		{"fraction as int", col("INT64"), schemas.Value{Kind: schemas.KindFloat, Num: 4.5}, nil, true},
		{"bool", col("BOOL"), schemas.Value{Kind: schemas.KindBool, Bool: true}, true, false},
		{"string as bool", col("BOOL"), schemas.Value{Kind: schemas.KindString, Str: "true"}, nil, true},
		{"timestamp", col("TIMESTAMP"), schemas.Value{Kind: schemas.KindTime, Int: 1772359200000}, time.UnixMilli(1772359200000).UTC(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BQJSONValue(tc.col, tc.v)
			if tc.bad {
				if !errors.Is(err, ErrBQValue) {
					t.Fatalf("BQJSONValue = %v, %v; want an ErrBQValue", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("BQJSONValue = %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
}

// TestFingerprint: equal values, equal fingerprints; any change, or the
// same text in another kind, a different one.
func TestFingerprint(t *testing.T) {
	r := func(vs ...schemas.Value) *schemas.Record { return &schemas.Record{Values: vs} }
	a := r(schemas.Value{Kind: schemas.KindString, Str: "p-1"}, schemas.Value{Kind: schemas.KindFloat, Num: 70})
	if a.Fingerprint() != r(schemas.Value{Kind: schemas.KindString, Str: "p-1"}, schemas.Value{Kind: schemas.KindFloat, Num: 70}).Fingerprint() {
		t.Error("equal records, different fingerprints")
	}
	for _, b := range []*schemas.Record{
		r(schemas.Value{Kind: schemas.KindString, Str: "p-1"}, schemas.Value{Kind: schemas.KindFloat, Num: 71}),
		r(schemas.Value{Kind: schemas.KindString, Str: "p-1"}, schemas.Value{Kind: schemas.KindString, Str: "70"}),
		r(schemas.Value{Kind: schemas.KindString, Str: "p-1"}),
	} {
		if a.Fingerprint() == b.Fingerprint() {
			t.Errorf("%v and %v share a fingerprint", a.Values, b.Values)
		}
	}
}
