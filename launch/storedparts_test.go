package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// storedPartsInput writes the same readings as JSON lines, CSV, Parquet
// (DuckDB, row groups of 200 rows) and Avro (hamba, blocks of 100
// records): 400 sensors over four hours, three readings an hour each, a
// seventh of the heart rates missing (imputed). Under vitals they are
// 1,600 sensor-hour rows, so that the Bigtable emulator, which samples
// about one row key in a hundred, gives sample row keys to cut at.
func storedPartsInput(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var js, cs strings.Builder
	cs.WriteString("sensor_id,timestamp,heart_rate,body_temperature,spO2,battery_level\n")
	type rec struct {
		S  string    `avro:"sensor_id"`
		T  time.Time `avro:"timestamp"`
		H  *float64  `avro:"heart_rate"`
		BT *float64  `avro:"body_temperature"`
		SP *float64  `avro:"spO2"`
		BA *float64  `avro:"battery_level"`
	}
	var recs []rec
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	i := 0
	for m := 0; m < 4*60; m += 20 {
		for s := 0; s < 400; s++ {
			i++
			ts := start.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
			sensor := fmt.Sprintf("s-%03d", s)
			hr, bt, sp, bat := float64(60+i%40), 36+float64(i%10)/10, float64(90+i%10), float64(100-i%100)
			r := rec{sensor, ts, &hr, &bt, &sp, &bat}
			hrText, hrJSON := fmt.Sprint(hr), fmt.Sprint(hr)
			if i%7 == 0 {
				r.H, hrText, hrJSON = nil, "", "null"
			}
			recs = append(recs, r)
			stamp := ts.Format("2006-01-02T15:04:05.000Z")
			fmt.Fprintf(&js, `{"sensor_id":"%s","timestamp":"%s","heart_rate":%s,"body_temperature":%g,"spO2":%g,"battery_level":%g}`+"\n", sensor, stamp, hrJSON, bt, sp, bat)
			fmt.Fprintf(&cs, "%s,%s,%s,%g,%g,%g\n", sensor, stamp, hrText, bt, sp, bat)
		}
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("readings.jsonl", js.String())
	write("readings.csv", cs.String())
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(fmt.Sprintf(`SET TimeZone='UTC'; COPY (SELECT sensor_id, timestamp::TIMESTAMPTZ AS timestamp, heart_rate::DOUBLE AS heart_rate,
		body_temperature::DOUBLE AS body_temperature, spO2::DOUBLE AS spO2, battery_level::DOUBLE AS battery_level FROM read_csv('%s'))
		TO '%s' (FORMAT PARQUET, ROW_GROUP_SIZE 200)`, filepath.Join(dir, "readings.csv"), filepath.Join(dir, "readings.parquet"))); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "readings.avro"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc, err := ocf.NewEncoder(`{"type":"record","name":"r","fields":[{"name":"sensor_id","type":"string"},
		{"name":"timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"heart_rate","type":["null","double"]},
		{"name":"body_temperature","type":["null","double"]},{"name":"spO2","type":["null","double"]},{"name":"battery_level","type":["null","double"]}]}`,
		f, ocf.WithCodec(ocf.Deflate), ocf.WithBlockLength(100))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// partsRun is what one local run left: its table's cells and its ledger.
type partsRun struct {
	cells  []string
	ledger string
	stderr string
}

// runParts runs the launcher with args, writing Bigtable table, and
// returns what it left.
func runParts(t *testing.T, env []string, table string, args ...string) partsRun {
	t.Helper()
	summary := filepath.Join(t.TempDir(), "summary.json")
	args = append(args, "--bigtable_project=p", "--bigtable_instance=i", "--bigtable_table="+table,
		"--dead_letter="+t.TempDir(), "--summary_json="+summary)
	r := runLauncher(t, env, args...)
	if r.code != 0 {
		t.Fatalf("launch %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	l := readSummary(t, summary)
	host := strings.TrimPrefix(env[0], "BIGTABLE_EMULATOR_HOST=")
	return partsRun{cells: dump(t, host, table), stderr: r.stderr,
		ledger: fmt.Sprintf("read %d, rejected %d, duplicates %d, dead-lettered %d, rows by format %v, balanced %v", l.Read, l.Rejected, l.Duplicates, l.DeadLettered(), l.RowsByFormat, l.Balanced)}
}

// sameAsOneJob checks that a run in parts left the one job's cells and
// ledger, and ran as several jobs, each with its part's line; it returns
// how many.
func sameAsOneJob(t *testing.T, parted, one partsRun, cut string) int {
	t.Helper()
	m := regexp.MustCompile(`runs as (\d+) jobs, one after another .*: (.*)`).FindStringSubmatch(parted.stderr)
	if m == nil || !strings.Contains(m[2], cut) {
		t.Fatalf("stderr lacks the notice that the input runs as parts (%s):\n%s", cut, parted.stderr)
	}
	var n int
	fmt.Sscan(m[1], &n)
	if n < 2 || !strings.Contains(parted.stderr, fmt.Sprintf("part %d of %d: ", n, n)) {
		t.Errorf("want two parts or more, each announced; %d:\n%s", n, parted.stderr)
	}
	if len(one.cells) < 1000 {
		t.Fatalf("the one job wrote %d cells", len(one.cells))
	}
	if !slices.Equal(parted.cells, one.cells) {
		t.Errorf("%d parts wrote other cells than one job: %d cells, %d as one job; %d differ:\n%s",
			n, len(parted.cells), len(one.cells), cellDiff(parted.cells, one.cells), firstDiffs(parted.cells, one.cells, 10))
	}
	if parted.ledger != one.ledger {
		t.Errorf("ledger in %d parts: %s; as one job: %s", n, parted.ledger, one.ledger)
	}
	return n
}

// TestRekeyInPartsEqualsOneJob: a rekey (--source=bigtable) from a table
// whose rows hold periods of 2^22 ms, so that its hours are grouped from
// the rows they span,
// and whose --local_part_mb cuts the table into several key ranges, each a
// job of its own, writes the new table cell for cell as the rekey run as
// one job does, with the same ledger. A rekey from a table whose rows hold
// whole hours builds them as it reads them, as one job whatever
// --local_part_mb, and writes the same cells again.
func TestRekeyInPartsEqualsOneJob(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	host := emulators.StartBigtable(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + host}
	in := storedPartsInput(t)
	const periods = "../testdata/rekey/vitals_periods.yaml"
	runParts(t, env, "old", "--input="+filepath.Join(in, "readings.jsonl"), "--spec="+periods, "--local_part_mb=0")
	rekey := []string{"--source=bigtable", "--from_spec=" + periods, "--from_table=old", "--spec=" + saltedSpec}
	one := runParts(t, env, "one", append(rekey, "--local_part_mb=0")...)
	parted := runParts(t, env, "parted", append(rekey, "--local_part_mb=0.1")...)
	n := sameAsOneJob(t, parted, one, "key ranges at its sample row keys")
	if !strings.Contains(parted.stderr, "the rows from key ") {
		t.Errorf("stderr lacks a part's key range:\n%s", parted.stderr)
	}
	t.Logf("%d parts; %s", n, one.ledger)

	runParts(t, env, "hourly", "--input="+filepath.Join(in, "readings.jsonl"), "--spec=vitals", "--local_part_mb=0")
	whole := runParts(t, env, "whole", "--source=bigtable", "--from_spec=vitals", "--from_table=hourly", "--spec="+saltedSpec, "--local_part_mb=0.05")
	if strings.Contains(whole.stderr, "runs as") {
		t.Errorf("a rekey of rows that hold whole hours ran in parts:\n%s", whole.stderr)
	}
	if !slices.Equal(whole.cells, one.cells) {
		t.Errorf("the rekey of whole hours wrote other cells than the grouped rekey: %d cells, %d grouped; %d differ:\n%s",
			len(whole.cells), len(one.cells), cellDiff(whole.cells, one.cells), firstDiffs(whole.cells, one.cells, 10))
	}
	if whole.ledger != one.ledger {
		t.Errorf("ledger of the rekey of whole hours: %s; grouped: %s", whole.ledger, one.ledger)
	}

	// Parts smaller than the chunks between the emulator's sample keys
	// (one row key in a hundred, about 0.04 MB here) are cut at row keys inside
	// them: more ranges than sample keys.
	finer := runParts(t, env, "finer", append(rekey, "--local_part_mb=0.05")...)
	m := sameAsOneJob(t, finer, one, "key ranges at its sample row keys")
	var samples int
	if _, err := fmt.Sscanf(finer.stderr[strings.Index(finer.stderr, "sample row keys (")+len("sample row keys ("):], "%d", &samples); err != nil || m <= samples {
		t.Errorf("%d parts at %d sample row keys (%v): want more parts than samples", m, samples, err)
	}
	t.Logf("%d parts at %d sample row keys", m, samples)
}

// TestRebuildFromBigQueryInPartsEqualsOneJob: a rebuild from BigQuery
// (--source=bigquery) whose --local_part_mb cuts the table into ranges of
// whole hours, each read with a row restriction in a job of its own,
// writes Bigtable cell for cell as the rebuild run as one job does, with
// the same ledger.
func TestRebuildFromBigQueryInPartsEqualsOneJob(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	host := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	env := bqEnv(host, bq)
	in := storedPartsInput(t)
	runParts(t, env, "stored", "--input="+filepath.Join(in, "readings.jsonl"), "--bigquery_dataset=vitals", "--local_part_mb=0")
	rebuild := []string{"--source=bigquery", "--from_table=vitals.readings"}
	one := runParts(t, env, "one", append(rebuild, "--local_part_mb=0")...)
	parted := runParts(t, env, "parted", append(rebuild, "--local_part_mb=0.01")...)
	n := sameAsOneJob(t, parted, one, "parts of one whole hour")
	if n != 4 || !strings.Contains(parted.stderr, "the readings from 2026-03-01T11:00:00Z to 2026-03-01T12:00:00Z") {
		t.Errorf("want the four hours in four parts, each announced; %d:\n%s", n, parted.stderr)
	}
}

// TestTableFilesInPartsEqualOneJob: a batch of one Parquet (DuckDB's),
// Avro or CSV file whose --local_part_mb cuts it into several parts (of
// row groups, blocks, byte ranges), each a job of its own, writes
// Bigtable cell for cell as the file run as one job does, with the same
// ledger; so does one whose hours span three parts or more, read in
// shares of its identities.
func TestTableFilesInPartsEqualOneJob(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	host := emulators.StartBigtable(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + host}
	in := storedPartsInput(t)
	ones := map[string]partsRun{}
	for _, tc := range []struct{ name, format, partMB, cut, line string }{
		// DuckDB writes row groups of 2,048 rows (0.3 MB as JSON) at least.
		{"parquet", "parquet", "0.3", "by row group (3 row groups", "part 2 of 3: 2048 rows"},
		{"parquet row groups in slices", "parquet", "0.2", "by row group (3 row groups", "rows 1024 to 2048 of a row group"},
		{"avro", "avro", "0.3", "by block (48 blocks)", "rows (about "},
		{"csv", "csv", "0.3", "by byte range", "MB of input (about "},
		// Parts of 0.1 MB hold less than an hour (0.15 MB as JSON): the
		// parts an hour spans three or more of are read in shares.
		{"parquet hours across many parts", "parquet", "0.1", "read in shares of their identities", "the readings of share 1 of "},
		{"csv hours across many parts", "csv", "0.1", "read in shares of their identities", "the readings of share 1 of "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := "--input=" + filepath.Join(in, "readings."+tc.format)
			one, ok := ones[tc.format]
			if !ok {
				one = runParts(t, env, tc.format+"_one", file, "--local_part_mb=0")
				ones[tc.format] = one
			}
			parted := runParts(t, env, strings.ReplaceAll(tc.name, " ", "_"), file, "--local_part_mb="+tc.partMB)
			n := sameAsOneJob(t, parted, one, tc.cut)
			if !strings.Contains(parted.stderr, tc.line) {
				t.Errorf("stderr lacks %q:\n%s", tc.line, parted.stderr)
			}
			t.Logf("%d parts; %s", n, one.ledger)
		})
	}
}
