package group

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// IdentityKey is the grouping key of a record: its identity fields' text,
// joined by a unit separator. Grouped per event-time hour, it is the unit of
// deduplication and imputation.
func IdentityKey(s *schemas.Spec, r *schemas.Record) string {
	if len(s.Identity) == 1 {
		return string(schemas.AppendText(nil, r.Values[s.FieldIndex(s.Identity[0])]))
	}
	var b []byte
	for i, name := range s.Identity {
		if i > 0 {
			b = append(b, 0x1f)
		}
		b = schemas.AppendText(b, r.Values[s.FieldIndex(name)])
	}
	return string(b)
}

// ReadingID is the deterministic id of a reading: the hex of the first 16
// bytes of SHA-256 over the identity fields joined by "|", then "|" and the
// event epoch milliseconds: for an identity of one field, field + "|" + ms.
func ReadingID(s *schemas.Spec, r *schemas.Record) string {
	var b []byte
	for _, name := range s.Identity {
		b = schemas.AppendText(b, r.Values[s.FieldIndex(name)])
		b = append(b, '|')
	}
	b = strconv.AppendInt(b, r.EventMs, 10)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Prepare takes the readings of one identity in one hour, in any order,
// and returns them in event-time order with duplicates removed and missing
// values imputed. Readings with the same identity and millisecond are one
// reading: the one with the most values wins, ties broken by the observed
// values (field by field, in spec order, a value before none, then the
// smaller value; see compareObserved), so
// the choice does not depend on arrival order, nor on the raw payload,
// which a stream's window state does not keep (AppendHeld). It returns the
// number of duplicates dropped. recs is reordered in place.
func Prepare(s *schemas.Spec, recs []schemas.Record) ([]schemas.Record, int) {
	kept, dropped := Dedup(s, recs)
	impute(s, kept)
	return kept, dropped
}

// Dedup sorts recs by event time and drops duplicates as Prepare
// describes.
func Dedup(s *schemas.Spec, recs []schemas.Record) ([]schemas.Record, int) {
	sort.Slice(recs, func(i, j int) bool {
		a, b := &recs[i], &recs[j]
		if a.EventMs != b.EventMs {
			return a.EventMs < b.EventMs
		}
		if ka, kb := IdentityKey(s, a), IdentityKey(s, b); ka != kb {
			return ka < kb
		}
		if na, nb := present(s, a), present(s, b); na != nb {
			return na > nb
		}
		if c := compareObserved(s, a, b); c != 0 {
			return c < 0
		}
		if ra, rb := deadletter.IsReadBack(a), deadletter.IsReadBack(b); ra != rb {
			return rb // the same values: the copy read from the input wins over one read back
		}
		return a.Raw < b.Raw // the same values: either gives the same cells
	})
	kept := recs[:0]
	dropped := 0
	for i := range recs {
		if len(kept) > 0 {
			last := &kept[len(kept)-1]
			if last.EventMs == recs[i].EventMs && IdentityKey(s, last) == IdentityKey(s, &recs[i]) {
				dropped++
				continue
			}
		}
		kept = append(kept, recs[i])
	}
	return kept, dropped
}

// Seen summarises, in constant space, the observed values of the imputed
// fields in the readings of one identity and window that earlier firings
// prepared: for each Impute entry, the earliest and the latest observed
// value. The zero value has seen nothing.
type Seen struct {
	Observed []Observed
}

// Observed is the earliest and latest observed value of one imputed field.
type Observed struct {
	N               int64
	FirstMs, LastMs int64
	First, Last     schemas.Value
}

// PrepareEarly is Prepare for an early firing of a stream, which
// carries only the readings that arrived since the previous firing: it
// imputes them from each other and from the observed values seen holds, as
// if those readings were in the group, and then adds the firing's observed
// values to seen. The result is provisional: for readings that arrive in
// event-time order it is what Prepare gives for everything seen so
// far, and the window's on-time firing re-imputes it from all its readings.
// Duplicates are dropped within recs only; it returns how many.
func PrepareEarly(s *schemas.Spec, recs []schemas.Record, seen *Seen) ([]schemas.Record, int) {
	kept, dropped := Dedup(s, recs)
	if len(seen.Observed) != len(s.Impute) {
		seen.Observed = make([]Observed, len(s.Impute))
	}
	// The observed values seen so far join the group as anchors: records
	// holding one field's value only, dropped again after imputing.
	var anchors []schemas.Record
	for i, ob := range seen.Observed {
		if ob.N == 0 {
			continue
		}
		fi := s.FieldIndex(s.Impute[i].Field)
		for _, a := range []struct {
			ms int64
			v  schemas.Value
		}{{ob.FirstMs, ob.First}, {ob.LastMs, ob.Last}} {
			r := schemas.Record{EventMs: a.ms, Values: make([]schemas.Value, len(s.Fields)+len(s.Impute))}
			r.Values[fi] = a.v
			anchors = append(anchors, r)
			if ob.FirstMs == ob.LastMs {
				break
			}
		}
	}
	if len(anchors) == 0 {
		impute(s, kept)
	} else {
		// Anchors go before readings of the same millisecond. Records
		// share their Values with kept, so imputing all imputes kept.
		sort.SliceStable(anchors, func(i, j int) bool { return anchors[i].EventMs < anchors[j].EventMs })
		all := make([]schemas.Record, 0, len(kept)+len(anchors))
		k := 0
		for _, a := range anchors {
			for k < len(kept) && kept[k].EventMs < a.EventMs {
				all = append(all, kept[k])
				k++
			}
			all = append(all, a)
		}
		impute(s, append(all, kept[k:]...))
	}
	n := len(s.Fields)
	for i, im := range s.Impute {
		fi, ob := s.FieldIndex(im.Field), &seen.Observed[i]
		for r := range kept {
			v := kept[r].Values[fi]
			if v.Kind == schemas.KindNull || kept[r].Values[n+i].Bool {
				continue
			}
			if ob.N == 0 || kept[r].EventMs < ob.FirstMs {
				ob.FirstMs, ob.First = kept[r].EventMs, v
			}
			if ob.N == 0 || kept[r].EventMs >= ob.LastMs {
				ob.LastMs, ob.Last = kept[r].EventMs, v
			}
			ob.N++
		}
	}
	return kept, dropped
}

// compareObserved orders two readings by their observed values, field by
// field in spec order (an imputed value counts as null, as observed has
// it): a value before none, then by kind and value. It returns -1, 0 or +1.
// Dedup calls it only for copies of one reading (same identity, millisecond
// and number of values), so the two scratch slices cost nothing that counts.
func compareObserved(s *schemas.Spec, a, b *schemas.Record) int {
	va, vb := make([]schemas.Value, s.NumValues()), make([]schemas.Value, s.NumValues())
	s.Observed(va, a)
	s.Observed(vb, b)
	for i := range s.Fields {
		switch {
		case va[i].Kind == vb[i].Kind:
		case va[i].Kind == schemas.KindNull:
			return 1 // a value before none
		case vb[i].Kind == schemas.KindNull:
			return -1
		default:
			return cmp.Compare(va[i].Kind, vb[i].Kind)
		}
		if c := schemas.CompareValues(va[i], vb[i]); c != 0 {
			return c
		}
	}
	return 0
}

// present counts r's observed field values: imputed values and flags, which
// a record kept by an earlier firing may carry, do not count.
func present(s *schemas.Spec, r *schemas.Record) int {
	n := 0
	for i := range s.Fields {
		if r.Values[i].Kind != schemas.KindNull {
			n++
		}
	}
	for i, im := range s.Impute {
		if r.Values[len(s.Fields)+i].Bool && r.Values[s.FieldIndex(im.Field)].Kind != schemas.KindNull {
			n--
		}
	}
	return n
}

// impute fills each missing imputed field from the nearest earlier reading
// with an observed value, else the nearest later one, and sets its flag.
// recs must be in event-time order. A group with no observed value keeps the
// field null.
func impute(s *schemas.Spec, recs []schemas.Record) {
	n := len(s.Fields)
	for i, im := range s.Impute {
		fi, flag := s.FieldIndex(im.Field), n+i
		// Clear what an earlier pass may have imputed, so re-imputing an
		// accumulated window starts from the observed values only.
		for r := range recs {
			if recs[r].Values[flag].Bool {
				recs[r].Values[fi] = schemas.Value{}
			}
			recs[r].Values[flag] = schemas.Value{Kind: schemas.KindBool}
		}
		var prev *schemas.Value
		for r := range recs {
			v := &recs[r].Values[fi]
			if v.Kind != schemas.KindNull {
				prev = v
				continue
			}
			if prev != nil {
				*v = *prev
				recs[r].Values[flag].Bool = true
			}
		}
		var next *schemas.Value
		for r := len(recs) - 1; r >= 0; r-- {
			v := &recs[r].Values[fi]
			if recs[r].Values[flag].Bool {
				continue
			}
			if v.Kind != schemas.KindNull {
				next = v
				continue
			}
			if next != nil {
				*v = *next
				recs[r].Values[flag].Bool = true
			}
		}
	}
}
