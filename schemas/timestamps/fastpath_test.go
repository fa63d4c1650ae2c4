package timestamps

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestUTCTimestampFastPathRandom checks parseUTCTimestamp against
// ParseTimestamp on instants from year 0 to 9999 in every fraction width.
func TestUTCTimestampFastPathRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	lo := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	layouts := []string{"2006-01-02T15:04:05Z", "2006-01-02T15:04:05.0Z", "2006-01-02T15:04:05.000Z", "2006-01-02T15:04:05.000000000Z"}
	for i := range 400000 {
		in := time.UnixMilli(rng.Int64N(MaxEventMs-lo) + lo).UTC().Format(layouts[i%len(layouts)])
		want, err := ParseTimestamp(in)
		got, ok := ParseUTCTimestamp([]byte(in))
		if err != nil || !ok || got != want {
			t.Fatalf("parseUTCTimestamp(%q) = %d, %v; ParseTimestamp = %d, %v", in, got, ok, want, err)
		}
	}
	for m := 1; m <= 12; m++ {
		for _, y := range []int{0, 1, 4, 100, 400, 1900, 2000, 2023, 2024, 9999} {
			if got, want := daysInMonth(y, m), time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day(); got != want {
				t.Fatalf("daysInMonth(%d, %d) = %d, want %d", y, m, got, want)
			}
		}
	}
}
