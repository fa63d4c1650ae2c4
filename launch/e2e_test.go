package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	// Queries (bq query, the Go client's) run on the emulator's SQL engine.
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/internal/testrig/gobuild"
	_ "github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu/sqlengine"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// TestMain raises the number of tests run at once, stops the emulators
// the tests share, and removes the launcher the tests built (about
// 200 MB), so runs do not fill the temporary folder.
func TestMain(m *testing.M) {
	flag.Parse()
	// The end-to-end tests mostly wait (on stream windows and firings, on
	// retries against a stopped store, on subprocesses) rather than
	// compute, so more of them run at once than GOMAXPROCS, the default;
	// the ones that do compute hold a cpuHeavy slot. An explicit -parallel
	// wins.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", strconv.Itoa(endToEndParallel))
	}
	code := m.Run()
	sharedPubSub.Stop()
	os.Remove(launcherPath())
	os.Remove(testBootPath())
	os.Exit(code)
}

// endToEndParallel is how many tests run at once unless -parallel says.
// More would not help: with every end-to-end test at once, a 2-core
// machine stretches each call so far that a live store misses a
// 5-second --write_retry_deadline.
const endToEndParallel = 8

// sharedPubSub is the Pub/Sub emulator of the whole test binary (a JVM,
// slow to start): each test publishes to topics of its own names.
var sharedPubSub = emulators.Shared{Kind: emulators.PubSub}

// heavyOrder ranks the tests that compute, longest first: when they
// queue for a CPU slot together, the longest starts first, so that it
// does not end the run alone.
var heavyOrder = []string{
	"TestBigtableDiesMidBackfill", // 300,000 readings
	"TestReplayAfterBigQueryDiesMidBatch",
	"TestBigQueryFaults",
	"TestBigtableFaults",
	"TestLostAnswersCostAboutACallsLatency",
	"TestBigQueryDiesMidBackfill",
	"TestStreamOfLargeAndCompressedMessages",
	"TestLocalPartsEqualOneJob",
	"TestBigQueryAnswersLost",
}

// cpuSlots is how many tests that compute (tens of thousands of readings
// through the launcher and the emulators) run at once: one more than a
// 2-core machine's cores, because each also waits (on job start-ups,
// emulators and retries) part of its time; more would only stretch each,
// and their retry deadlines with them, while the tests that wait run
// beside them.
const cpuSlots = 3

var cpu = struct {
	sync.Mutex
	cond    *sync.Cond
	free    int
	first   time.Time   // the first request; slots are given from cpuSettle after it
	waiting map[int]int // rank -> tests waiting
}{free: cpuSlots, waiting: map[int]int{}}

// cpuSettle lets the tests released together by t.Parallel all queue
// before the first slots are given, so that the ranks decide.
const cpuSettle = 200 * time.Millisecond

func init() { cpu.cond = sync.NewCond(&cpu.Mutex) }

// cpuHeavy holds one of cpuSlots until the test ends, or until the
// release it returns is called, given to the waiting test of the lowest
// heavyOrder rank (a subtest has its test's). Call it after t.Parallel. A
// test whose parallel subtests compute releases its slot before they
// start, and each takes one: a parent's slot is otherwise held, idle,
// until they end.
func cpuHeavy(t *testing.T) (release func()) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	rank := slices.Index(heavyOrder, top)
	if rank < 0 {
		rank = len(heavyOrder)
	}
	cpu.Lock()
	if cpu.first.IsZero() {
		cpu.first = time.Now()
		time.AfterFunc(cpuSettle, func() { cpu.Lock(); cpu.cond.Broadcast(); cpu.Unlock() })
	}
	cpu.waiting[rank]++
	for {
		best := true
		for r, n := range cpu.waiting {
			if n > 0 && r < rank {
				best = false
			}
		}
		if best && cpu.free > 0 && time.Since(cpu.first) >= cpuSettle {
			break
		}
		cpu.cond.Wait()
	}
	cpu.waiting[rank]--
	cpu.free--
	cpu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			cpu.Lock()
			cpu.free++
			cpu.cond.Broadcast()
			cpu.Unlock()
		})
	}
	t.Cleanup(release)
	return release
}

