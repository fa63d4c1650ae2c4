package dofns

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sensorpipe/sensorpipe/internal/testrig/synth"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

// TestPreGroupFnPacksEachReadingOnceByIdentityAndHour drives PreGroupFn
// through bundles: every reading comes out exactly once, in a batch of its
// own identity and hour stamped with the hour's start, no batch over
// MaxReadings, and no more than MaxBuffered readings held at once.
func TestPreGroupFnPacksEachReadingOnceByIdentityAndHour(t *testing.T) {
	const h0 = int64(1772359200000) // 2026-03-01T10:00Z
	for _, tc := range []struct {
		name                     string
		readings, sensors        int
		maxReadings, maxBuffered int
	}{
		{"defaults", 5000, 7, 0, 0},
		{"small batches", 5000, 7, 3, 0},
		{"small buffer", 5000, 50, 0, 40},
		{"both", 1000, 3, 5, 8},
		{"empty bundle", 0, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &PreGroupFn{MaxReadings: tc.maxReadings, MaxBuffered: tc.maxBuffered}
			seen := map[string]int{}
			batches := 0
			emit := func(et beam.EventTime, key string, p HourBatch) {
				batches++
				start := et.Milliseconds()
				if start%time.Hour.Milliseconds() != 0 {
					t.Fatalf("batch stamped %d; want an hour's start", start)
				}
				if max := defaultIf(tc.maxReadings, DefaultPreGroupReadings); len(p.Records) > max || len(p.Records) == 0 {
					t.Fatalf("batch of %d readings; want 1..%d", len(p.Records), max)
				}
				for _, r := range p.Records {
					if r.Source != key || r.EventMs < start || r.EventMs >= start+time.Hour.Milliseconds() {
						t.Fatalf("reading of %s at %d in %s's batch of the hour from %d", r.Source, r.EventMs, key, start)
					}
					seen[fmt.Sprint(r.Source, r.EventMs)]++
				}
			}
			f.StartBundle(emit)
			for i := 0; i < tc.readings; i++ {
				// Readings spread over three hours, in no order.
				id := fmt.Sprint("s", i%tc.sensors)
				ms := h0 + int64((i*7919)%10800)*1000
				f.ProcessElement(context.Background(), beam.EventTime(ms), id, schemas.Record{EventMs: ms, Source: id}, emit)
				if max := defaultIf(tc.maxBuffered, DefaultPreGroupBuffered); f.buffered >= max {
					t.Fatalf("%d readings held; want fewer than %d", f.buffered, max)
				}
			}
			f.FinishBundle(emit)
			if f.buffered != 0 || len(f.batches) != 0 {
				t.Errorf("%d readings in %d batches still held after FinishBundle", f.buffered, len(f.batches))
			}
			total := 0
			for k, n := range seen {
				if n != 1 {
					t.Errorf("reading %s came out %d times", k, n)
				}
				total += n
			}
			if total != tc.readings {
				t.Errorf("%d readings came out of %d", total, tc.readings)
			}
			t.Logf("%d readings in %d batches", tc.readings, batches)
		})
	}
}

