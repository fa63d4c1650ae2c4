package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/protobuf/proto"

	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/internal/testrig/gobuild"
	"github.com/sensorpipe/sensorpipe/launch/readside/readpath"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

func TestPlanOnly(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--spec", "vitals", "--where", "sensor_id=s1", "--since", "1h", "--now", "2026-03-01T10:20:00Z", "--plan"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var s summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Table != "patient_vitals" || s.Scan != "range" || len(s.Ranges) != 1 ||
		s.Ranges[0].Start != "s1#2026-03-01T09" || s.Ranges[0].End != "s1#2026-03-01T11" {
		t.Errorf("plan = %+v", s)
	}
}

// TestSpecDefaultsToTheDefaultSpec: without --spec, query plans against
// the default spec, as every command does: the plan is --spec vitals's.
func TestSpecDefaultsToTheDefaultSpec(t *testing.T) {
	args := []string{"--where", "sensor_id=s1", "--since", "1h", "--now", "2026-03-01T10:20:00Z", "--plan"}
	var viaSpec, viaDefault, errSpec, errDefault bytes.Buffer
	if err := run(context.Background(), append([]string{"--spec", schemas.DefaultSpecName()}, args...), &viaSpec, &errSpec); err != nil {
		t.Fatalf("--spec: %v: %s", err, errSpec.String())
	}
	if err := run(context.Background(), args, &viaDefault, &errDefault); err != nil {
		t.Fatalf("no --spec: %v: %s", err, errDefault.String())
	}
	if viaSpec.String() != viaDefault.String() {
		t.Errorf("plan without --spec = %s, want --spec %s's %s", viaDefault.String(), schemas.DefaultSpecName(), viaSpec.String())
	}
	if errSpec.Len() != 0 || errDefault.Len() != 0 {
		t.Errorf("stderr = %q and %q, want nothing", errSpec.String(), errDefault.String())
	}
}

