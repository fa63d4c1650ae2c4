package fileio

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	beamfileio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// benchReadings is the readings each format's benchmark reads.
const benchReadings = 100_000

// benchFiles writes the same vitals readings as JSON lines, CSV, Parquet
// (DuckDB, snappy) and Avro (deflate), once per run.
func benchFiles(b *testing.B) map[string]string {
	b.Helper()
	dir := b.TempDir()
	paths := map[string]string{}
	var js, cs strings.Builder
	cs.WriteString("sensor_id,timestamp,heart_rate,body_temperature,spO2,battery_level\n")
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < benchReadings; i++ {
		ts := start.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000Z")
		s, hr, bt, sp, bat := fmt.Sprintf("patient-%03d", i%100), 60+i%40, 36+float64(i%10)/10, 90+i%10, 100-i%100
		fmt.Fprintf(&js, `{"sensor_id":"%s","timestamp":"%s","heart_rate":%d,"body_temperature":%g,"spO2":%d,"battery_level":%d}`+"\n", s, ts, hr, bt, sp, bat)
		fmt.Fprintf(&cs, "%s,%s,%d,%g,%d,%d\n", s, ts, hr, bt, sp, bat)
	}
	paths[FormatJSON] = filepath.Join(dir, "v.jsonl")
	paths[FormatCSV] = filepath.Join(dir, "v.csv")
	paths[FormatParquet] = filepath.Join(dir, "v.parquet")
	paths[FormatAvro] = filepath.Join(dir, "v.avro")
	for f, content := range map[string]string{FormatJSON: js.String(), FormatCSV: cs.String()} {
		if err := os.WriteFile(paths[f], []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(fmt.Sprintf(`SET TimeZone='UTC'; COPY (SELECT sensor_id, timestamp::TIMESTAMPTZ AS timestamp, heart_rate::DOUBLE AS heart_rate,
		body_temperature::DOUBLE AS body_temperature, spO2::DOUBLE AS spO2, battery_level::DOUBLE AS battery_level FROM read_csv('%s'))
		TO '%s' (FORMAT PARQUET)`, paths[FormatCSV], paths[FormatParquet])); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(paths[FormatAvro])
	if err != nil {
		b.Fatal(err)
	}
	enc, err := ocf.NewEncoder(`{"type":"record","name":"r","fields":[{"name":"sensor_id","type":"string"},
		{"name":"timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"heart_rate","type":["null","double"]},
		{"name":"body_temperature","type":["null","double"]},{"name":"spO2","type":["null","double"]},{"name":"battery_level","type":["null","double"]}]}`,
		f, ocf.WithCodec(ocf.Deflate))
	if err != nil {
		b.Fatal(err)
	}
	type rec struct {
		S  string    `avro:"sensor_id"`
		T  time.Time `avro:"timestamp"`
		H  *float64  `avro:"heart_rate"`
		BT *float64  `avro:"body_temperature"`
		SP *float64  `avro:"spO2"`
		BA *float64  `avro:"battery_level"`
	}
	for i := 0; i < benchReadings; i++ {
		hr, bt, sp, bat := float64(60+i%40), 36+float64(i%10)/10, float64(90+i%10), float64(100-i%100)
		if err := enc.Encode(rec{fmt.Sprintf("patient-%03d", i%100), start.Add(time.Duration(i) * time.Second), &hr, &bt, &sp, &bat}); err != nil {
			b.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return paths
}

var benchPaths map[string]string

// BenchmarkReadAndParse reads the same readings from each format and
// parses them as the batch does (JSON lines: the file reader, then the
// spec's parser; a table format: the reader, which parses its rows),
// reporting readings/s: CSV and Parquet are to read at least as
// many per second as JSON lines.
func BenchmarkReadAndParse(b *testing.B) {
	if benchPaths == nil {
		benchPaths = benchFiles(b)
	}
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		b.Fatal(err)
	}
	c, err := hours.Compile(spec, hours.CompileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, format := range []string{FormatJSON, FormatCSV, FormatParquet, FormatAvro} {
		b.Run(format, func(b *testing.B) {
			path := benchPaths[format]
			st, _ := os.Stat(path)
			file := beamfileio.ReadableFile{Metadata: beamfileio.FileMetadata{Path: path, Size: st.Size()}}
			ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bench"), "read")
			dec, bld := c.Decoder(), c.Builder()
			var recs []schemas.Record
			n := 0
			// A line's parse as dofns.ParseFn runs it: decode, check
			// each reading can be built, key it by its identity.
			parse := func(source, line string) {
				recs, _ = dec.ParseInput(recs[:0], line, source, codec.Input{})
				for i := range recs {
					if bld.Check(&recs[i]) == nil && group.IdentityKey(c.Spec, &recs[i]) != "" {
						n++
					}
				}
			}
			dead := func(d deadletter.DeadLetter) { b.Fatalf("dead letter: %+v", d) }
			b.SetBytes(st.Size())
			b.ResetTimer()
			for b.Loop() {
				var err error
				rest := offsetrange.Restriction{Start: 0, End: st.Size()}
				rt := sdf.NewLockRTracker(offsetrange.NewTracker(rest))
				if format == FormatJSON {
					err = (&readLinesFn{}).ProcessElement(ctx, rt, file, parse, dead)
				} else {
					// The table reader parses its rows itself.
					err = (&readRowsFn{Format: format, Spec: c}).ProcessElement(ctx, rt, file, func(_ beam.EventTime, _ string, _ schemas.Record) { n++ }, dead)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			if n != b.N*benchReadings {
				b.Fatalf("parsed %d readings, want %d", n, b.N*benchReadings)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "readings/s")
		})
	}
}
