package pubsubio

import (
	"fmt"
	"testing"
	"time"
)

// TestRecentIDsForgetByAgeAndCount: an id is remembered for the ttl from
// its last recording, the oldest are forgotten beyond max, and an id
// recorded again is not forgotten with its older recording.
func TestRecentIDsForgetByAgeAndCount(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	r := newRecentIDs(time.Minute, 0)
	r.record([]string{"a", "b"}, at(0))
	r.record([]string{"c"}, at(30*time.Second))
	for _, tc := range []struct {
		id   string
		now  time.Duration
		want bool
	}{
		{"a", 0, true},
		{"b", 59 * time.Second, true},
		{"a", time.Minute, false}, // a ttl after its recording
		{"c", 89 * time.Second, true},
		{"d", 0, false},
		{"", 0, false},
	} {
		if got := r.contains(tc.id, at(tc.now)); got != tc.want {
			t.Errorf("contains(%q) at +%v = %v; want %v", tc.id, tc.now, got, tc.want)
		}
	}
	// Recording at +70s forgets a and b (recorded at 0), keeps c.
	r.record([]string{"a"}, at(70*time.Second))
	if got := r.len(); got != 2 {
		t.Errorf("after expiry: %d ids; want 2 (c, and a again)", got)
	}
	// a's old recording leaves the order without taking the new one.
	r.expire(at(95 * time.Second))
	if !r.contains("a", at(95*time.Second)) || r.contains("c", at(95*time.Second)) {
		t.Errorf("at +95s: a %v, c %v; want a remembered (recorded at +70s), c forgotten", r.contains("a", at(95*time.Second)), r.contains("c", at(95*time.Second)))
	}

	// At most max: the oldest go first.
	m := newRecentIDs(time.Hour, 3)
	for i := range 5 {
		m.record([]string{fmt.Sprint(i)}, at(time.Duration(i)*time.Second))
	}
	for i := range 5 {
		if got, want := m.contains(fmt.Sprint(i), at(5*time.Second)), i >= 2; got != want {
			t.Errorf("max 3 after 5 ids: contains(%d) = %v; want %v", i, got, want)
		}
	}
}

// TestRecentIDsTellManyIDsApart: 200,000 ids like Pub/Sub's, recorded,
// are each found, and as many others are not (their hashes do not
// collide).
func TestRecentIDsTellManyIDsApart(t *testing.T) {
	now := time.Now()
	r := newRecentIDs(time.Hour, 0)
	ids := make([]string, 200_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("projects/p/subscriptions/s:%d", i)
	}
	r.record(ids, now)
	for _, id := range ids {
		if !r.contains(id, now) {
			t.Fatalf("%s recorded and not found", id)
		}
	}
	for i := range ids {
		if id := fmt.Sprintf("projects/p/subscriptions/s:%d", len(ids)+i); r.contains(id, now) {
			t.Fatalf("%s never recorded and found", id)
		}
	}
}

// TestRecentIDsRecordNewReturnsOnlyTheNew: recordNew records and returns
// the ids not recorded within the ttl (one listed twice once), and leaves
// the others and their times alone.
func TestRecentIDsRecordNewReturnsOnlyTheNew(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	r := newRecentIDs(time.Minute, 0)
	r.record([]string{"a"}, t0)
	if got := r.recordNew([]string{"a", "b", "b", "c"}, t0.Add(30*time.Second)); fmt.Sprint(got) != "[b c]" {
		t.Errorf("recordNew(a b b c) at +30s = %v; want [b c]", got)
	}
	// a keeps its time (0): at +60s it is new again, b and c are not.
	if got := r.recordNew([]string{"a", "b", "c"}, t0.Add(time.Minute)); fmt.Sprint(got) != "[a]" {
		t.Errorf("recordNew(a b c) at +60s = %v; want [a]", got)
	}
}
