package fileio

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	beamfileio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// Block is a piece of a table file that its reader reads whole, in the
// part of the file its first byte is in: a Parquet row group (at its first
// page) or an Avro block (after the sync marker before it).
type Block struct {
	// Offset is where the block starts in its file.
	Offset int64
	// Rows is how many rows it holds.
	Rows int64
}

// Blocks lists the blocks of a Parquet or Avro file in file order, from
// its footer (Parquet) or its block headers (Avro, read without decoding
// a block). A CSV file has none: its rows start at any line start. A file
// that cannot be read has none either (its run dead-letters it).
func Blocks(ctx context.Context, path, format string) ([]Block, error) {
	switch format {
	case FormatParquet:
		f, done, err := openLocal(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		defer done()
		var pf *parquetFile
		if guard(func() (err error) { pf, err = openParquet(f); return err }) != nil {
			return nil, nil
		}
		var out []Block
		prev := int64(-1)
		for rg := 0; rg < pf.rdr.NumRowGroups(); rg++ {
			off := max(pf.rowGroupOffset(rg), prev+1) // as readParquet places it
			prev = off
			out = append(out, Block{Offset: off, Rows: pf.rdr.MetaData().RowGroup(rg).NumRows()})
		}
		return out, nil
	case FormatAvro:
		if Compressed(path) {
			return nil, nil
		}
		fd, err := OpenInput(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		defer fd.Close()
		r := &avroInput{br: bufio.NewReaderSize(fd, 1<<20)}
		h, err := r.header()
		if err != nil {
			return nil, nil
		}
		var out []Block
		for {
			start := r.pos
			count, err := r.long()
			if err != nil {
				return out, nil // the end, or damage the run dead-letters
			}
			size, err := r.long()
			if err != nil || count < 0 || size < 0 {
				return out, nil
			}
			out = append(out, Block{Offset: start, Rows: count})
			n, err := r.br.Discard(int(size))
			r.pos += int64(n)
			if err != nil {
				return out, nil
			}
			var sync [16]byte
			if _, err := r.full(sync[:]); err != nil || sync != h.sync {
				return out, nil
			}
		}
	}
	return nil, nil
}

// RowSample is what the first rows of a table file weigh.
type RowSample struct {
	// Rows is how many rows were read.
	Rows int64
	// JSONBytes is the bytes of their JSON objects, each with a newline:
	// what the run holds of them, as it holds JSON lines.
	JSONBytes int64
	// FileBytes is the bytes of the file they were read from (for a
	// compressed file, the whole file).
	FileBytes int64
}

// SampleRows reads the rows of a table file's first block (a CSV's first
// MB) as the run reads them, and weighs them: what a local run's parts are
// sized by. A file that cannot be read gives no rows.
func SampleRows(ctx context.Context, path, format string, spec *hours.Compiled, blocks []Block) (RowSample, error) {
	st, err := statInput(ctx, path)
	if err != nil {
		return RowSample{}, err
	}
	end := min(st, int64(1<<20))
	switch {
	case Compressed(path):
		end = 1
	case len(blocks) > 1:
		end = blocks[1].Offset
	case len(blocks) == 1:
		end = st
	}
	var s RowSample
	s.FileBytes = end
	if Compressed(path) {
		s.FileBytes = st
	}
	rest := offsetrange.Restriction{Start: 0, End: max(end, 1)}
	rt := sdf.NewLockRTracker(offsetrange.NewTracker(rest))
	file := beamfileio.ReadableFile{Metadata: beamfileio.FileMetadata{Path: path, Size: st}}
	mctx := metrics.SetPTransformID(metrics.SetBundleID(ctx, "sample"), "sample")
	emit := func(_, row string) {
		s.Rows++
		s.JSONBytes += int64(len(row)) + 1
	}
	dead := func(deadletter.DeadLetter) { s.Rows++ }
	fn := &readRowsFn{Format: format, Spec: spec}
	if err := fn.Setup(); err != nil {
		return RowSample{}, err
	}
	if err := fn.read(mctx, rt, file, &rowOut{emitJSON: emit, dead: dead}); err != nil {
		return RowSample{}, err
	}
	return s, nil
}

// statInput is the stored size of the file at path.
func statInput(ctx context.Context, path string) (int64, error) {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size(), nil
	}
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return 0, err
	}
	defer fs.Close()
	return fs.Size(ctx, path)
}

// RowTimes reads the rows of the files in ranges (the ranges of one local
// part, a compressed file whole) as the run reads them, and calls fn with
// the event time (epoch ms) of each reading they hold: what a local run
// needs to know of a table file's hours to cut it. Rows that fail have no
// reading and are skipped, as is a file that cannot be read.
func RowTimes(ctx context.Context, format string, spec *hours.Compiled, ranges []FileRange, fn func(eventMs int64)) error {
	rfn := &readRowsFn{Format: format, Spec: spec, Ranges: ranges}
	if err := rfn.Setup(); err != nil {
		return err
	}
	mctx := metrics.SetPTransformID(metrics.SetBundleID(ctx, "scan"), "scan")
	emit := func(_ beam.EventTime, _ string, r schemas.Record) { fn(r.EventMs) }
	dead := func(deadletter.DeadLetter) {}
	for _, r := range ranges {
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := statInput(ctx, r.Path)
		if err != nil {
			return fmt.Errorf("scan %s: %w", r.Path, err)
		}
		file := beamfileio.ReadableFile{Metadata: beamfileio.FileMetadata{Path: r.Path, Size: st}}
		rt := sdf.NewLockRTracker(offsetrange.NewTracker(rfn.CreateInitialRestriction(file)))
		if err := rfn.read(mctx, rt, file, &rowOut{emit: emit, dead: dead}); err != nil {
			return fmt.Errorf("scan %s: %w", r.Path, err)
		}
	}
	return nil
}
