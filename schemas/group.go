package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
)

// IdentityKey is the grouping key of a record: its identity fields' text,
// joined by a unit separator. Grouped per event-time hour, it is the unit of
// deduplication and imputation.
func (s *Spec) IdentityKey(r *Record) string {
	if len(s.Identity) == 1 {
		return string(AppendText(nil, r.Values[s.FieldIndex(s.Identity[0])]))
	}
	var b []byte
	for i, name := range s.Identity {
		if i > 0 {
			b = append(b, 0x1f)
		}
		b = AppendText(b, r.Values[s.FieldIndex(name)])
	}
	return string(b)
}

// ReadingID is the deterministic id of a reading: the hex of the first 16
// bytes of SHA-256 over the identity fields joined by "|", then "|" and the
// event epoch milliseconds. For vitals that is sensor_id + "|" + ms.
func (s *Spec) ReadingID(r *Record) string {
	var b []byte
	for _, name := range s.Identity {
		b = AppendText(b, r.Values[s.FieldIndex(name)])
		b = append(b, '|')
	}
	b = strconv.AppendInt(b, r.EventMs, 10)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// PrepareGroup takes the readings of one identity in one hour, in any order,
// and returns them in event-time order with duplicates removed and missing
// values imputed. Readings with the same identity and millisecond are one
// reading: the one with the most values wins, ties broken by the smallest
// raw payload, so the choice does not depend on arrival order. It returns the
// number of duplicates dropped. recs is reordered in place.
func (s *Spec) PrepareGroup(recs []Record) ([]Record, int) {
	sort.Slice(recs, func(i, j int) bool {
		a, b := &recs[i], &recs[j]
		if a.EventMs != b.EventMs {
			return a.EventMs < b.EventMs
		}
		if ka, kb := s.IdentityKey(a), s.IdentityKey(b); ka != kb {
			return ka < kb
		}
		if na, nb := present(a), present(b); na != nb {
			return na > nb
		}
		return a.Raw < b.Raw
	})
	kept := recs[:0]
	dropped := 0
	for i := range recs {
		if len(kept) > 0 {
			last := &kept[len(kept)-1]
			if last.EventMs == recs[i].EventMs && s.IdentityKey(last) == s.IdentityKey(&recs[i]) {
				dropped++
				continue
			}
		}
		kept = append(kept, recs[i])
	}
	s.impute(kept)
	return kept, dropped
}

func present(r *Record) int {
	n := 0
	for _, v := range r.Values {
		if v.Kind != KindNull {
			n++
		}
	}
	return n
}

// impute fills each missing imputed field from the nearest earlier reading
// with an observed value, else the nearest later one, and sets its flag.
// recs must be in event-time order. A group with no observed value keeps the
// field null.
func (s *Spec) impute(recs []Record) {
	n := len(s.Fields)
	for i, im := range s.Impute {
		fi, flag := s.FieldIndex(im.Field), n+i
		// Clear what an earlier pass may have imputed, so re-imputing an
		// accumulated window starts from the observed values only.
		for r := range recs {
			if recs[r].Values[flag].Bool {
				recs[r].Values[fi] = Value{}
			}
			recs[r].Values[flag] = Value{Kind: KindBool}
		}
		var prev *Value
		for r := range recs {
			v := &recs[r].Values[fi]
			if v.Kind != KindNull {
				prev = v
				continue
			}
			if prev != nil {
				*v = *prev
				recs[r].Values[flag].Bool = true
			}
		}
		var next *Value
		for r := len(recs) - 1; r >= 0; r-- {
			v := &recs[r].Values[fi]
			if recs[r].Values[flag].Bool {
				continue
			}
			if v.Kind != KindNull {
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
