package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// fleetSpec and fleetInput are the fleet of docs/guide/querying.md: five
// devices over two hours, each declaring its interval. dev-a reports every
// minute (with a duplicate), dev-b skips three stretches, dev-c stops at
// 11:29, dev-d reports every 20 minutes under an interval of 20 minutes,
// dev-e is first seen at 10:15:30.
const (
	fleetSpec  = "../testdata/fleet/fleet.yaml"
	fleetInput = "../testdata/fleet/fleet.jsonl"
)

// fleetReading is one line of the fleet's input.
type fleetReading struct {
	Device   string `json:"device"`
	TS       string `json:"ts"`
	Interval string `json:"interval"`
}

// wantCoverage is one device-hour's coverage, computed here from the
// input alone, by the definitions of docs/guide/querying.md.
type wantCoverage struct {
	expected, coverage float64
	gaps               int64
	longestGapS        float64
}

// fleetCoverage computes every device-hour's coverage of lines: the
// distinct event times per device and UTC hour; the hour's interval is its
// latest reading's; the device's first hour (the one holding its earliest
// reading) expects readings from that reading on, and has no start edge.
func fleetCoverage(t *testing.T, lines []string) map[string]wantCoverage {
	t.Helper()
	times := map[string]map[int64]string{} // device -> ms -> interval
	for _, l := range lines {
		var r fleetReading
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339Nano, r.TS)
		if err != nil {
			t.Fatal(err)
		}
		if times[r.Device] == nil {
			times[r.Device] = map[int64]string{}
		}
		times[r.Device][ts.UnixMilli()] = r.Interval
	}
	out := map[string]wantCoverage{}
	for dev, byMs := range times {
		var all []int64
		for ms := range byMs {
			all = append(all, ms)
		}
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		firstSeen := all[0]
		hours := map[int64][]int64{}
		for _, ms := range all {
			h := ms - ms%3600000
			hours[h] = append(hours[h], ms)
		}
		for start, ms := range hours {
			end := start + 3600000
			iv := byMs[ms[len(ms)-1]]
			cad, err := time.ParseDuration(iv)
			if err != nil {
				secs, err := strconv.ParseFloat(iv, 64)
				if err != nil {
					t.Fatalf("interval %q", iv)
				}
				cad = time.Duration(secs * float64(time.Second))
			}
			c := float64(cad.Milliseconds())
			from := start
			if firstSeen >= start {
				from = ms[0]
			}
			w := wantCoverage{expected: float64(end-from) / c}
			w.coverage = math.Min(1, float64(len(ms))/w.expected)
			// The points the intervals run between: the hour's start
			// (when the device was reporting before it), each reading, the
			// hour's end.
			points := append([]int64(nil), ms...)
			if firstSeen < start {
				points = append([]int64{start}, points...)
			}
			points = append(points, end)
			var longest int64
			for i := 1; i < len(points); i++ {
				if d := points[i] - points[i-1]; float64(d) > 2*c {
					w.gaps++
					if d > longest {
						longest = d
					}
				}
			}
			w.longestGapS = float64(longest) / 1000
			out[fmt.Sprintf("%s %d", dev, start)] = w
		}
	}
	return out
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}

// btCoverage reads the coverage cells of the fleet's rollups from a dump
// of its readings table: "device start" -> the four columns.
func btCoverage(t *testing.T, cells []string) map[string]wantCoverage {
	t.Helper()
	out := map[string]wantCoverage{}
	for _, c := range cells {
		// "row fam:col@micros=value"
		row, rest, _ := strings.Cut(c, " ")
		col, rest, _ := strings.Cut(rest, "@")
		micros, val, _ := strings.Cut(rest, "=")
		fam, q, _ := strings.Cut(col, ":")
		if fam != "hourly" {
			continue
		}
		dev, _, _ := strings.Cut(row, "#")
		us, _ := strconv.ParseInt(micros, 10, 64)
		k := fmt.Sprintf("%s %d", dev, us/1000-3600000)
		w := out[k]
		v, _ := strconv.ParseFloat(val, 64)
		switch q {
		case "expected":
			w.expected = v
		case "coverage":
			w.coverage = v
		case "gaps":
			w.gaps = int64(v)
		case "longest_gap_s":
			w.longestGapS = v
		default:
			continue
		}
		out[k] = w
	}
	return out
}

