package fileio

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	beamfileio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"

	// DuckDB writes the Parquet fixtures: a writer other than the
	// reader's library (arrow-go), as files from elsewhere are.
	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// readOut is what a table read gave: rows by source, and dead letters.
type readOut struct {
	rows map[string]string // source -> JSON object
	dead []deadletter.DeadLetter
}

// readTable reads path as format with spec, in parts of block bytes
// (0: whole), each part on its own as a worker reads it: each row's
// rendered JSON object, before the parse (readTableRecords reads the
// readings ProcessElement emits).
func readTable(t *testing.T, spec *hours.Compiled, format, path string, block int64) readOut {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	fn := &readRowsFn{Format: format, Spec: spec}
	file := beamfileio.ReadableFile{Metadata: beamfileio.FileMetadata{Path: path, Size: st.Size()}}
	whole := fn.CreateInitialRestriction(file)
	parts := fn.SplitRestriction(file, whole)
	if block > 0 && !Compressed(path) {
		parts = whole.SizedSplits(block)
	}
	out := readOut{rows: map[string]string{}}
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "test"), "read")
	for _, part := range parts {
		rt := sdf.NewLockRTracker(offsetrange.NewTracker(part))
		err := fn.read(ctx, rt, file, &rowOut{emitJSON: func(source, row string) {
			if _, dup := out.rows[source]; dup {
				t.Errorf("%s read twice (parts of %d bytes)", source, block)
			}
			out.rows[source] = row
		}, dead: func(d deadletter.DeadLetter) { out.dead = append(out.dead, d) }})
		if err != nil {
			t.Fatalf("part %v: %v", part, err)
		}
		if err := rt.GetError(); err != nil {
			t.Fatalf("part %v: tracker: %v", part, err)
		}
	}
	return out
}

// sorted lists the rows in source order.
func (o readOut) sorted() []string {
	var keys []string
	for k := range o.rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return a < b
	})
	var out []string
	for _, k := range keys {
		out = append(out, strings.ReplaceAll(k, "\x1e", " ")+" "+o.rows[k])
	}
	return out
}

