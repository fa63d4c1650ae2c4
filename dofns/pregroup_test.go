package dofns

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sensorpipe/sensorpipe/schemas"
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
			emit := func(et beam.EventTime, key string, p PaneBatch) {
				batches++
				if et.Milliseconds() != p.StartMs || p.EndMs-p.StartMs != time.Hour.Milliseconds() || p.StartMs%time.Hour.Milliseconds() != 0 {
					t.Fatalf("batch stamped %d for [%d, %d); want an hour stamped with its start", et.Milliseconds(), p.StartMs, p.EndMs)
				}
				if max := defaultIf(tc.maxReadings, DefaultPreGroupReadings); len(p.Records) > max || len(p.Records) == 0 {
					t.Fatalf("batch of %d readings; want 1..%d", len(p.Records), max)
				}
				for _, r := range p.Records {
					if r.Source != key || r.EventMs < p.StartMs || r.EventMs >= p.EndMs {
						t.Fatalf("reading of %s at %d in %s's batch of [%d, %d)", r.Source, r.EventMs, key, p.StartMs, p.EndMs)
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
