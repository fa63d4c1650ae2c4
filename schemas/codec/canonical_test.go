package codec

import (
	"bufio"
	"math"
	"os"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

// TestFlatCanonicalJSONIsTheTree: for a spec of flat paths, CanonicalJSON
// writes the object directly (appendFlat); it is byte for byte the one the
// tree gives (canonicalTree), for the builtin specs' sample readings, with
// each value in turn imputed or null, and for values JSON cannot hold.
func TestFlatCanonicalJSONIsTheTree(t *testing.T) {
	flat := 0
	for _, tc := range []struct{ spec, sample string }{
		{"vitals", "vitals"}, {"vitals", "vitals_fleet"}, {"user_events", "user_events"},
		{"traffic", "traffic"}, {"heroic_metrics", "heroic_metrics"},
	} {
		s := spectest.Must(t, tc.spec)
		if s.Explode != nil || !flatPaths(s) {
			continue
		}
		flat++
		recs := sampleLines(t, s, tc.sample)
		if len(recs) == 0 {
			t.Fatalf("%s: no sample reading", tc.sample)
		}
		for _, r := range recs {
			variants := []schemas.Record{r}
			for i := range r.Values {
				v := r
				v.Values = append([]schemas.Value(nil), r.Values...)
				if i >= len(s.Fields) {
					v.Values[i] = schemas.Value{Kind: schemas.KindBool, Bool: true} // an impute flag set
				} else {
					v.Values[i] = schemas.Value{}
				}
				variants = append(variants, v)
				if i < len(s.Fields) && r.Values[i].Kind == schemas.KindFloat {
					w := v
					w.Values = append([]schemas.Value(nil), v.Values...)
					w.Values[i] = schemas.Value{Kind: schemas.KindFloat, Num: math.Inf(1)}
					variants = append(variants, w)
				}
			}
			for _, v := range variants {
				if got, want := CanonicalJSON(s, &v), canonicalTree(s, &v); got != want {
					t.Errorf("%s: flat %s\n          tree %s", tc.spec, got, want)
				}
			}
		}
	}
	if flat < 3 {
		t.Errorf("%d builtin specs have flat paths: the test shows too little", flat)
	}
}

// sampleLines parses the sample readings of testdata/samples/name.jsonl.
func sampleLines(t *testing.T, s *schemas.Spec, name string) []schemas.Record {
	t.Helper()
	f, err := os.Open("../../testdata/samples/" + name + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := NewParser(s)
	var recs []schemas.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		more, err := p.Parse(nil, sc.Bytes(), name)
		if err == nil {
			recs = append(recs, more...)
		}
	}
	return recs
}
