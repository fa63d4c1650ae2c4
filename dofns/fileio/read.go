// Package fileio is sensorpipe's file edge: it reads the lines of local,
// gs:// and .gz files (Read, readLinesFn), whole or in the ranges of a
// local run's part, with each line's source and offset for the dead
// letter; and the rows of CSV, Parquet and Avro files (readRowsFn), each
// as the reading the spec's parser reads from the row's JSON object, with
// its place in its file.
package fileio

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	beamfileio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// inputs
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local inputs
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/lines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// Config is what Read reads. Its zero value reads nothing: Glob is
// required.
type Config struct {
	// Glob names the files: local paths or gs://, .gz decompressed.
	Glob string
	// Ranges, when non-empty, limit the read to those parts of the files
	// (a local run's part).
	Ranges []FileRange
	// MaxLineBytes is the longest line read (0: the default limit); a
	// longer one is a too_large dead letter.
	MaxLineBytes int
	// Format is how the files are read: "" or FormatJSON as JSON lines,
	// or one of TableFormats as rows whose columns Spec maps to its
	// fields.
	Format string
	// Spec is the compiled spec a table format's rows are mapped by.
	Spec *hours.Compiled
}

// Read reads every line of the files matching cfg.Glob as KV<file, line>,
// and dead letters for lines over cfg.MaxLineBytes and files that cannot
// be read to the end. With a table format it reads every row's reading,
// parsed as the JSON object the row renders is (KV<identity, Record>
// stamped with its event time, as dofns.ParseFn emits a line's), and dead
// letters for rows that fail the parse and parts of files that cannot be
// read: no parse follows.
func Read(s beam.Scope, cfg Config) (lines, dead beam.PCollection) {
	s = s.Scope("ReadFiles")
	matches := beamfileio.MatchFiles(s, cfg.Glob, beamfileio.MatchEmptyAllow())
	files := beamfileio.ReadMatches(s, matches)
	if IsTableFormat(cfg.Format) {
		return beam.ParDo2(s, &readRowsFn{Format: cfg.Format, Spec: cfg.Spec, Ranges: cfg.Ranges, MaxLineBytes: cfg.MaxLineBytes}, files)
	}
	return beam.ParDo2(s, &readLinesFn{MaxLineBytes: cfg.MaxLineBytes, Ranges: cfg.Ranges}, files)
}

func init() {
	dofnreg.DoFn(&readLinesFn{}, register.Function5x1[context.Context, *sdf.LockRTracker, beamfileio.ReadableFile, func(string, string), func(deadletter.DeadLetter), error])
	register.Emitter2[string, string]()
}

// splitBytes is the size of the blocks an uncompressed file is split into.
const splitBytes int64 = 64 << 20

// readLinesFn is a splittable DoFn that emits every line of a file as
// KV<path, line>. Uncompressed files split into 64 MiB blocks; compressed
// (.gz) files are read whole by one worker.
//
// Beam's textio is not used because its restriction is the file's stored
// size: on a .gz file it stops after that many decompressed bytes and drops
// the rest of the file without an error. A file that cannot be read to the
// end is dead-lettered (reason malformed) with the line it stopped at,
// rather than failing the job.
type readLinesFn struct {
	// MaxLineBytes limits a line (default schemas.DefaultMaxLineBytes).
	MaxLineBytes int
	// Ranges, when set, is the part of the input to read: of each file it
	// names, the lines that start in its range (and, with Shares, whose
	// index byte falls in its share); files it does not name are not read.
	// A compressed file is read whole when named. A file's read error is
	// reported by share 0 alone.
	Ranges []FileRange

	ctrs ledger.Recorder
}

// Compressed reports whether readLinesFn reads path as one compressed unit
// (whole, by one worker).
func Compressed(path string) bool {
	return strings.HasSuffix(path, ".gz") || strings.HasSuffix(path, ".gzip")
}

// OpenInput opens an input file for reading its lines, a compressed one
// (Compressed) through gzip. fileio's ReadableFile.Open decompresses by
// extension, .gz only, so a .gzip file came out as its compressed bytes,
// every line a parse error; and it fails the open of a .gz file that is
// not gzip, which failed the job. Here such a file opens, and its first
// read returns the gzip error, which the readers dead-letter (malformed)
// like any file they cannot read to the end.
func OpenInput(ctx context.Context, path string) (io.ReadCloser, error) {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	rc, err := fs.OpenRead(ctx, path)
	if err != nil {
		return nil, err
	}
	if !Compressed(path) {
		return rc, nil
	}
	return &gzipFile{raw: rc}, nil
}

