package group

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

// TestHeldKeepsWhatReimputationNeeds packs prepared readings and decodes
// them: event times, sources and observed values come back, imputed values
// and raw payloads do not, and re-imputing the decoded readings gives what
// the originals gave.
func TestHeldKeepsWhatReimputationNeeds(t *testing.T) {
	s := spectest.Must(t, "vitals")
	const h = 1772359200000
	tests := []struct {
		name  string
		lines []string
	}{
		{"one", []string{readingtest.VitalsLine("s", h, 70)}},
		{"imputed between observed", []string{readingtest.VitalsLine("s", h, 70), readingtest.VitalsLine("s", h+1000, -1), readingtest.VitalsLine("s", h+2000, 80)}},
		{"out of order, duplicates", []string{readingtest.VitalsLine("s", h+5000, 72.25), readingtest.VitalsLine("s", h, -1), readingtest.VitalsLine("s", h+5000, 72.25), readingtest.VitalsLine("s", h-3000, 20.1)}},
		{"no observed heart rate", []string{readingtest.VitalsLine("s", h, -1), readingtest.VitalsLine("s", h+1, -1)}},
		{"long decimals", []string{readingtest.VitalsLine("s", h, 100.0/3), readingtest.VitalsLine("s", h+1, 30*math.Pi)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := readingtest.Parse(t, s, tt.lines...)
			recs[len(recs)-1].Source = "bigtable:x (read back)"
			want := make([]schemas.Record, len(recs))
			for i := range recs {
				want[i] = schemas.Record{Values: make([]schemas.Value, s.NumValues()), EventMs: recs[i].EventMs, Source: recs[i].Source}
				copy(want[i].Values, recs[i].Values)
			}
			// Impute in place, as a firing does before its readings join
			// the state: the imputed values must not be kept.
			prepared := append([]schemas.Record(nil), recs...)
			impute(s, prepared)
			got, err := packed.DecodeHeld(s, nil, packed.AppendHeld(s, nil, prepared))
			if err != nil {
				t.Fatalf("DecodeHeld: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded\n  %+v\nwant\n  %+v", got, want)
			}
			gotKept, gotDropped := Prepare(s, got)
			wantKept, wantDropped := Prepare(s, readingtest.Parse(t, s, tt.lines...))
			if hrs(s, gotKept) != hrs(s, wantKept) || gotDropped != wantDropped {
				t.Fatalf("re-imputed: %s (%d dropped); want %s (%d)", hrs(s, gotKept), gotDropped, hrs(s, wantKept), wantDropped)
			}
		})
	}
}

func TestDecodeHeldRejectsTruncatedInput(t *testing.T) {
	s := spectest.Must(t, "vitals")
	b := packed.AppendHeld(s, nil, readingtest.Parse(t, s, readingtest.VitalsLine("s", 1772359200000, 70), readingtest.VitalsLine("s", 1772359201000, 71)))
	for n := 0; n < len(b); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if _, err := packed.DecodeHeld(s, nil, b[:n]); !errors.Is(err, packed.ErrCodec) {
				t.Fatalf("DecodeHeld(%d of %d bytes) = %v; want ErrCodec", n, len(b), err)
			}
		})
	}
}

// TestDuplicatesTieOnValuesNotPayload: two copies of a reading with as
// many values each keep the same one whatever their raw payloads and
// order, so a window rebuilt from held readings (no raw payload) chooses
// as the batch does.
func TestDuplicatesTieOnValuesNotPayload(t *testing.T) {
	s := spectest.Must(t, "vitals")
	const h = 1772359200000
	a, b := readingtest.VitalsLine("s", h, 70), readingtest.VitalsLine("s", h, 71)
	spaced := " " + b // sorts before a by its payload
	tests := []struct {
		name  string
		lines []string
		raw   []string // "" leaves the payload
	}{
		{"a first", []string{a, b}, nil},
		{"b first", []string{b, a}, nil},
		{"b's payload smaller", []string{spaced, a}, nil},
		{"a without payload", []string{a, spaced}, []string{"", spaced}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := readingtest.Parse(t, s, tt.lines...)
			for i, r := range tt.raw {
				if r == "" {
					recs[i].Raw = ""
				}
			}
			kept, dropped := Prepare(s, recs)
			if got := hrs(s, kept); got != "70" || dropped != 1 {
				t.Fatalf("kept %s, dropped %d; want 70, 1", got, dropped)
			}
		})
	}
}

// TestHeldVitalsReadingTakesAboutTwentyBytes: a firing's worth of one
// sensor's readings at 1 Hz packs into about 20 bytes each (a stream holds
// every reading of an open hour this way; see AppendHeld).
func TestHeldVitalsReadingTakesAboutTwentyBytes(t *testing.T) {
	s := spectest.Must(t, "vitals")
	const h = 1772359200000
	var lines []string
	for i := 0; i < 10; i++ {
		lines = append(lines, fmt.Sprintf(`{"sensor_id":"patient-0042","timestamp":%d,"heart_rate":%d,"body_temperature":%.1f,"spO2":%d,"battery_level":88}`,
			h+int64(i)*1000+int64(i%3), 60+i%7, 36.5+float64(i%4)/10, 95+i%3))
	}
	recs := readingtest.Parse(t, s, lines...)
	for i := range recs {
		recs[i].Source = "projects/p/subscriptions/vitals"
	}
	b := packed.AppendHeld(s, nil, recs)
	if per := float64(len(b)) / float64(len(recs)); per > 24 {
		t.Errorf("%d bytes for %d readings: %.1f a reading, want at most 24 (31 before the one-byte value heads)", len(b), len(recs), per)
	}
	got, err := packed.DecodeHeld(s, nil, b)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("DecodeHeld: %d readings, %v", len(got), err)
	}
	for i := range got {
		if c := compareObserved(s, &got[i], &recs[i]); c != 0 || got[i].EventMs != recs[i].EventMs {
			t.Errorf("reading %d decoded as %+v; want %+v", i, got[i], recs[i])
		}
	}
}
