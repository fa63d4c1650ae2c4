package hours

import (
	"strconv"
	"time"
)

// The benchmarks' input lines: vitals readings as the benchmarks have always
// measured them (they were launch/bench's; launch/bench now generates
// any spec's readings through internal/testrig/synth, which imports this package,
// so the lines live here and the figures stay comparable).

// benchStart is the first event time of the lines: the start of a UTC hour.
var benchStart = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// mix is a small deterministic hash of a sensor and a second, so generated
// values vary without a random source.
func mix(sensor, second int) uint32 {
	h := uint32(sensor)*2654435761 ^ uint32(second)*2246822519
	h ^= h >> 15
	h *= 2654435761
	return h ^ h>>13
}

// appendVitalsLine appends the reading of sensor at second seconds after
// start, as a vitals JSON line without a newline. It looks like the
// testdata: about one line in twenty has "heart_rate": null (a missed beat
// detection, imputed later), one in ten gives its timestamp as epoch
// milliseconds instead of RFC 3339, and each sensor has its own
// sub-second phase.
func appendVitalsLine(dst []byte, start time.Time, sensor, second int) []byte {
	h := mix(sensor, second)
	ms := start.UnixMilli() + int64(second)*1000 + int64(sensor*37%1000)
	dst = append(dst, `{"sensor_id":"patient-`...)
	dst = appendPadded(dst, sensor, 5)
	dst = append(dst, `","timestamp":`...)
	if h%10 == 3 {
		dst = strconv.AppendInt(dst, ms, 10)
	} else {
		dst = append(dst, '"')
		dst = time.UnixMilli(ms).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
		dst = append(dst, '"')
	}
	dst = append(dst, `,"heart_rate":`...)
	if h%20 == 7 {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, int64(55+h%50), 10)
	}
	dst = append(dst, `,"body_temperature":`...)
	dst = strconv.AppendFloat(dst, 36+float64(h>>8%25)/10, 'f', 1, 64)
	dst = append(dst, `,"spO2":`...)
	dst = strconv.AppendInt(dst, int64(92+h>>16%9), 10)
	dst = append(dst, `,"battery_level":`...)
	dst = strconv.AppendFloat(dst, 100-float64(second%3600)/60-float64(sensor%7), 'f', 1, 64)
	return append(dst, '}')
}

func appendPadded(dst []byte, n, width int) []byte {
	s := strconv.Itoa(n)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// vitalsLines returns n lines of one sensor, one a second from start: a
// prepared group's worth of input for the micro-benchmarks.
func vitalsLines(sensor, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = appendVitalsLine(nil, benchStart, sensor, i)
	}
	return out
}