// TestPlanPicksTheServingTable shows the named queries' plans without a
// table flag: each goes to the table whose key serves it, with the ranges
// the key promises.
func TestPlanPicksTheServingTable(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantTable  string
		wantRanges int
		wantPrefix string // every range starts with it (after a salt bucket, with salted)
		salted     bool
	}{
		{"traffic corridor: one range", []string{"--spec", "traffic", "corridor_speed", "--param", "highway=I-35"}, "traffic", 1, "I-35#03", false},
		{"logins: the login prefix of each bucket", []string{"--spec", "user_events", "logins_last_day"}, "user_events_by_type", 8, "#login#", true},
		{"device: its own table", []string{"--spec", "user_events", "device_events", "--param", "device_id=quest-01", "--from", "2026-03", "--to", "2026-04"}, "user_events_by_device", 1, "quest-01#", false},
		{"marker day: the day row", []string{"--spec", "traffic", "marker_day", "--param", "highway=I-35", "--param", "milemarker=347"}, "traffic_daily", 1, "I-35#0347#2026-0", false},
		{"ad hoc: the same choice", []string{"--spec", "user_events", "--where", "event_type=heartbeat", "--since", "7d", "--aggregate", "duration:5s"}, "user_events_by_type", 8, "#heartbeat#", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append(tc.args, "--now", "2026-03-01T12:00:00Z", "--plan")
			if err := run(context.Background(), args, &out, &errb); err != nil {
				t.Fatalf("%v: %s", err, errb.String())
			}
			var s summary
			if err := json.Unmarshal(out.Bytes(), &s); err != nil {
				t.Fatal(err)
			}
			if s.Table != tc.wantTable || len(s.Ranges) != tc.wantRanges {
				t.Fatalf("plan = %+v, want table %s with %d ranges", s, tc.wantTable, tc.wantRanges)
			}
			for _, r := range s.Ranges {
				start, end := r.Start, r.End
				if tc.salted {
					start, end = start[1:], end[1:] // drop the bucket digit
				}
				if !strings.HasPrefix(start, tc.wantPrefix) || !strings.HasPrefix(end, tc.wantPrefix) {
					t.Errorf("range %v is not under %q", r, tc.wantPrefix)
				}
			}
		})
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no --schema alias", []string{"--schema", "vitals", "--where", "sensor_id=s1"}, "flag provided but not defined: -schema"},
		{"bad where", []string{"--spec", "vitals", "--where", "sensor_id"}, "want field=value"},
		{"bad since", []string{"--spec", "vitals", "--where", "sensor_id=s1", "--since", "soon"}, "--since"},
		{"bad now", []string{"--spec", "vitals", "--where", "sensor_id=s1", "--now", "noon"}, "--now"},
		{"since and from", []string{"--spec", "vitals", "--where", "sensor_id=s1", "--since", "1h", "--from", "2026-03-01"}, "not both"},
		{"unknown field", []string{"--spec", "vitals", "--where", "nope=1"}, "not a field"},
		{"unknown spec", []string{"--spec", "nope"}, "unknown spec"},
		{"unknown query", []string{"--spec", "vitals", "nope"}, "has no query \"nope\""},
		{"missing parameter", []string{"--spec", "vitals", "sensor_last_hour"}, "needs --param sensor_id"},
		{"unknown parameter", []string{"--spec", "vitals", "sensor_last_hour", "--param", "sensor_id=s1", "--param", "x=1"}, "no parameter x"},
		{"where with a named query", []string{"--spec", "vitals", "sensor_last_hour", "--where", "sensor_id=s1"}, "--param"},
		{"backwards range", []string{"--spec", "traffic", "--where", "highway=I-35", "--where", "milemarker=350..340"}, "empty"},
		{"bad aggregate", []string{"--spec", "traffic", "--where", "highway=I-35", "--aggregate", "median:speed_mph"}, "use count"},
		{"latest without a reverse timestamp", []string{"--spec", "vitals", "--where", "sensor_id=s1", "--latest"}, "reverse timestamp"},
		{"two query names", []string{"--spec", "vitals", "sensor_last_hour", "other"}, "unexpected arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errb)
			if err == nil || !strings.Contains(err.Error()+errb.String(), tc.want) {
				t.Fatalf("err = %v, stderr %q; want %q", err, errb.String(), tc.want)
			}
			if code := cli.ExitCode(err); code != cli.ExitUsage {
				t.Errorf("exit code %d, want %d (usage)", code, cli.ExitUsage)
			}
		})
	}
}

// TestRefusesWhatNoKeyServes: all events with one file id, with no event
// type, is served by no key prefix; the tool refuses in one line naming a
// key that would serve it, and --allow_scan plans it anyway.
func TestRefusesWhatNoKeyServes(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--spec", "user_events", "--where", "file_id=scene-3", "--since", "30d", "--now", "2026-03-01T12:00:00Z", "--plan"}
	err := run(context.Background(), args, &out, &errb)
	if cli.ExitCode(err) != cli.ExitUsage || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "{file_id}#{epoch_ms|ms|pad:13}") || !strings.Contains(err.Error(), "--allow_scan") {
		t.Fatalf("err = %v, want a one-line usage error naming the key {file_id}#... and --allow_scan", err)
	}
	if nt := (*rowkey.NoTableError)(nil); !errors.As(err, &nt) {
		t.Errorf("err = %v: the usage error lost its *schemas.NoTableError (wrap with %%w)", err)
	}
	out.Reset()
	if err := run(context.Background(), append(args, "--allow_scan"), &out, &errb); err != nil {
		t.Fatalf("with --allow_scan: %v", err)
	}
	if !strings.Contains(out.String(), `"checked_on_rows":["file_id"]`) {
		t.Errorf("plan %s: want file_id checked on the rows", out.String())
	}
}

func TestUnreachableBigtableIsARuntimeError(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a connection timeout")
	}
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--spec", "vitals", "--where", "sensor_id=s1", "--timeout", "2s"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "reachable") || cli.ExitCode(err) != cli.ExitRuntime {
		t.Errorf("err = %v (exit %d), want a one-line unreachable error, exit 1", err, cli.ExitCode(err))
	}
}

