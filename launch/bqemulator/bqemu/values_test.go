package bqemu

import (
	"math/big"
	"testing"

	bq "google.golang.org/api/bigquery/v2"
)

func TestValueEncodings(t *testing.T) {
	packNumeric := func(v *big.Int) []byte {
		// Little-endian two's complement, 16 bytes.
		n := new(big.Int).Set(v)
		if n.Sign() < 0 {
			n.Add(n, new(big.Int).Lsh(big.NewInt(1), 128))
		}
		be := n.FillBytes(make([]byte, 16))
		le := make([]byte, 16)
		for i := range be {
			le[15-i] = be[i]
		}
		return le
	}
	packDT := func(y, mo, d, h, mi, s, us int64) int64 {
		return y<<46 | mo<<42 | d<<37 | h<<32 | mi<<26 | s<<20 | us
	}
	for _, tc := range []struct {
		name string
		got  func() (string, error)
		want string
	}{
		{"javaDouble", func() (string, error) { return javaDouble(1.7e9), nil }, "1.7E9"},
		{"javaDouble micros", func() (string, error) { return javaDouble(1767323045.123456), nil }, "1.767323045123456E9"},
		{"numeric positive", func() (string, error) {
			return decodePackedNumeric(packNumeric(big.NewInt(123450000000)), "NUMERIC"), nil
		}, "123.45"},
		{"numeric negative", func() (string, error) {
			return decodePackedNumeric(packNumeric(big.NewInt(-1500000000)), "NUMERIC"), nil
		}, "-1.5"},
		{"datetime", func() (string, error) { return decodePackedDateTime(packDT(2024, 5, 6, 7, 8, 9, 123)) }, "2024-05-06T07:08:09.000123"},
		{"time", func() (string, error) { return decodePackedTime(packDT(0, 0, 0, 23, 59, 58, 0)) }, "23:59:58"},
		{"timestamp string", func() (string, error) {
			us, err := parseTimestamp("2026-01-02 03:04:05.123456 UTC")
			return formatValue(&bq.TableFieldSchema{Type: "TIMESTAMP"}, us, true).(string), err
		}, "1767323045123456"},
		{"datetime canonical", func() (string, error) { return parseDateTime("2024-05-06 07:08:09.500000") }, "2024-05-06T07:08:09.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.got()
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := decodePackedDateTime(packDT(2024, 13, 6, 7, 8, 9, 0)); err == nil {
		t.Error("month 13 accepted")
	}
}
