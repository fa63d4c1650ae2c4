// Package bench holds what sensorpipe's benchmarks share: a workload of
// generated readings of a dataset spec (internal/testrig/synth), emulators started
// outside a test (through internal/testrig/emulators), and a description of the
// machine the figures were measured on.
package bench

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/testrig/synth"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// Workload describes generated readings: Sensors identities each reporting
// once a second for Seconds seconds from Start.
type Workload struct {
	Sensors int
	Seconds int
	Start   time.Time
	// Spec is the dataset whose readings are generated; nil means the
	// default built-in spec (schemas.DefaultSpecName).
	Spec *schemas.Spec
}

// DefaultStart is the first event time of a generated workload: the start of
// a UTC hour, so 300 seconds of readings fall in one row per sensor.
var DefaultStart = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// The shares of the generated lines that look like the testdata: one
// optional value in twenty is null (imputed later), one timestamp in ten
// is epoch milliseconds instead of RFC 3339.
const (
	MissingShare = 0.05
	EpochMsShare = 0.1
)

// Readings is the number of lines the workload generates.
func (w Workload) Readings() int { return w.Sensors * w.Seconds }

// Lines makes the workload's lines.
type Lines struct {
	gen   *synth.Generator
	start int64
}

// Lines returns the workload's line generator.
func (w Workload) Lines() (*Lines, error) {
	spec := w.Spec
	if spec == nil {
		var err error
		if spec, err = schemas.BuiltinSpec(schemas.DefaultSpecName()); err != nil {
			return nil, err
		}
	}
	g, err := synth.New(spec, synth.Options{IDs: max(1, w.Sensors), MissingShare: MissingShare, EpochMsShare: EpochMsShare})
	if err != nil {
		return nil, err
	}
	return &Lines{gen: g, start: w.Start.UnixMilli()}, nil
}

// EventMs is the event time of sensor's reading second seconds after the
// start: each sensor has its own sub-second phase.
func (l *Lines) EventMs(sensor, second int) int64 {
	return l.start + int64(second)*1000 + int64(sensor*37%1000)
}

// Append appends sensor's reading second seconds after the start as a JSON
// line without a newline. The same sensor and second give the same line.
func (l *Lines) Append(dst []byte, sensor, second int) []byte {
	return l.gen.AppendJSON(dst, sensor, l.EventMs(sensor, second))
}

// AppendAt appends sensor's reading at event time ms (epoch milliseconds).
func (l *Lines) AppendAt(dst []byte, sensor int, ms int64) []byte {
	return l.gen.AppendJSON(dst, sensor, ms)
}

// WriteTo writes the workload as JSON Lines, in arrival order: second by
// second, every sensor within a second.
func (w Workload) WriteTo(out io.Writer) (int64, error) {
	lines, err := w.Lines()
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	var n int64
	var buf []byte
	for s := 0; s < w.Seconds; s++ {
		for id := 0; id < w.Sensors; id++ {
			buf = lines.Append(buf[:0], id, s)
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

// String describes the workload.
func (w Workload) String() string {
	name := schemas.DefaultSpecName()
	if w.Spec != nil {
		name = w.Spec.Name
	}
	return fmt.Sprintf("%d %s readings: %d sensors at 1 Hz for %d s from %s", w.Readings(), name, w.Sensors, w.Seconds, w.Start.Format(time.RFC3339))
}
