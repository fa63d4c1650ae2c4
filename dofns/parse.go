package dofns

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*schemas.Record)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*schemas.DeadLetter)(nil)).Elem())
	register.DoFn5x0[context.Context, string, string, func(beam.EventTime, string, schemas.Record), func(schemas.DeadLetter)](&ParseFn{})
	register.Emitter3[beam.EventTime, string, schemas.Record]()
	register.Emitter1[schemas.DeadLetter]()
}

// Decoder turns one payload (a line of a file, or a Pub/Sub message's data)
// into records. schemas.Parser is the JSON decoder.
type Decoder interface {
	ParseString(dst []schemas.Record, payload, source string) ([]schemas.Record, error)
}

// Formats maps a payload format (the launcher's --format) to the constructor
// of its decoder. A new format is one entry here: the launcher and the
// pipelines pass --format through to ParseFn.
var Formats = map[string]func(*schemas.Spec) (Decoder, error){
	"json": func(s *schemas.Spec) (Decoder, error) { return schemas.NewParser(s), nil },
	"proto": func(s *schemas.Spec) (Decoder, error) {
		p, err := schemas.NewProtoParser(s)
		if err != nil {
			return nil, err
		}
		return p, nil
	},
}

// CheckFormat reports whether format has a decoder ("" means json).
func CheckFormat(format string) error {
	if format == "" {
		format = "json"
	}
	if _, ok := Formats[format]; !ok {
		return fmt.Errorf("format %q has no decoder in this build (available: %s)", format, formatNames())
	}
	return nil
}

// NewDecoder returns the decoder of format ("" means json) for spec, or an
// error naming what does not fit.
func NewDecoder(spec *schemas.Spec, format string) (Decoder, error) {
	if err := CheckFormat(format); err != nil {
		return nil, err
	}
	if format == "" {
		format = "json"
	}
	d, err := Formats[format](spec)
	if err != nil {
		return nil, fmt.Errorf("%s decoder: %w", format, err)
	}
	return d, nil
}

func formatNames() string {
	names := make([]string, 0, len(Formats))
	for n := range Formats {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// ParseFn parses one input line (keyed by its source) into records keyed by
// their identity and stamped with their event time. Lines that fail
// validation go to the dead-letter output with their reason.
type ParseFn struct {
	Spec *schemas.Spec
	// Format is the payload format, a key of Formats ("" means json).
	Format string
	// MaxLineBytes limits a payload (default schemas.DefaultMaxLineBytes);
	// a longer one is dead-lettered as too_large with its first bytes.
	MaxLineBytes int

	parser  Decoder
	builder *schemas.Builder
	buf     []schemas.Record
	ctrs    counters
}

// NewParseFn returns a ParseFn for spec.
func NewParseFn(spec *schemas.Spec) *ParseFn { return &ParseFn{Spec: spec} }

// Setup compiles the spec and picks the decoder of Format.
func (f *ParseFn) Setup() error {
	var err error
	if _, f.builder, err = compile(f.Spec); err != nil {
		return err
	}
	if f.parser, err = NewDecoder(f.Spec, f.Format); err != nil {
		return err
	}
	return nil
}

func compile(spec *schemas.Spec) (*schemas.Parser, *schemas.Builder, error) {
	if spec == nil {
		return nil, nil, fmt.Errorf("no dataset spec")
	}
	if err := spec.Validate(); err != nil {
		return nil, nil, fmt.Errorf("spec: %w", err)
	}
	b, err := schemas.NewBuilder(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("spec: %w", err)
	}
	return schemas.NewParser(spec), b, nil
}

// ProcessElement parses line, read from source. Every record it reads is
// counted in the run's ledger: each reading it emits, or the line as one
// rejected record (also when the parser could not handle it: reason
// internal).
func (f *ParseFn) ProcessElement(ctx context.Context, source, line string, emit func(beam.EventTime, string, schemas.Record), dead func(schemas.DeadLetter)) {
	var err error
	max := f.MaxLineBytes
	if max <= 0 {
		max = schemas.DefaultMaxLineBytes
	}
	if len(line) > max {
		f.ctrs.inc(ctx, ledger.InputRecords, 1)
		f.ctrs.inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(schemas.SinkParse, schemas.Prefix(line), source, schemas.TooLarge(int64(len(line)), max)))
		return
	}
	if perr := guard(func() { err = f.parse(line, source) }); perr != nil {
		err = perr
	}
	if err != nil {
		f.ctrs.inc(ctx, ledger.InputRecords, 1)
		f.ctrs.inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(schemas.SinkParse, line, source, err))
		return
	}
	f.ctrs.inc(ctx, ledger.InputRecords, int64(len(f.buf)))
	for i := range f.buf {
		r := f.buf[i]
		emit(mtime.FromMilliseconds(r.EventMs), f.Spec.IdentityKey(&r), r)
	}
}

// parse decodes line into f.buf and checks that every record can be built.
func (f *ParseFn) parse(line, source string) error {
	var err error
	f.buf, err = f.parser.ParseString(f.buf[:0], line, source)
	if err != nil {
		return err
	}
	for i := range f.buf {
		if err := f.builder.Check(&f.buf[i]); err != nil {
			return err
		}
	}
	return nil
}
