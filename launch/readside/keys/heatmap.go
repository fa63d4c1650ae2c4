package keys

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gomedium"
	"golang.org/x/image/font/gofont/gomono"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// Heatmap layout, in pixels.
const (
	margin      = 10
	plotW       = 720
	plotH       = 400
	maxRowH     = 48 // a tablet's row is at most this tall ...
	maxPlotH    = 1600
	scaleW      = 16 // the colour scale's bar
	tickW       = 4
	maxKeyChars = 40 // a tablet label shows at most this much of each key
)

// The typefaces: the Go fonts (golang.org/x/image/font/gofont), a real
// typeface with distinct M, W, H and #, and lower case kept as it is (row
// keys are case-sensitive). Proportional Go Regular for titles and axes,
// Go Mono for row keys so their characters line up. They are parsed once;
// x/image's opentype rasteriser draws them.
var (
	fontsOnce            sync.Once
	textFace, keyFace    font.Face
	titleFace            font.Face
	errFonts             error
	lineH, keyLineH      int
	textAscent, keyAscnt int
)

func loadFonts() error {
	fontsOnce.Do(func() {
		face := func(ttf []byte, size float64) font.Face {
			if errFonts != nil {
				return nil
			}
			f, err := opentype.Parse(ttf)
			if err != nil {
				errFonts = fmt.Errorf("parse the Go font: %w", err)
				return nil
			}
			fc, err := opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
			if err != nil {
				errFonts = fmt.Errorf("load the Go font: %w", err)
				return nil
			}
			return fc
		}
		textFace = face(goregular.TTF, 13)
		titleFace = face(gomedium.TTF, 15)
		keyFace = face(gomono.TTF, 12)
		if errFonts != nil {
			return
		}
		m := textFace.Metrics()
		lineH, textAscent = m.Height.Ceil(), m.Ascent.Ceil()
		km := keyFace.Metrics()
		keyLineH, keyAscnt = km.Height.Ceil(), km.Ascent.Ceil()
	})
	return errFonts
}

// label is a piece of text the heatmap draws: its top-left corner, its
// text exactly as drawn, and its face.
type label struct {
	X, Y int
	Text string
	Face font.Face
	// Kind says what it labels: "title", "summary", "tablet", "time",
	// "axis", "scale" or "scale-title".
	Kind string
}

// heatLayout is where everything of the heatmap goes.
type heatLayout struct {
	W, H         int
	Plot         image.Rectangle // the cells
	CellW, CellH int
	Scale        image.Rectangle // the colour scale's bar
	MaxWrites    int             // the writes the top of the scale stands for
	Labels       []label
}

var (
	bg        = color.RGBA{0x12, 0x12, 0x1a, 0xff}
	fg        = color.RGBA{0xe8, 0xe8, 0xe8, 0xff}
	gridColor = color.RGBA{0x30, 0x30, 0x3c, 0xff}
)

// heatStops is a Key Visualizer-like scale: dark for few writes, through
// violet and red to bright yellow for the most.
var heatStops = []color.RGBA{
	{0x00, 0x00, 0x00, 0xff},
	{0x2c, 0x0b, 0x6b, 0xff},
	{0xa0, 0x1a, 0x7d, 0xff},
	{0xec, 0x4e, 0x20, 0xff},
	{0xfa, 0xc2, 0x28, 0xff},
	{0xff, 0xff, 0xd0, 0xff},
}

// HeatColor maps x in [0, 1] onto the scale.
func HeatColor(x float64) color.RGBA {
	if x <= 0 {
		return heatStops[0]
	}
	if x >= 1 {
		return heatStops[len(heatStops)-1]
	}
	pos := x * float64(len(heatStops)-1)
	i := int(pos)
	f := pos - float64(i)
	a, b := heatStops[i], heatStops[i+1]
	mix := func(p, q uint8) uint8 { return uint8(float64(p) + f*(float64(q)-float64(p)) + 0.5) }
	return color.RGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 0xff}
}

// keyText shows a row key as it is, clipped to maxKeyChars characters:
// never upper-cased (keys are case-sensitive), with bytes that are not
// printable UTF-8 escaped as Go does.
func keyText(k string) string {
	q := strconv.Quote(k)
	q = q[1 : len(q)-1]
	if r := []rune(q); len(r) > maxKeyChars {
		q = string(r[:maxKeyChars-1]) + "…"
	}
	return q
}