// hourOfReadings is n generated vitals readings of one sensor, a second
// apart, parsed from one file.
func hourOfReadings(t testing.TB, n int) []schemas.Record {
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	g, err := synth.New(spec, synth.Options{MissingShare: 0.05, EpochMsShare: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	p := codec.NewParser(spec)
	var recs []schemas.Record
	for i := range n {
		if recs, err = p.ParseString(recs, string(g.AppendJSON(nil, 7, 1772359200000+int64(i)*1000)), "gs://bucket/vitals/part-00000.jsonl"); err != nil {
			t.Fatal(err)
		}
	}
	return recs
}

// TestHourBatchCoder: a batch comes back as it went, compressed to less
// than a third of its records' compact form, and damaged bytes give an
// error, not a panic.
func TestHourBatchCoder(t *testing.T) {
	for _, n := range []int{0, 1, 512} {
		recs := hourOfReadings(t, n)
		enc := encodeHourBatch(HourBatch{Records: recs})
		got, err := decodeHourBatch(enc)
		if err != nil {
			t.Fatalf("%d readings: %v", n, err)
		}
		if len(got.Records) != n || n > 0 && !reflect.DeepEqual(got.Records, recs) {
			t.Fatalf("%d readings: round trip differs", n)
		}
		if plain := len(packed.AppendRecords(nil, recs)); n == 512 && len(enc)*3 > plain {
			t.Errorf("%d readings compressed to %d bytes of %d; want under a third", n, len(enc), plain)
		}
	}
	enc := encodeHourBatch(HourBatch{Records: hourOfReadings(t, 20)})
	for cut := 0; cut < len(enc); cut++ {
		if _, err := decodeHourBatch(enc[:cut]); !errors.Is(err, packed.ErrCodec) {
			t.Fatalf("decoding %d of %d bytes: err = %v; want ErrCodec", cut, len(enc), err)
		}
	}
}

// BenchmarkHourBatchCoder encodes and decodes a batch of 512 vitals
// readings of one sensor, as PreGroupFn's batches cross the GroupByKey.
func BenchmarkHourBatchCoder(b *testing.B) {
	recs := hourOfReadings(b, DefaultPreGroupReadings)
	var enc []byte
	b.ReportAllocs()
	for b.Loop() {
		enc = encodeHourBatch(HourBatch{Records: recs})
		if _, err := decodeHourBatch(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/reading")
	b.ReportMetric(float64(len(enc))/float64(len(recs)), "bytes/reading")
	b.ReportMetric(float64(len(packed.AppendRecords(nil, recs)))/float64(len(recs)), "uncompressed_bytes/reading")
}

// TestParseBatchesFnIsParseFnThenPreGroupFn: the fused parse gives the
// batches and dead letters that ParseFn followed by PreGroupFn gives, on
// lines of several sensors across hours with bad lines among them, and
// counts what ParseFn counts.
func TestParseBatchesFnIsParseFnThenPreGroupFn(t *testing.T) {
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	compiled := hours.MustCompile(spec, hours.CompileOptions{})
	var lines []string
	for i := range 3000 {
		ts := strconv.FormatInt(1772359200000+int64((i*7919)%10800)*1000, 10) // three hours, in no order
		switch {
		case i%500 == 7:
			lines = append(lines, "not json")
		case i%700 == 3:
			lines = append(lines, strings.Repeat("x", 300))
		default:
			lines = append(lines, vitalsLine(fmt.Sprint("s", i%11), ts))
		}
	}
	type out struct {
		batches []string
		dead    []string
	}
	collect := func(o *out) (func(beam.EventTime, string, HourBatch), func(deadletter.DeadLetter)) {
		return func(et beam.EventTime, key string, b HourBatch) {
				for _, r := range b.Records {
					o.batches = append(o.batches, fmt.Sprint(key, "@", et.Milliseconds(), " ", r.EventMs, " ", r.Raw, " ", r.Source))
				}
			}, func(d deadletter.DeadLetter) {
				o.dead = append(o.dead, d.Reason+" "+d.Payload+" "+d.Source)
			}
	}
	ctx := context.Background()
	// Two bundles each, the second smaller than a batch.
	bundles := [][]string{lines[:2500], lines[2500:]}

	var want out
	emit, dead := collect(&want)
	parse, group := &ParseFn{Spec: compiled, MaxLineBytes: 200}, &PreGroupFn{}
	if err := parse.Setup(); err != nil {
		t.Fatal(err)
	}
	for b, bundle := range bundles {
		group.StartBundle(emit)
		for i, l := range bundle {
			parse.ProcessElement(ctx, fmt.Sprint("f:", b, ":", i), l, func(et beam.EventTime, k string, r schemas.Record) {
				group.ProcessElement(ctx, et, k, r, emit)
			}, dead)
		}
		group.FinishBundle(emit)
	}

	var got out
	emit, dead = collect(&got)
	fused := &ParseBatchesFn{Spec: compiled, MaxLineBytes: 200}
	if err := fused.Setup(); err != nil {
		t.Fatal(err)
	}
	for b, bundle := range bundles {
		fused.StartBundle(emit, dead)
		for i, l := range bundle {
			fused.ProcessElement(ctx, fmt.Sprint("f:", b, ":", i), l, emit, dead)
		}
		if err := fused.FinishBundle(ctx, emit, dead); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want.batches)
	slices.Sort(got.batches)
	if len(want.batches) != 3000-6-5 || len(want.dead) != 11 {
		t.Fatalf("the reference gives %d readings and %d dead letters; want 2989 and 11", len(want.batches), len(want.dead))
	}
	if !slices.Equal(got.batches, want.batches) {
		t.Errorf("the fused parse gives %d readings in its batches, differing from ParseFn then PreGroupFn's %d", len(got.batches), len(want.batches))
	}
	if !slices.Equal(got.dead, want.dead) {
		t.Errorf("dead letters:\n%q\nwant\n%q", got.dead, want.dead)
	}
}
