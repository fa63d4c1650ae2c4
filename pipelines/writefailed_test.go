package pipelines

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	register.Function2x0(keyByLinePlace)
	register.Function1x1(deadPlace)
}

// lineOfSensor reads the line number a test line carries in its sensor id
// ("s7" is line 7).
var lineOfSensor = regexp.MustCompile(`"sensor_id":"s(\d+)"`)

// keyByLinePlace keys a line by its place in a file, as ReadLinesFn
// would: in.jsonl, line n for sensor sn.
func keyByLinePlace(line string, emit func(string, string)) {
	n := int64(0)
	if m := lineOfSensor.FindStringSubmatch(line); m != nil {
		n, _ = strconv.ParseInt(m[1], 10, 64)
	}
	emit(deadletter.LineSource("in.jsonl", n, 0), line)
}

// deadPlace renders a dead letter as "reason sink source:line sensor".
func deadPlace(d deadletter.DeadLetter) string {
	sensor := ""
	if m := lineOfSensor.FindStringSubmatch(d.Payload); m != nil {
		sensor = "s" + m[1]
	}
	return fmt.Sprintf("%s %s %s:%d %s", d.Reason, d.Sink, d.Source, d.Line, sensor)
}

// TestWriteFailedDeadLettersCarryTheirLine writes a batch to a Bigtable
// nobody answers: each reading's write_failed dead letter names its file
// and line, as a parse's dead letter does, through the grouping by hour
// and the write.
func TestWriteFailedDeadLettersCarryTheirLine(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	t.Setenv("BIGTABLE_EMULATOR_HOST", dead)

	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec := hours.MustCompile(loaded, hours.CompileOptions{})
	spec.Rollup = nil
	p, s := beam.NewPipelineWithRoot()
	var in, want []string
	for i := 1; i <= 6; i++ {
		in = append(in, vitalsLine(fmt.Sprintf("s%d", i), `"2026-03-01T10:00:00Z"`, "70"))
		want = append(want, fmt.Sprintf("write_failed bigtable in.jsonl:%d s%d", i, i))
	}
	in = append(in, `{"sensor_id":"s7"}`)
	want = append(want, "missing_field parse in.jsonl:7 s7")
	lines := beam.ParDo(s, keyByLinePlace, beam.CreateList(s, in))
	cfg := Config{Spec: spec, Bigtable: bigtableio.Config{Project: "p", Instance: "i"}, Retry: retry.Settings{Deadline: 2 * time.Second, AttemptTimeout: 500 * time.Millisecond}}
	records, parseDead := parseLines(s, cfg, lines, true)
	var dl []beam.PCollection
	for _, d := range append([]beam.PCollection{parseDead}, ingestBatch(s, cfg, false, records)...) {
		dl = append(dl, beam.WindowInto(s, window.NewGlobalWindows(), d))
	}
	passert.Equals(s, beam.ParDo(s, deadPlace, beam.Flatten(s, dl...)), toAny(want)...)
	ptest.RunAndValidate(t, p)
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
