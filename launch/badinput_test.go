package main

import (
	"bytes"
	"compress/gzip"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
)

// vitalsLine is a vitals reading with the given sensor id and raw JSON
// values for timestamp and heart_rate.
func vitalsLine(sensor, ts, hr string) string {
	return `{"sensor_id":` + sensor + `,"timestamp":` + ts + `,"heart_rate":` + hr + `,"body_temperature":36.8,"spO2":98,"battery_level":87}`
}

// TestEveryClassOfBadInput runs one batch over every class of bad input
// the issue lists, each among good lines, and checks where each record
// ends: in Bigtable, or in the dead letter with its reason. Nothing is
// lost, nothing crashes, and the ledger balances.
func TestEveryClassOfBadInput(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	dir := t.TempDir()
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const ts = `"2026-03-01T10:00:00Z"`
	// Each case: a line and where it must end ("written", or a reason).
	// marker starts the sensor id: unique, it finds the record's row or
	// dead letter.
	cases := []struct{ name, marker, line, want string }{
		{"good", "case-good", vitalsLine(`"case-good"`, ts, "70"), "written"},
		{"5 KB sensor_id", "case-5kb", vitalsLine(`"case-5kb-`+strings.Repeat("x", 5000)+`"`, ts, "70"), "invalid_field"},
		{"sensor_id with #", "case-hash", vitalsLine(`"case-hash#1"`, ts, "70"), "invalid_field"},
		{"sensor_id with a newline", "case-newline", vitalsLine(`"case-newline\n1"`, ts, "70"), "written"},
		{"sensor_id in Unicode", "case-unicode", vitalsLine(`"case-unicode-café-☃"`, ts, "70"), "written"},
		{"NaN", "case-nan", vitalsLine(`"case-nan"`, ts, "NaN"), "invalid_field"},
		{"Infinity", "case-inf", vitalsLine(`"case-inf"`, ts, "Infinity"), "malformed"},
		{"1e309", "case-e309", vitalsLine(`"case-e309"`, ts, "1e309"), "invalid_field"},
		{"number as a string", "case-string", vitalsLine(`"case-string"`, ts, `"72"`), "invalid_field"},
		{"duplicate key", "case-dup", `{"sensor_id":"case-dup-1","sensor_id":"case-dup-2","timestamp":` + ts + `,"body_temperature":36.8,"spO2":98,"battery_level":87}`, "malformed"},
		{"year 1", "case-year1", vitalsLine(`"case-year1"`, `"0001-01-01T00:00:00.000Z"`, "70"), "out_of_range"},
		{"year 9999", "case-year9999", vitalsLine(`"case-year9999"`, `"9999-12-31T23:59:59.999Z"`, "70"), "written"},
		{"negative epoch", "case-negative", vitalsLine(`"case-negative"`, "-1000", "70"), "out_of_range"},
	}
	var lines []string
	for _, c := range cases {
		lines = append(lines, c.line)
	}
	write("cases.jsonl", []byte(strings.Join(lines, "\n")+"\n"))
	// A 20 MB line between good ones.
	var big bytes.Buffer
	big.WriteString(vitalsLine(`"good-2"`, ts, "71") + "\n")
	big.WriteString(`{"sensor_id":"huge-1","note":"` + strings.Repeat("z", 20<<20) + `"}` + "\n")
	big.WriteString(vitalsLine(`"good-3"`, ts, "72") + "\n")
	write("big.jsonl", big.Bytes())
	// A UTF-8 byte-order mark, CRLF line ends.
	write("bom.jsonl", []byte("\ufeff"+vitalsLine(`"bom-1"`, ts, "70")+"\n"))
	write("crlf.jsonl", []byte(vitalsLine(`"crlf-1"`, ts, "70")+"\r\n"+vitalsLine(`"crlf-2"`, ts, "70")+"\r\n"))
	// A .gz cut in the middle, after a good line.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(vitalsLine(`"gz-1"`, ts, "70") + "\n"))
	for i := 0; i < 2000; i++ {
		zw.Write([]byte(vitalsLine(`"gz-more"`, ts, "70") + "\n"))
	}
	zw.Close()
	write("truncated.jsonl.gz", gz.Bytes()[:gz.Len()/2])
	// A whole gzip file named .gzip, and a plain one named .gz.
	gz.Reset()
	zw = gzip.NewWriter(&gz)
	zw.Write([]byte(vitalsLine(`"gzip-1"`, ts, "70") + "\n" + vitalsLine(`"gzip-2"`, ts, "71") + "\n"))
	zw.Close()
	write("whole.jsonl.gzip", gz.Bytes())
	write("plain.jsonl.gz", []byte(vitalsLine(`"notgz-1"`, ts, "70")+"\n"))
	// A binary file: 64 KiB of noise, and an empty file.
	noise := make([]byte, 64<<10)
	rand.New(rand.NewSource(1)).Read(noise)
	write("binary.bin", noise)
	write("empty.jsonl", nil)

	dl, summary := t.TempDir(), filepath.Join(t.TempDir(), "summary.json")
	r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + host}, "--input="+dir+"/*", "--bigtable_project=p", "--bigtable_instance=i",
		"--dead_letter="+dl, "--summary_json="+summary)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr (tail):\n%s", r.code, tailLines(r.stderr, 10))
	}
	if l := readSummary(t, summary); !l.Balanced {
		t.Fatalf("ledger does not balance: %v", l.Problems)
	}
	rows := map[string]bool{}
	for _, c := range dump(t, host, "patient_vitals") {
		rows[strings.SplitN(c, "#", 2)[0]] = true
	}
	letters := deadLetters(t, dl)
	reasonOf := func(marker string) string {
		for _, d := range letters {
			if strings.Contains(d["payload"], marker) {
				if d["sink"] != "parse" || d["error"] == "" {
					t.Errorf("dead letter %v: want sink parse and an error", d)
				}
				return d["reason"]
			}
		}
		return ""
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := reasonOf(`"sensor_id":"` + c.marker)
			if rowsWithPrefix(rows, c.marker) {
				if got != "" {
					t.Fatalf("%s is both in Bigtable and dead-lettered (%s)", c.marker, got)
				}
				got = "written"
			}
			if got != c.want {
				t.Errorf("%s ended as %q; want %q", c.marker, got, c.want)
			}
		})
	}
	t.Run("20 MB line", func(t *testing.T) {
		for _, d := range letters {
			if strings.HasPrefix(d["payload"], `{"sensor_id":"huge-1"`) {
				if d["reason"] != "too_large" || len(d["payload"]) != 1024 || !strings.Contains(d["error"], "20971") {
					t.Errorf("dead letter reason %q, payload of %d bytes, error %q; want too_large with the first 1024 bytes", d["reason"], len(d["payload"]), d["error"])
				}
				return
			}
		}
		t.Error("no dead letter for the 20 MB line")
	})
	for _, want := range []string{"good-2", "good-3", "bom-1", "crlf-1", "crlf-2", "gz-1", "gzip-1", "gzip-2"} {
		if !rows[want] {
			t.Errorf("%s not in Bigtable", want)
		}
	}
	t.Run("truncated .gz", func(t *testing.T) {
		for _, d := range letters {
			if strings.HasSuffix(d["source"], "truncated.jsonl.gz") && d["reason"] == "malformed" && strings.Contains(d["error"], "could not be read past line") {
				return
			}
		}
		t.Error("no malformed dead letter for the truncated .gz")
	})
	t.Run(".gz that is not gzip", func(t *testing.T) {
		for _, d := range letters {
			if strings.HasSuffix(d["source"], "plain.jsonl.gz") && d["reason"] == "malformed" && strings.Contains(d["error"], "not gzip") {
				return
			}
		}
		t.Error("no malformed dead letter for the .gz file that is not gzip")
	})
	t.Run("binary file", func(t *testing.T) {
		n := 0
		for _, d := range letters {
			if strings.HasSuffix(d["source"], "binary.bin") {
				n++
				if d["reason"] != "malformed" {
					t.Errorf("binary line dead-lettered as %q; want malformed", d["reason"])
				}
			}
		}
		if n == 0 {
			t.Error("no dead letter for the binary file")
		}
	})
}