// launcherPath is where launcher builds the launcher: one per test binary.
func launcherPath() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("sensorpipe-e2e-%d", os.Getpid()))
}

var (
	buildLauncher sync.Once
	launcherErr   error
)

// launcher builds the launcher once per test binary and returns its path;
// SENSORPIPE_LAUNCHER names one built before instead (e.g. another
// version's, to compare). Tests running in parallel wait for the one
// build.
func launcher(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped under -short")
	}
	if bin := os.Getenv("SENSORPIPE_LAUNCHER"); bin != "" {
		return bin
	}
	bin := launcherPath()
	buildLauncher.Do(func() {
		launcherErr = gobuild.Run(bin, ".")
	})
	if launcherErr != nil {
		t.Fatal(launcherErr)
	}
	return bin
}

type result struct {
	code           int
	stdout, stderr string
}

func runLauncher(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runLauncherIn(t, "", env, args...)
}

// runLauncherIn runs the launcher in the working folder dir ("": the
// test's).
func runLauncherIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(launcher(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run launcher: %v", err)
	}
	return result{code, stdout.String(), stderr.String()}
}

func line(sensor string, ts any, hr any) string {
	b, _ := json.Marshal(map[string]any{"sensor_id": sensor, "timestamp": ts, "heart_rate": hr,
		"body_temperature": 36.8, "spO2": 98, "battery_level": 87})
	return string(b)
}

// writeInput writes the acceptance input: a plain and a gzipped file.
func writeInput(t *testing.T) string {
	dir := t.TempDir()
	plain := []string{
		line("p-1", "2026-03-01T10:00:00Z", nil),
		line("p-1", "2026-03-01T12:30:00.5+02:00", 70), // 10:30:00.500Z
		line("p-1", 1772362799999, nil),                // 10:59:59.999Z
		"",
		line("p-1", "2026-03-01T10:30:00.500Z", 70), // duplicate of the second
		`{"sensor_id":"p-2","timestamp":"2026-03-01T11:00:00Z","body_temperature":37,"spO2":99,"battery_level":50}`,
		`not json`,
		`{"sensor_id":"p#3","timestamp":"2026-03-01T11:00:00Z","body_temperature":37,"spO2":99,"battery_level":50}`,
	}
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(strings.Join(plain, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	// Enough lines that the decompressed text is far longer than the file.
	for i := 0; i < 300; i++ {
		fmt.Fprintln(zw, line("p-4", 1772359200000+int64(i)*1000, 60+i%10))
	}
	fmt.Fprintln(zw, `{"sensor_id":"p-5","timestamp":"yesterday","body_temperature":37,"spO2":99,"battery_level":50}`)
	fmt.Fprintln(zw, `{"sensor_id":"p-5","timestamp":"2026-03-01T11:00:00Z","body_temperature":99,"spO2":99,"battery_level":50}`)
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, "b.jsonl.gz"), gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readSummary reads a --summary_json file.
func readSummary(t *testing.T, path string) ledger.Ledger {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("--summary_json: %v", err)
	}
	var l ledger.Ledger
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("--summary_json %s: %v", path, err)
	}
	return l
}

// dump reads every cell of every row of a table in the emulator's
// instance p/i.
func dump(t *testing.T, host, table string) []string {
	t.Helper()
	return emulators.DumpBigtable(t, host, "p", "i", table)
}

func deadLetters(t *testing.T, dir string) []map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var out []map[string]string
	for _, f := range files {
		fd, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fd)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var raw map[string]any
			if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
				t.Fatalf("dead letter %s: %v", f, err)
			}
			// Text fields as they are, the others (line, identity,
			// previous) as their JSON.
			m := make(map[string]string, len(raw))
			for k, v := range raw {
				if s, ok := v.(string); ok {
					m[k] = s
				} else {
					b, _ := json.Marshal(v)
					m[k] = string(b)
				}
			}
			out = append(out, m)
		}
		fd.Close()
	}
	return out
}

