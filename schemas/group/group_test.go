package group

import (
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

// hrs renders each record's heart rate and flag as "72" or "72*" (imputed)
// or "-" (none).
func hrs(s *schemas.Spec, recs []schemas.Record) string {
	hi, fi := s.FieldIndex("heart_rate"), s.FieldIndex("heart_rate_imputed")
	var out []string
	for _, r := range recs {
		v := "-"
		if !r.Values[hi].Null() {
			v = string(schemas.AppendText(nil, r.Values[hi]))
		}
		if r.Values[fi].Bool {
			v += "*"
		}
		out = append(out, v)
	}
	return strings.Join(out, " ")
}

func TestPrepareGroupImputation(t *testing.T) {
	s := spectest.Must(t, "vitals")
	const h = 1772359200000 // 10:00Z
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"all observed", []string{readingtest.VitalsLine("s", h, 70), readingtest.VitalsLine("s", h+1, 71)}, "70 71"},
		{"earlier wins", []string{readingtest.VitalsLine("s", h, 70), readingtest.VitalsLine("s", h+5, -1), readingtest.VitalsLine("s", h+9, 90)}, "70 70* 90"},
		{"nearest earlier, not first", []string{readingtest.VitalsLine("s", h, 70), readingtest.VitalsLine("s", h+1, 75), readingtest.VitalsLine("s", h+2, -1)}, "70 75 75*"},
		{"later when no earlier", []string{readingtest.VitalsLine("s", h, -1), readingtest.VitalsLine("s", h+1, -1), readingtest.VitalsLine("s", h+2, 80), readingtest.VitalsLine("s", h+3, 81)}, "80* 80* 80 81"},
		{"chain uses observed only", []string{readingtest.VitalsLine("s", h, 60), readingtest.VitalsLine("s", h+1, -1), readingtest.VitalsLine("s", h+2, -1)}, "60 60* 60*"},
		{"none observed", []string{readingtest.VitalsLine("s", h, -1), readingtest.VitalsLine("s", h+1, -1)}, "- -"},
		{"input order does not matter", []string{readingtest.VitalsLine("s", h+9, 90), readingtest.VitalsLine("s", h+5, -1), readingtest.VitalsLine("s", h, 70)}, "70 70* 90"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, _ := Prepare(s, readingtest.Parse(t, s, tt.lines...))
			if got := hrs(s, kept); got != tt.want {
				t.Fatalf("heart rates = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestPrepareGroupReimputeIsStable(t *testing.T) {
	s := spectest.Must(t, "vitals")
	const h = 1772359200000
	recs := readingtest.Parse(t, s, readingtest.VitalsLine("s", h, -1), readingtest.VitalsLine("s", h+2, 80))
	kept, _ := Prepare(s, recs)
	// A later pane adds an earlier observation: the imputed value changes.
	more := append(kept, readingtest.Parse(t, s, readingtest.VitalsLine("s", h-1, 50))...)
	again, _ := Prepare(s, more)
	if got, want := hrs(s, again), "50 50* 80"; got != want {
		t.Fatalf("re-imputed = %q; want %q", got, want)
	}
}

func TestPrepareEarlyImputesFromWhatWasSeen(t *testing.T) {
	s := spectest.Must(t, "vitals")
	const h = 1772359200000
	tests := []struct {
		name    string
		firings [][]string
		want    []string // heart rates per firing
	}{
		{"from an earlier firing", [][]string{{readingtest.VitalsLine("s", h, 70)}, {readingtest.VitalsLine("s", h+5, -1)}}, []string{"70", "70*"}},
		{"nearest earlier of first and last seen", [][]string{{readingtest.VitalsLine("s", h, 60), readingtest.VitalsLine("s", h+2, 70), readingtest.VitalsLine("s", h+4, 80)}, {readingtest.VitalsLine("s", h+3, -1)}},
			[]string{"60 70 80", "60*"}}, // h+2 is neither first nor last: provisional
		{"later when none earlier", [][]string{{readingtest.VitalsLine("s", h+5, 90)}, {readingtest.VitalsLine("s", h, -1)}}, []string{"90", "90*"}},
		{"within the firing first", [][]string{{readingtest.VitalsLine("s", h, 60)}, {readingtest.VitalsLine("s", h+5, 75), readingtest.VitalsLine("s", h+6, -1)}}, []string{"60", "75 75*"}},
		{"imputed values are not seen", [][]string{{readingtest.VitalsLine("s", h, -1)}, {readingtest.VitalsLine("s", h+1, -1)}}, []string{"-", "-"}},
		{"duplicates within a firing", [][]string{{readingtest.VitalsLine("s", h, -1), readingtest.VitalsLine("s", h, 70)}, {readingtest.VitalsLine("s", h+1, -1)}}, []string{"70", "70*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen Seen
			for i, lines := range tt.firings {
				kept, _ := PrepareEarly(s, readingtest.Parse(t, s, lines...), &seen)
				if got := hrs(s, kept); got != tt.want[i] {
					t.Fatalf("firing %d: heart rates = %q; want %q", i, got, tt.want[i])
				}
			}
		})
	}
}

func TestPrepareGroupDuplicates(t *testing.T) {
	s := spectest.Must(t, "vitals")
	const h = 1772359200000
	a := readingtest.VitalsLine("s", h, 70)
	withNull := readingtest.VitalsLine("s", h, -1)
	tests := []struct {
		name    string
		lines   []string
		kept    int
		dropped int
		hrs     string
	}{
		{"exact duplicate", []string{a, a}, 1, 1, "70"},
		{"same ms, value wins over null", []string{withNull, a}, 1, 1, "70"},
		{"same ms, order independent", []string{a, withNull}, 1, 1, "70"},
		{"different ms kept", []string{a, readingtest.VitalsLine("s", h+1, 70)}, 2, 0, "70 70"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped := Prepare(s, readingtest.Parse(t, s, tt.lines...))
			if len(kept) != tt.kept || dropped != tt.dropped || hrs(s, kept) != tt.hrs {
				t.Fatalf("kept %d (%s), dropped %d; want %d (%s), %d", len(kept), hrs(s, kept), dropped, tt.kept, tt.hrs, tt.dropped)
			}
		})
	}
}

func TestReadingID(t *testing.T) {
	s := spectest.Must(t, "vitals")
	recs := readingtest.Parse(t, s, readingtest.VitalsLine("sensor-1", 1772359200000, 70))
	// hex(sha256("sensor-1|1772359200000")[:16]), computed independently
	// with Python's hashlib.
	const want = "3e1926762495cb49160eb170bf5a0a4a"
	if got := ReadingID(s, &recs[0]); got != want {
		t.Fatalf("ReadingID = %q; want %q", got, want)
	}
}
