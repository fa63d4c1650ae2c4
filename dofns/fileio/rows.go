package fileio

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	beamfileio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// The file formats Read reads: JSON lines, and the table formats, whose
// rows the spec maps to its fields (codec.TableMap).
const (
	FormatJSON    = "json"
	FormatCSV     = "csv"
	FormatParquet = "parquet"
	FormatAvro    = "avro"
)

// TableFormats are the formats read as rows of columns.
var TableFormats = []string{FormatCSV, FormatParquet, FormatAvro}

// IsTableFormat reports whether format is one of TableFormats.
func IsTableFormat(format string) bool {
	return format == FormatCSV || format == FormatParquet || format == FormatAvro
}

// FormatOf is the table format a file's name says (.csv, .csv.gz,
// .parquet, .avro; any case), or "" for any other name, which is read as
// JSON lines.
func FormatOf(path string) string {
	p := strings.ToLower(path)
	p = strings.TrimSuffix(strings.TrimSuffix(p, ".gz"), ".gzip")
	switch {
	case strings.HasSuffix(p, ".csv"):
		return FormatCSV
	case strings.HasSuffix(p, ".parquet") && !Compressed(path):
		return FormatParquet
	case strings.HasSuffix(p, ".avro") && !Compressed(path):
		return FormatAvro
	}
	return ""
}

func init() {
	register.DoFn5x1[context.Context, *sdf.LockRTracker, beamfileio.ReadableFile, func(string, string), func(deadletter.DeadLetter), error](&readRowsFn{})
}

// readRowsFn is a splittable DoFn that reads the rows of CSV, Parquet and
// Avro files and emits each as KV<source, JSON object>: the object the
// spec's parser reads (codec.TableMap.AppendJSON), keyed by the row's
// place (the CSV line, the Parquet row group and row, the Avro block and
// record), so that the parse that follows, and any dead letter, is the
// JSON lines' own. A file splits by bytes: a CSV's rows belong to the
// block their first byte is in (rows start after an unquoted newline), a
// Parquet row group to the block of its first page, an Avro block to the
// block of its first byte. A compressed CSV is read whole.
type readRowsFn struct {
	// Format is one of TableFormats.
	Format string
	// Spec maps the files' columns to fields.
	Spec *hours.Compiled
	// Ranges, when set, names the files to read (whole).
	Ranges []FileRange

	ctrs ledger.Recorder
}

// CreateInitialRestriction covers the file's bytes; a compressed file is
// one unit.
func (fn *readRowsFn) CreateInitialRestriction(file beamfileio.ReadableFile) offsetrange.Restriction {
	if Compressed(file.Metadata.Path) {
		return offsetrange.Restriction{Start: 0, End: 1}
	}
	return offsetrange.Restriction{Start: 0, End: max(file.Metadata.Size, 1)}
}

// SplitRestriction splits uncompressed files into blocks.
func (fn *readRowsFn) SplitRestriction(file beamfileio.ReadableFile, rest offsetrange.Restriction) []offsetrange.Restriction {
	if Compressed(file.Metadata.Path) {
		return []offsetrange.Restriction{rest}
	}
	return rest.SizedSplits(splitBytes)
}

// RestrictionSize is the restriction's byte count.
func (fn *readRowsFn) RestrictionSize(file beamfileio.ReadableFile, rest offsetrange.Restriction) float64 {
	if Compressed(file.Metadata.Path) {
		return float64(file.Metadata.Size)
	}
	return rest.Size()
}

