package pubsubread

import "testing"

func TestParseEventTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1795312276318", 1795312276318, true},
		{"2026-11-22T10:15:30.123Z", 1795342530123, true},
		{"2026-11-22T11:15:30+01:00", 1795342530000, true},
		{"", 0, false},
		{"yesterday", 0, false},
		{"99999999999999999", 0, false},
	} {
		got, err := ParseEventTime(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseEventTime(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestTrackerSplitsOnlyAtCheckpoint(t *testing.T) {
	tr := newTracker(Restriction{Pulls: 3})
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
	if !p.(Restriction).Done || !tr.IsDone() || tr.TryClaim(int64(5)) {
		t.Errorf("primary %+v not done", p)
	}
	if res := r.(Restriction); res.Pulls != 4 || res.Done || len(res.PendingAcks) != 1 {
		t.Errorf("residual = %+v", res)
	}
}
