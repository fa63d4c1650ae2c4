// Package parts cuts a local batch's input into parts, so that a local run
// can write one part after another and hold in memory only the part in
// flight, not the whole input.
//
// Why: a batch reads its files as one bounded source, so the runner's
// hourly GroupByKey holds every reading until the whole input is read, and
// prism (the local runner) keeps several copies of it: run as one job, a
// batch's memory grows with its whole input (figures in
// docs/performance.md, "Memory and CPU per reading").
//
// The batch builds each identity's hour from all its readings and from
// nothing else (the duplicates, the imputation and the rollup depend on
// every one of them), so a part must hold all of an identity-hour's
// readings. Two cuts keep that:
//   - between hours: a part may end only where no hour read before it has a
//     reading after it. Scan finds those places with one pass over the
//     input (a parse per line, two offsets kept per hour), and Plan cuts
//     there into parts no larger than asked where the hours allow. Input in
//     rough event-time order, as historical exports are, has such a place
//     at almost every hour.
//   - between identities: a part still larger (one hour holding more than
//     asked, or shuffled input, whose hours overlap throughout) splits into
//     shares of its identities (Share). The same scan writes each file's
//     line index (internal/lines): one hash byte of each line's identity;
//     each share reads the part's bytes and keeps the lines whose byte falls
//     in it.
//
// The result is exactly the one-job batch's: every identity-hour is built
// once, from all its readings, in the part that holds them. Dataflow runs
// the input as one job (its shuffle holds the groups off the workers).
package parts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/lines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// File is one input file, in the run's order.
type File struct {
	Path string
	Size int64
}

// Compressed reports whether the run reads the file as one unit: a part
// then holds all of it or none.
func (f File) Compressed() bool { return fileio.Compressed(f.Path) }

// Span is where one hour's readings lie in the input: the offsets of the
// first and the last line holding one, counted through the files in order
// as if they were one (a compressed file's lines are all at its start).
type Span struct {
	First, Last int64
}

// Part is one run's share of the input.
type Part struct {
	// Ranges are the byte ranges of the files to read (lines that start in
	// them); empty means every file whole.
	Ranges []fileio.FileRange
	// Bytes is the part's size in the input: the bytes it reads.
	Bytes int64
	// Share and Shares, when Shares > 1, say that the part writes only
	// the readings of share Share of its bytes' identities (see Share).
	Share, Shares int
	// Keys, for a part of a stored Bigtable table (Keys), is the key
	// range it reads; the zero range is the whole table.
	Keys bigtableio.KeyRange
	// FromMs and ToMs, for a part of a BigQuery table (Hours), bound the
	// event times it reads to [FromMs, ToMs) (0: no bound).
	FromMs, ToMs int64
	// Rows is the rows it reads, where they are known (a table file's
	// part); 0 where not.
	Rows int64
}

// List returns the files glob matches, sorted by path.
func List(ctx context.Context, glob string) ([]File, error) {
	fs, err := filesystem.New(ctx, glob)
	if err != nil {
		return nil, fmt.Errorf("--input %s: %w", glob, err)
	}
	defer fs.Close()
	paths, err := fs.List(ctx, glob)
	if err != nil {
		return nil, fmt.Errorf("--input %s: %w", glob, err)
	}
	slices.Sort(paths)
	files := make([]File, 0, len(paths))
	for _, p := range paths {
		if fileio.IsDir(p) {
			continue // the readers skip folders (fileio.IsDir)
		}
		size, err := fs.Size(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("--input %s: size of %s: %w", glob, p, err)
		}
		files = append(files, File{Path: p, Size: size})
	}
	return files, nil
}

// Total is the files' size in bytes.
func Total(files []File) int64 {
	var n int64
	for _, f := range files {
		n += f.Size
	}
	return n
}

// Scanned is what Scan found in the input.
type Scanned struct {
	// Spans is each hour's span, keyed by the hour's start (epoch ms).
	Spans map[int64]Span
	// Index is each file's line index (internal/lines), by path: each
	// line's identity hash byte (lines.IdentityHash of its first reading's
	// identity; 0 for a line with no reading). Set when ScanOptions has
	// an IndexDir.
	Index map[string]string
	// Mixed is true when a line holds readings of identities with
	// different hash bytes: the input then cannot be split into shares of
	// its identities (Share).
	Mixed bool
}