func TestBatchEndToEndAgainstBigtableEmulator(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	in := writeInput(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + host}
	args := func(dl string, extra ...string) []string {
		return append([]string{"--source=files", "--input=" + in + "/*", "--bigtable_project=p", "--bigtable_instance=i",
			"--bigtable_table=patient_vitals", "--dead_letter=" + dl}, extra...)
	}
	dl := t.TempDir()
	summaryFile := filepath.Join(t.TempDir(), "summary.json")
	r := runLauncher(t, env, args(dl, "--summary_json="+summaryFile)...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	cells := dump(t, host, "patient_vitals")

	t.Run("imputation and encoding", func(t *testing.T) {
		want := []string{
			"p-1#2026-03-01T10 meta:battery_level@1772359200000000=87",
			"p-1#2026-03-01T10 meta:battery_level@1772361000500000=87",
			"p-1#2026-03-01T10 meta:battery_level@1772362799999000=87",
			"p-1#2026-03-01T10 meta:heart_rate_imputed@1772359200000000=true",
			"p-1#2026-03-01T10 meta:heart_rate_imputed@1772361000500000=false",
			"p-1#2026-03-01T10 meta:heart_rate_imputed@1772362799999000=true",
			"p-1#2026-03-01T10 vitals:body_temperature@1772359200000000=36.8",
			"p-1#2026-03-01T10 vitals:body_temperature@1772361000500000=36.8",
			"p-1#2026-03-01T10 vitals:body_temperature@1772362799999000=36.8",
			"p-1#2026-03-01T10 vitals:heart_rate@1772359200000000=70",
			"p-1#2026-03-01T10 vitals:heart_rate@1772361000500000=70",
			"p-1#2026-03-01T10 vitals:heart_rate@1772362799999000=70",
			"p-1#2026-03-01T10 vitals:spO2@1772359200000000=98",
			"p-1#2026-03-01T10 vitals:spO2@1772361000500000=98",
			"p-1#2026-03-01T10 vitals:spO2@1772362799999000=98",
			"p-2#2026-03-01T11 meta:battery_level@1772362800000000=50",
			"p-2#2026-03-01T11 meta:heart_rate_imputed@1772362800000000=false",
			"p-2#2026-03-01T11 vitals:body_temperature@1772362800000000=37",
			"p-2#2026-03-01T11 vitals:spO2@1772362800000000=99",
		}
		var got []string
		for _, c := range cells {
			// The hourly rollups have their own tests (pipelines.TestBatchRollups).
			if (strings.HasPrefix(c, "p-1#") || strings.HasPrefix(c, "p-2#")) && !strings.Contains(c, " hourly:") {
				got = append(got, c)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("cells:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("gzip file read whole", func(t *testing.T) {
		n := 0
		for _, c := range cells {
			if strings.HasPrefix(c, "p-4#2026-03-01T10 vitals:heart_rate@") {
				n++
			}
		}
		if n != 300 {
			t.Fatalf("p-4 has %d heart_rate versions; want 300", n)
		}
	})

	t.Run("dead letters", func(t *testing.T) {
		got := map[string]int{}
		for _, d := range deadLetters(t, dl) {
			for _, k := range []string{"payload", "reason", "error", "source", "time"} {
				if d[k] == "" {
					t.Errorf("dead letter %v has no %s", d, k)
				}
			}
			if _, err := time.Parse(time.RFC3339Nano, d["time"]); err != nil {
				t.Errorf("time %q: %v", d["time"], err)
			}
			got[d["reason"]]++
			if d["reason"] == "invalid_field" && !strings.Contains(d["payload"], "p#3") {
				t.Errorf("invalid_field payload %q", d["payload"])
			}
			if d["reason"] == "bad_timestamp" && !strings.HasSuffix(d["source"], "b.jsonl.gz") {
				t.Errorf("bad_timestamp source %q; want the .gz file", d["source"])
			}
		}
		want := map[string]int{"malformed": 1, "invalid_field": 1, "bad_timestamp": 1, "out_of_range": 1}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("dead letters by reason = %v; want %v", got, want)
		}
	})

	t.Run("ledger balances, in the summary and --summary_json", func(t *testing.T) {
		for _, want := range []string{"records read:            309", "distinct valid readings: 304", "duplicates merged:       1",
			"rejected:                4", "bigtable patient_vitals: readings routed 304 = written 304 + dead-lettered 0",
			"dead letters:            4 (parse/bad_timestamp 1, parse/invalid_field 1, parse/malformed 1, parse/out_of_range 1)", "ledger: balanced"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("summary lacks %q:\n%s", want, r.stdout)
			}
		}
		l := readSummary(t, summaryFile)
		if l.Read != 309 || l.Readings != 304 || l.Duplicates != 1 || l.Rejected != 4 || !l.Balanced {
			t.Errorf("summary JSON %+v; want 309 read = 304 distinct + 1 merged + 4 rejected, balanced", l)
		}
		if len(l.Sinks) != 1 || fmt.Sprint(l.Sinks[0]) != fmt.Sprint(ledger.Sink{Sink: "bigtable", Table: "patient_vitals", Routed: 304, Written: 304, Rows: 3}) {
			t.Errorf("sinks %+v; want patient_vitals: 304 routed and written", l.Sinks)
		}
		if fmt.Sprint(l.DeadLetters) != "map[parse:map[bad_timestamp:1 invalid_field:1 malformed:1 out_of_range:1]]" {
			t.Errorf("dead letters %v; want the 4 parse ones by reason", l.DeadLetters)
		}
		// A local batch with a dead-letter folder reads its ledger from
		// its durable record there.
		if !strings.HasPrefix(l.CountsFrom, ledger.FromRecord+" (") || !strings.Contains(r.stdout, "counts from:             "+ledger.FromRecord) {
			t.Errorf("counts from %q; want the run's record", l.CountsFrom)
		}
	})

	t.Run("idempotent rerun, direct runner", func(t *testing.T) {
		r := runLauncher(t, env, args(t.TempDir(), "--runner=direct")...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if again := dump(t, host, "patient_vitals"); strings.Join(again, "\n") != strings.Join(cells, "\n") {
			t.Fatalf("second run changed Bigtable: %d cells before, %d after", len(cells), len(again))
		}
	})

	t.Run("create_tables=false on a missing table", func(t *testing.T) {
		r := runLauncher(t, env, append(args(t.TempDir()), "--bigtable_table=nope", "--create_tables=false")...)
		if r.code == 0 || !strings.Contains(r.stderr, `"nope" does not exist`) {
			t.Fatalf("exit %d, stderr %q; want failure naming the table", r.code, r.stderr)
		}
	})
}

func TestLauncherFailsWithOneLineReason(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	base := []string{"--source=files", "--input=../testdata/vitals/*", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + t.TempDir()}
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"unknown flag", nil, append(base, "--nope"), 2, "flag provided but not defined"},
		{"no project, no emulator", []string{"BIGTABLE_EMULATOR_HOST="}, []string{"--input=x", "--bigtable_instance=i", "--dead_letter=d"}, 2, "--bigtable_project is required"},
		// Under the emulator the project and instance default to make run's
		// (internal/cli), so the run gets as far as Bigtable.
		{"BigQuery without its emulator does not take the local Bigtable default", []string{"BIGTABLE_EMULATOR_HOST=" + closed, "BIGQUERY_EMULATOR_HOST="},
			[]string{"--input=../testdata/vitals/*", "--dead_letter=" + t.TempDir(), "--bigquery_dataset=vitals"}, 2, "--bigquery_project is required"},
		{"no project or instance under the emulator: local defaults", []string{"BIGTABLE_EMULATOR_HOST=" + closed},
			[]string{"--input=../testdata/vitals/*", "--dead_letter=" + t.TempDir(), "--bigtable_timeout=2s"}, 1, "bigtable unreachable"},
		{"no input", nil, []string{"--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=d"}, 2, "--input is required"},
		{"no dead letter", nil, []string{"--input=x", "--bigtable_project=p", "--bigtable_instance=i"}, 2, "--dead_letter is required"},
		{"bad source", nil, append(base, "--source=kafka"), 2, `--source="kafka"`},
		{"glob matches nothing", nil, append(base, "--input=/nonexistent/*.jsonl"), 2, "matches no file"},
		{"unknown spec", nil, append(base, "--spec=nope"), 2, "unknown spec"},
		{"bigtable unreachable", []string{"BIGTABLE_EMULATOR_HOST=" + closed}, append(base, "--bigtable_timeout=2s"), 1, "bigtable unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runLauncher(t, tt.env, tt.args...)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != tt.code || len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line containing %q", r.code, r.stderr, tt.code, tt.want)
			}
		})
	}
}

