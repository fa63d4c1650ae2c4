package silences

import (
	"sort"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// Restore takes the records of the sensor's gaps that a run before a
// restart wrote to the silences table (stored: kind, last_seen,
// silent_since and resumed_at), the readings read back with them
// (timesMs, ascending, as Prepend took them) and the records Prepend
// returned (out), and returns the records still to raise, each detected
// at detectedMs:
//
//   - out without the records stored already: a gap raised before the
//     restart is not raised again;
//   - for each stored silence without its resumed record, stored or in
//     out: its resumed record, at the sensor's first reading after
//     last_seen, when there is one; else the silence is the sensor's open
//     one (Open, with LastMs its last_seen), so its next reading raises
//     the resumed record and no timer raises the silence again.
//
// The stored records are what the watermark raised, which the readings
// alone do not tell: a silence raised when the watermark passed a
// sensor's time before its next reading came (a gap of at most
// silent_after in event time) gets its resumed record after a restart
// too.
func (t *SilenceTrack) Restore(identity []schemas.Value, timesMs []int64, stored, out []Silence, detectedMs int64) []Silence {
	if len(stored) == 0 {
		return out
	}
	type gap struct {
		kind  string
		since int64
	}
	written := make(map[gap]bool, len(stored))
	for _, x := range stored {
		written[gap{x.Kind, x.SilentSinceMs}] = true
	}
	kept := out[:0:0]
	for _, x := range out {
		if !written[gap{x.Kind, x.SilentSinceMs}] {
			kept = append(kept, x)
		}
		if x.Kind == SilenceResumed {
			written[gap{x.Kind, x.SilentSinceMs}] = true
		}
	}
	var open []Silence
	for _, x := range stored {
		if x.Kind == SilenceRaised && !written[gap{SilenceResumed, x.SilentSinceMs}] {
			open = append(open, x)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i].LastSeenMs < open[j].LastSeenMs })
	if t.Identity == nil {
		t.Identity = identity
	}
	for _, x := range open {
		id := t.Identity
		if id == nil {
			id = x.Identity
		}
		if next, ok := t.nextAfter(timesMs, x.LastSeenMs); ok {
			kept = append(kept, Silence{Kind: SilenceResumed, Identity: id, LastSeenMs: x.LastSeenMs,
				SilentSinceMs: x.SilentSinceMs, DetectedAtMs: detectedMs, ResumedAtMs: next})
			continue
		}
		// Nothing since last_seen: the sensor is silent, and known to be.
		if !t.Known {
			t.FirstMs = x.LastSeenMs
		}
		t.Known, t.Identity, t.LastMs, t.AfterMs, t.Open = true, id, x.LastSeenMs, x.SilentSinceMs-x.LastSeenMs, true
	}
	return kept
}

// nextAfter is the sensor's first known reading after ms: among timesMs,
// and the track's first and newest readings.
func (t *SilenceTrack) nextAfter(timesMs []int64, ms int64) (int64, bool) {
	next, ok := int64(0), false
	take := func(v int64) {
		if v > ms && (!ok || v < next) {
			next, ok = v, true
		}
	}
	if i := sort.Search(len(timesMs), func(i int) bool { return timesMs[i] > ms }); i < len(timesMs) {
		take(timesMs[i])
	}
	if t.Known {
		take(t.FirstMs)
		take(t.LastMs)
	}
	return next, ok
}