// ScanOptions are Scan's settings.
type ScanOptions struct {
	// MaxLine is the run's line limit: a longer line has no reading.
	MaxLine int
	// IndexDir, when set, is the folder Scan writes the files' line
	// indexes to.
	IndexDir string
	// Progress, when not nil and Every > 0, is called with the bytes read
	// so far about every Every.
	Progress func(read int64)
	Every    time.Duration
}

// Scan reads every line of files in order, as the batch reads them (the
// same line ends, byte-order mark and line limit), parses it with the
// spec's decoder, and returns the span of each hour that a reading falls in
// and, with opts.IndexDir, each line's identity hash. Lines that do not
// parse have no hour: the run dead-letters them wherever they fall.
func Scan(ctx context.Context, files []File, spec *hours.Compiled, opts ScanOptions) (Scanned, error) {
	sc := Scanned{Spans: map[int64]Span{}}
	dec := spec.Decoder()
	var (
		base int64
		recs []schemas.Record
	)
	last := time.Now()
	for i, f := range files {
		var index *lines.IndexWriter
		if opts.IndexDir != "" {
			path := filepath.Join(opts.IndexDir, fmt.Sprintf("%d.index", i))
			var err error
			if index, err = lines.CreateIndex(path); err != nil {
				return Scanned{}, err
			}
			if sc.Index == nil {
				sc.Index = map[string]string{}
			}
			sc.Index[f.Path] = path
		}
		var werr error
		err := scanFile(ctx, f, opts.MaxLine, func(off, size int64, line string, whole bool) {
			pos := base + off
			if f.Compressed() {
				pos = base
			}
			recs = recs[:0]
			if whole {
				// A line that does not parse, or makes the decoder panic,
				// has no reading: the run dead-letters it as ParseFn does.
				var err error
				if perr := ledger.Guard(func() { recs, err = dec.ParseString(recs, line, f.Path) }); perr != nil || err != nil {
					recs = recs[:0]
				}
			}
			var h byte
			for i := range recs {
				hs := hours.WindowStart(recs[i].EventMs, time.Hour)
				s, ok := sc.Spans[hs]
				if !ok {
					s.First = pos
				}
				s.Last = pos
				sc.Spans[hs] = s
				if index == nil {
					continue
				}
				b := lines.IdentityHash(group.IdentityKey(spec.Spec, &recs[i]))
				if i == 0 {
					h = b
				} else if b != h {
					sc.Mixed = true
				}
			}
			if index != nil && werr == nil {
				werr = index.Add(size, h)
			}
			if opts.Progress != nil && opts.Every > 0 && time.Since(last) > opts.Every {
				last = time.Now()
				opts.Progress(base + off)
			}
		})
		if index != nil {
			if cerr := index.Close(); werr == nil {
				werr = cerr
			}
		}
		if err == nil {
			err = werr
		}
		if err != nil {
			return Scanned{}, err
		}
		base += f.Size
	}
	return sc, nil
}

// scanFile calls fn with the offset (in the file, decompressed) and size of
// each line of f, the line, and whether it is whole: not over maxLine bytes
// (a longer one is cut there).
func scanFile(ctx context.Context, f File, maxLine int, fn func(off, size int64, line string, whole bool)) error {
	rd, err := fileio.OpenInput(ctx, f.Path)
	if err != nil {
		return fmt.Errorf("read %s: %w", f.Path, err)
	}
	defer rd.Close()
	lr := lines.NewReader(rd, 1<<20, maxLine)
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, length, size, err := lr.Next()
		if size > 0 {
			if off == 0 {
				line, length = lines.TrimBOM(line, length)
			}
			if length <= int64(maxLine) {
				fn(off, size, string(line), true)
			} else {
				fn(off, size, "", false)
			}
			off += size
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// A compressed file the run cannot read to the end: it
			// dead-letters the rest and reads no reading from it, and the
			// file goes whole into one part anyway. A plain file the run
			// cannot read fails the run's read too.
			return nil
		}
	}
}

