package sensorclock

import (
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 15, 30, 400_000, time.UTC) // 0.4 ms into a millisecond
	ms0 := t0.UnixMilli()
	var c Clock
	steps := []struct {
		sensor int
		at     time.Time
		want   int64
	}{
		{1, t0, ms0},     // first reading: its own time
		{1, t0, ms0 + 1}, // same millisecond: moved on
		{1, t0.Add(500 * time.Microsecond), ms0 + 2}, // still not later than the last
		{2, t0, ms0}, // another sensor is independent
		{1, t0.Add(10 * time.Millisecond), ms0 + 10}, // later: its own time again
		{1, t0.Add(-time.Hour), ms0 + 11},            // earlier than the last: after it
		{2, t0.Add(3 * time.Millisecond), ms0 + 3},   // other sensor unaffected by sensor 1
	}
	for i, s := range steps {
		if got := c.Next(s.sensor, s.at); got != s.want {
			t.Errorf("step %d: Next(%d, %s) = %d, want %d", i, s.sensor, s.at.Format(time.RFC3339Nano), got, s.want)
		}
	}
}
