package bigtableio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"

	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

func init() {
	runtime.RegisterType(reflect.TypeOf((*keyRangeTracker)(nil)))
	runtime.RegisterType(reflect.TypeOf((*KeyRange)(nil)).Elem())
	runtime.RegisterFunction(encKeyRange)
	runtime.RegisterFunction(decKeyRange)
	coder.RegisterCoder(reflect.TypeOf((*KeyRange)(nil)).Elem(), encKeyRange, decKeyRange)
}

// KeyRange is the restriction of a table read: the row keys in [Start,
// End), End "" being the end of the table. A Bigtable row is the unit of
// the read: a row is claimed whole by its key.
type KeyRange struct {
	Start, End string
}

func encKeyRange(r KeyRange) ([]byte, error) { return json.Marshal(r) }

func decKeyRange(b []byte) (KeyRange, error) {
	var r KeyRange
	err := json.Unmarshal(b, &r)
	return r, err
}

// contains reports whether key is in r.
func (r KeyRange) contains(key string) bool {
	return key >= r.Start && (r.End == "" || key < r.End)
}

// SplitAt splits r at the keys of samples that fall strictly inside it
// (Bigtable's SampleRowKeys: keys that end tablet-sized chunks of the
// table), giving ranges that together cover r exactly, in key order.
func (r KeyRange) SplitAt(samples []string) []KeyRange {
	cuts := append([]string(nil), samples...)
	sort.Strings(cuts)
	var out []KeyRange
	start := r.Start
	for _, k := range cuts {
		if k <= start || (r.End != "" && k >= r.End) {
			continue
		}
		out = append(out, KeyRange{Start: start, End: k})
		start = k
	}
	return append(out, KeyRange{Start: start, End: r.End})
}

// Clip is the parts of ranges (a scan plan's, in any order) inside r.
func (r KeyRange) Clip(ranges []rowkey.RowRange) []rowkey.RowRange {
	var out []rowkey.RowRange
	for _, rg := range ranges {
		start, end := max(rg.Start, r.Start), rg.End
		switch {
		case end == "":
			end = r.End
		case r.End != "" && r.End < end:
			end = r.End
		}
		if end != "" && start >= end {
			continue
		}
		out = append(out, rowkey.RowRange{Start: start, End: end})
	}
	return out
}

// boundsOf is the smallest KeyRange that holds every range of a scan plan.
func boundsOf(ranges []rowkey.RowRange) KeyRange {
	if len(ranges) == 0 {
		return KeyRange{}
	}
	b := KeyRange{Start: ranges[0].Start, End: ranges[0].End}
	for _, rg := range ranges[1:] {
		b.Start = min(b.Start, rg.Start)
		if b.End != "" && (rg.End == "" || rg.End > b.End) {
			b.End = rg.End
		}
	}
	return b
}

// position places key between lo and hi (hi "" the end of the key space)
// as a fraction in [0, 1]: the keys' first 8 bytes after their common
// prefix, read as big-endian numbers. It guides splits and progress; it
// is not exact.
func position(lo, hi, key string) float64 {
	a, b, k := keyNumbers(lo, hi, key)
	if b <= a {
		return 0
	}
	return math.Min(1, math.Max(0, (k-a)/(b-a)))
}

// interpolate is the key at fraction f of the way from lo to hi (hi ""
// the end of the key space), by the same numbering as position.
func interpolate(lo, hi string, f float64) string {
	p := commonPrefix(lo, hi)
	a, b, _ := keyNumbers(lo, hi, lo)
	v := uint64(a + f*(b-a))
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	return lo[:p] + string(bytes.TrimRight(buf[:], "\x00"))
}

// keyNumbers reads lo, hi and key past lo and hi's common prefix as
// numbers in [0, 2^64].
func keyNumbers(lo, hi, key string) (a, b, k float64) {
	p := commonPrefix(lo, hi)
	num := func(s string) float64 {
		if len(s) < p {
			return 0
		}
		var buf [8]byte
		copy(buf[:], s[p:])
		return float64(binary.BigEndian.Uint64(buf[:]))
	}
	a, k = num(lo), num(key)
	if hi == "" {
		b = math.Exp2(64)
	} else {
		b = num(hi)
	}
	return a, b, k
}

func commonPrefix(a, b string) int {
	if b == "" {
		return 0
	}
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// endOfRange is the claim that marks a read's range finished.
type endOfRange struct{}

// keyRangeTracker tracks a read of a KeyRange: each row's key is claimed
// before the row is emitted, in increasing order. A split keeps the rows
// claimed (and the next) in the primary and gives the rest of the range
// to the residual, so that a runner can hand the rest of a large range to
// another worker.
type keyRangeTracker struct {
	rest    KeyRange
	claimed string // the last key claimed
	any     bool   // a key was claimed
	done    bool
	err     error
}

func newKeyRangeTracker(r KeyRange) *keyRangeTracker { return &keyRangeTracker{rest: r} }

// TryClaim claims a row key (a string), or the end of the range
// (endOfRange). It fails once the key is past the range, which ends the
// read.
func (t *keyRangeTracker) TryClaim(pos any) bool {
	if t.done || t.err != nil {
		return false
	}
	switch p := pos.(type) {
	case endOfRange:
		t.done = true
		return false
	case string:
		if t.any && p <= t.claimed {
			t.err = fmt.Errorf("bigtable read: key %q claimed after %q: rows must come in key order", p, t.claimed)
			return false
		}
		if p < t.rest.Start {
			t.err = fmt.Errorf("bigtable read: key %q is before the range %v", p, t.rest)
			return false
		}
		if !t.rest.contains(p) {
			t.done = true
			return false
		}
		t.claimed, t.any = p, true
		return true
	default:
		t.err = fmt.Errorf("bigtable read: claim of a %T, not a row key", pos)
		return false
	}
}

// GetError is the error a bad claim set.
func (t *keyRangeTracker) GetError() error { return t.err }

// TrySplit splits the unread part of the range at fraction of it (0: just
// after the last row claimed, a checkpoint).
func (t *keyRangeTracker) TrySplit(fraction float64) (primary, residual any, err error) {
	if t.done || t.err != nil {
		return t.rest, nil, nil
	}
	from := t.rest.Start
	if t.any {
		from = t.claimed + "\x00" // the smallest key after the claimed one
	}
	split := from
	if fraction > 0 {
		split = max(from, interpolate(from, t.rest.End, math.Min(fraction, 1)))
	}
	if (t.rest.End != "" && split >= t.rest.End) || (split == t.rest.Start && !t.any && fraction > 0) {
		return t.rest, nil, nil
	}
	residual = KeyRange{Start: split, End: t.rest.End}
	t.rest.End = split
	return t.rest, residual, nil
}

// GetProgress estimates the share of the range read and left.
func (t *keyRangeTracker) GetProgress() (done, remaining float64) {
	if t.done {
		return 1, 0
	}
	if !t.any {
		return 0, 1
	}
	f := position(t.rest.Start, t.rest.End, t.claimed)
	return f, 1 - f
}

// IsDone reports whether the range was read to its end.
func (t *keyRangeTracker) IsDone() bool {
	return t.done || (t.rest.End != "" && t.rest.Start >= t.rest.End)
}

// GetRestriction is the range as it stands (narrowed by splits).
func (t *keyRangeTracker) GetRestriction() any { return t.rest }

// IsBounded reports that a table read ends.
func (t *keyRangeTracker) IsBounded() bool { return true }
