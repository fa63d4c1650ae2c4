package keys

import (
	"bytes"
	"encoding/json"
	"flag"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/image/font"

	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden previews in testdata/golden")

var root = filepath.Join("..", "..", "..")

// TestPreviewGolden previews every built-in spec's sample input and
// compares the output with testdata/golden/<spec>.preview.jsonl. It also
// checks that every table of the spec gets rows: the fan-out works.
func TestPreviewGolden(t *testing.T) {
	for _, name := range schemas.BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			spec, err := schemas.BuiltinSpec(name)
			if err != nil {
				t.Fatal(err)
			}
			in, err := os.Open(filepath.Join(root, "testdata", "samples", name+".jsonl"))
			if err != nil {
				t.Fatalf("every built-in spec needs a sample input: %v", err)
			}
			defer in.Close()
			var out bytes.Buffer
			rows, rejects, err := Preview(spec, in, &out)
			if err != nil {
				t.Fatal(err)
			}
			if rows == 0 || rejects == 0 {
				t.Errorf("rows = %d, rejects = %d; the sample should show both", rows, rejects)
			}
			tables := map[string]bool{}
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var r struct {
					Table  string `json:"table"`
					Reason string `json:"reason"`
				}
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				if r.Table != "" {
					tables[r.Table] = true
				}
			}
			for _, ts := range spec.Bigtable.Tables {
				if !tables[ts.Name] {
					t.Errorf("table %s got no rows", ts.Name)
				}
			}
			golden := filepath.Join(root, "testdata", "golden", name+".preview.jsonl")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./launch/readside/keys -update)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("preview differs from %s (run with -update if intended):\n%s", golden, firstDiff(out.String(), string(want)))
			}
		})
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n got " + a + "\nwant " + b
		}
	}
	return ""
}

func TestPreviewLines(t *testing.T) {
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"sensor_id":"s1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
		`{"sensor_id":"s1","timestamp":"2026-03-01T10:16:30.250Z","heart_rate":null,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
		`{"sensor_id":"a#b","timestamp":"2026-03-01T10:15:30.250Z","body_temperature":36.8,"spO2":98,"battery_level":87}`,
		`{"sensor_id":"s1","timestamp":"2026-03-01T10:15:30.250Z","heart_rate":72,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
	}, "\n")
	var out bytes.Buffer
	if _, _, err := Preview(spec, strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want one per record:\n%s", len(lines), out.String())
	}
	var first PreviewRow
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Table != "patient_vitals" || first.RowKey != "s1#2026-03-01T10" || len(first.Cells) != 5 {
		t.Errorf("first = %+v", first)
	}
	if c := first.Cells[0]; c.Family != "vitals" || c.Qualifier != "heart_rate" || c.TimestampMicros != 1772360130250000 || c.Value == nil || *c.Value != "72" {
		t.Errorf("first cell = %+v", c)
	}
	// The second reading's heart rate is imputed from the first, as the
	// pipeline does within an identity and hour.
	if !strings.Contains(lines[1], `"qualifier":"heart_rate","timestamp_micros":1772360190250000,"value":"72"`) ||
		!strings.Contains(lines[1], `"qualifier":"heart_rate_imputed","timestamp_micros":1772360190250000,"value":"true"`) {
		t.Errorf("second line does not carry the imputed heart rate: %s", lines[1])
	}
	var rej PreviewReject
	if err := json.Unmarshal([]byte(lines[2]), &rej); err != nil || rej.Reason != "invalid_field" || !strings.Contains(rej.Error, "delimiter") {
		t.Errorf("third line = %s, want an invalid_field reject", lines[2])
	}
	if err := json.Unmarshal([]byte(lines[3]), &rej); err != nil || rej.Reason != ReasonDuplicate {
		t.Errorf("fourth line = %s, want a duplicate", lines[3])
	}
}

func simulateFleet(t *testing.T, specPath string) *Report {
	t.Helper()
	spec, err := cli.LoadSpec(specPath) // a built-in name or a YAML file
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "testdata", "samples", "vitals_fleet.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writes, rejected, err := ReadWrites(spec, "", f)
	if err != nil {
		t.Fatal(err)
	}
	if rejected != 0 || len(writes) != 3456 {
		t.Fatalf("writes = %d, rejected = %d; want 3456, 0", len(writes), rejected)
	}
	for i := 1; i < len(writes); i++ {
		if writes[i].EventMs < writes[i-1].EventMs {
			t.Fatal("writes are not in event-time order")
		}
	}
	return Simulate(writes, 8, 24)
}

