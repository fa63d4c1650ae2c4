package hours

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

// TestDiskStateComesBackAsItWent: held chunks framed one after another,
// and a final state, decode to exactly what was written, and every
// cut-short form fails with ErrCodec instead of panicking.
func TestDiskStateComesBackAsItWent(t *testing.T) {
	spec, h := firingsSpec(t)
	recs := readingtest.Parse(t, spec, vitals(0, "", "36.8", "98"), vitals(time.Second, "70", "36.8", "98"), vitals(2*time.Second, "71", "", "97"))
	chunks := [][]byte{packed.AppendHeld(h.Spec, nil, recs[:1]), {}, packed.AppendHeld(h.Spec, nil, recs[1:])}
	var b []byte
	for _, c := range chunks {
		b = AppendChunk(b, c)
	}
	got, err := SplitChunks(b)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(chunks) {
		t.Errorf("SplitChunks = %v, %v; want %v", got, err, chunks)
	}
	for n := 1; n < len(b); n++ {
		if got, err := SplitChunks(b[:n]); err == nil && fmt.Sprint(got) == fmt.Sprint(chunks) {
			t.Errorf("the first %d of %d bytes split into every chunk", n, len(b))
		}
	}
	if got, err := SplitChunks(b[:len(b)-1]); !errors.Is(err, packed.ErrCodec) {
		t.Errorf("a chunk cut short: %v, %v; want ErrCodec", got, err)
	}

	for _, fin := range []FinalState{
		{Ms: []int64{}, Prints: []uint64{}},
		{Ms: []int64{firingsMs(0), firingsMs(time.Second), firingsMs(2 * time.Second)}, Prints: []uint64{1, 1 << 63, 42}, Dropped: 2},
		{Ms: []int64{-5000, -1, 0}, Prints: []uint64{7, 8, 9}},
	} {
		b := AppendFinalState(nil, fin)
		got, err := DecodeFinalState(b)
		if err != nil || !reflect.DeepEqual(got, fin) {
			t.Errorf("DecodeFinalState = %+v, %v; want %+v", got, err, fin)
		}
		for n := 0; n < len(b); n++ {
			if _, err := DecodeFinalState(b[:n]); !errors.Is(err, packed.ErrCodec) {
				t.Errorf("the first %d of %d bytes: err = %v, want ErrCodec", n, len(b), err)
			}
		}
		if _, err := DecodeFinalState(append(b, 0)); !errors.Is(err, packed.ErrCodec) {
			t.Errorf("a byte too many: err = %v, want ErrCodec", err)
		}
	}
}

// TestVitalsHourOnDiskTakesAboutThirtyBytesAReading: what a vitals hour
// costs on disk, a reading a second with varying values, held in chunks
// of ten readings (an early firing every 10 s) and finalized.
func TestVitalsHourOnDiskTakesAboutThirtyBytesAReading(t *testing.T) {
	spec, h := firingsSpec(t)
	var lines []string
	for i := 0; i < 3600; i++ {
		lines = append(lines, vitals(time.Duration(i)*time.Second, fmt.Sprint(60+i%40), fmt.Sprintf("36.%d", i%10), fmt.Sprint(90+i%10)))
	}
	recs := readingtest.Parse(t, spec, lines...)
	for i := range recs {
		recs[i].Source = "pubsub:projects/p/subscriptions/vitals"
	}
	var held []byte
	for i := 0; i < len(recs); i += 10 {
		held = AppendChunk(held, packed.AppendHeld(h.Spec, nil, recs[i:i+10]))
	}
	kept, _ := group.Prepare(spec, recs)
	fin := FinalState{}
	for i := range kept {
		fin.Ms, fin.Prints = append(fin.Ms, kept[i].EventMs), append(fin.Prints, kept[i].Fingerprint())
	}
	final := AppendFinalState(nil, fin)
	perHeld, perFinal := float64(len(held))/float64(len(kept)), float64(len(final))/float64(len(kept))
	t.Logf("held %.1f bytes a reading, final state %.1f", perHeld, perFinal)
	if perHeld+perFinal > 40 {
		t.Errorf("an hour on disk takes %.1f + %.1f bytes a reading; want about 30", perHeld, perFinal)
	}
}