// TestEveryBuiltinSpecEndToEnd runs the batch pipeline on each built-in
// spec's sample input and checks that Bigtable holds exactly the cells of
// the spec's golden preview (testdata/golden), and that every rejected
// record reached the dead letter.
func TestEveryBuiltinSpecEndToEnd(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + host}
	for _, name := range schemas.BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			spec, err := schemas.BuiltinSpec(name)
			if err != nil {
				t.Fatal(err)
			}
			dl := t.TempDir()
			r := runLauncher(t, env, "--source=files", "--spec="+name, "--input=../testdata/samples/"+name+".jsonl",
				"--bigtable_project=p", "--bigtable_instance=i", "--dead_letter="+dl)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			want, rejects := goldenCells(t, "../testdata/golden/"+name+".preview.jsonl")
			if len(want) == 0 || rejects == 0 {
				t.Fatalf("golden preview has %d cells and %d rejects; the sample should have both", len(want), rejects)
			}
			var got []string
			for _, tbl := range spec.Bigtable.Tables {
				for _, c := range dump(t, host, tbl.Name) {
					// The golden previews hold the readings' cells; the
					// rollup family has its own tests.
					if spec.Rollup != nil && strings.Contains(c, " "+spec.Rollup.Family+":") {
						continue
					}
					got = append(got, tbl.Name+" "+c)
				}
			}
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("Bigtable differs from the golden preview: %d cells, want %d\ngot:\n%s\nwant:\n%s",
					len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if n := len(deadLetters(t, dl)); n != rejects {
				t.Fatalf("%d dead letters; the preview rejects %d records", n, rejects)
			}
		})
	}
}

