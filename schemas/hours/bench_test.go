package hours

// Benchmarks of the per-reading work of the ingest path, run by `make bench`.
// The contract is at most 1.5 µs per reading per core for parse + validate +
// key + mutation build (BenchmarkParseKeyMutation, ns/reading).
//
// Inputs are realistic vitals lines (benchlines_test.go): one sensor, one
// line a second, RFC 3339 or epoch-millisecond timestamps, and about one
// line in twenty with "heart_rate": null, so imputation has work to do.
//
// BenchmarkDecode picked the JSON decoder. Measured with
//
//	go test -run '^$' -bench Decode -benchmem ./schemas/
//
// on linux/amd64, cpu: Intel(R) Xeon(R) Processor, 2 cores, Go 1.26.8,
// while other builds ran on the machine (so read the ratios, not the
// absolute figures):
//
//	decoder (one vitals line, every field read)             ns/op  B/op  allocs/op
//	encoding/json into a struct (*float64, RawMessage)  1589-1812   373     10
//	encoding/json into map[string]any                   2136-2847   815     29
//	goccy/go-json into the same struct                   284-393    157      6
//	goccy/go-json into map[string]any                    638-924    530     16
//	fastjson, pooled parser (ParserPool)                 267-278      0      0
//
// (two runs; the spread is the machine's load, not the decoders.)
//
// fastjson is the parser's decoder (parse.go): it is the fastest (go-json's
// struct decode comes close in time but allocates 6 times a line),
// allocates nothing once its pooled parser is warm, and, unlike a struct
// decode, tells an absent field from null from a value of the wrong JSON
// type, which the dead-letter reasons need. encoding/json is 6x slower.

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	gojson "github.com/goccy/go-json"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
	"github.com/valyala/fastjson"
)

// groupSize is the readings of one prepared group: a sensor's minute at
// 1 Hz. A real group is a sensor's hour (3,600 readings); 60 keeps the
// group's share of the work (sort, impute, one row key) conservative.
const groupSize = 60

const benchSource = "gs://bucket/vitals/part-00000.jsonl"

// vitalsStruct is what encoding/json and go-json decode a vitals line into:
// pointers tell null from 0, and the timestamp stays raw since it is either
// a string or a number.
type vitalsStruct struct {
	SensorID        string          `json:"sensor_id"`
	Timestamp       json.RawMessage `json:"timestamp"`
	HeartRate       *float64        `json:"heart_rate"`
	BodyTemperature *float64        `json:"body_temperature"`
	SpO2            *float64        `json:"spO2"`
	BatteryLevel    *float64        `json:"battery_level"`
}

var sink float64

func BenchmarkDecode(b *testing.B) {
	lines := vitalsLines(7, groupSize)
	b.Run("encoding_json_struct", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var v vitalsStruct
			if err := json.Unmarshal(lines[i%len(lines)], &v); err != nil {
				b.Fatal(err)
			}
			sink += *v.BodyTemperature + float64(len(v.Timestamp))
		}
	})
	b.Run("encoding_json_map", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var v map[string]any
			if err := json.Unmarshal(lines[i%len(lines)], &v); err != nil {
				b.Fatal(err)
			}
			sink += v["body_temperature"].(float64)
		}
	})
	b.Run("goccy_go_json_struct", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var v vitalsStruct
			if err := gojson.Unmarshal(lines[i%len(lines)], &v); err != nil {
				b.Fatal(err)
			}
			sink += *v.BodyTemperature + float64(len(v.Timestamp))
		}
	})
	b.Run("goccy_go_json_map", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var v map[string]any
			if err := gojson.Unmarshal(lines[i%len(lines)], &v); err != nil {
				b.Fatal(err)
			}
			sink += v["body_temperature"].(float64)
		}
	})
	b.Run("fastjson_pool", func(b *testing.B) {
		var pool fastjson.ParserPool
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			p := pool.Get()
			v, err := p.ParseBytes(lines[i%len(lines)])
			if err != nil {
				b.Fatal(err)
			}
			// Read every field, as the struct decoders do.
			id := v.GetStringBytes("sensor_id")
			ts := v.Get("timestamp")
			for _, k := range [...]string{"heart_rate", "body_temperature", "spO2", "battery_level"} {
				if f := v.Get(k); f != nil && f.Type() == fastjson.TypeNumber {
					n, _ := f.Float64()
					sink += n
				}
			}
			sink += float64(len(id)) + float64(ts.Type())
			pool.Put(p)
		}
	})
}

// benchInputs loads the vitals spec, its parser and builder, and a group's
// worth of lines.
func benchInputs(b *testing.B) (*schemas.Spec, *codec.Parser, *Builder, [][]byte) {
	b.Helper()
	spec := spectest.Must(b, "vitals")
	bld, err := NewBuilder(spec)
	if err != nil {
		b.Fatal(err)
	}
	return spec, codec.NewParser(spec), bld, vitalsLines(7, groupSize)
}

