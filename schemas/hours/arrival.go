package hours

import "github.com/sensorpipe/sensorpipe/schemas"

// A local stream writes each reading's observed cells on arrival, before
// its window fires (dofns.ArrivalRowsFn), so that an acknowledged message is
// in Bigtable. Its early firing then has only the imputed cells to add.

// ArrivalRecord is r as its arrival write stores it: its observed values,
// and a false flag for each imputed field it has a value for (an observed
// value is never imputed, so that flag is already final). A field it lacks
// gets neither cell: its window's firings impute it. r's values are not
// modified (other consumers of the element share them).
func ArrivalRecord(s *schemas.Spec, r schemas.Record) schemas.Record {
	if len(s.Impute) == 0 {
		return r
	}
	vals := make([]schemas.Value, len(r.Values))
	copy(vals, r.Values)
	n := len(s.Fields)
	for i, im := range s.Impute {
		if f := n + i; f < len(vals) && vals[s.FieldIndex(im.Field)].Kind != schemas.KindNull {
			vals[f] = schemas.Value{Kind: schemas.KindBool}
		}
	}
	r.Values = vals
	return r
}

// ArrivalComplete reports whether a prepared reading's cells (as an early
// firing writes them: no deletions) are what its arrival write stored:
// every imputed field was observed, not imputed. An early firing after an
// arrival write need not write it again.
func ArrivalComplete(s *schemas.Spec, r *schemas.Record) bool {
	n := len(s.Fields)
	for i, im := range s.Impute {
		f := n + i
		if f >= len(r.Values) || r.Values[f].Bool || r.Values[s.FieldIndex(im.Field)].Kind == schemas.KindNull {
			return false
		}
	}
	return true
}
