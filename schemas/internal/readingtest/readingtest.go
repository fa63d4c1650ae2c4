// Package readingtest parses readings for the tests of schemas' packages,
// as the batch's JSON input would. Only tests import it.
package readingtest

import (
	"fmt"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// Parse parses lines as the spec's JSON readings, ending the test on an
// error.
func Parse(t testing.TB, s *schemas.Spec, lines ...string) []schemas.Record {
	t.Helper()
	p := codec.NewParser(s)
	var recs []schemas.Record
	for _, l := range lines {
		var err error
		if recs, err = p.Parse(recs, []byte(l), "f"); err != nil {
			t.Fatalf("Parse(%s): %v", l, err)
		}
	}
	return recs
}

// VitalsLine is a reading of the built-in vitals spec as a JSON line at
// epoch milliseconds ms; hr < 0 is a null heart rate, for imputation.
func VitalsLine(sensor string, ms int64, hr float64) string {
	h := "null"
	if hr >= 0 {
		h = fmt.Sprint(hr)
	}
	return fmt.Sprintf(`{"sensor_id":%q,"timestamp":%d,"heart_rate":%s,"body_temperature":36.8,"spO2":98,"battery_level":87}`, sensor, ms, h)
}
