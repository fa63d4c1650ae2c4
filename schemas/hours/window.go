package hours

import "time"

// Window arithmetic. Fixed windows are aligned to the Unix epoch, so hourly
// windows are UTC hours, the same hours the row keys bucket by.

// WindowStart is the start, in epoch milliseconds, of the fixed window of
// size that holds ms.
func WindowStart(ms int64, size time.Duration) int64 {
	n := size.Milliseconds()
	r := ms % n
	if r < 0 {
		r += n
	}
	return ms - r
}

// WindowEnd is the (exclusive) end, in epoch milliseconds, of the fixed
// window of size that holds ms.
func WindowEnd(ms int64, size time.Duration) int64 {
	return WindowStart(ms, size) + size.Milliseconds()
}

// TooLate reports whether a reading with event time eventMs, seen at nowMs,
// is later than allowed: its window closed (end plus allowed lateness) at or
// before nowMs. A streaming runner silently drops such a reading at the
// grouping, so the stream dead-letters it before windowing instead.
func TooLate(eventMs, nowMs int64, size, lateness time.Duration) bool {
	return WindowEnd(eventMs, size)+lateness.Milliseconds() <= nowMs
}
