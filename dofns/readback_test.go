package dofns

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

func TestPaneBatchCoderKeepsTheRecoveryProbe(t *testing.T) {
	rec := schemas.Record{Values: []schemas.Value{{Kind: schemas.KindString, Str: "s"}}, EventMs: 5, Raw: "{}", Source: "sub"}
	for _, p := range []PaneBatch{
		{StartMs: 0, EndMs: 3600000, Timing: typex.PaneLate, Index: 2, Records: []schemas.Record{rec}},
		{StartMs: 3600000, EndMs: 7200000, Recover: true},
	} {
		got, err := decodePaneBatch(encodePaneBatch(p))
		if err != nil {
			t.Fatal(err)
		}
		if got.StartMs != p.StartMs || got.EndMs != p.EndMs || got.Timing != p.Timing || got.Index != p.Index ||
			got.Recover != p.Recover || len(got.Records) != len(p.Records) {
			t.Errorf("decoded %+v; want %+v", got, p)
		}
	}
	if _, err := decodePaneBatch(append(encodePaneBatch(PaneBatch{}), 2)); err == nil {
		t.Error("a stray trailing byte decoded")
	}
}

func TestPaneBatchCoderRoundTripsAndReadsTheEarlierForm(t *testing.T) {
	recs := []schemas.Record{
		{Values: []schemas.Value{{Kind: schemas.KindString, Str: "s1"}, {Kind: schemas.KindFloat, Num: 71.5}}, EventMs: 3600005, Raw: `{"id":"s1","hr":71.5}`, Source: "projects/p/subscriptions/s"},
		{Values: []schemas.Value{{Kind: schemas.KindString, Str: "s1"}, {}}, EventMs: 3600900, Raw: `{"id":"s1"}`, Source: "projects/p/subscriptions/s"},
	}
	for _, p := range []PaneBatch{
		{StartMs: 3600000, EndMs: 7200000, Timing: typex.PaneEarly, Index: 0, Records: recs},
		{StartMs: 0, EndMs: 3600000, Timing: typex.PaneLate, Index: 7, Records: recs[:1]},
		{StartMs: -3600000, EndMs: 0, Timing: typex.PaneOnTime, Index: 1, Records: recs},
		{StartMs: 7200000, EndMs: 10800000, Recover: true},
	} {
		for name, enc := range map[string][]byte{"current": encodePaneBatch(p), "earlier": encodePaneBatchV0(p)} {
			got, err := decodePaneBatch(enc)
			if err != nil {
				t.Fatalf("%s form of %+v: %v", name, p, err)
			}
			if len(got.Records) == 0 {
				got.Records = nil // the earlier form decodes none as empty
			}
			if !reflect.DeepEqual(got, p) {
				t.Errorf("%s form: decoded %+v; want %+v", name, got, p)
			}
		}
	}
	// A firing of one identity's readings, as a stream brings them.
	hour := hourOfReadings(t, 600)
	for i := range hour {
		hour[i].Source = "projects/p/subscriptions/vitals"
	}
	p := PaneBatch{StartMs: 1772359200000, EndMs: 1772362800000, Timing: typex.PaneEarly, Records: hour}
	n, v0 := len(encodePaneBatch(p)), len(encodePaneBatchV0(p))
	t.Logf("600 readings: %d bytes, %d in the earlier form", n, v0)
	if 3*n > v0 {
		t.Errorf("a firing of 600 readings takes %d bytes, %d uncompressed: want less than a third", n, v0)
	}
	for _, bad := range [][]byte{{paneBatchS2}, {paneBatchS2, 0, 2, 9, 0, 0}, {paneBatchS2, 0, 2, 0, 0, 2}, append(encodePaneBatch(PaneBatch{Records: recs}), 7)} {
		if _, err := decodePaneBatch(bad); err == nil {
			t.Errorf("decoded % x", bad)
		}
	}
}

// encodePaneBatchV0 is encodePaneBatch before its compressed form, which
// a job updated in place may still find in flight.
func encodePaneBatchV0(p PaneBatch) []byte {
	b := binary.AppendVarint(nil, p.StartMs)
	b = binary.AppendVarint(b, p.EndMs)
	b = append(b, byte(p.Timing))
	b = binary.AppendVarint(b, p.Index)
	b = binary.AppendUvarint(b, uint64(len(p.Records)))
	var rec []byte
	for i := range p.Records {
		rec = packed.AppendBinary(&p.Records[i], rec[:0])
		b = binary.AppendUvarint(b, uint64(len(rec)))
		b = append(b, rec...)
	}
	if p.Recover {
		b = append(b, 1)
	}
	return b
}

func TestStateKeyNamesIdentityAndWindow(t *testing.T) {
	for _, id := range []string{"s1", "a@b", "x\x1fy", ""} {
		k := stateKey(id, 3600000)
		if got := stateIdentity(k); got != id {
			t.Errorf("stateIdentity(%q) = %q; want %q", k, got, id)
		}
	}
}

// TestMergedAtClose: the on-time pane that follows the close timer's
// firing skips the read-back only when every reading it brings is held
// as a read-back copy with the same values, and a settle read-back will
// come.
func TestMergedAtClose(t *testing.T) {
	reading := func(ms int64, hr float64, source string) schemas.Record {
		return schemas.Record{Values: []schemas.Value{{Kind: schemas.KindString, Str: "s1"}, {Kind: schemas.KindFloat, Num: hr}}, EventMs: ms, Source: source}
	}
	const sub = "projects/p/subscriptions/s"
	readBack := deadletter.ReadBackSource("patient_vitals")
	held := []schemas.Record{reading(1000, 60, sub), reading(2000, 61, readBack), reading(3000, 62, readBack)}
	for _, tc := range []struct {
		name     string
		timing   typex.PaneTiming
		brings   []schemas.Record
		lateness time.Duration
		want     bool
	}{
		{"every reading read back", typex.PaneOnTime, []schemas.Record{reading(2000, 61, sub), reading(3000, 62, sub)}, time.Hour, true},
		{"one reading not read back", typex.PaneOnTime, []schemas.Record{reading(2000, 61, sub), reading(4000, 63, sub)}, time.Hour, false},
		{"a value differs from its read-back copy", typex.PaneOnTime, []schemas.Record{reading(3000, 70, sub)}, time.Hour, false},
		{"held by this run, not read back", typex.PaneOnTime, []schemas.Record{reading(1000, 60, sub)}, time.Hour, false},
		{"a late pane", typex.PaneLate, []schemas.Record{reading(2000, 61, sub)}, time.Hour, false},
		{"no settle read-back to come", typex.PaneOnTime, []schemas.Record{reading(2000, 61, sub)}, 0, false},
		{"no readings", typex.PaneOnTime, nil, time.Hour, false},
	} {
		f := &StreamRowsFn{AllowedLateness: tc.lateness, MergeStored: true}
		if got := f.mergedAtClose(PaneBatch{Timing: tc.timing, Records: tc.brings}, held); got != tc.want {
			t.Errorf("%s: mergedAtClose = %v; want %v", tc.name, got, tc.want)
		}
	}
}