// goldenCells reads a preview file: the distinct cells as dump formats
// them, prefixed with the table, and the number of rejected records.
func goldenCells(t *testing.T, path string) ([]string, int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	rejects := 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var row struct {
			Table  string `json:"table"`
			RowKey string `json:"row_key"`
			Reason string `json:"reason"`
			Cells  []struct {
				Family, Qualifier string
				TimestampMicros   int64 `json:"timestamp_micros"`
				Value             string
			} `json:"cells"`
		}
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if row.Reason != "" {
			if row.Reason != "duplicate" {
				rejects++
			}
			continue
		}
		for _, c := range row.Cells {
			seen[fmt.Sprintf("%s %s %s:%s@%d=%s", row.Table, row.RowKey, c.Family, c.Qualifier, c.TimestampMicros, c.Value)] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, rejects
}

// TestBatchBothSinks runs the contract command with the BigQuery sink on,
// for each write method, and checks BigQuery against Bigtable: one row per
// distinct valid reading, with the same values and imputation as the cells,
// in a DAY-partitioned table clustered by sensor_id.
func TestBatchBothSinks(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	for _, method := range []string{"upsert", "storage_write", "insert_all"} {
		t.Run(method, func(t *testing.T) {
			bq := bqemu.StartServerForTest(t)
			env := []string{"BIGTABLE_EMULATOR_HOST=" + host,
				"BIGQUERY_EMULATOR_HOST=" + strings.TrimPrefix(bq.RESTEndpoint, "http://"),
				"BIGQUERY_STORAGE_EMULATOR_HOST=" + bq.GRPCAddr}
			table := "vitals_" + method
			r := runLauncher(t, env, "--source=files", "--input="+writeInput(t)+"/*", "--bigtable_project=p",
				"--bigtable_instance=i", "--bigtable_table="+table, "--bigquery_project=p", "--bigquery_dataset=vitals",
				"--bigquery_table=readings", "--bigquery_write_method="+method, "--dead_letter="+t.TempDir())
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}

			// Bigtable: sensor|ms -> "hr,bt,spo2,bat,imputed" from the cells.
			fromBT := map[string][]string{}
			cols := map[string]int{"heart_rate": 0, "body_temperature": 1, "spO2": 2, "battery_level": 3, "heart_rate_imputed": 4}
			for _, c := range dump(t, host, table) {
				// "row fam:col@micros=value"
				row, rest, _ := strings.Cut(c, " ")
				col, rest, _ := strings.Cut(rest, "@")
				micros, val, _ := strings.Cut(rest, "=")
				sensor, _, _ := strings.Cut(row, "#")
				_, q, _ := strings.Cut(col, ":")
				i, ok := cols[q]
				if !ok {
					continue // rollup families
				}
				k := sensor + "|" + strings.TrimSuffix(micros, "000")
				if fromBT[k] == nil {
					fromBT[k] = make([]string, 5)
				}
				fromBT[k][i] = val
			}

			ctx := context.Background()
			client, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			tbl := client.Dataset("vitals").Table("readings")
			md, err := tbl.Metadata(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if p := md.TimePartitioning; p == nil || p.Type != bigquery.DayPartitioningType || p.Field != "event_timestamp" {
				t.Errorf("time partitioning = %+v; want DAY on event_timestamp", md.TimePartitioning)
			}
			if c := md.Clustering; c == nil || strings.Join(c.Fields, ",") != "sensor_id" {
				t.Errorf("clustering = %+v; want sensor_id", md.Clustering)
			}
			hourly, err := client.Dataset("vitals").Table("readings_hourly").Metadata(ctx)
			if err != nil {
				t.Fatalf("readings_hourly: %v", err)
			}
			if p := hourly.TimePartitioning; p == nil || p.Type != bigquery.DayPartitioningType || p.Field != "window_start" {
				t.Errorf("readings_hourly partitioning = %+v; want DAY on window_start", hourly.TimePartitioning)
			}
			if c := hourly.Clustering; c == nil || strings.Join(c.Fields, ",") != "sensor_id" {
				t.Errorf("readings_hourly clustering = %+v; want sensor_id", hourly.Clustering)
			}
			// One rollup row per (sensor, hour): the batch's single firing.
			if !strings.Contains(r.stdout, "bigquery_rollups readings_hourly: rollup rows routed 3 = written 3 + dead-lettered 0") {
				t.Errorf("summary lacks 3 readings_hourly rows (p-1 and p-4 at 10h, p-2 at 11h):\n%s", r.stdout)
			}
			fromBQ := map[string][]string{}
			ids := map[string]bool{}
			rows, err := emulators.ReadBigQuery(ctx, tbl)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range rows {
				ms := row["event_timestamp"].(time.Time).UnixMilli()
				k := fmt.Sprintf("%s|%d", row["sensor_id"], ms)
				if fromBQ[k] != nil {
					t.Errorf("reading %s landed twice", k)
				}
				text := func(v bigquery.Value) string {
					if v == nil {
						return ""
					}
					return fmt.Sprint(v)
				}
				fromBQ[k] = []string{text(row["heart_rate"]), text(row["body_temperature"]), text(row["spO2"]),
					text(row["battery_level"]), text(row["heart_rate_imputed"])}
				id, _ := row["reading_id"].(string)
				if len(id) != 32 || ids[id] {
					t.Errorf("reading_id %q: want 32 unique hex digits", id)
				}
				ids[id] = true
			}
			if len(fromBQ) != 304 || len(fromBT) != 304 {
				t.Fatalf("BigQuery has %d readings, Bigtable %d; want 304 each", len(fromBQ), len(fromBT))
			}
			for k, want := range fromBT {
				if got := fromBQ[k]; strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("reading %s: BigQuery %v, Bigtable %v", k, got, want)
				}
			}
		})
	}
}

