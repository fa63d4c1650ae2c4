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
	"strings"
	"time"
)

// Heatmap layout, in pixels.
const (
	fontScale   = 2
	glyphW      = 3 * fontScale
	glyphH      = 5 * fontScale
	charW       = glyphW + fontScale // glyph and one (scaled) column of space
	marginTop   = 44
	marginLeft  = 8 + 26*charW // "t12 " and a key prefix
	marginRight = 90           // the colour scale
	marginBot   = 50
	plotW       = 720
	plotH       = 400
)

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

// Image draws the heatmap in Key Visualizer's style: time across, key ranges
// (tablets, first key at the top) down, colour for the write count of each
// tablet and time slice, with axis labels and a colour scale.
func (r *Report) Image() *image.RGBA {
	slices := len(r.Counts)
	if slices == 0 || r.Tablets == 0 {
		return image.NewRGBA(image.Rect(0, 0, 1, 1))
	}
	cw, ch := plotW/slices, plotH/r.Tablets
	if cw < 1 {
		cw = 1
	}
	if ch < 1 {
		ch = 1
	}
	w, h := marginLeft+cw*slices+marginRight, marginTop+ch*r.Tablets+marginBot
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(img, img.Bounds(), bg)
	// The scale tops out at the busiest slice's total writes, what one
	// tablet gets when it takes them all, so pictures of the same data under
	// different keys share a scale. Colour follows the square root of the
	// count, so an even spread still shows.
	maxN := 1
	for s := range r.Counts {
		if n := r.Stat(s).Writes; n > maxN {
			maxN = n
		}
	}
	for s, row := range r.Counts {
		for t, n := range row {
			x0, y0 := marginLeft+s*cw, marginTop+t*ch
			fill(img, image.Rect(x0, y0, x0+cw, y0+ch), HeatColor(math.Sqrt(float64(n)/float64(maxN))))
		}
	}
	// Thin lines between tablets when there is room for them.
	if ch >= 6 {
		for t := 1; t < r.Tablets; t++ {
			y := marginTop + t*ch
			fill(img, image.Rect(marginLeft, y, marginLeft+cw*slices, y+1), gridColor)
		}
	}
	drawText(img, 8, 8, clip(r.Title, (w-16)/charW), fg)
	fair := r.FairShare()
	mean := r.MeanHottestShare()
	drawText(img, 8, 24, fmt.Sprintf("HOTTEST TABLET %.1f%% OF WRITES (%.2fX FAIR %.1f%%), %d WRITES", 100*mean, mean/fair, 100*fair, r.Writes), fg)
	// Key ranges down the left: the tablet and the first key it holds.
	step := 1
	for step*ch < glyphH+2 {
		step++
	}
	for t := 0; t < r.Tablets; t += step {
		start, _ := r.TabletRange(t)
		if start == "" {
			start = "(START)"
		}
		label := fmt.Sprintf("T%-2d %s", t, start)
		drawText(img, 8, marginTop+t*ch+(ch-glyphH)/2, clip(label, 26), fg)
	}
	// Time across the bottom: a few labels at slice starts.
	labelEvery := 1
	for labelEvery*cw < 6*charW {
		labelEvery++
	}
	span := time.Duration(r.SliceMs*int64(slices)) * time.Millisecond
	layout := "15:04"
	if span > 48*time.Hour {
		layout = "01-02"
	}
	for s := 0; s < slices; s += labelEvery {
		x := marginLeft + s*cw
		fill(img, image.Rect(x, marginTop+ch*r.Tablets, x+1, marginTop+ch*r.Tablets+4), fg)
		drawText(img, x, marginTop+ch*r.Tablets+8, r.SliceStart(s).Format(layout), fg)
	}
	drawText(img, marginLeft, h-glyphH-6, "TIME (UTC, FROM "+r.SliceStart(0).Format("2006-01-02 15:04")+") -> ; KEY RANGES DOWN", fg)
	// Colour scale on the right, most writes at the top.
	sx, sy, sh := marginLeft+cw*slices+16, marginTop, ch*r.Tablets
	for y := 0; y < sh; y++ {
		fill(img, image.Rect(sx, sy+y, sx+14, sy+y+1), HeatColor(math.Sqrt(1-float64(y)/float64(sh))))
	}
	drawText(img, sx+18, sy, fmt.Sprint(maxN), fg)
	drawText(img, sx+18, sy+sh/2-glyphH/2, fmt.Sprint(maxN/2), fg)
	drawText(img, sx+18, sy+sh-glyphH, "0", fg)
	drawText(img, sx, sy+sh+8, "WRITES", fg)
	return img
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 3 {
		return s[:n]
	}
	return s[:n-2] + ".."
}

