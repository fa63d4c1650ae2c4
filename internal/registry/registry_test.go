package registry

import (
	"errors"
	"testing"
)

type settings struct {
	target string
	limit  int
}

func TestAcquireSharesOneValuePerKeyAndReleasesAtTheLast(t *testing.T) {
	var r Registry[settings, *int]
	made := 0
	mk := func(n int) func() (*int, error) {
		return func() (*int, error) { made++; v := n; return &v, nil }
	}
	a, _ := r.Acquire(settings{"p/i", 4}, mk(4))
	b, _ := r.Acquire(settings{"p/i", 4}, mk(4))
	c, _ := r.Acquire(settings{"p/i", 8}, mk(8))
	if a != b {
		t.Error("two callers with the same settings got different values")
	}
	if a == c || *c != 8 {
		t.Errorf("a caller with other settings got %v (limit %d); want its own, limit 8", c, *c)
	}
	if made != 2 || r.Len() != 2 {
		t.Fatalf("made %d values, holds %d; want 2 and 2", made, r.Len())
	}
	closed := 0
	closer := func(*int) error { closed++; return nil }
	if err := r.Release(settings{"p/i", 4}, closer); err != nil || closed != 0 {
		t.Fatalf("first release: %v, closed %d; want the value kept for its other holder", err, closed)
	}
	if err := r.Release(settings{"p/i", 4}, closer); err != nil || closed != 1 || r.Len() != 1 {
		t.Fatalf("last release: %v, closed %d, holds %d; want closed once and one left", err, closed, r.Len())
	}
	if err := r.Release(settings{"p/i", 4}, closer); err == nil {
		t.Error("a release with no holder is not an error")
	}
	if d, _ := r.Acquire(settings{"p/i", 4}, mk(4)); d == a {
		t.Error("a value acquired after its last release is the released one")
	}
}

func TestAcquireKeepsNothingWhenMakeFails(t *testing.T) {
	var r Registry[string, int]
	if _, err := r.Acquire("k", func() (int, error) { return 0, errors.New("down") }); err == nil {
		t.Fatal("make's error is not returned")
	}
	if r.Len() != 0 {
		t.Fatalf("holds %d values after a failed make; want 0", r.Len())
	}
}

func TestGetKeepsAValueForTheProcess(t *testing.T) {
	var r Registry[string, *int]
	a := r.Get("bigtable p/i", func() *int { return new(int) })
	b := r.Get("bigtable p/i", func() *int { return new(int) })
	c := r.Get("bigquery p", func() *int { return new(int) })
	if a != b || a == c {
		t.Errorf("Get: same key shared %v, other key apart %v; want both", a == b, a != c)
	}
	if err := r.Release("bigtable p/i", nil); err == nil {
		t.Error("releasing a value kept for the process is not an error")
	}
}