// bqEnv points the launcher at both emulators.
func bqEnv(btHost string, bq *bqemu.TestServer) []string {
	return []string{"BIGTABLE_EMULATOR_HOST=" + btHost,
		"BIGQUERY_EMULATOR_HOST=" + strings.TrimPrefix(bq.RESTEndpoint, "http://"),
		"BIGQUERY_STORAGE_EMULATOR_HOST=" + bq.GRPCAddr}
}

// TestBatchRerunKeepsOneRowPerReading is the contract: the batch contract
// command (default write method: upsert) run twice on the same input
// leaves one row per distinct valid reading in vitals.readings, as
// tabledata.list, a query through the Go client and the bq CLI all see,
// and one rollup row per sensor and hour.
func TestBatchRerunKeepsOneRowPerReading(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	in := writeInput(t)
	for run := 1; run <= 2; run++ {
		r := runLauncher(t, bqEnv(host, bq), "--source=files", "--input="+in+"/*", "--bigtable_project=p",
			"--bigtable_instance=i", "--bigquery_dataset=vitals", "--dead_letter="+t.TempDir())
		if r.code != 0 {
			t.Fatalf("run %d: exit %d\n%s\n%s", run, r.code, r.stdout, r.stderr)
		}
	}
	const distinct = 304 // 309 read, 4 dead letters, 1 duplicate
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Run("tabledata.list", func(t *testing.T) {
		rows, err := emulators.ReadBigQuery(ctx, c.Dataset("vitals").Table("readings"))
		if err != nil {
			t.Fatal(err)
		}
		ids := map[any]bool{}
		for _, row := range rows {
			ids[row["reading_id"]] = true
		}
		if len(rows) != distinct || len(ids) != distinct {
			t.Errorf("%d rows, %d distinct reading_ids; want %d of each", len(rows), len(ids), distinct)
		}
		md, err := c.Dataset("vitals").Table("readings").Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if md.NumRows != distinct {
			t.Errorf("tables.get numRows = %d, want %d", md.NumRows, distinct)
		}
		hourly, err := emulators.ReadBigQuery(ctx, c.Dataset("vitals").Table("readings_hourly"))
		if err != nil {
			t.Fatal(err)
		}
		if len(hourly) != 3 {
			t.Errorf("readings_hourly has %d rows, want 3 (p-1 and p-4 at 10h, p-2 at 11h)", len(hourly))
		}
	})
	const count = "SELECT COUNT(*) AS n, COUNT(DISTINCT reading_id) AS d FROM vitals.readings"
	t.Run("query", func(t *testing.T) {
		it, err := c.Query(count).Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var row []bigquery.Value
		if err := it.Next(&row); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(row) != fmt.Sprintf("[%d %d]", distinct, distinct) {
			t.Errorf("%s = %v, want %d and %d", count, row, distinct, distinct)
		}
	})
	t.Run("bq query", func(t *testing.T) {
		out := emulators.RunBQ(t, emulators.BQCLI(t), bq.RESTEndpoint, "p", "query", "--use_legacy_sql=false", "--format=json", count)
		if want := fmt.Sprintf(`[{"d":"%d","n":"%d"}]`, distinct, distinct); strings.TrimSpace(out) != want {
			t.Errorf("bq query: %s, want %s", out, want)
		}
	})
}