// drawText draws s with the built-in 3x5 font, scaled; lower case is drawn
// as upper case and unknown characters as '?'.
func drawText(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, ch := range strings.ToUpper(s) {
		g, ok := font3x5[ch]
		if !ok {
			g = font3x5['?']
		}
		for row := 0; row < 5; row++ {
			for col := 0; col < 3; col++ {
				if g[row][col] == '#' {
					fill(img, image.Rect(x+col*fontScale, y+row*fontScale, x+(col+1)*fontScale, y+(row+1)*fontScale), c)
				}
			}
		}
		x += charW
	}
}

// WritePNG encodes the heatmap as PNG.
func (r *Report) WritePNG(w io.Writer) error { return png.Encode(w, r.Image()) }

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

// font3x5 is a tiny built-in bitmap font: five rows of three columns.
var font3x5 = map[rune][5]string{
	'A': {".#.", "#.#", "###", "#.#", "#.#"}, 'B': {"##.", "#.#", "##.", "#.#", "##."},
	'C': {".##", "#..", "#..", "#..", ".##"}, 'D': {"##.", "#.#", "#.#", "#.#", "##."},
	'E': {"###", "#..", "##.", "#..", "###"}, 'F': {"###", "#..", "##.", "#..", "#.."},
	'G': {".##", "#..", "#.#", "#.#", ".##"}, 'H': {"#.#", "#.#", "###", "#.#", "#.#"},
	'I': {"###", ".#.", ".#.", ".#.", "###"}, 'J': {"..#", "..#", "..#", "#.#", ".#."},
	'K': {"#.#", "#.#", "##.", "#.#", "#.#"}, 'L': {"#..", "#..", "#..", "#..", "###"},
	'M': {"#.#", "###", "###", "#.#", "#.#"}, 'N': {"##.", "#.#", "#.#", "#.#", "#.#"},
	'O': {".#.", "#.#", "#.#", "#.#", ".#."}, 'P': {"##.", "#.#", "##.", "#..", "#.."},
	'Q': {".#.", "#.#", "#.#", "##.", ".##"}, 'R': {"##.", "#.#", "##.", "#.#", "#.#"},
	'S': {".##", "#..", ".#.", "..#", "##."}, 'T': {"###", ".#.", ".#.", ".#.", ".#."},
	'U': {"#.#", "#.#", "#.#", "#.#", "###"}, 'V': {"#.#", "#.#", "#.#", "#.#", ".#."},
	'W': {"#.#", "#.#", "###", "###", "#.#"}, 'X': {"#.#", "#.#", ".#.", "#.#", "#.#"},
	'Y': {"#.#", "#.#", ".#.", ".#.", ".#."}, 'Z': {"###", "..#", ".#.", "#..", "###"},
	'0': {"###", "#.#", "#.#", "#.#", "###"}, '1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"##.", "..#", ".#.", "#..", "###"}, '3': {"##.", "..#", ".#.", "..#", "##."},
	'4': {"#.#", "#.#", "###", "..#", "..#"}, '5': {"###", "#..", "##.", "..#", "##."},
	'6': {".##", "#..", "###", "#.#", "###"}, '7': {"###", "..#", ".#.", ".#.", ".#."},
	'8': {"###", "#.#", "###", "#.#", "###"}, '9': {"###", "#.#", "###", "..#", "##."},
	' ': {"...", "...", "...", "...", "..."}, ':': {"...", ".#.", "...", ".#.", "..."},
	'-': {"...", "...", "###", "...", "..."}, '.': {"...", "...", "...", "...", ".#."},
	'%': {"#.#", "..#", ".#.", "#..", "#.#"}, '#': {"#.#", "###", "#.#", "###", "#.#"},
	'{': {".##", ".#.", "#..", ".#.", ".##"}, '}': {"##.", ".#.", "..#", ".#.", "##."},
	'|': {".#.", ".#.", ".#.", ".#.", ".#."}, '_': {"...", "...", "...", "...", "###"},
	'/': {"..#", "..#", ".#.", "#..", "#.."}, '(': {"..#", ".#.", ".#.", ".#.", "..#"},
	')': {"#..", ".#.", ".#.", ".#.", "#.."}, '=': {"...", "###", "...", "###", "..."},
	',': {"...", "...", "...", ".#.", "#.."}, '+': {"...", ".#.", "###", ".#.", "..."},
	'>': {"#..", ".#.", "..#", ".#.", "#.."}, '<': {"..#", ".#.", "#..", ".#.", "..#"},
	';': {"...", ".#.", "...", ".#.", "#.."}, '?': {"##.", "..#", ".#.", "...", ".#."},
	'"': {"#.#", "#.#", "...", "...", "..."}, '\'': {".#.", ".#.", "...", "...", "..."},
	'$': {".##", "##.", ".#.", ".##", "##."}, '*': {"...", "#.#", ".#.", "#.#", "..."},
}
