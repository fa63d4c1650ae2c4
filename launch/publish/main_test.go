package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/internal/testrig/gobuild"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func TestTopicDefaultsOnlyUnderTheEmulator(t *testing.T) {
	t.Setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:8085")
	c, err := parseFlags(nil)
	if err != nil || c.topic != "projects/local-project/topics/vitals" {
		t.Errorf("under the emulator: topic %q, err %v; want make stream's topic", c.topic, err)
	}
	t.Setenv("PUBSUB_EMULATOR_HOST", "")
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "--topic is required") {
		t.Errorf("without the emulator: err %v, want --topic required", err)
	}
}

// TestExitCodes runs the binary: bad flags exit 2 with one line, a topic
// that does not exist (on a real Pub/Sub emulator, reached through the
// default topic) exits 1.
func TestExitCodes(t *testing.T) {
	host := emulators.StartPubSub(t)
	bin := filepath.Join(t.TempDir(), "publish")
	gobuild.Build(t, bin, ".")
	tests := []struct {
		name string
		env  string
		args []string
		code int
		want string
	}{
		{"help", "", []string{"--help"}, 0, "Exit codes"},
		{"unknown flag", "", []string{"--nope"}, 2, "flag provided but not defined"},
		{"bad rate", host, []string{"--rate=0"}, 2, "--rate"},
		{"no topic, no emulator", "", nil, 2, "--topic is required"},
		{"the default topic does not exist", host, []string{"--duration=1s"}, 1, "topic projects/local-project/topics/vitals does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), "PUBSUB_EMULATOR_HOST="+tc.env)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.want)
			}
			if code != 0 && strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 {
				t.Errorf("stderr %q: want one line", stderr.String())
			}
		})
	}
}

// TestProtoAndJSONCarryTheSameReading: two generators with the same seed,
// one per format, publish the same readings: the pipeline's decoders give
// the same records, or the same dead-letter reason for the bad ones.
func TestProtoAndJSONCarryTheSameReading(t *testing.T) {
	spec, err := schemas.BuiltinSpec(schemas.DefaultSpecName())
	if err != nil {
		t.Fatal(err)
	}
	jp := codec.NewParser(spec)
	pp, err := codec.NewProtoParser(spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{sensors: 20, badFraction: 0.2, lateFraction: 0.1, lateBy: time.Hour, missingFraction: 0.1, seed: 11}
	cfg.format = "json"
	gj, err := newGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.format = "proto"
	gp, err := newGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)
	reasons := map[string]int{}
	for n := 0; n < 300; n++ {
		j, _, jbad, _, err := gj.next(now)
		if err != nil {
			t.Fatal(err)
		}
		p, _, pbad, _, err := gp.next(now)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, jerr := jp.Parse(nil, j, "t")
		fromProto, perr := pp.Parse(nil, p, "t")
		reason := func(err error) string {
			if err == nil {
				return ""
			}
			return schemas.Reason(err)
		}
		if jbad != pbad || reason(jerr) != reason(perr) || (jerr != nil) != jbad {
			t.Fatalf("message %d: bad %v/%v, reasons json %q (%v), proto %q (%v)", n, jbad, pbad, reason(jerr), jerr, reason(perr), perr)
		}
		reasons[reason(jerr)]++
		if len(fromJSON) != len(fromProto) {
			t.Fatalf("json gave %d records, proto %d", len(fromJSON), len(fromProto))
		}
		for i := range fromJSON {
			if !reflect.DeepEqual(fromJSON[i].Values, fromProto[i].Values) || fromJSON[i].EventMs != fromProto[i].EventMs {
				t.Errorf("records differ:\n json  %+v\n proto %+v", fromJSON[i], fromProto[i])
			}
		}
	}
	if reasons[""] == 0 || reasons["malformed"] == 0 || reasons["out_of_range"] == 0 {
		t.Errorf("reasons %v: want valid, malformed and out_of_range readings", reasons)
	}
}

// TestEverySpecPublishes: every built-in spec's readings are generated
// and valid (proto only where the spec declares it).
func TestEverySpecPublishes(t *testing.T) {
	for _, name := range schemas.BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			spec, err := schemas.BuiltinSpec(name)
			if err != nil {
				t.Fatal(err)
			}
			g, err := newGenerator(config{spec: name, sensors: 5, format: "json", seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			data, _, _, _, err := g.next(time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := codec.NewParser(spec).Parse(nil, data, "t"); err != nil {
				t.Errorf("%s: %v", data, err)
			}
			_, err = parseFlags([]string{"--topic=projects/p/topics/t", "--spec=" + name, "--format=proto"})
			if got, want := err == nil, spec.Proto != nil; got != want {
				t.Errorf("--spec=%s --format=proto: error %v; want one only without a proto declaration", name, err)
			}
		})
	}
}

