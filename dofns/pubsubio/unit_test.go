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

// TestPullWaitWidensOnCutOffAnswers: an answer cut off on the wire widens
// the deadline fourfold up to maxPullWait. An answer halves it back, never
// below pullTimeout, when its transfer shows that the largest answer yet
// (after a cut-off, Pub/Sub's largest message) would arrive within a
// quarter of it. A pull that saw an older deadline changes nothing.
func TestPullWaitWidensOnCutOffAnswers(t *testing.T) {
	w := newPullWait()
	const mb = 1_000_000 // a tenth of the largest message
	ms := time.Millisecond
	type step struct {
		op       string // "cut" or "answer"
		was      time.Duration
		bytes    int           // for "answer"
		took     time.Duration // for "answer"
		wantOK   bool          // for "cut"
		wantWait time.Duration
	}
	for i, s := range []step{
		{op: "answer", was: pullTimeout, bytes: mb, took: 10 * ms, wantWait: pullTimeout},
		{op: "cut", was: pullTimeout, wantOK: true, wantWait: 4 * time.Second},
		{op: "cut", was: pullTimeout, wantOK: false, wantWait: 4 * time.Second}, // a pull started before the widening
		{op: "cut", was: 4 * time.Second, wantOK: true, wantWait: 16 * time.Second},
		// 8 MB in 5 s projects 10 MB at 6.25 s: not within 16/4 s.
		{op: "answer", was: 16 * time.Second, bytes: 8 * mb, took: 5 * time.Second, wantWait: 16 * time.Second},
		{op: "cut", was: 16 * time.Second, wantOK: true, wantWait: maxPullWait},
		{op: "cut", was: maxPullWait, wantOK: false, wantWait: maxPullWait},
		// 1 MB in 0.5 s projects 10 MB at 5 s.
		{op: "answer", was: maxPullWait, bytes: mb, took: 500 * ms, wantWait: 30 * time.Second},
		{op: "answer", was: maxPullWait, bytes: mb, took: 500 * ms, wantWait: 30 * time.Second}, // stale
		{op: "answer", was: 30 * time.Second, bytes: mb, took: 500 * ms, wantWait: 15 * time.Second},
		{op: "answer", was: 15 * time.Second, bytes: mb, took: 500 * ms, wantWait: 15 * time.Second}, // 5 s is over 15/4 s
		// The link speeds up: 10 MB in 0.4 s.
		{op: "answer", was: 15 * time.Second, bytes: 8 * mb, took: 320 * ms, wantWait: 7500 * ms},
		{op: "answer", was: 7500 * ms, bytes: mb, took: 40 * ms, wantWait: 3750 * ms},
		{op: "answer", was: 3750 * ms, bytes: mb, took: 40 * ms, wantWait: 1875 * ms},
		{op: "answer", was: 1875 * ms, bytes: mb, took: 40 * ms, wantWait: pullTimeout},
		{op: "answer", was: pullTimeout, bytes: mb, took: 40 * ms, wantWait: pullTimeout},
	} {
		switch s.op {
		case "cut":
			if _, ok := w.cutOff(s.was); ok != s.wantOK {
				t.Errorf("step %d: cutOff(%v) ok = %v; want %v", i, s.was, ok, s.wantOK)
			}
		case "answer":
			w.answered(s.was, s.bytes, s.took)
		}
		if got := w.get(); got != s.wantWait {
			t.Errorf("step %d (%s after %v): wait %v; want %v", i, s.op, s.was, got, s.wantWait)
		}
	}
}

// TestBundleRampDoublesIntoABacklog: the first bundle into a backlog is
// capped at firstBundleCap; each that ends full doubles the next one's
// cap up to the limit; one that ends by time keeps it; one that ends at an
// empty pull (caught up) starts the ramp again.
func TestBundleRampDoublesIntoABacklog(t *testing.T) {
	type step struct {
		full, idle bool
		wantNext   int // the cap after the step, at a limit of 16,000
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"into a backlog", []step{{true, false, 2000}, {true, false, 4000}, {true, false, 8000}, {true, false, 16000}, {true, false, 16000}}},
		{"a bundle ended by time keeps the cap", []step{{true, false, 2000}, {false, false, 2000}, {true, false, 4000}}},
		{"caught up, it starts again", []step{{true, false, 2000}, {true, false, 4000}, {false, true, 1000}, {true, false, 2000}}},
		{"a live stream stays at the first cap", []step{{false, true, 1000}, {false, true, 1000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r bundleRamp
			if got := r.cap(16000); got != firstBundleCap {
				t.Fatalf("first cap %d; want %d", got, firstBundleCap)
			}
			for i, s := range tc.steps {
				r.ended(s.full, s.idle)
				if got := r.cap(16000); got != s.wantNext {
					t.Errorf("after step %d (full %v, idle %v): cap %d; want %d", i, s.full, s.idle, got, s.wantNext)
				}
			}
		})
	}
	var r bundleRamp
	if got := r.cap(300); got != 300 {
		t.Errorf("cap under a limit of 300: %d; want the limit", got)
	}
	for range 100 {
		r.ended(true, false)
	}
	if got := r.cap(16000); got != 16000 {
		t.Errorf("after 100 full bundles: cap %d; want the limit", got)
	}
}
