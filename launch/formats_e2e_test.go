package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// acceptanceObjects reads the JSON objects of the acceptance data
// (testdata/vitals: a plain and a gzip file); lines that are no JSON
// object have no row in a table file and are left out.
func acceptanceObjects(t *testing.T) []map[string]json.RawMessage {
	t.Helper()
	files, _ := filepath.Glob("../testdata/vitals/*")
	var out []map[string]json.RawMessage
	for _, f := range files {
		fd, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = fd
		if strings.HasSuffix(f, ".gz") {
			if r, err = gzip.NewReader(fd); err != nil {
				t.Fatal(err)
			}
		}
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil && m != nil {
				out = append(out, m)
			}
		}
		fd.Close()
	}
	if len(out) < 100 {
		t.Fatalf("%d acceptance objects", len(out))
	}
	return out
}

var vitalsColumns = []string{"sensor_id", "timestamp", "heart_rate", "body_temperature", "spO2", "battery_level"}

// writeAcceptanceCSV writes the objects as CSV, each value as its JSON
// text (a string's unquoted), null and absent empty. An object with a
// string where the spec reads a number ("heart_rate": "72", an
// invalid_field in JSON) is left out: CSV text has no types to tell the
// string 72 from the number.
func writeAcceptanceCSV(t *testing.T, path string, objs []map[string]json.RawMessage) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	w.Write(vitalsColumns)
	for _, o := range objs {
		if stringForNumber(o) {
			continue
		}
		row := make([]string, len(vitalsColumns))
		for i, c := range vitalsColumns {
			v := o[c]
			var s string
			switch {
			case len(v) == 0 || string(v) == "null":
			case json.Unmarshal(v, &s) == nil:
			default:
				s = string(v)
			}
			row[i] = s
		}
		w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// stringForNumber reports whether o holds a JSON string in a numeric
// field of the vitals spec.
func stringForNumber(o map[string]json.RawMessage) bool {
	for _, c := range vitalsColumns[2:] {
		if v := o[c]; len(v) > 0 && v[0] == '"' {
			return true
		}
	}
	return false
}

// acceptanceRecords parses the objects with the vitals spec: the valid
// readings, typed, for the typed formats.
func acceptanceRecords(t *testing.T, objs []map[string]json.RawMessage) []schemas.Record {
	t.Helper()
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	p := codec.NewParser(spec)
	var out []schemas.Record
	for _, o := range objs {
		b, _ := json.Marshal(o)
		out, _ = p.ParseString(out, string(b), "x")
	}
	return out
}

// writeAcceptanceParquet writes the valid readings as Parquet with
// DuckDB: another writer than the reader's library, with the event time
// a UTC-adjusted TIMESTAMP(MICROS) and null readings nulls, in row groups
// of 64 rows.
func writeAcceptanceParquet(t *testing.T, path string, recs []schemas.Record) {
	t.Helper()
	num := func(v schemas.Value) any {
		if v.Null() {
			return nil
		}
		return v.Num
	}
	duckParquet(t, path, "sensor_id VARCHAR, timestamp TIMESTAMPTZ, heart_rate DOUBLE, body_temperature DOUBLE, spO2 DOUBLE, battery_level DOUBLE",
		", ROW_GROUP_SIZE 64", func(exec func(q string, args ...any)) {
			for _, r := range recs {
				exec("INSERT INTO r VALUES (?, make_timestamptz(?::BIGINT * 1000), ?, ?, ?, ?)", r.Values[0].Str, r.EventMs,
					num(r.Values[2]), num(r.Values[3]), num(r.Values[4]), num(r.Values[5]))
			}
		})
}

// duckParquet writes a Parquet file with DuckDB, in UTC: a table r of
// columns, filled by fill through exec (which ends the test on an
// error), copied to path with the COPY options opts (", OPTION value"…).
func duckParquet(t *testing.T, path, columns, opts string, fill func(exec func(q string, args ...any))) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("SET TimeZone='UTC'")
	exec("CREATE TABLE r (" + columns + ")")
	fill(exec)
	exec(fmt.Sprintf("COPY r TO '%s' (FORMAT PARQUET%s)", path, opts))
}

