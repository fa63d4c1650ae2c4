package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	// DuckDB writes the Parquet file: a writer other than the reader's
	// library (arrow-go), as files from elsewhere are.
	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// formatFields are the default spec's fields the table files hold, in
// order: the event time, then the identity and the values.
var formatFields = []string{"sensor_id", "timestamp", "heart_rate", "body_temperature", "spO2", "battery_level"}

// writeFormats writes the readings of the JSON lines at input as CSV,
// Parquet (DuckDB, a writer other than the reader's arrow-go) and Avro
// (hamba/avro, deflate) beside it, and returns their paths by format:
// each reading parsed by the spec's parser, its fields written as the
// format types them (the event time a UTC timestamp in milliseconds,
// the values doubles, a null an empty cell or a null).
func writeFormats(work, input string) (map[string]string, error) {
	spec, err := schemas.BuiltinSpec(schemas.DefaultSpecName())
	if err != nil {
		return nil, err
	}
	idx := make([]int, len(formatFields))
	for i, name := range formatFields {
		if idx[i] = spec.FieldIndex(name); idx[i] < 0 {
			return nil, fmt.Errorf("the default spec %s has no field %s", spec.Name, name)
		}
	}
	paths := map[string]string{"json": input}
	for _, f := range []string{"csv", "parquet", "avro"} {
		paths[f] = filepath.Join(work, "readings."+f)
	}
	in, err := os.Open(input)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	cf, err := os.Create(paths["csv"])
	if err != nil {
		return nil, err
	}
	defer cf.Close()
	cw := bufio.NewWriterSize(cf, 1<<20)
	cw.WriteString(strings.Join(formatFields, ",") + "\n")
	af, err := os.Create(paths["avro"])
	if err != nil {
		return nil, err
	}
	defer af.Close()
	enc, err := ocf.NewEncoder(`{"type":"record","name":"readings","fields":[{"name":"sensor_id","type":"string"},
		{"name":"timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"heart_rate","type":["null","double"]},
		{"name":"body_temperature","type":["null","double"]},{"name":"spO2","type":["null","double"]},{"name":"battery_level","type":["null","double"]}]}`,
		af, ocf.WithCodec(ocf.Deflate))
	if err != nil {
		return nil, err
	}
	type avroReading struct {
		S  string    `avro:"sensor_id"`
		T  time.Time `avro:"timestamp"`
		H  *float64  `avro:"heart_rate"`
		BT *float64  `avro:"body_temperature"`
		SP *float64  `avro:"spO2"`
		BA *float64  `avro:"battery_level"`
	}
	num := func(v schemas.Value) *float64 {
		if v.Kind == schemas.KindNull {
			return nil
		}
		x := v.Float()
		return &x
	}
	parser := codec.NewParser(spec)
	rd := bufio.NewReaderSize(in, 1<<20)
	var recs []schemas.Record
	var line []byte
	for n := 1; ; n++ {
		b, rerr := rd.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			if recs, err = parser.Parse(recs[:0], bytes.TrimSpace(b), input); err != nil {
				return nil, fmt.Errorf("%s line %d: %w", input, n, err)
			}
			for _, r := range recs {
				line = line[:0]
				for i, fi := range idx {
					if i > 0 {
						line = append(line, ',')
					}
					v := r.Values[fi]
					switch v.Kind {
					case schemas.KindString:
						line = append(line, v.Str...)
					case schemas.KindTime:
						line = time.UnixMilli(v.Int).UTC().AppendFormat(line, "2006-01-02T15:04:05.000Z")
					case schemas.KindFloat, schemas.KindInt:
						line = strconv.AppendFloat(line, v.Float(), 'f', -1, 64)
					}
				}
				cw.Write(append(line, '\n'))
				v := r.Values
				if err := enc.Encode(avroReading{v[idx[0]].Str, time.UnixMilli(r.EventMs).UTC(), num(v[idx[2]]), num(v[idx[3]]), num(v[idx[4]]), num(v[idx[5]])}); err != nil {
					return nil, fmt.Errorf("avro: %w", err)
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, rerr
		}
	}
	if err := cw.Flush(); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.Exec(fmt.Sprintf(`SET TimeZone='UTC'; COPY (SELECT sensor_id::VARCHAR AS sensor_id, timestamp::TIMESTAMPTZ AS timestamp,
		heart_rate::DOUBLE AS heart_rate, body_temperature::DOUBLE AS body_temperature, spO2::DOUBLE AS spO2, battery_level::DOUBLE AS battery_level
		FROM read_csv('%s', header = true, all_varchar = true)) TO '%s' (FORMAT PARQUET)`, paths["csv"], paths["parquet"])); err != nil {
		return nil, fmt.Errorf("parquet (DuckDB): %w", err)
	}
	return paths, nil
}

// runFormats batches the same readings from JSON lines, CSV, Parquet and
// Avro, each into an empty table on an emulator of its own, side by side,
// and writes the report.
func runFormats(ctx context.Context, rep *Report, work, input string) error {
	paths, err := writeFormats(work, input)
	if err != nil {
		return fmt.Errorf("write the formats: %w", err)
	}
	for _, format := range []string{"json", "csv", "parquet", "avro"} {
		st, err := os.Stat(paths[format])
		if err != nil {
			return err
		}
		s, err := withEmulator(func(host string) (*Side, error) {
			s := &Side{Name: format, PipelineMode: "exec"}
			if err := pipelineExec(ctx, s, host, work, paths[format], filepath.Join(work, "deadletter-"+format), nil, nil); err != nil {
				return nil, err
			}
			s.ReadingsPerSec = float64(s.Readings) / s.Seconds
			return s, nil
		})
		if err != nil {
			return fmt.Errorf("%s batch: %w", format, err)
		}
		fmt.Printf("%s: %.1f MB; ", format, float64(st.Size())/1e6)
		printSide(s)
		rep.Formats = append(rep.Formats, s)
	}
	json0 := rep.Formats[0]
	for _, s := range rep.Formats[1:] {
		fmt.Printf("%s/json: %.2f readings/s, %.2f CPU per reading (target readings/s >= 1 for csv and parquet)\n", s.Name,
			s.ReadingsPerSec/json0.ReadingsPerSec, (s.CPUSeconds/float64(max(s.Readings, 1)))/(json0.CPUSeconds/float64(max(json0.Readings, 1))))
		if *verify && (s.Rows != json0.Rows || s.Cells != json0.Cells || s.Readings != json0.Readings || s.DeadLetters != json0.DeadLetters) {
			return fmt.Errorf("the %s batch wrote other data than the JSON batch: %d readings %d rows %d cells %d dead letters, JSON %d readings %d rows %d cells %d dead letters",
				s.Name, s.Readings, s.Rows, s.Cells, s.DeadLetters, json0.Readings, json0.Rows, json0.Cells, json0.DeadLetters)
		}
	}
	if *outFlag != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*outFlag, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("figures written to %s\n", *outFlag)
	}
	return nil
}