// CreateTracker wraps an offset-range tracker.
func (fn *readRowsFn) CreateTracker(rest offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(offsetrange.NewTracker(rest))
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (fn *readRowsFn) FinishBundle(ctx context.Context, _ func(string, string), _ func(deadletter.DeadLetter)) error {
	return fn.ctrs.Commit(ctx)
}

// ProcessElement reads the rows of the restriction's part of the file.
// What the file's header or footer makes unreadable, or a spec that its
// columns cannot fill, is one dead letter, from the part that starts the
// file.
func (fn *readRowsFn) ProcessElement(ctx context.Context, rt *sdf.LockRTracker, file beamfileio.ReadableFile, emit func(string, string), dead func(deadletter.DeadLetter)) error {
	path := file.Metadata.Path
	rest, ok := rt.GetRestriction().(offsetrange.Restriction)
	if !ok {
		return fmt.Errorf("read %s: restriction %T is not an offset range", path, rt.GetRestriction())
	}
	c := &claims{rt: rt}
	done := func() error { c.try(rest.End); return nil }
	if IsDir(path) || fn.skip(path) {
		return done()
	}
	if fn.Spec == nil {
		return fmt.Errorf("read %s: no compiled spec", path)
	}
	out := &rowOut{ctx: ctx, fn: fn, path: path, emit: emit, dead: dead, first: rest.Start == 0, rows: ledger.InputRows(fn.Format)}
	defer out.flush()
	var err error
	switch fn.Format {
	case FormatCSV:
		err = fn.readCSV(ctx, c, rest, path, out)
	case FormatParquet:
		err = fn.readParquet(ctx, c, rest, path, out)
	case FormatAvro:
		err = fn.readAvro(ctx, c, rest, path, out)
	default:
		return fmt.Errorf("read %s: format %q is not a table format (%s)", path, fn.Format, strings.Join(TableFormats, ", "))
	}
	if err != nil {
		return err
	}
	return done()
}

// skip reports whether Ranges leaves path out.
func (fn *readRowsFn) skip(path string) bool {
	if len(fn.Ranges) == 0 {
		return false
	}
	for _, r := range fn.Ranges {
		if r.Path == path {
			return false
		}
	}
	return true
}

// claims claims a restriction's positions, and stops at the first it
// cannot: a tracker must not be asked again after it said no.
type claims struct {
	rt      *sdf.LockRTracker
	stopped bool
}

func (c *claims) try(pos int64) bool {
	if c.stopped {
		return false
	}
	if !c.rt.TryClaim(pos) {
		c.stopped = true
		return false
	}
	return true
}

// rowOut is where a reader's rows and dead letters go.
type rowOut struct {
	ctx  context.Context
	fn   *readRowsFn
	path string
	emit func(string, string)
	dead func(deadletter.DeadLetter)
	// first: this part starts the file, and reports what is wrong with
	// the file as a whole.
	first bool
	rows  ledger.Key
	// read counts the rows read since the last flush: the counter is
	// kept once per part, not per row.
	read int64
	m    *codec.TableMap
	buf  []byte
}

// flush counts the rows read in the ledger.
func (o *rowOut) flush() {
	o.fn.ctrs.Inc(o.ctx, o.rows, o.read)
	o.read = 0
}

// row renders one row and emits it, or dead-letters it when a cell can
// be no value of its field.
func (o *rowOut) row(source string, cells []codec.RowCell) {
	o.read++
	var err error
	o.buf, err = o.m.AppendJSON(o.buf[:0], cells)
	if err != nil {
		o.reject(source, string(o.buf), err)
		return
	}
	o.emit(source, string(o.buf))
}

// reject dead-letters one record of the input.
func (o *rowOut) reject(source, payload string, err error) {
	o.fn.ctrs.Inc(o.ctx, ledger.InputRecords, 1)
	o.fn.ctrs.Inc(o.ctx, ledger.InputRejected, 1)
	o.dead(deadletter.NewDeadLetter(deadletter.SinkParse, payload, source, err, time.Now()))
}

// unreadable dead-letters what could not be read from source on.
func (o *rowOut) unreadable(source, format string, args ...any) {
	o.reject(source, "", fmt.Errorf("%w: %s: %s", schemas.ErrUnreadable, o.path, fmt.Sprintf(format, args...)))
}

// mapColumns maps the file's columns to the spec's fields; a file they
// cannot fill is one invalid_field dead letter (from the first part), and
// ok is false.
func (o *rowOut) mapColumns(cols []schemas.Column) bool {
	m, err := codec.MapColumns(o.fn.Spec.Spec, o.path, cols)
	if err != nil {
		if o.first {
			o.reject(o.path, "", fmt.Errorf("%w: %w", schemas.ErrInvalidField, err))
		}
		return false
	}
	o.m = m
	return true
}

// guard runs read, turning a panic of a format library on a damaged file
// into an error.
func guard(read func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the reader failed on the file's bytes: %v", r)
		}
	}()
	return read()
}

// openLocal opens path for random access: a local file as it is, another
// (gs://) copied to a temporary file first. close removes the copy.
func openLocal(ctx context.Context, path string) (*os.File, func(), error) {
	if !strings.Contains(path, "://") {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		return f, func() { f.Close() }, nil
	}
	rc, err := OpenInput(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp("", "sensorpipe-read-*")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { tmp.Close(); os.Remove(tmp.Name()) }
	if _, err := io.Copy(tmp, rc); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("copy %s: %w", path, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, nil, err
	}
	return tmp, cleanup, nil
}

// CheckColumns maps the columns of the file at path, read as format (one
// of TableFormats), to spec's fields, reading only its header (CSV,
// Avro) or footer (Parquet): the error, in one line naming the file and
// the column or field, of a file whose columns cannot fill the spec. A
// file that cannot be read is no error here: the run dead-letters it as
// unreadable.
func CheckColumns(ctx context.Context, path, format string, spec *hours.Compiled) error {
	var cols []schemas.Column
	switch format {
	case FormatCSV:
		names := spec.CSV.Names()
		if names == nil && spec.CSV.HasHeader() {
			h, err := readCSVHeader(ctx, path, func(r io.Reader) *csv.Reader {
				cr := csv.NewReader(r)
				cr.Comma = spec.CSV.Comma()
				cr.FieldsPerRecord = -1
				return cr
			})
			if err != nil {
				return nil
			}
			names = h
		}
		for i, n := range names {
			if i == 0 {
				n = strings.TrimPrefix(n, "\ufeff")
			}
			cols = append(cols, schemas.Column{Name: n, Kind: schemas.ColText, Type: "CSV text"})
		}
	case FormatParquet:
		f, done, err := openLocal(ctx, path)
		if err != nil {
			return nil
		}
		defer done()
		var pf *ParquetFile
		if guard(func() (err error) { pf, err = OpenParquet(f); return err }) != nil {
			return nil
		}
		cols = pf.Columns
	case FormatAvro:
		fd, err := OpenInput(ctx, path)
		if err != nil {
			return nil
		}
		defer fd.Close()
		h, err := (&avroInput{br: bufio.NewReader(fd)}).header()
		if err != nil {
			return nil
		}
		if cols, _, err = avroColumns(h.schema); err != nil {
			return nil
		}
	default:
		return fmt.Errorf("format %q is not a table format (%s)", format, strings.Join(TableFormats, ", "))
	}
	_, err := codec.MapColumns(spec.Spec, path, cols)
	return err
}
