package timestamps

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Timestamp units a numeric timestamp field may declare.
const (
	UnitMillis  = "ms"
	UnitSeconds = "s"
	UnitMicros  = "us"
	UnitNanos   = "ns"
)

// Bounds of a usable event time: years 1 to 9999, so every time renders in
// the four-digit-year key forms.
var (
	MinEventMs = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	MaxEventMs = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()
)

// UnitNames are the timestamp units a field may declare, and their names
// in messages.
var UnitNames = map[string]string{UnitSeconds: "seconds", UnitMillis: "milliseconds", UnitMicros: "microseconds", UnitNanos: "nanoseconds"}

// UnitOrder is the order hints try the units in.
var UnitOrder = []string{UnitSeconds, UnitMillis, UnitMicros, UnitNanos}

// EpochToMillis converts n epoch units (UnitSeconds, UnitMillis, UnitMicros
// or UnitNanos; "" is milliseconds) to epoch milliseconds, rounding toward
// the past; ok is false when the result would overflow.
func EpochToMillis(n int64, unit string) (ms int64, ok bool) {
	switch unit {
	case UnitSeconds:
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return 0, false
		}
		return n * 1000, true
	case UnitMicros:
		return floorDiv(n, 1000), true
	case UnitNanos:
		return floorDiv(n, 1_000_000), true
	}
	return n, true
}

// ErrOutsideYears marks a number that is no time of years 1 to 9999 in
// its unit.
var ErrOutsideYears = errors.New("no four-digit year")

// ParseUTCTimestamp is a fast path for the common form
// YYYY-MM-DDTHH:MM:SS[.fraction]Z, parsed from the bytes without a string.
// It reports false for anything else (other offsets, odd lengths, invalid
// dates), which then goes through ParseTimestamp; where it succeeds it gives
// exactly ParseTimestamp's result.
func ParseUTCTimestamp(b []byte) (int64, bool) {
	n := len(b)
	if n < 20 || n > 30 || (b[n-1] != 'Z' && b[n-1] != 'z') ||
		b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != 't') || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	num := func(i, w int) (int, bool) {
		v := 0
		for _, c := range b[i : i+w] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	if day > daysInMonth(year, month) {
		return 0, false
	}
	ms := 0
	if n > 20 {
		// A fraction: '.', one to nine digits, then Z.
		if b[19] != '.' || n-21 < 1 || n-21 > 9 {
			return 0, false
		}
		frac, ok := num(20, n-21)
		if !ok {
			return 0, false
		}
		for i := n - 21; i < 3; i++ {
			frac *= 10
		}
		for i := n - 21; i > 3; i-- {
			frac /= 10
		}
		ms = frac
	}
	return (daysFromCivil(year, month, day)*86400+int64(hour*3600+minute*60+sec))*1000 + int64(ms), true
}

// daysInMonth is the number of days of month (1-12) in year, proleptic
// Gregorian as the time package counts them.
func daysInMonth(year, month int) int {
	if month == 2 {
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	}
	return 30 + (month+month/8)%2
}

// daysFromCivil is the days from 1970-01-01 to year-month-day (year 0 to
// 9999), as time.Date counts them, without time.Date's normalisation:
// Howard Hinnant's days_from_civil
// (https://howardhinnant.github.io/date_algorithms.html), the inverse of
// utcFields. TestUTCTimestampFastPathAgreesWithTimeParse and
// FuzzUTCTimestampFastPath check it through parseUTCTimestamp.
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := int64(month + 9)
	if month > 2 {
		mp = int64(month - 3)
	}
	doy := (153*mp+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// ParseTimestamp parses an RFC 3339 timestamp with any UTC offset and an
// optional fraction, returning epoch milliseconds (sub-millisecond digits are
// truncated toward the past). A space may stand for the T between date and
// time, as RFC 3339 (section 5.6) allows and exports write it.
func ParseTimestamp(s string) (int64, error) {
	text := strings.ToUpper(s)
	if len(text) > 10 && text[10] == ' ' {
		text = text[:10] + "T" + text[11:]
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return 0, fmt.Errorf("%q is not RFC 3339 (e.g. 2026-03-01T10:15:30.250Z or 2026-03-01T12:15:30+02:00)", s)
	}
	return t.UnixMilli(), nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
