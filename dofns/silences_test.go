package dofns

import (
	"reflect"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/silences"
)

// TestSilenceCoder: a silence record comes back as it went.
func TestSilenceCoder(t *testing.T) {
	for _, x := range []silences.Silence{
		{Kind: silences.SilenceRaised, Identity: []schemas.Value{{Kind: schemas.KindString, Str: "s-1"}}, LastSeenMs: 1, SilentSinceMs: 61, DetectedAtMs: 99},
		{Kind: silences.SilenceResumed, Identity: []schemas.Value{{Kind: schemas.KindInt, Int: 7}, {Kind: schemas.KindString, Str: "b"}},
			LastSeenMs: 1_700_000_000_000, SilentSinceMs: 1_700_003_600_000, DetectedAtMs: 1_800_000_000_000, ResumedAtMs: 1_700_004_000_000},
	} {
		got, err := decodeSilence(encodeSilence(x))
		if err != nil || !reflect.DeepEqual(got, x) {
			t.Errorf("%+v came back %+v, %v", x, got, err)
		}
	}
	if _, err := decodeSilence([]byte{200}); err == nil {
		t.Errorf("a bad record decoded")
	}
}