func sameCoverage(a, b wantCoverage) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(y)) }
	return near(a.expected, b.expected) && near(a.coverage, b.coverage) && a.gaps == b.gaps && near(a.longestGapS, b.longestGapS)
}

func compareCoverage(t *testing.T, where string, got, want map[string]wantCoverage) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d device-hours with coverage; want %d", where, len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || !sameCoverage(g, w) {
			t.Errorf("%s: %s: got %+v; want %+v", where, k, g, w)
		}
	}
}

// TestBatchCoverageAgainstEmulators batches the fleet into Bigtable and
// BigQuery and checks each device-hour's expected, coverage, gaps and
// longest_gap_s in both stores against fleetCoverage, the inventory's
// first and last seen, and that the fleet split in two batches (one hour
// split between them, merged) leaves the same coverage.
func TestBatchCoverageAgainstEmulators(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	lines := readLines(t, fleetInput)
	want := fleetCoverage(t, lines)
	// Hand-checked anchors of the independent computation.
	for k, w := range map[string]wantCoverage{
		"dev-d 1772359200000": {expected: 3595.0 / 1200, coverage: 1},
		"dev-e 1772359200000": {expected: 44.5, coverage: 1},
		"dev-c 1772362800000": {expected: 60, coverage: 0.5, gaps: 1, longestGapS: 1845},
		"dev-b 1772359200000": {expected: 60, coverage: 50.0 / 60, gaps: 1, longestGapS: 660},
	} {
		if !sameCoverage(want[k], w) {
			t.Fatalf("fleetCoverage %s = %+v; the fleet's hand count is %+v", k, want[k], w)
		}
	}

	r := runLauncher(t, bqEnv(host, bq), "--spec="+fleetSpec, "--source=files", "--input="+fleetInput,
		"--bigtable_project=p", "--bigtable_instance=i", "--bigquery_project=p", "--bigquery_dataset=fleet",
		"--bigquery_table=fleet_readings", "--dead_letter="+t.TempDir(), "--progress_interval=0")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	compareCoverage(t, "Bigtable", btCoverage(t, dump(t, host, "fleet_readings")), want)

	ctx := context.Background()
	client, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rows, err := emulators.ReadBigQuery(ctx, client.Dataset("fleet").Table("fleet_readings_hourly"))
	if err != nil {
		t.Fatal(err)
	}
	fromBQ := map[string]wantCoverage{}
	for _, row := range rows {
		k := fmt.Sprintf("%s %d", row["device"], row["window_start"].(time.Time).UnixMilli())
		f := func(col string) float64 {
			switch v := row[col].(type) {
			case float64:
				return v
			case int64:
				return float64(v)
			}
			t.Errorf("%s: %s = %#v; want a number", k, col, row[col])
			return math.NaN()
		}
		fromBQ[k] = wantCoverage{expected: f("expected"), coverage: f("coverage"), gaps: int64(f("gaps")), longestGapS: f("longest_gap_s")}
	}
	compareCoverage(t, "BigQuery fleet_readings_hourly", fromBQ, want)

	// The inventory: one row per device, its earliest and latest reading.
	// Of each column the newest version counts (GC keeps one, lazily).
	inv := map[string]map[string]string{}
	newest := map[string]int64{}
	for _, c := range dump(t, host, "fleet_inventory") {
		row, rest, _ := strings.Cut(c, " ")
		col, rest, _ := strings.Cut(rest, "@")
		micros, val, _ := strings.Cut(rest, "=")
		us, _ := strconv.ParseInt(micros, 10, 64)
		if inv[row] == nil {
			inv[row] = map[string]string{}
		}
		if ts, seen := newest[row+" "+col]; !seen || us > ts {
			newest[row+" "+col] = us
			inv[row][col] = val
		}
	}
	wantInv := map[string][2]string{
		"dev-a": {"2026-03-01T10:00:00.000Z", "2026-03-01T11:59:00.000Z"},
		"dev-b": {"2026-03-01T10:00:00.000Z", "2026-03-01T11:54:00.000Z"},
		"dev-c": {"2026-03-01T10:00:15.000Z", "2026-03-01T11:29:15.000Z"},
		"dev-d": {"2026-03-01T10:00:05.000Z", "2026-03-01T11:40:05.000Z"},
		"dev-e": {"2026-03-01T10:15:30.000Z", "2026-03-01T11:59:30.000Z"},
	}
	if len(inv) != len(wantInv) {
		t.Errorf("inventory has %d rows; want %d: %v", len(inv), len(wantInv), inv)
	}
	for dev, w := range wantInv {
		got := inv[dev]
		if got["inventory:first_seen"] != w[0] || got["inventory:last_seen"] != w[1] || got["inventory:last_hour"] != "2026-03-01T11:00:00.000Z" {
			t.Errorf("inventory %s = %v; want first_seen %s, last_seen %s, last_hour 11:00", dev, got, w[0], w[1])
		}
	}

	// Split in two batches, in order, with 10:00-10:45 in the first and
	// the rest in the second: the second merges hour 10 with what the
	// first stored, and takes the devices' first-seen times from the
	// inventory.
	split := time.Date(2026, 3, 1, 10, 45, 0, 0, time.UTC)
	var early, late []string
	for _, l := range lines {
		var fr fleetReading
		json.Unmarshal([]byte(l), &fr)
		ts, _ := time.Parse(time.RFC3339Nano, fr.TS)
		if ts.Before(split) {
			early = append(early, l)
		} else {
			late = append(late, l)
		}
	}
	for i, part := range [][]string{early, late} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "part.jsonl"), []byte(strings.Join(part, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runLauncher(t, bqEnv(host, bq), "--spec="+fleetSpec, "--source=files", "--input="+filepath.Join(dir, "part.jsonl"),
			"--bigtable_project=p", "--bigtable_instance=split", "--dead_letter="+t.TempDir(), "--progress_interval=0")
		if r.code != 0 {
			t.Fatalf("batch %d: exit %d\n%s\n%s", i+1, r.code, r.stdout, r.stderr)
		}
	}
	compareCoverage(t, "Bigtable after two batches", btCoverage(t, emulators.DumpBigtable(t, host, "p", "split", "fleet_readings")), want)
}