// tabletLabel is tablet t's label: its index and key range [start, end).
func (r *Report) tabletLabel(t int) string {
	start, end := r.TabletRange(t)
	s, e := keyText(start), keyText(end)
	if start == "" {
		s = "(first key)"
	}
	if end == "" {
		e = "(last key)"
	}
	return fmt.Sprintf("t%-2d [%s, %s)", t, s, e)
}

// layout places the heatmap's cells, labels and colour scale.
func (r *Report) layout() (*heatLayout, error) {
	if err := loadFonts(); err != nil {
		return nil, err
	}
	slices := len(r.Counts)
	l := &heatLayout{}
	if slices == 0 || r.Tablets == 0 {
		l.W, l.H = 1, 1
		return l, nil
	}
	// Rows tall enough for a line of key text when they fit, so every
	// tablet's key range is readable; with very many tablets, every n-th.
	l.CellW = max(plotW/slices, 1)
	l.CellH = min(max(plotH/r.Tablets, 1), maxRowH)
	if l.CellH < keyLineH && r.Tablets*keyLineH <= maxPlotH {
		l.CellH = keyLineH
	}
	labelEvery := 1
	for labelEvery*l.CellH < keyLineH {
		labelEvery++
	}
	var tablets []label
	keyW := 0
	for t := 0; t < r.Tablets; t += labelEvery {
		text := r.tabletLabel(t)
		tablets = append(tablets, label{Text: text, Face: keyFace, Kind: "tablet", Y: t * l.CellH})
		keyW = max(keyW, font.MeasureString(keyFace, text).Ceil())
	}
	top := margin + 2*lineH + lineH/2
	left := margin + keyW + margin
	l.Plot = image.Rect(left, top, left+l.CellW*slices, top+l.CellH*r.Tablets)

	// The scale tops out at the busiest slice's total writes, what one
	// tablet gets when it takes them all, so pictures of the same data under
	// different keys share a scale.
	l.MaxWrites = 1
	for s := range r.Counts {
		l.MaxWrites = max(l.MaxWrites, r.Stat(s).Writes)
	}
	l.Scale = image.Rect(l.Plot.Max.X+2*margin, l.Plot.Min.Y, l.Plot.Max.X+2*margin+scaleW, l.Plot.Max.Y)
	scaleTitle := "writes per tablet"
	scaleTitle2 := "and time slice"
	ticks := scaleTicks(l.MaxWrites)
	tickLabelW := 0
	for _, v := range ticks {
		tickLabelW = max(tickLabelW, font.MeasureString(textFace, strconv.Itoa(v)).Ceil())
	}
	scaleTextW := max(tickW+4+tickLabelW, font.MeasureString(textFace, scaleTitle).Ceil(), font.MeasureString(textFace, scaleTitle2).Ceil())
	l.W = l.Scale.Max.X + scaleTextW + 2*margin
	l.H = l.Plot.Max.Y + tickW + 3*lineH + margin

	add := func(x, y int, text string, face font.Face, kind string) {
		l.Labels = append(l.Labels, label{X: x, Y: y, Text: text, Face: face, Kind: kind})
	}
	fair := r.FairShare()
	mean := r.MeanHottestShare()
	add(margin, margin, r.Title, titleFace, "title")
	add(margin, margin+lineH+2, fmt.Sprintf("hottest tablet: %.1f%% of writes on average (%.2f× the fair %.1f%%); %d writes, %d tablets, %d time slices",
		100*mean, mean/fair, 100*fair, r.Writes, r.Tablets, slices), textFace, "summary")
	for _, tl := range tablets {
		tl.X = margin
		tl.Y += l.Plot.Min.Y + (min(l.CellH*labelEvery, l.CellH)-keyLineH)/2
		l.Labels = append(l.Labels, tl)
	}
	// Time across the bottom: labels at slice starts, spaced to fit.
	span := time.Duration(r.SliceMs*int64(slices)) * time.Millisecond
	layout := "15:04"
	if span > 48*time.Hour {
		layout = "01-02"
	}
	timeW := font.MeasureString(textFace, "00:00").Ceil() + 8
	every := 1
	for every*l.CellW < timeW {
		every++
	}
	for s := 0; s < slices; s += every {
		add(l.Plot.Min.X+s*l.CellW, l.Plot.Max.Y+tickW+2, r.SliceStart(s).Format(layout), textFace, "time")
	}
	add(l.Plot.Min.X, l.Plot.Max.Y+tickW+2+lineH+2, "time (UTC, from "+r.SliceStart(0).Format("2006-01-02 15:04")+") →   key ranges, first key at the top ↓", textFace, "axis")
	// The colour scale: its title above it, tick values beside it.
	add(l.Scale.Min.X, l.Scale.Min.Y-2*lineH-lineH/2, scaleTitle, textFace, "scale-title")
	add(l.Scale.Min.X, l.Scale.Min.Y-lineH-lineH/2, scaleTitle2, textFace, "scale-title")
	for _, v := range ticks {
		y := l.Scale.Min.Y + scaleY(v, l.MaxWrites, l.Scale.Dy())
		add(l.Scale.Max.X+tickW+4, min(max(y-lineH/2, l.Scale.Min.Y-lineH/2), l.Scale.Max.Y-lineH/2), strconv.Itoa(v), textFace, "scale")
	}
	return l, nil
}

