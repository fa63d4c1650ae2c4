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

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	beamfileio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/lines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
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
	dofnreg.DoFn(&readRowsFn{}, register.Function5x1[context.Context, *sdf.LockRTracker, beamfileio.ReadableFile, func(beam.EventTime, string, schemas.Record), func(deadletter.DeadLetter), error])
	register.Emitter3[beam.EventTime, string, schemas.Record]()
}

// readRowsFn is a splittable DoFn that reads the rows of CSV, Parquet and
// Avro files and emits the reading of each, KV<identity, Record> stamped
// with its event time, as dofns.ParseFn emits a JSON line's: built from
// the row's cells (codec.RowParser) with the parse's checks and reasons,
// its payload the row rendered as the JSON object the spec's parser reads
// (codec.TableMap.AppendJSON), its source the row's place (the CSV line,
// the Parquet row group and row, the Avro block and record). A row that
// fails is a parse dead letter with that payload and place, as a JSON
// line's is. A file splits by bytes: a CSV's rows belong to the
// block their first byte is in (rows start after an unquoted newline), a
// Parquet row group to the block of its first page, an Avro block to the
// block of its first byte. A compressed CSV is read whole.
type readRowsFn struct {
	// Format is one of TableFormats.
	Format string
	// Spec maps the files' columns to fields.
	Spec *hours.Compiled
	// Ranges, when set, is the part of the input to read (a local run's
	// part): of each file it names, the rows its reader places in the
	// range's bytes (a compressed file whole); files it does not name
	// are not read.
	Ranges []FileRange
	// MaxLineBytes limits a row's rendered payload (default
	// schemas.DefaultMaxLineBytes); a longer one is dead-lettered as
	// too_large with its first bytes, as a JSON line is.
	MaxLineBytes int

	parser  *codec.Parser
	builder *hours.Builder
	ctrs    ledger.Recorder
}

// Setup takes the compiled spec's JSON parser (its event-time limits, its
// checks) and row builder.
func (fn *readRowsFn) Setup() error {
	if fn.Spec == nil {
		return fmt.Errorf("read rows: no compiled spec")
	}
	p, ok := fn.Spec.Decoder().(*codec.Parser)
	if !ok {
		p = codec.NewParserLimited(fn.Spec.Spec, fn.Spec.EventTimeLimits())
	}
	fn.parser, fn.builder = p, fn.Spec.Builder()
	return nil
}