// TestExitCodes runs the built binary: 2 for usage errors, 1 for runtime
// errors, 0 for --help, each with at most one line on stderr.
func TestExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and waits for a connection timeout")
	}
	bin := filepath.Join(t.TempDir(), "query")
	gobuild.Build(t, bin, ".")
	tests := []struct {
		name string
		env  string
		args []string
		code int
	}{
		{"help", "", []string{"--help"}, 0},
		{"unknown flag", "", []string{"--nope"}, 2},
		{"unknown spec", "", []string{"--spec", "nope", "--where", "a=b"}, 2},
		{"no project without the emulator", "", []string{"--spec", "vitals", "--where", "sensor_id=s1"}, 2},
		{"unreachable emulator", "127.0.0.1:1", []string{"--spec", "vitals", "--where", "sensor_id=s1", "--timeout", "2s"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+tc.env)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, stderr.String())
			}
			if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n"); code != 0 && lines != 0 {
				t.Errorf("stderr has %d lines, want one: %q", lines+1, stderr.String())
			}
		})
	}
}

// TestQueryEmulator writes a vitals reading set into a Bigtable emulator and
// runs the command: the vitals dataset's primary query reads at most 2 rows and prints
// the cells of the last hour and a summary with the ranges.
func TestQueryEmulator(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := bigtable.NewAdminClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	client, err := bigtable.NewClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := readpath.CreateTables(ctx, admin, spec); err != nil {
		t.Fatal(err)
	}
	p := codec.NewParser(spec)
	var recs []schemas.Record
	for _, ts := range []string{"2026-03-01T08:50:00Z", "2026-03-01T09:10:00Z", "2026-03-01T09:40:00Z", "2026-03-01T10:05:00Z"} {
		for _, sensor := range []string{"s1", "s2"} {
			line := `{"sensor_id":"` + sensor + `","timestamp":"` + ts + `","heart_rate":70,"body_temperature":36.6,"spO2":98,"battery_level":80}`
			if recs, err = p.Parse(recs, []byte(line), "t"); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, _ := hours.NewBuilder(spec)
	muts, _ := b.Mutations(recs)
	if err := readpath.WriteMutations(ctx, client, muts); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = run(ctx, []string{"--spec", "vitals", "--where", "sensor_id=s1", "--since", "1h", "--now", "2026-03-01T10:20:00Z",
		"--bigtable_project", "p", "--bigtable_instance", "i"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var s summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatal(err)
	}
	// 09:10 is outside the window 09:20-10:20; 09:40 and 10:05 are in: two
	// rows, 4 cells each (the imputed flag is unset without group.Prepare).
	if s.RowsRead != 2 || s.Cells != 8 || len(lines) != 9 || len(s.Ranges) != 1 {
		t.Errorf("summary = %+v with %d lines, want 2 rows, 8 cells, 1 range", s, len(lines))
	}
	if !strings.Contains(lines[0], `"row_key":"s1#2026-03-01T09"`) {
		t.Errorf("first cell = %s", lines[0])
	}
}

// readCalls records the app profiles of the ReadRows and MutateRows calls
// a proxy forwards.
type readCalls struct {
	mu       sync.Mutex
	profiles map[string]map[string]int // method: profile: calls
}

func (r *readCalls) hook(method string, req []byte) error {
	var profile string
	switch method {
	case "/google.bigtable.v2.Bigtable/ReadRows":
		var m bigtablepb.ReadRowsRequest
		if err := proto.Unmarshal(req, &m); err != nil {
			return err
		}
		profile = m.AppProfileId
	case "/google.bigtable.v2.Bigtable/MutateRows":
		var m bigtablepb.MutateRowsRequest
		if err := proto.Unmarshal(req, &m); err != nil {
			return err
		}
		profile = m.AppProfileId
	default:
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.profiles == nil {
		r.profiles = map[string]map[string]int{}
	}
	if r.profiles[method] == nil {
		r.profiles[method] = map[string]int{}
	}
	r.profiles[method][profile]++
	return nil
}

func (r *readCalls) get(method string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.profiles["/google.bigtable.v2.Bigtable/"+method]
}

// loadWithLauncher builds the launcher and loads what make run loads
// (testdata/vitals/* into patient_vitals) and the traffic and user_events
// samples into their specs' tables, with no project or instance flags: the
// local defaults apply under the emulator. The user_events load uses the
// app profile "backfill".
func loadWithLauncher(t *testing.T, env []string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sensorpipe")
	gobuild.Build(t, bin, "github.com/sensorpipe/sensorpipe/launch")
	loads := [][]string{
		{"--input=../../testdata/vitals/*", "--bigtable_table=patient_vitals"},
		{"--spec=traffic", "--input=../../testdata/samples/traffic.jsonl"},
		{"--spec=user_events", "--input=../../testdata/samples/user_events.jsonl", "--bigtable_app_profile=backfill"},
	}
	// Each load writes a table of its own: they run side by side.
	failed := make([]string, len(loads))
	var wg sync.WaitGroup
	for i, args := range loads {
		cmd := exec.Command(bin, append(args, "--dead_letter="+t.TempDir(), "--progress_interval=0")...)
		cmd.Env = append(os.Environ(), env...)
		wg.Go(func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				failed[i] = fmt.Sprintf("launcher %v: %v\n%s", args, err, out)
			}
		})
	}
	wg.Wait()
	for _, f := range failed {
		if f != "" {
			t.Error(f)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// answer is what one query printed.
type answer struct {
	lines  []map[string]any // every line but the summary
	sum    summary
	stderr string
}

// rows maps each row key printed to its cells' family:qualifier=value.
func (a answer) rows() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, l := range a.lines {
		k, ok := l["row_key"].(string)
		if !ok {
			continue
		}
		if out[k] == nil {
			out[k] = map[string]string{}
		}
		out[k][l["family"].(string)+":"+l["qualifier"].(string)] = l["value"].(string)
	}
	return out
}

func query(t *testing.T, args ...string) answer {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("query %v: %v\n%s", args, err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var a answer
	for _, l := range lines[:len(lines)-1] {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		a.lines = append(a.lines, m)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &a.sum); err != nil {
		t.Fatal(err)
	}
	a.stderr = errb.String()
	t.Logf("%v:\n%s", args, out.String())
	return a
}

// TestSampleQueries loads the sample data with the launcher into a Bigtable
// emulator and runs every query of the user_events, traffic and vitals specs through the
// tool, checking each answer's value and that the rows read stay within
// what the key promises: at most 2 rows for vitals' last hour, one range
// for the traffic corridor, the login prefix (of each salt bucket) for
// logins by type. The data goes through a proxy that records app profiles.
func TestSampleQueries(t *testing.T) {
	host := emulators.StartBigtable(t)
	var calls readCalls
	proxy := emulators.StartProxy(t, host, emulators.ProxyHooks{Before: calls.hook})
	loadWithLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + proxy.Addr})
	t.Setenv("BIGTABLE_EMULATOR_HOST", proxy.Addr)
	if p := calls.get("MutateRows"); p["backfill"] == 0 || p[""] == 0 {
		t.Errorf("MutateRows app profiles %v: want the user_events load on \"backfill\", the others on the default", p)
	}

	const alice = "3f2b8c1e-6a4d-4e7b-9c0a-1d2e3f4a5b6c"
	noon := "2026-03-01T12:00:00Z"

	t.Run("vitals: all vitals for a sensor for the last hour, at most 2 rows", func(t *testing.T) {
		a := query(t, "--spec", "vitals", "sensor_last_hour", "--param", "sensor_id=patient-001", "--now", noon)
		if a.sum.RowsRead > 2 || len(a.sum.Ranges) != 1 || a.sum.Table != "patient_vitals" {
			t.Errorf("summary %+v: want at most 2 rows read, one range", a.sum)
		}
		temps := 0
		for k := range a.rows() {
			if !strings.HasPrefix(k, "patient-001#") {
				t.Errorf("row %s is not the sensor's", k)
			}
		}
		for _, l := range a.lines {
			ts := int64(l["timestamp_micros"].(float64)) / 1000
			if ts < mustMs(t, "2026-03-01T11:00:00Z") || ts > mustMs(t, noon) {
				t.Errorf("cell at %d is outside the hour", ts)
			}
			if l["qualifier"] == "body_temperature" {
				temps++
			}
		}
		if temps != 12 { // 11:00:01, 11:05:01, ... 11:55:01
			t.Errorf("body_temperature readings = %d, want 12", temps)
		}
		c := query(t, "--spec", "vitals", "--where", "sensor_id=patient-001", "--since", "1h", "--now", noon, "--aggregate", "count")
		if len(c.lines) != 1 || c.lines[0]["count"] != 12.0 || c.sum.RowsRead > 2 {
			t.Errorf("count = %v (rows read %d), want 12 from at most 2 rows", c.lines, c.sum.RowsRead)
		}
	})

	t.Run("vitals: an empty answer names the data's span and --now", func(t *testing.T) {
		a := query(t, "--spec", "vitals", "sensor_last_hour", "--param", "sensor_id=patient-001", "--now", "2026-11-23T00:00:00Z")
		if a.sum.Empty == nil || a.sum.Empty.Newest != "2026-03-01T11:55:01Z" || a.sum.Empty.Oldest != "2026-03-01T10:00:01Z" ||
			!strings.Contains(a.sum.Empty.Hint, "--now 2026-03-01T11:55:01Z") || a.sum.Empty.RowsRead > 2 {
			t.Errorf("empty note %+v, want the sensor's oldest and newest readings, a --now hint, at most 2 rows read", a.sum.Empty)
		}
		if !strings.Contains(a.stderr, "--now") {
			t.Errorf("stderr %q: want the hint", a.stderr)
		}
	})

	t.Run("traffic: the speed now at I-35 mile 347, each direction", func(t *testing.T) {
		a := query(t, "--spec", "traffic", "speed_now", "--param", "highway=I-35", "--param", "milemarker=347", "--now", "2026-03-01T07:30:00Z")
		got := speeds(a)
		want := map[string]string{"0347#N": "66.6", "0347#S": "42.2"}
		if fmt.Sprint(got) != fmt.Sprint(want) || a.sum.RowsRead != 2 || a.sum.Table != "traffic" {
			t.Errorf("speeds %v (rows read %d), want %v from 2 rows", got, a.sum.RowsRead, want)
		}
	})

	t.Run("traffic: the speed as of 07:10 seeks past the newer rows of each prefix", func(t *testing.T) {
		a := query(t, "--spec", "traffic", "speed_now", "--param", "highway=I-35", "--param", "milemarker=347", "--now", "2026-03-01T07:10:00Z")
		want := map[string]string{"0347#N": "25.4", "0347#S": "33.9"} // the 07:05 readings; 07:10:02 is after --now
		if got := speeds(a); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("speeds %v, want %v", got, want)
		}
		// Per direction: one row to find the prefix (the 07:15 reading),
		// one seek to the window's end.
		if a.sum.RowsRead != 4 || a.sum.Reads != 5 {
			t.Errorf("summary %+v: want 4 rows read in 5 reads", a.sum)
		}
	})

	t.Run("traffic: latest speeds between markers 340 and 350, one range, one row per marker and direction", func(t *testing.T) {
		a := query(t, "--spec", "traffic", "corridor_latest", "--param", "highway=I-35", "--param", "milemarker=340..350", "--now", "2026-03-01T07:30:00Z")
		want := map[string]string{"0345#N": "59.4", "0345#S": "35.7", "0346#N": "38.2", "0346#S": "50.4",
			"0347#N": "66.6", "0347#S": "42.2", "0348#N": "35.2", "0348#S": "55.9"}
		if got := speeds(a); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("speeds %v, want %v", got, want)
		}
		if len(a.sum.Ranges) != 1 || a.sum.RowsRead != 8 {
			t.Errorf("summary %+v: want one range and one row read per marker and direction (8)", a.sum)
		}
	})

	t.Run("traffic: average speed between markers 340 and 350, one range", func(t *testing.T) {
		a := query(t, "--spec", "traffic", "corridor_speed", "--param", "highway=I-35", "--now", "2026-03-01T07:30:00Z")
		// The 32 valid I-35 readings of markers 345-348 (samples), mean 44.68125.
		if len(a.lines) != 1 || a.lines[0]["avg"] != 44.68125 || a.lines[0]["values"] != 32.0 {
			t.Errorf("answer %v, want avg 44.68125 over 32 values", a.lines)
		}
		if len(a.sum.Ranges) != 1 || a.sum.RowsRead != 32 {
			t.Errorf("summary %+v: want one range, 32 rows", a.sum)
		}
	})

	t.Run("traffic: speed on the highway, per marker", func(t *testing.T) {
		a := query(t, "--spec", "traffic", "highway_speed", "--param", "highway=I-35", "--now", "2026-03-01T07:30:00Z")
		want := "345=45.5875 346=42.7625 347=48.225 348=42.15"
		var got []string
		for _, l := range a.lines {
			got = append(got, fmt.Sprintf("%v=%v", l["milemarker"], l["avg"]))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("per marker %v, want %s", got, want)
		}
	})

	t.Run("traffic: the last few readings at one marker and direction, newest first", func(t *testing.T) {
		a := query(t, "--spec", "traffic", "marker_recent", "--param", "highway=I-35", "--param", "milemarker=347", "--param", "direction=N", "--now", "2026-03-01T07:30:00Z")
		if a.sum.RowsRead != 4 || !a.sum.Reversed {
			t.Fatalf("summary %+v: want the 4 readings, newest first", a.sum)
		}
		if first := a.lines[0]["timestamp_micros"].(float64); int64(first) != 1772349313450000 {
			t.Errorf("first cell at %v, want the newest reading (1772349313450 ms)", first)
		}
	})

	t.Run("traffic: a marker's day is one row of the daily table", func(t *testing.T) {
		a := query(t, "--spec", "traffic", "marker_day", "--param", "highway=I-35", "--param", "milemarker=347", "--now", "2026-03-01T12:00:00Z")
		if a.sum.Table != "traffic_daily" || a.sum.RowsRead != 1 || a.sum.Cells != 8 {
			t.Errorf("summary %+v: want one traffic_daily row with 8 readings", a.sum)
		}
	})

	t.Run("user_events: time in VR for Alice in the last day", func(t *testing.T) {
		a := query(t, "--spec", "user_events", "time_in_vr", "--param", "user_id="+alice, "--now", noon)
		if len(a.lines) != 1 || a.lines[0]["duration"] != "20s" || a.lines[0]["readings"] != 4.0 {
			t.Errorf("answer %v, want 20s (4 heartbeats x 5s)", a.lines)
		}
		if a.sum.RowsRead != 4 || len(a.sum.Ranges) != 1 || a.sum.Table != "user_events" {
			t.Errorf("summary %+v: want her 4 heartbeat rows from one range", a.sum)
		}
	})

	t.Run("user_events: logins in the last day, under the login prefix", func(t *testing.T) {
		a := query(t, "--spec", "user_events", "logins_last_day", "--now", noon)
		if len(a.lines) != 1 || a.lines[0]["count"] != 4.0 {
			t.Errorf("answer %v, want 4 logins", a.lines)
		}
		// One range per salt bucket, each under that bucket's login prefix,
		// and no row read but the logins.
		if a.sum.Table != "user_events_by_type" || len(a.sum.Ranges) != 8 || a.sum.RowsRead != 4 {
			t.Errorf("summary %+v: want 8 ranges and the 4 login rows read", a.sum)
		}
		for _, r := range a.sum.Ranges {
			if p := r.Start[:1] + "#login#"; !strings.HasPrefix(r.Start, p) || !strings.HasPrefix(r.End, p) {
				t.Errorf("range %v is not under %q", r, p)
			}
		}
		w := query(t, "--spec", "user_events", "logins_last_day", "--now", noon, "--since", "7d")
		if w.lines[0]["count"] != 5.0 {
			t.Errorf("logins in the last week = %v, want 5", w.lines)
		}
	})

	t.Run("user_events: time in VR for every user in the last week", func(t *testing.T) {
		a := query(t, "--spec", "user_events", "time_in_vr_all", "--now", noon)
		var got []string
		for _, l := range a.lines {
			got = append(got, fmt.Sprintf("%v=%v", l["user_id"], l["duration"]))
		}
		want := []string{"0d9e8f7a-6b5c-4d3e-2f1a-0b9c8d7e6f5a=20s", alice + "=20s", "a7c9e1f3-2b4d-4f6a-8c0e-2a4c6e8f0b1d=20s"}
		if strings.Join(got, " ") != strings.Join(want, " ") || a.sum.RowsRead != 12 {
			t.Errorf("per user %v (rows read %d), want %v from the 12 heartbeat rows", got, a.sum.RowsRead, want)
		}
	})

	march := []string{"--from", "2026-03", "--to", "2026-04", "--now", noon}
	rowsOf := func(t *testing.T, args ...string) answer {
		return query(t, append(append([]string{"--spec", "user_events"}, args...), march...)...)
	}
	t.Run("user_events: all events for Alice in March, one range per event type", func(t *testing.T) {
		a := rowsOf(t, "user_events", "--param", "user_id="+alice)
		// 11 valid events, one of them a login on 28 February.
		if len(a.rows()) != 10 || a.sum.RowsRead != 10 || len(a.sum.Ranges) != 5 {
			t.Errorf("summary %+v: want her 10 March rows, read from 5 ranges", a.sum)
		}
	})
	t.Run("user_events: all events for a device in March", func(t *testing.T) {
		a := rowsOf(t, "device_events", "--param", "device_id=quest-01")
		if len(a.rows()) != 8 || a.sum.Table != "user_events_by_device" || a.sum.RowsRead != 8 {
			t.Errorf("summary %+v: want quest-01's 8 rows from user_events_by_device", a.sum)
		}
	})
	t.Run("user_events: all of Alice's logins in March", func(t *testing.T) {
		a := rowsOf(t, "user_logins", "--param", "user_id="+alice)
		if len(a.rows()) != 2 || a.sum.RowsRead != 2 {
			t.Errorf("summary %+v: want her 2 March logins", a.sum)
		}
	})
	t.Run("user_events: Alice's logins on one device in March", func(t *testing.T) {
		a := rowsOf(t, "user_device_logins", "--param", "user_id="+alice, "--param", "device_id=quest-02")
		rows := a.rows()
		if len(rows) != 1 || rows[alice+"#login#1772362800000"] == nil || a.sum.RowsRead != 2 {
			t.Errorf("rows %v (read %d), want the 11:00 login on quest-02, checked on her 2 March logins", rows, a.sum.RowsRead)
		}
	})
	t.Run("user_events: all times a file was launched in March", func(t *testing.T) {
		a := rowsOf(t, "file_launches", "--param", "file_id=scene-9")
		if len(a.rows()) != 1 || a.sum.RowsRead != 3 {
			t.Errorf("summary %+v: want scene-9's one launch, checked on the 3 launches of March", a.sum)
		}
	})

	if p := calls.get("ReadRows"); len(p) != 1 || p[""] == 0 {
		t.Errorf("ReadRows app profiles %v, want the default profile only so far", p)
	}
	query(t, "--spec", "vitals", "sensor_last_hour", "--param", "sensor_id=patient-001", "--now", noon, "--bigtable_app_profile", "serving")
	if p := calls.get("ReadRows"); p["serving"] == 0 {
		t.Errorf("ReadRows app profiles %v, want the --bigtable_app_profile query on \"serving\"", p)
	}
}

// speeds maps marker#direction to the speed printed for each row.
func speeds(a answer) map[string]string {
	out := map[string]string{}
	for k, cells := range a.rows() {
		parts := strings.Split(k, "#")
		out[parts[1]+"#"+parts[2]] = cells["speed:speed_mph"]
	}
	return out
}

func mustMs(t *testing.T, s string) int64 {
	t.Helper()
	ms, err := timestamps.ParseTimestamp(s)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}