func TestParseFlagsFormat(t *testing.T) {
	tests := []struct {
		format  string
		wantErr bool
	}{
		{"json", false},
		{"proto", false},
		{"avro", true},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			_, err := parseFlags([]string{"--topic=projects/p/topics/t", "--format=" + tt.format})
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseFlags(--format=%s) error %v; want error %v", tt.format, err, tt.wantErr)
			}
		})
	}
}

// TestGeneratorNeverRepeatsASensorMillisecond: readings generated faster than
// one per sensor per millisecond (all at the same instant here), on time or
// late, still carry distinct event times per sensor, so the pipeline has no
// duplicates to merge; the payload's timestamp and event_ts agree.
func TestGeneratorNeverRepeatsASensorMillisecond(t *testing.T) {
	g, err := newGenerator(config{sensors: 3, lateFraction: 0.3, lateBy: 2 * time.Hour, format: "json", seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 10, 15, 30, 0, time.UTC)
	seen := map[string]bool{}
	lates := 0
	for n := 0; n < 600; n++ {
		data, attrs, _, late, err := g.next(now)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			SensorID  string `json:"sensor_id"`
			Timestamp string `json:"timestamp"`
		}
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatalf("payload %s: %v", data, err)
		}
		ts, err := time.Parse(time.RFC3339Nano, p.Timestamp)
		if err != nil {
			t.Fatal(err)
		}
		if got := strconv.FormatInt(ts.UnixMilli(), 10); got != attrs["event_ts"] {
			t.Fatalf("payload timestamp %s (%s ms) but event_ts %s", p.Timestamp, got, attrs["event_ts"])
		}
		key := p.SensorID + "@" + attrs["event_ts"]
		if seen[key] {
			t.Fatalf("message %d repeats sensor %s at %s", n, p.SensorID, p.Timestamp)
		}
		seen[key] = true
		if late {
			lates++
			if ts.After(now.Add(-time.Hour)) {
				t.Errorf("late reading at %s, want about 2h before %s", ts, now)
			}
		}
	}
	if lates == 0 || lates == 600 {
		t.Fatalf("%d late readings of 600 with late_fraction 0.3", lates)
	}
}

// TestReadingsPerMessage: a message of N readings splits back, as the
// pipeline reads it, into N payloads, each parsed alone: NDJSON lines, a
// JSON array, or the spec's proto batch wrapper.
func TestReadingsPerMessage(t *testing.T) {
	for _, tt := range []struct{ format, batchAs string }{{"json", "lines"}, {"json", "array"}, {"proto", "lines"}} {
		t.Run(tt.format+" "+tt.batchAs, func(t *testing.T) {
			cfg, err := parseFlags([]string{"--topic=projects/p/topics/t", "--format=" + tt.format, "--readings_per_message=10", "--batch_as=" + tt.batchAs, "--seed=5"})
			if err != nil {
				t.Fatal(err)
			}
			cfg.badFraction, cfg.lateFraction = 0, 0
			g, err := newGenerator(cfg)
			if err != nil {
				t.Fatal(err)
			}
			spec, _ := schemas.BuiltinSpec(schemas.DefaultSpecName())
			c := hours.MustCompile(spec, hours.CompileOptions{Format: tt.format})
			data, attrs, bad, late, err := g.nextMessage(time.Now())
			if err != nil || bad != 0 || late != 0 || attrs["event_ts"] == "" || attrs["record_id"] == "" {
				t.Fatalf("nextMessage: %v, attrs %v, bad %d, late %d", err, attrs, bad, late)
			}
			parts, err := c.Decoder().Split(data)
			if err != nil || len(parts) != 10 {
				t.Fatalf("Split: %d parts, %v; want 10", len(parts), err)
			}
			for i, p := range parts {
				if recs, err := c.Decoder().ParseString(nil, p, "t"); err != nil || len(recs) != 1 {
					t.Errorf("reading %d: %v", i, err)
				}
			}
		})
	}
	if _, err := parseFlags([]string{"--topic=projects/p/topics/t", "--readings_per_message=0"}); err == nil {
		t.Error("--readings_per_message=0 accepted")
	}
	b, err := os.ReadFile("../../schemas/specs/vitals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	noBatch := filepath.Join(t.TempDir(), "v.yaml")
	if err := os.WriteFile(noBatch, []byte(strings.Replace(string(b), "  batch: {message: sensorpipe.v1.Readings, number: 1}\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parseFlags([]string{"--topic=projects/p/topics/t", "--spec=" + noBatch, "--format=proto", "--readings_per_message=5"}); err == nil || !strings.Contains(err.Error(), "proto.batch") {
		t.Errorf("a proto spec without a batch wrapper: %v", err)
	}
}
