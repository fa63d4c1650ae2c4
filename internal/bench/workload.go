// Package bench holds what sensorpipe's benchmarks share: a generator of
// realistic vitals lines, emulators started outside a test (through
// internal/emulators), and a description of the machine the figures were
// measured on. It imports no sensorpipe package but internal/emulators,
// which imports none, so the schemas benchmarks can use it too.
package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Workload describes generated vitals readings: Sensors sensors each
// reporting once a second for Seconds seconds from Start.
type Workload struct {
	Sensors int
	Seconds int
	Start   time.Time
}

// DefaultStart is the first event time of a generated workload: the start of
// a UTC hour, so 300 seconds of readings fall in one row per sensor.
var DefaultStart = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// Readings is the number of lines the workload generates.
func (w Workload) Readings() int { return w.Sensors * w.Seconds }

// WriteTo writes the workload as JSON Lines, in arrival order: second by
// second, every sensor within a second.
func (w Workload) WriteTo(out io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(out, 1<<20)
	var n int64
	var buf []byte
	for s := 0; s < w.Seconds; s++ {
		for id := 0; id < w.Sensors; id++ {
			buf = AppendVitalsLine(buf[:0], w.Start, id, s)
			buf = append(buf, '\n')
			m, err := bw.Write(buf)
			n += int64(m)
			if err != nil {
				return n, err
			}
		}
	}
	return n, bw.Flush()
}

// mix is a small deterministic hash of a sensor and a second, so generated
// values vary without a random source.
func mix(sensor, second int) uint32 {
	h := uint32(sensor)*2654435761 ^ uint32(second)*2246822519
	h ^= h >> 15
	h *= 2654435761
	return h ^ h>>13
}

// AppendVitalsLine appends the reading of sensor at second seconds after
// start, as a vitals JSON line without a newline. It looks like the
// testdata: about one line in twenty has "heart_rate": null (a missed beat
// detection, imputed later), one in ten gives its timestamp as epoch
// milliseconds instead of RFC 3339, and each sensor has its own
// sub-second phase.
func AppendVitalsLine(dst []byte, start time.Time, sensor, second int) []byte {
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

// VitalsLines returns n lines of one sensor, one a second from start: a
// prepared group's worth of input for the micro-benchmarks.
func VitalsLines(sensor, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = AppendVitalsLine(nil, DefaultStart, sensor, i)
	}
	return out
}

// String describes the workload.
func (w Workload) String() string {
	return fmt.Sprintf("%d readings: %d sensors at 1 Hz for %d s from %s", w.Readings(), w.Sensors, w.Seconds, w.Start.Format(time.RFC3339))
}