// IsDir reports whether path names a local folder. A glob such as
// "dl/*" matches the folders beside the files too (a dead-letter folder
// holds its ledger record's); the readers skip them, as a copy of the
// glob without recursion would. Object stores (gs://) have no folders.
func IsDir(path string) bool {
	if strings.Contains(path, "://") {
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// gzipFile decompresses raw, reading its gzip header on the first Read.
type gzipFile struct {
	raw io.ReadCloser
	zr  *gzip.Reader
	err error
}

func (g *gzipFile) Read(p []byte) (int, error) {
	if g.zr == nil && g.err == nil {
		if g.zr, g.err = gzip.NewReader(g.raw); g.err != nil {
			g.err = fmt.Errorf("not gzip: %w", g.err)
		}
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.zr.Read(p)
}

func (g *gzipFile) Close() error { return g.raw.Close() }

// FileRange is the lines of one file that start at byte offsets in
// [Start, End); with Shares > 1, only those of them whose byte in the
// file's line index (internal/lines) falls in share Share of Shares.
type FileRange struct {
	Path       string
	Start, End int64
	// Index is the path of the file's line index, which holds each line's
	// identity hash (launch/parts.Scan); it is read when Shares > 1. A
	// table file's range has none: its reader hashes each row's readings'
	// identities itself (lines.IdentityHash).
	Index         string
	Share, Shares int
	// RowFrom and RowTo, when RowTo > 0, limit a Parquet file's range to
	// rows [RowFrom, RowTo) of the row group that starts in it: a row
	// group heavier than a local part is read in slices.
	RowFrom, RowTo int64
}

// rangeOf is the range of Ranges that names path.
func (fn *readLinesFn) rangeOf(path string) (FileRange, bool) {
	for _, r := range fn.Ranges {
		if r.Path == path {
			return r, true
		}
	}
	return FileRange{}, false
}

// CreateInitialRestriction covers the file (or its range in Ranges): its
// bytes, or for a compressed file a single unit claimed by reading it all.
func (fn *readLinesFn) CreateInitialRestriction(file beamfileio.ReadableFile) offsetrange.Restriction {
	start, end := int64(0), file.Metadata.Size
	if len(fn.Ranges) > 0 {
		r, _ := fn.rangeOf(file.Metadata.Path)
		start, end = r.Start, r.End
	}
	if Compressed(file.Metadata.Path) {
		return offsetrange.Restriction{Start: 0, End: min(end, 1)}
	}
	return offsetrange.Restriction{Start: start, End: end}
}

// SplitRestriction splits uncompressed files into blocks.
func (fn *readLinesFn) SplitRestriction(file beamfileio.ReadableFile, rest offsetrange.Restriction) []offsetrange.Restriction {
	if Compressed(file.Metadata.Path) {
		return []offsetrange.Restriction{rest}
	}
	return rest.SizedSplits(splitBytes)
}

// RestrictionSize is the restriction's byte count.
func (fn *readLinesFn) RestrictionSize(file beamfileio.ReadableFile, rest offsetrange.Restriction) float64 {
	if Compressed(file.Metadata.Path) {
		return float64(file.Metadata.Size)
	}
	return rest.Size()
}

// CreateTracker wraps an offset-range tracker.
func (fn *readLinesFn) CreateTracker(rest offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(offsetrange.NewTracker(rest))
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (fn *readLinesFn) FinishBundle(ctx context.Context, _ func(string, string), _ func(deadletter.DeadLetter)) error {
	return fn.ctrs.Commit(ctx)
}

// ProcessElement emits the lines that start inside the restriction. A
// line over MaxLineBytes is dead-lettered as too_large with its first
// bytes, and is never held whole: only its first MaxLineBytes are kept
// while the rest is skipped. A UTF-8 byte-order mark at the start of a
// file is dropped; CRLF line ends are read as LF.
func (fn *readLinesFn) ProcessElement(ctx context.Context, rt *sdf.LockRTracker, file beamfileio.ReadableFile, emit func(string, string), dead func(deadletter.DeadLetter)) error {
	path := file.Metadata.Path
	rest, ok := rt.GetRestriction().(offsetrange.Restriction)
	if !ok {
		return fmt.Errorf("read %s: restriction %T is not an offset range", path, rt.GetRestriction())
	}
	if IsDir(path) {
		rt.TryClaim(rest.End) // a folder the glob matched: nothing to read
		return nil
	}
	max := schemas.LineLimit(fn.MaxLineBytes)
	fd, err := OpenInput(ctx, path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer fd.Close()
	lr := lines.NewReader(fd, 1<<20, max)
	lr.HashLong()
	mine, owner, done, err := fn.share(path)
	if err != nil {
		return err
	}
	defer done()
	lineNo := 0
	reject := func(err error, payload string) {
		// One rejected record in the ledger: a line, or the rest of a
		// file that could not be read.
		fn.ctrs.Inc(ctx, ledger.InputRecords, 1)
		fn.ctrs.Inc(ctx, ledger.InputRejected, 1)
		dead(deadletter.NewDeadLetter(deadletter.SinkParse, payload, path, err, time.Now()))
	}
	// The lines' numbers are known when the read starts at the file's
	// start (a compressed file, or the first block of a plain one);
	// otherwise their dead letters give their byte offset.
	counting := Compressed(path) || rest.Start == 0
	emitLine := func(off int64, line []byte, length int64) error {
		if !Compressed(path) {
			lineNo++
		}
		at := deadletter.LineSource(path, 0, off)
		if counting {
			at = deadletter.LineSource(path, int64(lineNo), off)
		}
		if ok, err := mine(off); err != nil || !ok {
			return err
		}
		raw := length // the line's bytes in the file, a byte-order mark included
		if off == 0 {
			line, length = lines.TrimBOM(line, length)
		}
		if length > int64(max) {
			fn.ctrs.Inc(ctx, ledger.InputRecords, 1)
			fn.ctrs.Inc(ctx, ledger.InputRejected, 1)
			d := deadletter.NewDeadLetter(deadletter.SinkParse, schemas.Prefix(string(line)), at, schemas.TooLargeInFile(length, max), time.Now())
			// Its place and hash, for a replay to read it back
			// (ReadRecord); the line itself is never held.
			if sum := lr.Sum(); sum != nil {
				d.Offset, d.Length, d.SHA256 = off, raw, hex.EncodeToString(sum)
			}
			dead(d)
			return nil
		}
		emit(at, string(line))
		return nil
	}
	if Compressed(path) {
		if !rt.TryClaim(rest.Start) {
			return nil
		}
		var off int64
		for {
			line, length, size, err := lr.Next()
			if size > 0 {
				lineNo++
				if err := emitLine(off, line, length); err != nil {
					return err
				}
				off += size
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				if owner {
					reject(fmt.Errorf("%w: %s could not be read past line %d: %w", schemas.ErrMalformed, path, lineNo, err), "")
				}
				return nil
			}
		}
	}
	pos := rest.Start
	if pos > 0 {
		// Skip the line that started before the restriction: it belongs to
		// the previous block.
		if _, err := lr.Discard(int(pos - 1)); err != nil {
			return fmt.Errorf("seek %s to %d: %w", path, pos-1, err)
		}
		_, _, skipped, err := lr.Next()
		if err == io.EOF {
			rt.TryClaim(rest.End)
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		pos += skipped - 1
	}
	for rt.TryClaim(pos) {
		line, length, size, err := lr.Next()
		if size > 0 {
			if err := emitLine(pos, line, length); err != nil {
				return err
			}
		}
		if err == io.EOF {
			rt.TryClaim(rest.End)
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		pos += size
	}
	return nil
}

// share returns whether the line at an offset of path is this read's
// (mine; offsets asked in increasing order), whether this read also owns
// the file's read errors (owner: one share does), and a func that closes
// what it opened. Without Shares in the file's range, every line is.
func (fn *readLinesFn) share(path string) (mine func(off int64) (bool, error), owner bool, done func(), err error) {
	r, _ := fn.rangeOf(path)
	if r.Shares <= 1 {
		return func(int64) (bool, error) { return true, nil }, true, func() {}, nil
	}
	x, err := lines.OpenIndex(r.Index)
	if err != nil {
		return nil, false, nil, fmt.Errorf("read %s, share %d of %d: %w", path, r.Share+1, r.Shares, err)
	}
	mine = func(off int64) (bool, error) {
		// A line the index lacks (none should) goes with share 0, as its
		// read errors do.
		b, _, err := x.Byte(off)
		return lines.Share(b, r.Shares) == r.Share, err
	}
	return mine, r.Share == 0, func() { x.Close() }, nil
}

// errRecordChanged is wrapped by ReadRecord's error when the file no
// longer holds the record its dead letter names.
var errRecordChanged = errors.New("the source file changed since the record was dead-lettered")

// ReadRecord reads back the record a too_large dead letter names: length
// bytes at offset of path (local, gs://; of a compressed file, of its
// decompressed text), whose SHA-256 must be sum (hex). A record at the
// file's start loses its UTF-8 byte-order mark, as the read drops it. A
// file that is gone, shorter, or holds other bytes there is an error
// wrapping errRecordChanged, which names the file.
func ReadRecord(ctx context.Context, path string, offset, length int64, sum string) ([]byte, error) {
	fd, err := OpenInput(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errRecordChanged, path, err)
	}
	defer fd.Close()
	if offset > 0 {
		if _, err := io.CopyN(io.Discard, fd, offset); err != nil {
			return nil, fmt.Errorf("%w: %s: it ends before the record's offset %d (%w)", errRecordChanged, path, offset, err)
		}
	}
	b := make([]byte, length)
	if _, err := io.ReadFull(fd, b); err != nil {
		return nil, fmt.Errorf("%w: %s: it ends inside the record's %d bytes at offset %d (%w)", errRecordChanged, path, length, offset, err)
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
		return nil, fmt.Errorf("%w: %s: the %d bytes at offset %d have sha256 %s, not the dead letter's %s",
			errRecordChanged, path, length, offset, hex.EncodeToString(h[:8]), cut(sum, 16))
	}
	if offset == 0 {
		b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	}
	return b, nil
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
