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

	"github.com/sensorpipe/sensorpipe/internal/emulators"
	"github.com/sensorpipe/sensorpipe/schemas"
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
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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

// TestProtoAndJSONEncodersCarryTheSameReading decodes both encodings with
// the pipeline's parsers and compares the records.
func TestProtoAndJSONEncodersCarryTheSameReading(t *testing.T) {
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	jp := schemas.NewParser(spec)
	pp, err := schemas.NewProtoParser(spec)
	if err != nil {
		t.Fatal(err)
	}
	hr := 72
	badHR := 400
	ts := time.Date(2026, 11, 22, 10, 15, 30, 123456789, time.UTC)
	tests := []struct {
		name string
		r    Reading
		want string // the reason, "" when valid
	}{
		{"complete", Reading{SensorID: "sensor-0042", Timestamp: ts, HeartRate: &hr, BodyTemperature: 36.8, SpO2: 98, BatteryLevel: 87}, ""},
		{"heart_rate null", Reading{SensorID: "sensor-0001", Timestamp: ts, BodyTemperature: 37.1, SpO2: 95, BatteryLevel: 12}, ""},
		{"out of range", Reading{SensorID: "sensor-0002", Timestamp: ts, HeartRate: &badHR, BodyTemperature: 36.8, SpO2: 98, BatteryLevel: 87}, "out_of_range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := encodeJSON(tt.r)
			if err != nil {
				t.Fatal(err)
			}
			p, err := encodeProto(tt.r)
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
			if reason(jerr) != tt.want || reason(perr) != tt.want {
				t.Fatalf("reasons json %q (%v), proto %q (%v); want %q", reason(jerr), jerr, reason(perr), perr, tt.want)
			}
			if len(fromJSON) != len(fromProto) {
				t.Fatalf("json gave %d records, proto %d", len(fromJSON), len(fromProto))
			}
			for i := range fromJSON {
				if !reflect.DeepEqual(fromJSON[i].Values, fromProto[i].Values) || fromJSON[i].EventMs != fromProto[i].EventMs {
					t.Errorf("records differ:\n json  %+v\n proto %+v", fromJSON[i], fromProto[i])
				}
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
	g := newGenerator(config{sensors: 3, lateFraction: 0.3, lateBy: 2 * time.Hour, format: "json", seed: 7})
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
