package schemas

// Tests of the hot-path fast paths against the standard library they stand in for.

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

// TestAppendFloatMatchesStrconv checks appendFloat's fast path against
// strconv.AppendFloat(x, 'f', -1, 64) on the values sensors send (few
// decimals), the edges of the fast path, and random float64s.
func TestAppendFloatMatchesStrconv(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.2, 0.3, 0.7, 1.005, 36.6, 72.5, 99.99, 100, 1e-3, 5e-4,
		0.001, 0.0015, 123456789.125, 999999999.999, 1e9, -1e9, 1e9 - 0.5, 1e21, 5e-324, math.MaxFloat64,
		math.Inf(1), math.Inf(-1), math.NaN(), 0.1 + 0.2, 1.0 / 3, 2.675, 4.35, 8.675, 1.115, 0.285}
	for i := -200000; i <= 200000; i++ {
		vals = append(vals, float64(i)/10, float64(i)/100, float64(i)/1000, float64(i)*0.001, float64(i)*0.01, float64(i)*0.1)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300000 {
		vals = append(vals,
			math.Float64frombits(rng.Uint64()),
			(rng.Float64()-0.5)*2e9,
			float64(rng.Int64N(2e12)-1e12)/1000,
			math.Nextafter(float64(rng.Int64N(2e9)-1e9)/100, math.Inf(1)),
			math.Nextafter(float64(rng.Int64N(2e9)-1e9)/100, math.Inf(-1)))
	}
	for _, x := range vals {
		got := string(appendFloat([]byte("x"), x))
		want := string(strconv.AppendFloat([]byte("x"), x, 'f', -1, 64))
		if got != want {
			t.Fatalf("appendFloat(%v) = %q, want %q", x, got, want)
		}
	}
}

// TestUTCFieldsMatchesTime checks utcFields against time's UTC fields
// across its fast range, its edges, and outside it.
func TestUTCFieldsMatchesTime(t *testing.T) {
	ms := []int64{0, 1, -1, 86399999, 86400000, 951782400000, 951868800000, timestamps.MaxEventMs - 1, timestamps.MaxEventMs, timestamps.MaxEventMs + 1, timestamps.MinEventMs, -62135596800000}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500000 {
		ms = append(ms, rng.Int64N(timestamps.MaxEventMs), rng.Int64N(timestamps.MaxEventMs-timestamps.MinEventMs)+timestamps.MinEventMs, rng.Int64N(4e12))
	}
	for _, m := range ms {
		tt := time.UnixMilli(m).UTC()
		y, mo, d, h, mi := utcFields(m)
		if y != tt.Year() || mo != int(tt.Month()) || d != tt.Day() || h != tt.Hour() || mi != tt.Minute() {
			t.Fatalf("utcFields(%d) = %d-%d-%d %d:%d, want %v", m, y, mo, d, h, mi, tt)
		}
	}
}