// writeAcceptanceAvro writes the valid readings as Avro (hamba's
// encoder), the event time as timestamp-millis, the readings nullable.
func writeAcceptanceAvro(t *testing.T, path string, recs []schemas.Record) {
	t.Helper()
	type reading struct {
		SensorID  string    `avro:"sensor_id"`
		Timestamp time.Time `avro:"timestamp"`
		HeartRate *float64  `avro:"heart_rate"`
		BodyTemp  *float64  `avro:"body_temperature"`
		SpO2      *float64  `avro:"spO2"`
		Battery   *float64  `avro:"battery_level"`
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ocf.NewEncoder(`{"type":"record","name":"reading","fields":[{"name":"sensor_id","type":"string"},
		{"name":"timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"heart_rate","type":["null","double"]},{"name":"body_temperature","type":["null","double"]},
		{"name":"spO2","type":["null","double"]},{"name":"battery_level","type":["null","double"]}]}`, f,
		ocf.WithBlockLength(50), ocf.WithCodec(ocf.Deflate))
	if err != nil {
		t.Fatal(err)
	}
	num := func(v schemas.Value) *float64 {
		if v.Null() {
			return nil
		}
		n := v.Num
		return &n
	}
	for _, r := range recs {
		if err := enc.Encode(reading{r.Values[0].Str, time.UnixMilli(r.EventMs).UTC(), num(r.Values[2]), num(r.Values[3]), num(r.Values[4]), num(r.Values[5])}); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestBatchOfEachFormatEqualsTheJSONBatch: the acceptance data as CSV,
// Parquet (written by DuckDB) and Avro land in Bigtable cell for cell as
// the JSON lines do.
func TestBatchOfEachFormatEqualsTheJSONBatch(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + host}
	batch := func(table, input string, extra ...string) {
		t.Helper()
		r := runLauncher(t, env, append([]string{"--source=files", "--input=" + input, "--bigtable_project=p", "--bigtable_instance=i",
			"--bigtable_table=" + table, "--dead_letter=" + t.TempDir(), "--progress_interval=0"}, extra...)...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", table, r.code, r.stdout, r.stderr)
		}
	}
	batch("vitals_json", "../testdata/vitals/*")
	want := dump(t, host, "vitals_json")
	if len(want) < 100 {
		t.Fatalf("the JSON batch wrote %d cells", len(want))
	}
	objs := acceptanceObjects(t)
	recs := acceptanceRecords(t, objs)
	dir := t.TempDir()
	writeAcceptanceCSV(t, filepath.Join(dir, "vitals.csv"), objs)
	writeAcceptanceParquet(t, filepath.Join(dir, "vitals.parquet"), recs)
	writeAcceptanceAvro(t, filepath.Join(dir, "vitals.avro"), recs)
	for _, format := range []string{"csv", "parquet", "avro"} {
		t.Run(format, func(t *testing.T) {
			table := "vitals_" + format
			batch(table, filepath.Join(dir, "vitals."+format))
			if got := dump(t, host, table); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s: %d cells differ from the JSON batch's %d\ngot:\n%s\nwant:\n%s", format, len(got), len(want),
					strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestBigQueryExportReingests: the readings table as BigQuery exports it
// (Avro: TIMESTAMP as long timestamp-micros, NULLABLE as a union with
// null; Parquet: TIMESTAMP as INT64 TIMESTAMP(MICROS, UTC-adjusted)), its
// column names (event_timestamp) mapped back through the spec's bigquery
// columns, lands in Bigtable as the batch that wrote it did, imputed
// values imputed again.
func TestBigQueryExportReingests(t *testing.T) {
	t.Parallel()
	host := emulators.StartBigtable(t)
	bq := bqemu.StartServerForTest(t)
	env := bqEnv(host, bq)
	r := runLauncher(t, env, "--source=files", "--input=../testdata/vitals/*", "--bigtable_project=p", "--bigtable_instance=i",
		"--bigtable_table=vitals_src", "--bigquery_project=p", "--bigquery_dataset=vitals", "--dead_letter="+t.TempDir(), "--progress_interval=0")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := dump(t, host, "vitals_src")
	ctx := context.Background()
	client, err := bigquery.NewClient(ctx, "p", bq.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rows, err := emulators.ReadBigQuery(ctx, client.Dataset("vitals").Table("readings"))
	if err != nil {
		t.Fatal(err)
	}
	imputed := 0
	for _, row := range rows {
		if b, _ := row["heart_rate_imputed"].(bool); b {
			imputed++
		}
	}
	if len(rows) < 100 || imputed == 0 {
		t.Fatalf("BigQuery holds %d rows, %d imputed: the export should have both", len(rows), imputed)
	}
	dir := t.TempDir()
	writeBigQueryAvro(t, filepath.Join(dir, "readings.avro"), rows)
	writeBigQueryParquet(t, filepath.Join(dir, "readings.parquet"), rows)
	for _, format := range []string{"avro", "parquet"} {
		t.Run(format, func(t *testing.T) {
			table := "vitals_export_" + format
			r := runLauncher(t, []string{"BIGTABLE_EMULATOR_HOST=" + host}, "--source=files", "--input="+filepath.Join(dir, "readings."+format),
				"--bigtable_project=p", "--bigtable_instance=i", "--bigtable_table="+table, "--dead_letter="+t.TempDir(), "--progress_interval=0")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if got := dump(t, host, table); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%d cells differ from the batch's %d\ngot:\n%s\nwant:\n%s", len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// bqExportSchema is the vitals readings table as BigQuery's Avro export
// writes it.
const bqExportSchema = `{"type":"record","name":"Root","fields":[
 {"name":"sensor_id","type":"string"},
 {"name":"event_timestamp","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"heart_rate","type":["null","double"]},
 {"name":"body_temperature","type":["null","double"]},
 {"name":"spO2","type":["null","double"]},
 {"name":"battery_level","type":["null","double"]},
 {"name":"heart_rate_imputed","type":["null","boolean"]},
 {"name":"reading_id","type":"string"},
 {"name":"ingested_at","type":["null",{"type":"long","logicalType":"timestamp-micros"}]}]}`

func bqFloat(v bigquery.Value) *float64 {
	if f, ok := v.(float64); ok {
		return &f
	}
	return nil
}

func writeBigQueryAvro(t *testing.T, path string, rows []map[string]bigquery.Value) {
	t.Helper()
	type row struct {
		SensorID   string     `avro:"sensor_id"`
		Event      time.Time  `avro:"event_timestamp"`
		HeartRate  *float64   `avro:"heart_rate"`
		BodyTemp   *float64   `avro:"body_temperature"`
		SpO2       *float64   `avro:"spO2"`
		Battery    *float64   `avro:"battery_level"`
		Imputed    *bool      `avro:"heart_rate_imputed"`
		ReadingID  string     `avro:"reading_id"`
		IngestedAt *time.Time `avro:"ingested_at"`
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ocf.NewEncoder(bqExportSchema, f, ocf.WithCodec(ocf.Snappy))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		out := row{SensorID: r["sensor_id"].(string), Event: r["event_timestamp"].(time.Time).UTC(), HeartRate: bqFloat(r["heart_rate"]),
			BodyTemp: bqFloat(r["body_temperature"]), SpO2: bqFloat(r["spO2"]), Battery: bqFloat(r["battery_level"])}
		out.ReadingID, _ = r["reading_id"].(string)
		if b, ok := r["heart_rate_imputed"].(bool); ok {
			out.Imputed = &b
		}
		if ts, ok := r["ingested_at"].(time.Time); ok {
			out.IngestedAt = &ts
		}
		if err := enc.Encode(out); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func writeBigQueryParquet(t *testing.T, path string, rows []map[string]bigquery.Value) {
	t.Helper()
	val := func(v bigquery.Value) any {
		if f := bqFloat(v); f != nil {
			return *f
		}
		return nil
	}
	duckParquet(t, path, `sensor_id VARCHAR NOT NULL, event_timestamp TIMESTAMPTZ NOT NULL, heart_rate DOUBLE, body_temperature DOUBLE,
		spO2 DOUBLE, battery_level DOUBLE, heart_rate_imputed BOOLEAN, reading_id VARCHAR NOT NULL, ingested_at TIMESTAMPTZ`,
		"", func(exec func(q string, args ...any)) {
			for _, r := range rows {
				var imputed any
				if b, ok := r["heart_rate_imputed"].(bool); ok {
					imputed = b
				}
				exec("INSERT INTO r VALUES (?, make_timestamptz(?::BIGINT), ?, ?, ?, ?, ?, ?, NULL)", r["sensor_id"], r["event_timestamp"].(time.Time).UnixMicro(),
					val(r["heart_rate"]), val(r["body_temperature"]), val(r["spO2"]), val(r["battery_level"]), imputed, r["reading_id"])
			}
		})
}
