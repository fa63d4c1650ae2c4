package parts

import (
	"cmp"
	"math"
	"slices"

	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/internal/lines"
)

// TableFile is a CSV, Parquet or Avro file as Tables cuts it: its blocks
// (fileio.Blocks: the Parquet row groups or Avro blocks its reader reads
// whole; none for a CSV, whose rows start at any line) and what a row of
// it weighs.
type TableFile struct {
	File
	Blocks []fileio.Block
	// RowBytes is the bytes a row weighs as the JSON object the run reads
	// it as (fileio.SampleRows), what a part's size counts.
	RowBytes float64
	// BytesPerRow is the file's bytes per row, for a file without blocks
	// (a CSV): its rows are counted from its bytes.
	BytesPerRow float64
	// SliceRows is set when a block can be read in slices of its rows
	// (a Parquet row group: fileio.FileRange.RowFrom, RowTo).
	SliceRows bool
}

// Tables cuts table files into parts of about target bytes each, counted
// as the JSON objects their rows are read as (a Parquet file's rows weigh
// many times its bytes). A part is a byte range of each file it reads:
// whole Parquet row groups and Avro blocks, and a CSV's rows that start in
// the range (its reader finds the line starts). A block heavier than
// target is a part of its own, or, when the file's blocks can be sliced
// (Parquet), parts of slices of its rows; a compressed file is one block. A file's
// first range starts at 0 and its last ends at its size, so that a part
// reads the file's header or footer once. With target <= 0, or files of at
// most target bytes, it returns one part of every file whole.
func Tables(files []TableFile, target int64) []Part {
	var total float64
	for _, f := range files {
		total += weight(f)
	}
	whole := []Part{{Bytes: int64(total), Rows: rowsOf(files)}}
	if target <= 0 || total <= float64(target) {
		return whole
	}
	var (
		out  []Part
		cur  Part
		load float64
	)
	flush := func() {
		if len(cur.Ranges) > 0 {
			cur.Bytes = int64(load)
			out = append(out, cur)
		}
		cur, load = Part{}, 0
	}
	// add puts bytes [start, end) of f, weighing w and holding rows, in
	// the current part, extending its range of f when it has one.
	add := func(f TableFile, start, end int64, w float64, rows int64) {
		if load > 0 && load+w > float64(target) {
			flush()
		}
		n := len(cur.Ranges)
		if n > 0 && cur.Ranges[n-1].Path == f.Path && cur.Ranges[n-1].End == start {
			cur.Ranges[n-1].End = end
		} else {
			cur.Ranges = append(cur.Ranges, fileio.FileRange{Path: f.Path, Start: start, End: end})
		}
		load += w
		cur.Rows += rows
	}
	for _, f := range files {
		size := max(f.Size, 1)
		switch {
		case f.Compressed() || (len(f.Blocks) == 0 && f.BytesPerRow <= 0):
			add(f, 0, size, weight(f), rowsOf([]TableFile{f}))
		case len(f.Blocks) > 0:
			for i, b := range f.Blocks {
				start, end := b.Offset, size
				if i == 0 {
					start = 0
				}
				if i+1 < len(f.Blocks) {
					end = f.Blocks[i+1].Offset
				}
				w := float64(b.Rows) * f.RowBytes
				if f.SliceRows && w > float64(target) && b.Rows > 1 {
					// Slices of about target each, a part each. Only
					// the first starts at the file's start (i == 0):
					// that part reports what is wrong with the file.
					flush()
					n := min(int64(math.Ceil(w/float64(target))), b.Rows)
					per := (b.Rows + n - 1) / n
					for from := int64(0); from < b.Rows; from += per {
						to := min(from+per, b.Rows)
						s := start
						if from > 0 {
							s = b.Offset
						}
						out = append(out, Part{Ranges: []fileio.FileRange{{Path: f.Path, Start: s, End: end, RowFrom: from, RowTo: to}},
							Bytes: int64(float64(to-from) * f.RowBytes), Rows: to - from})
					}
					continue
				}
				add(f, start, end, w, b.Rows)
			}
		default:
			// A CSV: pieces of the file's bytes that weigh about a tenth
			// of a part, so that parts come out close to target.
			step := max(int64(float64(target)/10/f.RowBytes*f.BytesPerRow), 1)
			for at := int64(0); at < size; at += step {
				end := min(at+step, size)
				rows := float64(end-at) / f.BytesPerRow
				add(f, at, end, rows*f.RowBytes, 0)
			}
		}
	}
	flush()
	if len(out) < 2 {
		return whole
	}
	return out
}

// weight is what a file's rows weigh as JSON objects.
func weight(f TableFile) float64 {
	if len(f.Blocks) > 0 {
		var rows int64
		for _, b := range f.Blocks {
			rows += b.Rows
		}
		return float64(rows) * f.RowBytes
	}
	if f.BytesPerRow > 0 {
		return float64(f.Size) / f.BytesPerRow * f.RowBytes
	}
	return float64(f.Size)
}

