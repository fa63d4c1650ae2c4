package pubsubio

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
)

func TestTrackerSplitsOnlyAtCheckpoint(t *testing.T) {
	tr := newTracker(pullRestriction{Pulls: 3})
	if !tr.TryClaim(int64(4)) {
		t.Fatal("claim 4 failed")
	}
	if _, r, _ := tr.TrySplit(0.5); r != nil {
		t.Fatalf("runner split while running gave residual %v", r)
	}
	tr.checkpoint([]string{"a"}, []string{"id-a"})
	p, r, err := tr.TrySplit(0)
	if err != nil || r == nil {
		t.Fatalf("checkpoint split: %v, %v", r, err)
	}
	if !p.(pullRestriction).Done || !tr.IsDone() || tr.TryClaim(int64(5)) {
		t.Errorf("primary %+v not done", p)
	}
	if res := r.(pullRestriction); res.Pulls != 4 || res.Done || len(res.PendingAcks) != 1 {
		t.Errorf("residual = %+v", res)
	}
}

// TestPendingHoldsEachBundleUntilOnePathTakesIt: a bundle's acks are taken
// once, by whichever path comes first, and a bundle neither path takes is
// forgotten after maxAge.
func TestPendingHoldsEachBundleUntilOnePathTakesIt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := newPending(time.Minute)
	if key := p.hold(nil, nil, t0); key != "" || p.len() != 0 {
		t.Fatalf("an empty bundle is held under %q (%d held)", key, p.len())
	}
	a := p.hold([]string{"a1", "a2"}, []string{"r1", "r2"}, t0)
	b := p.hold([]string{"b1"}, nil, t0.Add(30*time.Second))
	if acks, ids, ok := p.take(a); !ok || fmt.Sprint(acks, ids) != "[a1 a2] [r1 r2]" {
		t.Errorf("take(%q) = %v %v %v; want [a1 a2] [r1 r2] true", a, acks, ids, ok)
	}
	if _, _, ok := p.take(a); ok {
		t.Errorf("bundle %q taken twice", a)
	}
	// Past a minute, a held bundle is forgotten when the next is held.
	c := p.hold([]string{"c1"}, nil, t0.Add(91*time.Second))
	if _, _, ok := p.take(b); ok {
		t.Errorf("bundle %q held for 61s was not forgotten", b)
	}
	if _, _, ok := p.take(c); !ok || p.len() != 0 {
		t.Errorf("bundle %q not held, or %d left", c, p.len())
	}
}

// TestNextWatermarkNeverPassesTheWallClock: a bundle holds the watermark
// at its earliest on-time event time, but never past the wall clock less
// idleLag, however far ahead a reading's clock is; an idle subscription
// moves it to the wall clock less idleLag; a bundle without on-time
// readings on a busy subscription leaves it.
func TestNextWatermarkNeverPassesTheWallClock(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	none := int64(mtime.MaxTimestamp)
	lag := idleLag.Milliseconds()
	tests := []struct {
		name                 string
		minOnTime, lastMsgMs int64
		want                 int64
		ok                   bool
	}{
		{"readings from a minute ago", now - 60_000, now, now - 60_000, true},
		{"readings from now", now, now, now - lag, true},
		{"one reading 3 days ahead", now + 72*3600_000, now, now - lag, true},
		{"a reading at the end of time", none - 1, now, now - lag, true},
		{"idle for IdleAdvance", none, now - defaultIdleAdvance.Milliseconds(), now - lag, true},
		{"no on-time reading, not idle", none, now - 100, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := nextWatermark(tt.minOnTime, tt.lastMsgMs, now, defaultIdleAdvance)
			if got != tt.want || ok != tt.ok {
				t.Errorf("nextWatermark = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
			if ok && got > now {
				t.Errorf("watermark %d is past the wall clock %d", got, now)
			}
		})
	}
}