// scaleTicks are the values the colour scale labels: 0, the maximum, and
// the quarter points between (square-root spaced, as the colours are).
func scaleTicks(maxN int) []int {
	ticks := []int{maxN}
	for _, f := range []float64{0.5625, 0.25, 0.0625} { // (3/4)², (1/2)², (1/4)²
		if v := int(math.Round(f * float64(maxN))); v > 0 && v < ticks[len(ticks)-1] {
			ticks = append(ticks, v)
		}
	}
	return append(ticks, 0)
}

// scaleY is the offset from the scale's top of the value v: colour follows
// the square root of the count, and so does the scale.
func scaleY(v, maxN, h int) int {
	return int(math.Round((1 - math.Sqrt(float64(v)/float64(maxN))) * float64(h-1)))
}

// Image draws the heatmap in Key Visualizer's style: time across, key ranges
// (tablets, first key at the top, each labelled with its range) down, colour
// for the write count of each tablet and time slice, with axis labels and a
// labelled colour scale.
func (r *Report) Image() (*image.RGBA, error) {
	l, err := r.layout()
	if err != nil {
		return nil, err
	}
	img := image.NewRGBA(image.Rect(0, 0, l.W, l.H))
	fill(img, img.Bounds(), bg)
	if l.Plot.Empty() {
		return img, nil
	}
	// Colour follows the square root of the count, so an even spread
	// still shows.
	for s, row := range r.Counts {
		for t, n := range row {
			x0, y0 := l.Plot.Min.X+s*l.CellW, l.Plot.Min.Y+t*l.CellH
			fill(img, image.Rect(x0, y0, x0+l.CellW, y0+l.CellH), HeatColor(math.Sqrt(float64(n)/float64(l.MaxWrites))))
		}
	}
	// Thin lines between tablets when there is room for them.
	if l.CellH >= 6 {
		for t := 1; t < r.Tablets; t++ {
			y := l.Plot.Min.Y + t*l.CellH
			fill(img, image.Rect(l.Plot.Min.X, y, l.Plot.Max.X, y+1), gridColor)
		}
	}
	// Ticks under the time labels, and the colour scale with its ticks.
	for _, lb := range l.Labels {
		if lb.Kind == "time" {
			fill(img, image.Rect(lb.X, l.Plot.Max.Y, lb.X+1, l.Plot.Max.Y+tickW), fg)
		}
	}
	for y := 0; y < l.Scale.Dy(); y++ {
		fill(img, image.Rect(l.Scale.Min.X, l.Scale.Min.Y+y, l.Scale.Max.X, l.Scale.Min.Y+y+1),
			HeatColor(1-float64(y)/float64(l.Scale.Dy()-1)))
	}
	for _, v := range scaleTicks(l.MaxWrites) {
		y := l.Scale.Min.Y + scaleY(v, l.MaxWrites, l.Scale.Dy())
		fill(img, image.Rect(l.Scale.Max.X, y, l.Scale.Max.X+tickW, y+1), fg)
	}
	for _, lb := range l.Labels {
		drawText(img, lb)
	}
	return img, nil
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// drawText draws a label with its face, its top at lb.Y.
func drawText(img *image.RGBA, lb label) {
	ascent := textAscent
	if lb.Face == keyFace {
		ascent = keyAscnt
	}
	if lb.Face == titleFace {
		ascent = titleFace.Metrics().Ascent.Ceil()
	}
	d := font.Drawer{Dst: img, Src: image.NewUniform(fg), Face: lb.Face, Dot: fixed.P(lb.X, lb.Y+ascent)}
	d.DrawString(lb.Text)
}

// WritePNG encodes the heatmap as PNG.
func (r *Report) WritePNG(w io.Writer) error {
	img, err := r.Image()
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}

// WritePNGFile writes the heatmap to a PNG file.
func (r *Report) WritePNGFile(path string) error {
	var buf bytes.Buffer
	if err := r.WritePNG(&buf); err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

var htmlPage = template.Must(template.New("hotspots").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>hot spots: {{.Title}}</title>
<style>body{font-family:sans-serif;background:#fafafa;color:#222}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}code{background:#eee;padding:1px 3px}</style></head>
<body>
<h1>Write hot spots</h1>
<p>Key template: <code>{{.Title}}</code></p>
<p>{{.Writes}} writes played in event-time order over {{.Tablets}} tablets split at equal key counts.
The hottest tablet takes <b>{{printf "%.1f" .Mean}}%</b> of each time slice's writes on average,
<b>{{printf "%.2f" .Ratio}}x</b> the fair share of {{printf "%.1f" .Fair}}%.</p>
<p>Time runs across, key ranges (tablets) down, and colour is the write count (dark: few, bright: many), as in Key Visualizer.</p>
<img alt="hot-spot heatmap" src="data:image/png;base64,{{.PNG}}">
<h2>Tablets</h2>
<table><tr><th>tablet</th><th>start key</th><th>end key</th><th>writes</th></tr>
{{range .TabletRows}}<tr><td>t{{.T}}</td><td><code>{{.Start}}</code></td><td><code>{{.End}}</code></td><td>{{.Writes}}</td></tr>
{{end}}</table>
<h2>Time slices</h2>
<table><tr><th>slice</th><th>start (UTC)</th><th>writes</th><th>hottest</th><th>share</th><th>x fair</th></tr>
{{range .SliceRows}}<tr><td>{{.S}}</td><td>{{.Start}}</td><td>{{.Writes}}</td><td>t{{.Hottest}}</td><td>{{printf "%.1f" .Share}}%</td><td>{{printf "%.2f" .Ratio}}</td></tr>
{{end}}</table>
</body></html>
`))

// WriteHTML writes an HTML page that embeds the heatmap and tabulates the
// tablets and time slices.
func (r *Report) WriteHTML(w io.Writer) error {
	var pngBuf bytes.Buffer
	if err := r.WritePNG(&pngBuf); err != nil {
		return err
	}
	type tabletRow struct {
		T          int
		Start, End string
		Writes     int
	}
	type sliceRow struct {
		S, Writes, Hottest int
		Start              string
		Share, Ratio       float64
	}
	fair := r.FairShare()
	var trows []tabletRow
	for t := 0; t < r.Tablets; t++ {
		s, e := r.TabletRange(t)
		n := 0
		for _, row := range r.Counts {
			n += row[t]
		}
		trows = append(trows, tabletRow{T: t, Start: s, End: e, Writes: n})
	}
	var srows []sliceRow
	for s := range r.Counts {
		st := r.Stat(s)
		srows = append(srows, sliceRow{S: s, Writes: st.Writes, Hottest: st.Hottest, Start: r.SliceStart(s).Format(time.RFC3339), Share: 100 * st.Share, Ratio: st.Share / fair})
	}
	mean := r.MeanHottestShare()
	return htmlPage.Execute(w, map[string]any{
		"Title": r.Title, "Writes": r.Writes, "Tablets": r.Tablets,
		"Mean": 100 * mean, "Ratio": mean / fair, "Fair": 100 * fair,
		"PNG":        base64.StdEncoding.EncodeToString(pngBuf.Bytes()),
		"TabletRows": trows, "SliceRows": srows,
	})
}

// WriteHTMLFile writes the HTML page to a file.
func (r *Report) WriteHTMLFile(path string) error {
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf); err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
