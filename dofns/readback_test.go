package dofns

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"

	"github.com/sensorpipe/sensorpipe/schemas"
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

func TestStateKeyNamesIdentityAndWindow(t *testing.T) {
	for _, id := range []string{"s1", "a@b", "x\x1fy", ""} {
		k := stateKey(id, 3600000)
		if got := stateIdentity(k); got != id {
			t.Errorf("stateIdentity(%q) = %q; want %q", k, got, id)
		}
	}
}
