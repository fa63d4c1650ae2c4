package hours

import (
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

// BenchmarkRecordsCodec is AppendRecords and DecodeRecords of a sensor's
// minute of vitals readings from one file.
func BenchmarkRecordsCodec(b *testing.B) {
	p := codec.NewParser(spectest.Must(b, "vitals"))
	var recs []schemas.Record
	for _, l := range vitalsLines(7, groupSize) {
		var err error
		if recs, err = p.ParseString(recs, string(l), benchSource); err != nil {
			b.Fatal(err)
		}
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = packed.AppendRecords(buf[:0], recs)
		if _, err := packed.DecodeRecords(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/reading")
	b.ReportMetric(float64(len(buf))/float64(len(recs)), "bytes/reading")
}

func BenchmarkRecordCodec(b *testing.B) {
	s := spectest.Must(b, "vitals")
	recs, err := codec.NewParser(s).ParseString(nil, okLine, "testdata/vitals/readings-001.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = packed.AppendBinary(&recs[0], buf[:0])
		if _, err := packed.DecodeRecord(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes/record")
}