// perReading reports the loop's time and allocations per reading, where
// every op handled n readings. ns/op and allocs/op stay per group.
func perReading(b *testing.B, n int, before *runtime.MemStats) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	readings := float64(b.N * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/readings, "ns/reading")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/readings, "allocs/reading")
}

// BenchmarkParse is Parser.Parse of one line (decode, validate, build the
// Record); one op is one reading.
func BenchmarkParse(b *testing.B) {
	_, p, _, lines := benchInputs(b)
	var dst []schemas.Record
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var err error
		dst, err = p.Parse(dst[:0], lines[i%len(lines)], benchSource)
		if err != nil || len(dst) != 1 {
			b.Fatalf("parse: %v (%d records)", err, len(dst))
		}
	}
}

// parseGroup parses and checks lines into one group.
func parseGroup(b *testing.B, p *codec.Parser, bld *Builder, dst []schemas.Record, lines [][]byte) []schemas.Record {
	for _, l := range lines {
		n := len(dst)
		var err error
		dst, err = p.Parse(dst, l, benchSource)
		if err != nil || len(dst) != n+1 {
			b.Fatalf("parse: %v", err)
		}
		if err := bld.Check(&dst[n]); err != nil {
			b.Fatalf("check: %v", err)
		}
	}
	return dst
}

// BenchmarkPrepareGroup sorts, deduplicates and imputes one group of
// groupSize readings; one op is one group.
func BenchmarkPrepareGroup(b *testing.B) {
	spec, p, bld, lines := benchInputs(b)
	recs := parseGroup(b, p, bld, nil, lines)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportAllocs()
	for b.Loop() {
		kept, _ := group.Prepare(spec, recs)
		if len(kept) != groupSize {
			b.Fatalf("kept %d of %d", len(kept), groupSize)
		}
	}
	perReading(b, groupSize, &ms)
}

// BenchmarkMutations builds the Bigtable mutations of one prepared group of
// groupSize readings (one row, five cells a reading); one op is one group.
func BenchmarkMutations(b *testing.B) {
	spec, p, bld, lines := benchInputs(b)
	kept, _ := group.Prepare(spec, parseGroup(b, p, bld, nil, lines))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportAllocs()
	for b.Loop() {
		muts, rej := bld.Mutations(kept)
		if len(muts) != 1 || len(rej) != 0 || len(muts[0].Origins) != groupSize {
			b.Fatalf("%d mutations, %d rejected", len(muts), len(rej))
		}
	}
	perReading(b, groupSize, &ms)
}

// BenchmarkMutationsManyRows builds the mutations of readings spread
// over many rows, as a stream's arrival write builds a bundle's (4,096
// readings of 1,000 sensors, about four a row); one op is one call. Its
// B/op is what the rows' buffers reserve.
func BenchmarkMutationsManyRows(b *testing.B) {
	const readings, sensors = 4096, 1000
	_, p, bld, lines := benchInputs(b)
	one := parseGroup(b, p, bld, nil, lines)
	recs := make([]schemas.Record, readings)
	for i := range recs {
		r := one[i%len(one)]
		r.Values = append([]schemas.Value(nil), r.Values...)
		r.Values[0] = schemas.Value{Kind: schemas.KindString, Str: fmt.Sprintf("sensor-%04d", i%sensors)}
		recs[i] = r
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportAllocs()
	for b.Loop() {
		muts, rej := bld.Mutations(recs)
		if len(muts) < sensors || len(rej) != 0 {
			b.Fatalf("%d mutations, %d rejected", len(muts), len(rej))
		}
	}
	perReading(b, readings, &ms)
}

// BenchmarkParseKeyMutation is the whole per-reading path of the pipeline's
// CPU work outside Beam: Parse and Check every line of a group (ParseFn),
// then group.Prepare and Mutations (BuildRowsFn). One op is one group of
// groupSize readings; ns/reading is the figure the 1.5 µs contract is
// about.
func BenchmarkParseKeyMutation(b *testing.B) {
	spec, p, bld, lines := benchInputs(b)
	recs := make([]schemas.Record, 0, groupSize)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportAllocs()
	for b.Loop() {
		recs = parseGroup(b, p, bld, recs[:0], lines)
		kept, _ := group.Prepare(spec, recs)
		muts, rej := bld.Mutations(kept)
		if len(muts) != 1 || len(rej) != 0 || len(muts[0].Cells) < 4*groupSize {
			b.Fatalf("%d mutations, %d rejected", len(muts), len(rej))
		}
	}
	perReading(b, groupSize, &ms)
}