// rowsOf is the rows the files' blocks hold (CSV rows are not counted).
func rowsOf(files []TableFile) int64 {
	var n int64
	for _, f := range files {
		for _, b := range f.Blocks {
			n += b.Rows
		}
	}
	return n
}

// PartSpan is where one hour's readings lie in a Tables plan: the first
// and the last part that hold one.
type PartSpan struct {
	First, Last int
}

// TableShares splits what a Tables plan cannot hold in parts of about
// target bytes into shares of its identities, as Share does for JSON
// lines: each share reads the same rows and keeps the readings whose
// identity falls in it (the reader hashes each row's identities; no line
// index). Two cases need it:
//   - parts that an hour spans three or more of (spans, from the rows'
//     event times; a file of one hour, or shuffled rows): each later part
//     would read back and rewrite what the ones before stored of the hour,
//     so the run's time would grow with the square of the hour. Those
//     parts join into one, widened to whole Parquet row groups, and split
//     into shares. An hour across two parts is merged once, as before.
//   - a single part heavier than target (a block of its own, or a
//     compressed file, which is read whole).
//
// Each share keeps about target/ShareDivisor bytes of readings, and every
// identity's readings of the joined parts are in one share, so its hours
// are built exactly as in one job.
func TableShares(files []TableFile, plan []Part, spans map[int64]PartSpan, target int64) []Part {
	if target <= 0 || len(plan) == 0 {
		return plan
	}
	n := len(plan)
	type group struct{ first, last int }
	var groups []group
	for _, s := range spans {
		if s.First >= 0 && s.Last < n && s.Last-s.First >= 2 {
			groups = append(groups, group{s.First, s.Last})
		}
	}
	for i, p := range plan {
		if p.Bytes > target {
			groups = append(groups, group{i, i})
		}
	}
	if len(groups) == 0 {
		return plan
	}
	for i := range groups {
		g := &groups[i]
		for g.first > 0 && sameRowGroup(plan[g.first-1], plan[g.first]) {
			g.first--
		}
		for g.last+1 < n && sameRowGroup(plan[g.last], plan[g.last+1]) {
			g.last++
		}
	}
	slices.SortFunc(groups, func(a, b group) int { return cmp.Compare(a.first, b.first) })
	merged := groups[:1]
	for _, g := range groups[1:] {
		if m := &merged[len(merged)-1]; g.first <= m.last {
			m.last = max(m.last, g.last)
			continue
		}
		merged = append(merged, g)
	}
	size := max(target/ShareDivisor, 1)
	var out []Part
	next := 0
	for _, g := range merged {
		out = append(out, plan[next:g.first]...)
		joined := Part{}
		for _, p := range plan[g.first : g.last+1] {
			joined.Bytes += p.Bytes
			joined.Rows += p.Rows
			ranges := p.Ranges
			if len(ranges) == 0 {
				ranges = wholeRanges(files)
			}
			for _, r := range ranges {
				k := len(joined.Ranges)
				if k > 0 && joined.Ranges[k-1].Path == r.Path {
					joined.Ranges[k-1].Start = min(joined.Ranges[k-1].Start, r.Start)
					joined.Ranges[k-1].End = max(joined.Ranges[k-1].End, r.End)
					continue
				}
				joined.Ranges = append(joined.Ranges, fileio.FileRange{Path: r.Path, Start: r.Start, End: r.End})
			}
		}
		out = append(out, shareParts(joined, int(min((joined.Bytes+size-1)/size, lines.MaxShares)))...)
		next = g.last + 1
	}
	return append(out, plan[next:]...)
}

// shareParts is p as n shares of its identities, or p itself for n < 2.
func shareParts(p Part, n int) []Part {
	if n < 2 {
		return []Part{p}
	}
	out := make([]Part, n)
	for s := range n {
		out[s] = Part{Bytes: p.Bytes, Rows: p.Rows, Share: s, Shares: n}
		for _, r := range p.Ranges {
			r.Share, r.Shares = s, n
			out[s].Ranges = append(out[s].Ranges, r)
		}
	}
	return out
}

// sameRowGroup reports whether two parts are slices of one Parquet row
// group (Tables cuts a row group heavier than a part into slices).
func sameRowGroup(a, b Part) bool {
	if len(a.Ranges) != 1 || len(b.Ranges) != 1 {
		return false
	}
	x, y := a.Ranges[0], b.Ranges[0]
	return x.RowTo > 0 && y.RowTo > 0 && x.Path == y.Path && x.End == y.End && x.RowTo == y.RowFrom
}

// wholeRanges is every file whole, as ranges (a compressed file's range
// is its one unit).
func wholeRanges(files []TableFile) []fileio.FileRange {
	out := make([]fileio.FileRange, 0, len(files))
	for _, f := range files {
		out = append(out, fileio.FileRange{Path: f.Path, Start: 0, End: max(f.Size, 1)})
	}
	return out
}