// TestUpsertNeedsThePrimaryKey: a readings table made without the primary
// key stops an upsert launch with one line naming the ALTER TABLE to run;
// once it has run (here through the emulator), the launch succeeds.
func TestUpsertNeedsThePrimaryKey(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Dataset("vitals").Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var schema bigquery.Schema
	for _, col := range spec.BigQuery.Columns {
		ft := bigquery.FieldType(col.Type)
		switch col.Type {
		case "FLOAT64":
			ft = bigquery.FloatFieldType
		case "BOOL":
			ft = bigquery.BooleanFieldType
		}
		schema = append(schema, &bigquery.FieldSchema{Name: col.Name, Type: ft, Required: col.Mode == "REQUIRED"})
	}
	if err := c.Dataset("vitals").Table("readings").Create(ctx, &bigquery.TableMetadata{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	args := []string{"--source=files", "--input=" + writeInput(t) + "/*", "--bigtable_project=p", "--bigtable_instance=i",
		"--bigquery_dataset=vitals", "--dead_letter=" + t.TempDir()}
	r := runLauncher(t, bqEnv(host, bq), args...)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	const alter = "ALTER TABLE `p.vitals.readings` ADD PRIMARY KEY (reading_id) NOT ENFORCED"
	if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], alter) {
		t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming %q", r.code, r.stderr, alter)
	}
	if _, err := c.Query(alter).Read(ctx); err != nil {
		t.Fatalf("%s: %v", alter, err)
	}
	r = runLauncher(t, bqEnv(host, bq), args...)
	if r.code != 0 || !strings.Contains(r.stdout, "bigquery readings: readings routed 304 = written 304") {
		t.Fatalf("after the ALTER TABLE: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
