package dofns

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func vitalsLine(sensor, ts string) string {
	return `{"sensor_id":"` + sensor + `","timestamp":` + ts + `,"heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`
}

// TestParseMessageFnReadsEveryReading: a message's NDJSON lines and a JSON
// array's elements are readings of their own; a bad line is one dead
// letter beside the good ones; messages and records are counted apart, as
// are the timestamp attribute's problems and keys not in the spec.
func TestParseMessageFnReadsEveryReading(t *testing.T) {
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	compiled := hours.MustCompile(spec, hours.CompileOptions{})
	at := "1772360130250"
	msgs := []Message{
		{ID: "1", Data: []byte(vitalsLine("a", at) + "\nnot json\n" + strings.Replace(vitalsLine("b", at), "{", `{"firmware_version":"2",`, 1)),
			Attributes: map[string]string{"event_ts": at}},
		{ID: "2", Data: []byte("[" + vitalsLine("c", at) + "," + vitalsLine("d", "1772367330250") + "]"),
			Attributes: map[string]string{"event_ts": at}}, // d is 2h off
		{ID: "3", Data: []byte(vitalsLine("e", at))},                                                    // no attribute
		{ID: "4", Data: []byte(vitalsLine("f", at)), Attributes: map[string]string{"event_ts": "soon"}}, // unparseable
	}
	p, s := beam.NewPipelineWithRoot()
	records, dead := beam.ParDo2(s, &ParseMessageFn{Spec: compiled, Source: "sub", TimestampAttribute: "event_ts"}, beam.CreateList(s, msgs))
	passert.Count(s, records, "readings", 6)
	passert.Count(s, dead, "dead letters", 1)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Metrics()
	c := ledger.FromMetrics(&m)
	for k, want := range map[ledger.Key]int64{
		ledger.InputMessages: 4, ledger.InputRecords: 7, ledger.InputRejected: 1,
		ledger.TimestampAttributeMissing: 1, ledger.TimestampAttributeUnparseable: 1, ledger.TimestampAttributeDisagrees: 1,
		ledger.UnknownFieldKey("firmware_version"): 1,
	} {
		if c[k] != want {
			t.Errorf("%v = %d; want %d", k, c[k], want)
		}
	}
}

func init() {
	register.Function1x1(clockAheadLetter)
}

// clockAheadLetter reports whether d is the out_of_range dead letter of
// sensor "fast" whose clock is ahead.
func clockAheadLetter(d deadletter.DeadLetter) bool {
	return d.Reason == schemas.ErrOutOfRange.Error() && strings.Contains(d.Error, "ahead of the wall clock") &&
		strings.Contains(d.Error, "max_future 1h0m0s") && strings.Contains(d.Payload, `"fast"`)
}

// TestParseMessageFnRejectsAClockFarAhead: with MaxFuture set, a reading
// further ahead of the wall clock than it is an out_of_range dead letter,
// counted for its sensor; the readings beside it in the message, and one
// just within MaxFuture, pass. Without MaxFuture (a batch) it passes too.
func TestParseMessageFnRejectsAClockFarAhead(t *testing.T) {
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	compiled := hours.MustCompile(spec, hours.CompileOptions{})
	now := time.Now()
	ms := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMilli(), 10) }
	msgs := []Message{
		{ID: "1", Data: []byte(vitalsLine("ok-1", ms(-time.Minute)) + "\n" + vitalsLine("fast", ms(72*time.Hour)) + "\n" + vitalsLine("ok-2", ms(0)))},
		{ID: "2", Data: []byte(vitalsLine("fast", ms(73*time.Hour)))},
		{ID: "3", Data: []byte(vitalsLine("slightly-fast", ms(50*time.Minute)))},
	}
	p, s := beam.NewPipelineWithRoot()
	records, dead := beam.ParDo2(s, &ParseMessageFn{Spec: compiled, Source: "sub", MaxFuture: time.Hour}, beam.CreateList(s, msgs))
	passert.Count(s, records, "readings", 3)
	passert.Count(s, dead, "dead letters", 2)
	passert.True(s, dead, clockAheadLetter)
	// Without MaxFuture nothing is rejected.
	unchecked, none := beam.ParDo2(s.Scope("unchecked"), &ParseMessageFn{Spec: compiled, Source: "sub"}, beam.CreateList(s, msgs))
	passert.Count(s, unchecked, "unchecked readings", 5)
	passert.Empty(s, none)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Metrics()
	c := ledger.FromMetrics(&m)
	for k, want := range map[ledger.Key]int64{
		ledger.InputRecords: 10, ledger.InputRejected: 2, ledger.ClockAheadKey("fast"): 2, ledger.ClockAheadKey("slightly-fast"): 0,
	} {
		if c[k] != want {
			t.Errorf("%v = %d; want %d", k, c[k], want)
		}
	}
}

// TestParseMessageFnBoundsEachReading: --max_line_bytes bounds a reading,
// not its message: a reading over it is one too_large dead letter and the
// readings beside it land; a gzip message is read decompressed; a gzip
// message over its decompressed bound, and a message that is not text,
// are each one dead letter holding the message.
func TestParseMessageFnBoundsEachReading(t *testing.T) {
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	compiled := hours.MustCompile(spec, hours.CompileOptions{})
	at := "1772360130250"
	big := strings.Replace(vitalsLine("big", at), "{", `{"note":"`+strings.Repeat("n", 2000)+`",`, 1)
	zip := func(b []byte) []byte {
		var out bytes.Buffer
		w := gzip.NewWriter(&out)
		w.Write(b)
		w.Close()
		return out.Bytes()
	}
	msgs := []Message{
		{ID: "1", Data: []byte(vitalsLine("a", at) + "\n" + big + "\n" + vitalsLine("b", at))},
		{ID: "2", Data: zip([]byte(vitalsLine("c", at) + "\n" + vitalsLine("d", at)))},
		{ID: "3", Data: zip(bytes.Repeat([]byte(vitalsLine("e", at)+"\n"), 100))},
		{ID: "4", Data: []byte{'{', 0xff, '\n', 0xfe, '}'}},
	}
	p, s := beam.NewPipelineWithRoot()
	records, dead := beam.ParDo2(s, &ParseMessageFn{Spec: compiled, Source: "sub", MaxLineBytes: 1024, MaxDecompressedBytes: 4096}, beam.CreateList(s, msgs))
	passert.Count(s, records, "readings", 4)
	reasons := beam.ParDo(s, deadLetterSize, dead)
	passert.Equals(s, reasons, fmt.Sprintf("too_large %d", len(big)), fmt.Sprintf("too_large %d", len(msgs[2].Data)), "malformed 5")
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Metrics()
	c := ledger.FromMetrics(&m)
	for k, want := range map[ledger.Key]int64{ledger.InputMessages: 4, ledger.InputRecords: 7, ledger.InputRejected: 3} {
		if c[k] != want {
			t.Errorf("%v = %d; want %d", k, c[k], want)
		}
	}
}

func init() { register.Function1x1(deadLetterSize) }

// deadLetterSize is a dead letter's reason and the size of its payload.
func deadLetterSize(d deadletter.DeadLetter) string {
	b, _ := d.PayloadBytes()
	return fmt.Sprintf("%s %d", d.Reason, len(b))
}
