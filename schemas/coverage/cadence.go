package coverage

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// ReadingCadence is the interval a reading declares in the spec's
// cadence_field, read by CadenceOf. ok is false when the spec has no
// cadence_field or the reading carries no usable interval.
func ReadingCadence(s *schemas.Spec, r *schemas.Record) (d time.Duration, ok bool) {
	if s.CadenceField == "" {
		return 0, false
	}
	i := s.FieldIndex(s.CadenceField)
	if i < 0 || i >= len(r.Values) {
		return 0, false
	}
	return CadenceOf(r.Values[i])
}

// CadenceOf reads an interval from a cadence field's value: a Go duration
// string ("30s", "1m30s"), or a number of seconds, as an int, a float or
// a string that parses as one ("30", "1.5"). The interval is in whole
// milliseconds, truncated, since event times are milliseconds. ok is false
// for anything else, and for an interval under 1 ms or too long for a
// time.Duration.
func CadenceOf(v schemas.Value) (time.Duration, bool) {
	var d time.Duration
	switch v.Kind {
	case schemas.KindInt:
		if v.Int <= 0 || v.Int > math.MaxInt64/int64(time.Second) {
			return 0, false
		}
		d = time.Duration(v.Int) * time.Second
	case schemas.KindFloat:
		var ok bool
		if d, ok = secondsDuration(v.Num); !ok {
			return 0, false
		}
	case schemas.KindString:
		t := strings.TrimSpace(v.Str)
		if pd, err := time.ParseDuration(t); err == nil {
			d = pd
			break
		}
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return 0, false
		}
		var ok bool
		if d, ok = secondsDuration(f); !ok {
			return 0, false
		}
	default:
		return 0, false
	}
	if d = d.Truncate(time.Millisecond); d < time.Millisecond {
		return 0, false
	}
	return d, true
}

// secondsDuration is secs seconds as a duration; false when it is not a
// positive number that fits one.
func secondsDuration(secs float64) (time.Duration, bool) {
	if !(secs > 0) || secs >= float64(math.MaxInt64)/float64(time.Second) {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}