// CreateInitialRestriction covers the file's bytes, or its range in
// Ranges; a compressed file is one unit.
func (fn *readRowsFn) CreateInitialRestriction(file beamfileio.ReadableFile) offsetrange.Restriction {
	if Compressed(file.Metadata.Path) {
		return offsetrange.Restriction{Start: 0, End: 1}
	}
	for _, r := range fn.Ranges {
		if r.Path == file.Metadata.Path && r.End > r.Start {
			return offsetrange.Restriction{Start: r.Start, End: r.End}
		}
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
func (fn *readRowsFn) FinishBundle(ctx context.Context, _ func(beam.EventTime, string, schemas.Record), _ func(deadletter.DeadLetter)) error {
	return fn.ctrs.Commit(ctx)
}

// ProcessElement reads the rows of the restriction's part of the file.
// What the file's header or footer makes unreadable, or a spec that its
// columns cannot fill, is one dead letter, from the part that starts the
// file.
func (fn *readRowsFn) ProcessElement(ctx context.Context, rt *sdf.LockRTracker, file beamfileio.ReadableFile, emit func(beam.EventTime, string, schemas.Record), dead func(deadletter.DeadLetter)) error {
	if fn.parser == nil {
		if err := fn.Setup(); err != nil {
			return err
		}
	}
	return fn.read(ctx, rt, file, &rowOut{emit: emit, dead: dead})
}

// read reads the rows of the restriction's part of the file into out
// (its emit, or with emitJSON set each row's rendered object unparsed).
func (fn *readRowsFn) read(ctx context.Context, rt *sdf.LockRTracker, file beamfileio.ReadableFile, out *rowOut) error {
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
	out.ctx, out.fn, out.path, out.first, out.rows = ctx, fn, path, rest.Start == 0, ledger.InputRows(fn.Format)
	if r, ok := fn.rangeOf(path); ok && r.Shares > 1 {
		out.share, out.shares = r.Share, r.Shares
	}
	out.max = schemas.LineLimit(fn.MaxLineBytes)
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

// rangeOf is the range of Ranges that names path.
func (fn *readRowsFn) rangeOf(path string) (FileRange, bool) {
	for _, r := range fn.Ranges {
		if r.Path == path {
			return r, true
		}
	}
	return FileRange{}, false
}

// rowSlice is the slice of a row group that Ranges reads of path, if it
// names one.
func (fn *readRowsFn) rowSlice(path string) (FileRange, bool) {
	r, ok := fn.rangeOf(path)
	return r, ok && r.RowTo > 0
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
	emit func(beam.EventTime, string, schemas.Record)
	// emitJSON, when set, takes each row's rendered object instead of its
	// reading (the reader's tests).
	emitJSON func(source, row string)
	dead     func(deadletter.DeadLetter)
	// first: this part starts the file, and reports what is wrong with
	// the file as a whole.
	first bool
	// share and shares, when shares > 1, say that this read keeps only
	// the rows whose reading's identity falls in share of shares
	// (lines.Share of lines.IdentityHash; owns); share 0 also keeps the
	// rows without a reading and reports what is wrong with the file.
	share, shares int
	rows          ledger.Key
	// read counts the rows read since the last flush, and records the
	// readings emitted: the counters are kept once per part, not per row.
	read, records int64
	m             *codec.TableMap
	rp            *codec.RowParser
	max           int
	buf           []byte
	recs          []schemas.Record
	// ident holds a row's identity values for a read in shares (owns).
	ident []schemas.Value
}

// flush counts the rows read and the readings emitted in the ledger.
func (o *rowOut) flush() {
	o.fn.ctrs.Inc(o.ctx, o.rows, o.read)
	o.fn.ctrs.Inc(o.ctx, ledger.InputRecords, o.records)
	o.read, o.records = 0, 0
}

// row renders one row as its payload and emits its reading, or
// dead-letters it with that payload: when a cell can be no value of its
// field, when the payload is over MaxLineBytes (too_large, its first
// bytes), or when the reading fails the parse's checks or the builder's.
// Read in shares (shares > 1), a share reads only the rows it owns.
func (o *rowOut) row(source string, cells []codec.RowCell) {
	if o.shares > 1 && o.rp != nil && !o.owns(cells, source) {
		return
	}
	o.read++
	var err error
	o.buf, err = o.m.AppendJSON(o.buf[:0], cells)
	if err != nil {
		o.reject(source, string(o.buf), err)
		return
	}
	if o.emitJSON != nil {
		o.emitJSON(source, string(o.buf))
		return
	}
	if len(o.buf) > o.max {
		o.reject(source, schemas.Prefix(string(o.buf)), schemas.TooLarge(int64(len(o.buf)), o.max))
		return
	}
	raw := string(o.buf)
	if perr := ledger.Guard(func() { err = o.parse(cells, raw, source) }); perr != nil {
		err = perr
	}
	if err != nil {
		o.reject(source, raw, err)
		return
	}
	o.records += int64(len(o.recs))
	spec := o.fn.Spec.Spec
	for i := range o.recs {
		r := o.recs[i]
		o.emit(mtime.FromMilliseconds(r.EventMs), group.IdentityKey(spec, &r), r)
	}
}

// owns reports, for a read in shares, whether this share reads the row:
// counts it, emits its reading, or dead-letters it. A row holds one
// reading (codec.MapColumns refuses a spec that explodes points), and it
// is owned by the share of its identity, read from the identity fields
// alone (RowParser.Identity); where that cannot tell (a whole-row map),
// by the identity of the row parsed without its payload, or, rendered,
// with it. A row without a reading is share 0's. Every share reads the
// row alike, so exactly one owns it.
func (o *rowOut) owns(cells []codec.RowCell, source string) bool {
	spec := o.fn.Spec.Spec
	if len(o.ident) != spec.NumValues() {
		o.ident = make([]schemas.Value, spec.NumValues())
	}
	if o.rp.Identity(o.ident, cells) {
		return o.shareOf(group.IdentityKey(spec, &schemas.Record{Values: o.ident})) == o.share
	}
	var err error
	parse := func(raw string) {
		if perr := ledger.Guard(func() { o.recs, err = o.rp.Parse(o.recs[:0], cells, raw, source) }); perr != nil {
			err = perr
		}
	}
	parse("")
	if err != nil {
		if o.buf, err = o.m.AppendJSON(o.buf[:0], cells); err == nil {
			parse(string(o.buf))
		}
	}
	if err != nil || len(o.recs) == 0 {
		return o.share == 0
	}
	return o.shareOf(group.IdentityKey(spec, &o.recs[0])) == o.share
}

// shareOf is the share an identity key falls in.
func (o *rowOut) shareOf(key string) int {
	return lines.Share(lines.IdentityHash(key), o.shares)
}

// parse builds the row's readings into o.recs and checks that each can
// be built, as dofns.ParseFn does a line's.
func (o *rowOut) parse(cells []codec.RowCell, raw, source string) error {
	var err error
	if o.recs, err = o.rp.Parse(o.recs[:0], cells, raw, source); err != nil {
		return err
	}
	for i := range o.recs {
		if err := o.fn.builder.Check(&o.recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// reject dead-letters one record of the input.
func (o *rowOut) reject(source, payload string, err error) {
	o.fn.ctrs.Inc(o.ctx, ledger.InputRecords, 1)
	o.fn.ctrs.Inc(o.ctx, ledger.InputRejected, 1)
	o.dead(deadletter.NewDeadLetter(deadletter.SinkParse, payload, source, err, time.Now()))
}

// bad counts and dead-letters a row that is no row of the file's columns
// (a CSV row that is not CSV, or has another number of fields); read in
// shares, share 0 alone does.
func (o *rowOut) bad(source, payload string, err error) {
	if o.share != 0 {
		return
	}
	o.read++
	o.reject(source, payload, err)
}

// unreadable dead-letters what could not be read from source on; read in
// shares, share 0 alone does.
func (o *rowOut) unreadable(source, format string, args ...any) {
	if o.share != 0 {
		return
	}
	o.reject(source, "", fmt.Errorf("%w: %s: %s", schemas.ErrUnreadable, o.path, fmt.Sprintf(format, args...)))
}

// mapColumns maps the file's columns to the spec's fields; a file they
// cannot fill is one invalid_field dead letter (from the first part), and
// ok is false.
func (o *rowOut) mapColumns(cols []schemas.Column) bool {
	m, err := codec.MapColumns(o.fn.Spec.Spec, o.path, cols)
	if err != nil {
		if o.first && o.share == 0 {
			o.reject(o.path, "", fmt.Errorf("%w: %w", schemas.ErrInvalidField, err))
		}
		return false
	}
	o.m = m
	if o.emitJSON == nil {
		o.rp = m.NewRowParser(o.fn.parser)
	}
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
		var pf *parquetFile
		if guard(func() (err error) { pf, err = openParquet(f); return err }) != nil {
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