func compile(t *testing.T, yaml string) *hours.Compiled {
	t.Helper()
	var s *schemas.Spec
	var err error
	if strings.Contains(yaml, "\n") {
		s, err = schemas.ParseSpec("test.yaml", []byte(yaml))
	} else {
		s, err = schemas.BuiltinSpec(yaml)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := hours.Compile(s, hours.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const vitalsCSV = "sensor_id,timestamp,heart_rate,body_temperature,spO2,battery_level\n" +
	"p-1,2026-03-01T10:00:00Z,72,36.6,98,80\n" +
	"\"p-2\",\"2026-03-01 10:00:01Z\",,36.7,97,79\n" +
	"\"p-\"\"3\"\"\n(ward 2)\",2026-03-01T10:00:02Z,70,36.8,96,78\n" +
	"p-4,2026-03-01T10:00:03Z,71,36.9,95\n" +
	"p-5,2026-03-01T10:00:04Z,73,37.0,94,77\n"

func TestCSVRowsReadOnceWhereverTheFileSplits(t *testing.T) {
	spec := compile(t, "vitals")
	path := filepath.Join(t.TempDir(), "v.csv")
	write(t, path, vitalsCSV)
	want := []string{
		`PATH L2 {"sensor_id":"p-1","timestamp":"2026-03-01T10:00:00Z","heart_rate":72,"body_temperature":36.6,"spO2":98,"battery_level":80}`,
		`PATH L3 {"sensor_id":"p-2","timestamp":"2026-03-01 10:00:01Z","body_temperature":36.7,"spO2":97,"battery_level":79}`,
		`PATH L4 {"sensor_id":"p-\"3\"\n(ward 2)","timestamp":"2026-03-01T10:00:02Z","heart_rate":70,"body_temperature":36.8,"spO2":96,"battery_level":78}`,
		`PATH L7 {"sensor_id":"p-5","timestamp":"2026-03-01T10:00:04Z","heart_rate":73,"body_temperature":37.0,"spO2":94,"battery_level":77}`,
	}
	for i := range want {
		want[i] = strings.Replace(want[i], "PATH", path, 1)
	}
	for _, block := range []int64{0, 1, 7, 40, 64, 100} {
		t.Run(fmt.Sprintf("parts of %d bytes", block), func(t *testing.T) {
			got := readTable(t, spec, FormatCSV, path, block)
			if g, w := strings.Join(got.sorted(), "\n"), strings.Join(want, "\n"); g != w {
				t.Errorf("rows:\n%s\nwant:\n%s", g, w)
			}
			if len(got.dead) != 1 || got.dead[0].Reason != "malformed" || got.dead[0].Line != 6 || !strings.Contains(got.dead[0].Error, "5 fields, the header 6") {
				t.Errorf("dead letters %+v, want line 6's malformed row", got.dead)
			}
		})
	}
}

func TestCSVLocalTimesAcrossDaylightSaving(t *testing.T) {
	spec := compile(t, `
name: plant
event_time: ts
identity: [meter]
csv: {header: false, columns: [meter, ts, kw], delimiter: ";"}
fields:
  - {name: meter, type: string, required: true}
  - {name: ts, type: timestamp, required: true, layout: "02.01.2006 15:04:05", timezone: Europe/Berlin}
  - {name: kw, type: float}
bigtable:
  tables:
    - name: t
      row_key: "{meter}#{ts|hour}"
      families: [{name: m, columns: [{qualifier: kw, value: kw}]}]
`)
	path := filepath.Join(t.TempDir(), "plant.csv.gz")
	writeGzip(t, path, "m1;25.10.2026 01:30:00;1.5\nm1;25.10.2026 02:30:00;2\nm1;25.10.2026 03:30:00;3\nm1;29.03.2026 02:30:00;4\n")
	got := readTable(t, spec, FormatCSV, path, 0)
	dec := spec.Decoder()
	var results []string
	for _, row := range got.sorted() {
		i := strings.Index(row, "{")
		recs, err := dec.ParseInput(nil, row[i:], "x", codec.Input{})
		switch {
		case err != nil:
			results = append(results, err.Error())
		default:
			results = append(results, fmt.Sprint(recs[0].EventMs))
		}
	}
	want := []string{
		"1792884600000", // 01:30 CEST = 23:30 UTC the day before
		"bad_timestamp: ts: 2026-10-25 02:30:00 is ambiguous in Europe/Berlin",
		"1792895400000", // 03:30 CET = 02:30 UTC
		"bad_timestamp: ts: 2026-03-29 02:30:00 does not exist in Europe/Berlin",
	}
	if len(results) != len(want) {
		t.Fatalf("got %q", results)
	}
	for i := range want {
		if !strings.HasPrefix(results[i], want[i]) {
			t.Errorf("row %d: got %q, want %q…", i+1, results[i], want[i])
		}
	}
}

// duckParquet writes the rows of a DuckDB query to a Parquet file.
func duckParquet(t *testing.T, path, query, options string) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(fmt.Sprintf("SET TimeZone='UTC'; COPY (%s) TO '%s' (FORMAT PARQUET%s)", query, path, options)); err != nil {
		t.Fatal(err)
	}
}

func TestParquetFromDuckDB(t *testing.T) {
	spec := compile(t, "vitals")
	dir := t.TempDir()
	path := filepath.Join(dir, "v.parquet")
	// A BigQuery-export-like layout: event_timestamp as a UTC-adjusted
	// TIMESTAMP(MICROS), a DECIMAL, the impute flag.
	duckParquet(t, path, `SELECT 'p-' || (i % 3) AS sensor_id,
		TIMESTAMPTZ '2026-03-01 10:00:00+00' + INTERVAL (i) SECOND AS event_timestamp,
		CASE WHEN i % 5 = 0 THEN NULL ELSE 60.5 + i % 7 END AS heart_rate,
		(36 + (i % 10) / 10.0)::DECIMAL(9,2) AS body_temperature,
		97.0::DOUBLE AS spO2, (100 - i % 50)::BIGINT AS battery_level,
		i % 4 = 0 AS heart_rate_imputed,
		'id-' || i AS reading_id
		FROM range(5000) t(i)`, ", ROW_GROUP_SIZE 1024")
	for _, block := range []int64{0, 5000} {
		got := readTable(t, spec, FormatParquet, path, block)
		if len(got.rows) != 5000 || len(got.dead) != 0 {
			t.Fatalf("parts of %d: %d rows, dead %+v", block, len(got.rows), got.dead)
		}
		for _, r := range got.sorted() {
			if strings.Contains(r, "row group 0, row 4 ") {
				want := `{"sensor_id":"p-1","timestamp":"2026-03-01T10:00:04Z","body_temperature":36.40,"spO2":97,"battery_level":96}`
				if !strings.HasSuffix(r, want) {
					t.Errorf("row 4: %s\nwant …%s (imputed heart rate blanked)", r, want)
				}
			}
		}
	}

	// A column that cannot hold its field: one invalid_field dead letter.
	bad := filepath.Join(dir, "bad.parquet")
	duckParquet(t, bad, `SELECT 'p' AS sensor_id, true AS timestamp, 1.0 AS body_temperature, 1.0 AS spO2, 1.0 AS battery_level`, "")
	got := readTable(t, spec, FormatParquet, bad, 0)
	if len(got.rows) != 0 || len(got.dead) != 1 || got.dead[0].Reason != "invalid_field" || !strings.Contains(got.dead[0].Error, `column "timestamp" is BOOLEAN`) {
		t.Errorf("got %d rows, dead %+v", len(got.rows), got.dead)
	}
}

func TestCorruptParquetKeepsTheRowsBeforeTheDamage(t *testing.T) {
	spec := compile(t, "vitals")
	dir := t.TempDir()
	path := filepath.Join(dir, "v.parquet")
	duckParquet(t, path, `SELECT 'p-' || (i % 3) AS sensor_id, TIMESTAMPTZ '2026-03-01 10:00:00+00' + INTERVAL (i) SECOND AS timestamp,
		random() AS body_temperature, random() AS spO2, random() AS battery_level FROM range(6000) t(i)`, ", ROW_GROUP_SIZE 2048, COMPRESSION zstd")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := openParquet(f)
	if err != nil {
		t.Fatal(err)
	}
	groups := pf.rdr.NumRowGroups()
	second := pf.rowGroupOffset(1)
	f.Close()
	if groups < 2 {
		t.Fatalf("%d row groups", groups)
	}
	// Damage the second row group's first page.
	damaged := append([]byte(nil), data...)
	for i := second + 40; i < second+400; i++ {
		damaged[i] ^= 0x5a
	}
	write(t, path, string(damaged))
	got := readTable(t, spec, FormatParquet, path, 0)
	var first int
	for k := range got.rows {
		if strings.Contains(k, "row group 0,") {
			first++
		}
	}
	if first != int(2048) {
		t.Errorf("%d rows of row group 0 read, want 2048", first)
	}
	if len(got.dead) == 0 || got.dead[0].Reason != "unreadable" || !strings.HasPrefix(got.dead[0].Row, "row group 1") {
		t.Errorf("dead letters %+v, want row group 1 unreadable", got.dead)
	}

	// A file cut short has no footer: the whole file is one dead letter.
	write(t, path, string(data[:len(data)/2]))
	got = readTable(t, spec, FormatParquet, path, 0)
	if len(got.rows) != 0 || len(got.dead) != 1 || got.dead[0].Reason != "unreadable" {
		t.Errorf("cut file: %d rows, dead %+v", len(got.rows), got.dead)
	}
}

const avroSchema = `{"type":"record","name":"readings","fields":[
 {"name":"sensor_id","type":"string"},
 {"name":"event_timestamp","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"heart_rate","type":["null","double"],"default":null},
 {"name":"body_temperature","type":["null",{"type":"bytes","logicalType":"decimal","precision":38,"scale":9}]},
 {"name":"spO2","type":["null","double"]},
 {"name":"battery_level","type":["null","long"]},
 {"name":"heart_rate_imputed","type":["null","boolean"]},
 {"name":"reading_id","type":"string"}]}`

type avroReading struct {
	SensorID  string   `avro:"sensor_id"`
	Event     int64    `avro:"event_timestamp"`
	HeartRate *float64 `avro:"heart_rate"`
	BodyTemp  *big.Rat `avro:"body_temperature"`
	SpO2      *float64 `avro:"spO2"`
	Battery   *int64   `avro:"battery_level"`
	Imputed   *bool    `avro:"heart_rate_imputed"`
	ReadingID string   `avro:"reading_id"`
}

func writeAvro(t *testing.T, path string, n int, codec ocf.CodecName) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ocf.NewEncoder(avroSchema, f, ocf.WithBlockLength(100), ocf.WithCodec(codec))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		hr, spo2, bat, imp := 60.0+float64(i%7), 97.5, int64(90), i%4 == 0
		r := avroReading{SensorID: fmt.Sprintf("p-%d", i%3), Event: 1772359200000000 + int64(i)*1_000_000, HeartRate: &hr,
			BodyTemp: big.NewRat(3665+int64(i%5), 100), SpO2: &spo2, Battery: &bat, Imputed: &imp, ReadingID: fmt.Sprint(i)}
		if i%10 == 1 {
			r.HeartRate = nil
		}
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestAvroBlocksReadOnceWhereverTheFileSplits(t *testing.T) {
	spec := compile(t, "vitals")
	for _, codec := range []ocf.CodecName{ocf.Null, ocf.Deflate, ocf.Snappy, ocf.ZStandard} {
		t.Run(string(codec), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.avro")
			writeAvro(t, path, 1000, codec)
			for _, block := range []int64{0, 1000, 4096} {
				got := readTable(t, spec, FormatAvro, path, block)
				if len(got.rows) != 1000 || len(got.dead) != 0 {
					t.Fatalf("parts of %d: %d rows, dead %+v", block, len(got.rows), got.dead)
				}
				for k, r := range got.rows {
					if strings.Contains(r, `"timestamp":"2026-03-01T10:00:02Z"`) {
						want := `{"sensor_id":"p-2","timestamp":"2026-03-01T10:00:02Z","heart_rate":62,"body_temperature":36.670000000,"spO2":97.5,"battery_level":90}`
						if r != want {
							t.Errorf("%s\ngot  %s\nwant %s", k, r, want)
						}
					}
				}
			}
		})
	}
}

func TestTruncatedAvroKeepsTheBlocksBefore(t *testing.T) {
	spec := compile(t, "vitals")
	path := filepath.Join(t.TempDir(), "v.avro")
	writeAvro(t, path, 1000, ocf.Deflate)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, string(data[:len(data)-200]))
	got := readTable(t, spec, FormatAvro, path, 0)
	if len(got.rows) != 900 {
		t.Errorf("%d rows, want the 900 of the 9 whole blocks", len(got.rows))
	}
	if len(got.dead) != 1 || got.dead[0].Reason != "unreadable" || !strings.Contains(got.dead[0].Error, "truncated") || !strings.HasPrefix(got.dead[0].Row, "block at byte") {
		t.Errorf("dead letters %+v", got.dead)
	}
	write(t, path, "Obj\x01 not avro")
	got = readTable(t, spec, FormatAvro, path, 0)
	if len(got.dead) != 1 || got.dead[0].Reason != "unreadable" {
		t.Errorf("not avro: dead letters %+v", got.dead)
	}
}
