// Package parts cuts a local batch's input into parts of whole event-time
// hours, so that a local run can write one part after another and hold in
// memory only the part in flight, not the whole input.
//
// Why: a batch reads its files as one bounded source, so the runner's
// hourly GroupByKey holds every reading until the whole input is read, and
// prism (the local runner) keeps several copies of it (README, issue #13:
// about 4.4 KB of resident memory per reading). Run as one job, a 3 M
// reading backfill needs 13 GB. An hour is built from all its readings (the
// duplicates, the imputation and the rollup depend on every one of them), so
// a part may end only where no hour read before it has a reading after it.
// Scan finds those places with one pass over the input (a parse per line,
// and two offsets kept per hour), and Plan cuts there into parts no larger
// than asked where the hours allow. Input
// in rough event-time order, as historical exports are, has such a place at
// almost every hour; shuffled input has none, and runs as one part.
//
// The result is exactly the one-job batch's: every hour is built once, from
// all its readings, in the part that holds them. Dataflow runs the input as
// one job (its shuffle holds the groups off the workers).
package parts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/internal/lines"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// File is one input file, in the run's order.
type File struct {
	Path string
	Size int64
}

// Compressed reports whether the run reads the file as one unit: a part
// then holds all of it or none.
func (f File) Compressed() bool { return dofns.Compressed(f.Path) }

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
	Ranges []dofns.FileRange
	// Bytes is the part's size in the input.
	Bytes int64
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

// Scan reads every line of files in order, as the batch reads them (the
// same line ends, byte-order mark and maxLine limit), parses it with dec and
// returns the span of each hour (keyed by its start, epoch ms) that a record
// falls in. Lines that do not parse have no hour: the run dead-letters them
// wherever they fall. progress, when not nil and every > 0, is called with
// the bytes read so far about every that long.
func Scan(ctx context.Context, files []File, dec schemas.Decoder, maxLine int, every time.Duration, progress func(read int64)) (map[int64]Span, error) {
	spans := map[int64]Span{}
	var (
		base int64
		recs []schemas.Record
	)
	last := time.Now()
	for _, f := range files {
		err := scanFile(ctx, f, maxLine, func(off int64, line string) {
			pos := base + off
			if f.Compressed() {
				pos = base
			}
			recs = parseGuarded(dec, recs[:0], line, f.Path)
			for i := range recs {
				h := schemas.WindowStart(recs[i].EventMs, time.Hour)
				s, ok := spans[h]
				if !ok {
					s.First = pos
				}
				s.Last = pos
				spans[h] = s
			}
			if progress != nil && every > 0 && time.Since(last) > every {
				last = time.Now()
				progress(base + off)
			}
		})
		if err != nil {
			return nil, err
		}
		base += f.Size
	}
	return spans, nil
}

// parseGuarded parses line, or returns no record when it does not parse or
// the decoder panics (the run dead-letters such a line as ParseFn does).
func parseGuarded(dec schemas.Decoder, dst []schemas.Record, line, source string) (recs []schemas.Record) {
	defer func() {
		if recover() != nil {
			recs = dst[:0]
		}
	}()
	recs, err := dec.ParseString(dst, line, source)
	if err != nil {
		return dst[:0]
	}
	return recs
}

// scanFile calls fn with the offset of each line of f that is not over
// maxLine bytes, and the line.
func scanFile(ctx context.Context, f File, maxLine int, fn func(off int64, line string)) error {
	rd, err := fileio.ReadableFile{Metadata: fileio.FileMetadata{Path: f.Path, Size: f.Size}}.Open(ctx)
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
				fn(off, string(line))
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
				p.Ranges = append(p.Ranges, dofns.FileRange{Path: f.Path, Start: 0, End: max(f.Size, 1)})
			}
		case start < end:
			p.Ranges = append(p.Ranges, dofns.FileRange{Path: f.Path, Start: start, End: end})
		}
		base += f.Size
	}
	return p
}