// Plan cuts the input (files, in order, with the hours' spans from Scan)
// into parts of at most target bytes where the hours allow, each cut at a
// line where no hour read before it has a reading at or after it. A part
// is larger only where no such line lies within target bytes. With target
// <= 0, an input of at most target bytes, or no such line, it returns one
// part holding every file whole.
func Plan(files []File, spans map[int64]Span, target int64) []Part {
	total := Total(files)
	whole := []Part{{Bytes: total}}
	if target <= 0 || total <= target {
		return whole
	}
	// The places a part may start: the first line of an hour that every
	// hour read before it has ended before.
	order := make([]Span, 0, len(spans))
	for _, s := range spans {
		order = append(order, s)
	}
	slices.SortFunc(order, func(a, b Span) int { return cmp.Compare(a.First, b.First) })
	var cuts []int64
	end := int64(-1)
	for _, s := range order {
		if s.First > end && s.First > 0 {
			cuts = append(cuts, s.First)
		}
		end = max(end, s.Last)
	}
	// Each part ends at the last place within target bytes of its start,
	// or, when there is none, at the first place after it.
	var chosen []int64
	from, prev := int64(0), int64(0)
	for _, c := range cuts {
		if c-from > target {
			if prev > from {
				chosen, from = append(chosen, prev), prev
			}
			if c-from > target {
				chosen, from = append(chosen, c), c
			}
		}
		prev = c
	}
	if total-from > target && prev > from {
		chosen = append(chosen, prev)
	}
	if len(chosen) == 0 {
		return whole
	}
	bounds := append(append([]int64{0}, chosen...), total)
	parts := make([]Part, 0, len(bounds)-1)
	for p := 0; p+1 < len(bounds); p++ {
		parts = append(parts, part(files, bounds[p], bounds[p+1], total))
	}
	return parts
}

// part is the input's bytes [from, to) as file ranges. A compressed file
// goes whole with the part its start falls in (Plan never cuts inside one),
// even when empty (at the input's end: with the last part), so that it is
// read, and a broken one dead-lettered, exactly once.
func part(files []File, from, to, total int64) Part {
	p := Part{Bytes: to - from}
	var base int64
	for _, f := range files {
		start, end := max(from-base, 0), min(to-base, f.Size)
		switch {
		case f.Compressed():
			if base >= from && base < to || base == total && to == total {
				p.Ranges = append(p.Ranges, fileio.FileRange{Path: f.Path, Start: 0, End: max(f.Size, 1)})
			}
		case start < end:
			p.Ranges = append(p.Ranges, fileio.FileRange{Path: f.Path, Start: start, End: end})
		}
		base += f.Size
	}
	return p
}

// Share splits each part of plan larger than target bytes (a part of one
// hour, or of hours that overlap throughout, as shuffled input's do) into
// shares of its identities: ceil(ShareDivisor * bytes / target) parts, up
// to lines.MaxShares, that each read the same bytes but keep only the lines
// whose identity hash (Scanned.Index) falls in their share. The batch
// builds each identity's hour from its readings alone (its duplicates,
// imputation and rollup), so an hour split by identity is built exactly as
// in one part; each share holds about 1/shares of the part's readings in
// memory, at the cost of reading its bytes once more per share. Parts whose
// files have no index are kept whole.
func Share(files []File, plan []Part, index map[string]string, target int64) []Part {
	if target <= 0 {
		return plan
	}
	size := max(target/ShareDivisor, 1)
	total := Total(files)
	var out []Part
	for _, p := range plan {
		if p.Bytes <= target {
			out = append(out, p)
			continue
		}
		n := min((p.Bytes+size-1)/size, lines.MaxShares)
		ranges := p.Ranges
		if len(ranges) == 0 {
			ranges = part(files, 0, total, total).Ranges
		}
		if !indexed(ranges, index) {
			out = append(out, p)
			continue
		}
		whole := Part{Bytes: p.Bytes}
		for _, r := range ranges {
			r.Index = index[r.Path]
			whole.Ranges = append(whole.Ranges, r)
		}
		out = append(out, shareParts(whole, int(n))...)
	}
	return out
}

// ShareDivisor is how many shares of a part's identities fit in the bytes
// of a part: a share keeps about target/ShareDivisor bytes of readings.
// prism holds more per reading in a share than in a part of whole hours of
// the same bytes, because a share's identity-hours are whole and so large;
// at half the part size a share's peak memory is about that of a part
// (docs/performance.md, "Why shares are half the part size").
const ShareDivisor = 2

// indexed reports whether every range's file has an index.
func indexed(ranges []fileio.FileRange, index map[string]string) bool {
	for _, r := range ranges {
		if index[r.Path] == "" {
			return false
		}
	}
	return len(ranges) > 0
}