// TestHotspotsTimestampFirstVersusVitalsKey plays the same fleet of 48
// sensors over 12 hours under a timestamp-first key and under the vitals
// key: the first sends every slice's writes to one tablet, the second
// spreads them evenly.
func TestHotspotsTimestampFirstVersusVitalsKey(t *testing.T) {
	tsFirst := simulateFleet(t, filepath.Join(root, "testdata", "specs", "timestamp-first.yaml"))
	vitals := simulateFleet(t, "vitals")
	if got := tsFirst.MeanHottestShare(); got < 0.9 {
		t.Errorf("timestamp-first: hottest tablet share %.2f, want > 0.9 (one tablet takes each slice)", got)
	}
	if got := vitals.MeanHottestShare(); got > 0.2 {
		t.Errorf("vitals: hottest tablet share %.2f, want near the fair 0.125", got)
	}
	for s := range vitals.Counts {
		if st := vitals.Stat(s); st.Active != 8 {
			t.Errorf("vitals slice %d: %d tablets active, want all 8", s, st.Active)
		}
		if st := tsFirst.Stat(s); st.Active > 2 {
			t.Errorf("timestamp-first slice %d: %d tablets active, want 1 or 2", s, st.Active)
		}
	}
}

func TestSplitPointsEqualKeyCounts(t *testing.T) {
	var writes []Write
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "a", "a"} {
		writes = append(writes, Write{RowKey: k})
	}
	splits := SplitPoints(writes, 4)
	if got := strings.Join(splits, ","); got != "c,e,g" {
		t.Errorf("splits = %s, want c,e,g (two distinct keys per tablet)", got)
	}
	r := &Report{Splits: splits}
	for key, want := range map[string]int{"a": 0, "b": 0, "c": 1, "d": 1, "g": 3, "zz": 3, "": 0} {
		if got := r.Tablet(key); got != want {
			t.Errorf("Tablet(%q) = %d, want %d", key, got, want)
		}
	}
	// Fewer distinct keys than tablets still gives increasing splits.
	few := SplitPoints([]Write{{RowKey: "x"}}, 3)
	if len(few) != 2 || !(few[0] < few[1]) {
		t.Errorf("splits = %q, want two increasing keys", few)
	}
}

func TestHeatmapOutputs(t *testing.T) {
	r := simulateFleet(t, "vitals")
	r.Title = "vitals: {sensor_id}#{timestamp|hour}"
	var pngBuf bytes.Buffer
	if err := r.WritePNG(&pngBuf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&pngBuf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < plotW || b.Dy() < plotH {
		t.Errorf("image is %v, want at least %dx%d", b, plotW, plotH)
	}
	// The top-left cell of the plot has the colour of its write count.
	n := r.Counts[0][0]
	maxN := 0
	for s := range r.Counts {
		maxN = max(maxN, r.Stat(s).Writes)
	}
	l, err := r.layout()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := img.At(l.Plot.Min.X+1, l.Plot.Min.Y+1), HeatColor(math.Sqrt(float64(n)/float64(maxN))); got != want {
		t.Errorf("top-left cell colour = %v, want %v for %d of %d writes", got, want, n, maxN)
	}
	var html bytes.Buffer
	if err := r.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"data:image/png;base64,", "{sensor_id}#{timestamp|hour}", "<td>t7</td>"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "summary: hottest tablet takes 12.5%") {
		t.Errorf("text report lacks the summary:\n%s", text.String())
	}
}

func TestHeatColorScale(t *testing.T) {
	if HeatColor(0) != heatStops[0] || HeatColor(1) != heatStops[len(heatStops)-1] {
		t.Error("scale ends are not the first and last colour stops")
	}
	lum := func(x float64) int { c := HeatColor(x); return int(c.R) + int(c.G) + int(c.B) }
	for x := 0.1; x <= 1; x += 0.1 {
		if lum(x) < lum(x-0.1) {
			t.Errorf("scale gets darker between %.1f and %.1f", x-0.1, x)
		}
	}
}