// TestStreamCoverageEqualsBatch streams the fleet (moved to the last
// hours, each message published twice) and batches it into another
// instance: once the stream's hours have closed, each device-hour's
// expected, coverage, gaps and longest_gap_s in Bigtable are the batch's,
// and fleetCoverage's.
func TestStreamCoverageEqualsBatch(t *testing.T) {
	host := emulators.StartBigtable(t) // skips under -short
	ps := sharedPubSub.HostPort(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + host, "PUBSUB_EMULATOR_HOST=" + ps}
	// Whole hours later, so that each reading keeps its place in its hour.
	shift := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour).Sub(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	var lines []string
	var msgs []streamMsg
	for _, l := range readLines(t, fleetInput) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["ts"]))
		if err != nil {
			t.Fatal(err)
		}
		ts = ts.Add(shift)
		m["ts"] = ts.Format("2006-01-02T15:04:05.000Z")
		b, _ := json.Marshal(m)
		lines = append(lines, string(b))
		msgs = append(msgs, msg(string(b), ts.UnixMilli()), msg(string(b), ts.UnixMilli()))
	}
	want := fleetCoverage(t, lines)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fleet.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runLauncher(t, env, "--spec="+fleetSpec, "--source=files", "--input="+filepath.Join(dir, "fleet.jsonl"),
		"--bigtable_project=p", "--bigtable_instance=batch", "--dead_letter="+t.TempDir(), "--progress_interval=0")
	if r.code != 0 {
		t.Fatalf("batch: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	batch := btCoverage(t, emulators.DumpBigtable(t, host, "p", "batch", "fleet_readings"))
	compareCoverage(t, "batch", batch, want)

	f := newPubSub(t, ps, "fleet_stream")
	job := startStream(t, env, streamArgs(f.sub, "fleet_readings", t.TempDir(), "--spec="+fleetSpec, "--allowed_lateness=6h", "--bigtable_instance=stream")...)
	f.publish(t, msgs...)
	eventually(t, 120*time.Second, job, func() (bool, string) {
		got := btCoverage(t, emulators.DumpBigtable(t, host, "p", "stream", "fleet_readings"))
		var diff []string
		for k, w := range batch {
			if g, ok := got[k]; !ok || !sameCoverage(g, w) {
				diff = append(diff, fmt.Sprintf("%s: stream %+v, batch %+v", k, g, w))
			}
		}
		sort.Strings(diff)
		return len(diff) == 0 && len(got) == len(batch), fmt.Sprintf("stream coverage equal to the batch's: %d device-hours, %d differ\n%s", len(got), len(diff), strings.Join(diff, "\n"))
	})
	if code := job.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d\nstderr:\n%s", code, job.stderr.String())
	}
}
