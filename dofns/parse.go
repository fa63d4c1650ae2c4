package dofns

import (
	"context"
	"errors"
	"reflect"

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

// ParseFn parses one input line (keyed by its source) into records keyed by
// their identity and stamped with their event time. Lines that fail
// validation go to the dead-letter output with their reason.
type ParseFn struct {
	// Spec is the compiled spec; its options name the payload format.
	Spec *schemas.Compiled
	// MaxLineBytes limits a payload (default schemas.DefaultMaxLineBytes);
	// a longer one is dead-lettered as too_large with its first bytes.
	MaxLineBytes int

	parser  schemas.Decoder
	builder *schemas.Builder
	buf     []schemas.Record
	ctrs    counters
}

// NewParseFn returns a ParseFn for spec.
func NewParseFn(spec *schemas.Compiled) *ParseFn { return &ParseFn{Spec: spec} }

// Setup takes the compiled spec's row builder and payload decoder.
func (f *ParseFn) Setup() error {
	if f.Spec == nil {
		return errors.New("parse: no compiled spec")
	}
	f.builder, f.parser = f.Spec.Builder(), f.Spec.Decoder()
	return nil
}

// ProcessElement parses line, read from source. Every record it reads is
// counted in the run's ledger: each reading it emits, or the line as one
// rejected record (also when the parser could not handle it: reason
// internal).
func (f *ParseFn) ProcessElement(ctx context.Context, at, line string, emit func(beam.EventTime, string, schemas.Record), dead func(schemas.DeadLetter)) {
	// at may name the line's place in its file, for its dead letter; the
	// readings keep the file's name alone (schemas.LineSource).
	source := schemas.SourcePath(at)
	var err error
	max := schemas.LineLimit(f.MaxLineBytes)
	if len(line) > max {
		f.ctrs.inc(ctx, ledger.InputRecords, 1)
		f.ctrs.inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(schemas.SinkParse, schemas.Prefix(line), at, schemas.TooLarge(int64(len(line)), max)))
		return
	}
	if perr := Guard(func() { err = f.parse(line, source) }); perr != nil {
		err = perr
	}
	if err != nil {
		f.ctrs.inc(ctx, ledger.InputRecords, 1)
		f.ctrs.inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(schemas.SinkParse, line, at, err))
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