// rowsWithPrefix reports whether some row's sensor id starts with p.
func rowsWithPrefix(rows map[string]bool, p string) bool {
	for r := range rows {
		if strings.HasPrefix(r, p) {
			return true
		}
	}
	return false
}

// TestBatchThatRejectsEverythingFails runs batches whose every record is
// rejected: a CSV file read as JSON (the format), vitals readings read
// with another dataset's spec (the spec), and readings whose epoch times
// are in seconds read as milliseconds by a spec that takes only recent
// times (the unit). Each exits 1 with one line naming its top reasons with
// their counts and the likely cause; --allow_all_rejected exits 0.
func TestBatchThatRejectsEverythingFails(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + host}
	csv := writeLines(t, []string{"sensor_id,timestamp,heart_rate", "a,2026-03-01T10:00:00Z,70", "b,2026-03-01T10:00:01Z,71"})
	vitals := writeLines(t, []string{vitalsLine(`"v-1"`, `"2026-03-01T10:00:00Z"`, "70"), vitalsLine(`"v-2"`, `"2026-03-01T10:00:00Z"`, "71")})
	seconds := writeLines(t, []string{vitalsLine(`"s-1"`, "1772359200", "70"), vitalsLine(`"s-2"`, "1772359201", "71")})
	recent := filepath.Join(t.TempDir(), "recent.yaml")
	spec, err := os.ReadFile("../schemas/specs/vitals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recent, append(spec, []byte("\nevent_time_range: {min: \"2000-01-01T00:00:00Z\", max: \"2100-01-01T00:00:00Z\"}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		wants []string
	}{
		{"a CSV file", []string{"--input=" + csv + "/*"}, []string{"malformed 3", "--format"}},
		{"another dataset's spec", []string{"--input=" + vitals + "/*", "--spec=traffic"}, []string{"missing_field 2", "--spec"}},
		{"epoch seconds", []string{"--input=" + seconds + "/*", "--spec=" + recent}, []string{"bad_timestamp 2", "unit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--bigtable_project=p", "--bigtable_instance=i", "--progress_interval=0"}, tt.args...)
			r := runLauncher(t, env, append(args, "--dead_letter="+t.TempDir())...)
			last := lastLine(r.stderr)
			t.Logf("exit %d: %s", r.code, last)
			if r.code != 1 || !strings.Contains(last, "every one of the") {
				t.Fatalf("exit %d, last line %q; want 1 and the line that every record was rejected\n%s", r.code, last, r.stderr)
			}
			for _, w := range tt.wants {
				if !strings.Contains(last, w) {
					t.Errorf("last line %q does not say %q", last, w)
				}
			}
			if tt.name != "a CSV file" {
				return
			}
			r = runLauncher(t, env, append(args, "--dead_letter="+t.TempDir(), "--allow_all_rejected")...)
			if r.code != 0 {
				t.Fatalf("with --allow_all_rejected: exit %d\n%s", r.code, r.stderr)
			}
		})
	}
}