// TestHeatmapDrawsKeysAsTheyAreInARealTypeface: the PNG decodes at the
// layout's size; every tablet is labelled with its key range, the keys
// case-preserved (row keys are case-sensitive); each label is drawn with a
// Go font (its pixels differ from the background where the text is, and
// "M" and "W" rasterise differently); and the colour scale has a title and
// its ends labelled.
func TestHeatmapDrawsKeysAsTheyAreInARealTypeface(t *testing.T) {
	r := &Report{
		Title:   "mixed: {user}#{ts}",
		Tablets: 3,
		Splits:  []string{"Mw#H-1", "aB#c"},
		StartMs: 1772359200000,
		SliceMs: 60_000,
		Counts:  [][]int{{5, 1, 0}, {0, 7, 2}},
		Writes:  15,
	}
	l, err := r.layout()
	if err != nil {
		t.Fatal(err)
	}
	var tablets []string
	kinds := map[string][]string{}
	for _, lb := range l.Labels {
		kinds[lb.Kind] = append(kinds[lb.Kind], lb.Text)
		if lb.Kind == "tablet" {
			tablets = append(tablets, lb.Text)
			if lb.Face != keyFace {
				t.Errorf("tablet label %q is not drawn with Go Mono", lb.Text)
			}
		}
	}
	want := []string{"t0  [(first key), Mw#H-1)", "t1  [Mw#H-1, aB#c)", "t2  [aB#c, (last key))"}
	if strings.Join(tablets, "|") != strings.Join(want, "|") {
		t.Errorf("tablet labels = %q, want %q (keys as they are)", tablets, want)
	}
	if got := kinds["scale-title"]; len(got) == 0 || !strings.Contains(strings.Join(got, " "), "writes") {
		t.Errorf("colour scale titles = %q, want one saying writes", got)
	}
	if got := kinds["scale"]; len(got) < 2 || got[0] != "9" || got[len(got)-1] != "0" {
		t.Errorf("colour scale ticks = %q, want the busiest slice's writes (9) down to 0", got)
	}

	var buf bytes.Buffer
	if err := r.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != l.W || b.Dy() != l.H {
		t.Errorf("image is %dx%d, want the layout's %dx%d", b.Dx(), b.Dy(), l.W, l.H)
	}
	for _, lb := range l.Labels {
		if lb.Kind != "tablet" {
			continue
		}
		box := image.Rect(lb.X, lb.Y, lb.X+font.MeasureString(lb.Face, lb.Text).Ceil(), lb.Y+lb.Face.Metrics().Height.Ceil())
		if lit := litPixels(img, box); lit < len(lb.Text) {
			t.Errorf("label %q: %d lit pixels in %v, want its glyphs drawn", lb.Text, lit, box)
		}
	}
	// A real typeface: M and W are different glyphs (the old 3x5 font drew
	// them nearly alike), and lower case is not upper case.
	glyph := func(s string) string {
		m := image.NewRGBA(image.Rect(0, 0, 20, 20))
		fill(m, m.Bounds(), bg)
		drawText(m, label{X: 2, Y: 2, Text: s, Face: keyFace})
		var b strings.Builder
		for y := 0; y < 20; y++ {
			for x := 0; x < 20; x++ {
				if m.RGBAAt(x, y) != bg {
					b.WriteByte('#')
				} else {
					b.WriteByte('.')
				}
			}
		}
		return b.String()
	}
	if glyph("M") == glyph("W") || glyph("a") == glyph("A") || glyph("H") == glyph("#") {
		t.Errorf("M/W, a/A or H/# rasterise alike: not a real typeface")
	}
}

// litPixels counts the pixels of box that are not the background.
func litPixels(img image.Image, box image.Rectangle) int {
	n := 0
	for y := box.Min.Y; y < box.Max.Y; y++ {
		for x := box.Min.X; x < box.Max.X; x++ {
			if r, g, b, _ := img.At(x, y).RGBA(); r>>8 != uint32(bg.R) || g>>8 != uint32(bg.G) || b>>8 != uint32(bg.B) {
				n++
			}
		}
	}
	return n
}
