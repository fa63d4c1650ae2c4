package dofns

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/progress"
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
	Spec *schemas.Spec

	parser  *schemas.Parser
	builder *schemas.Builder
	buf     []schemas.Record
	read    beam.Counter
	invalid beam.Counter
}

// NewParseFn returns a ParseFn for spec.
func NewParseFn(spec *schemas.Spec) *ParseFn { return &ParseFn{Spec: spec} }

// Setup compiles the spec.
func (f *ParseFn) Setup() error {
	var err error
	f.parser, f.builder, err = compile(f.Spec)
	f.read = beam.NewCounter("parse", "records")
	f.invalid = beam.NewCounter("parse", "dead_lettered")
	return err
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

// ProcessElement parses line, read from source.
func (f *ParseFn) ProcessElement(ctx context.Context, source, line string, emit func(beam.EventTime, string, schemas.Record), dead func(schemas.DeadLetter)) {
	var err error
	f.buf, err = f.parser.Parse(f.buf[:0], []byte(line), source)
	if err == nil {
		for i := range f.buf {
			if err = f.builder.Check(&f.buf[i]); err != nil {
				break
			}
		}
	}
	if err != nil {
		progress.Read.Add(1)
		f.read.Inc(ctx, 1)
		f.invalid.Inc(ctx, 1)
		dead(NewDeadLetter(line, source, err))
		return
	}
	for i := range f.buf {
		progress.Read.Add(1)
		f.read.Inc(ctx, 1)
		r := f.buf[i]
		emit(mtime.FromMilliseconds(r.EventMs), f.Spec.IdentityKey(&r), r)
	}
}

// NewDeadLetter builds a dead letter for payload with err's reason.
func NewDeadLetter(payload, source string, err error) schemas.DeadLetter {
	return schemas.DeadLetter{
		Payload: payload,
		Reason:  schemas.Reason(err),
		Error:   err.Error(),
		Source:  source,
		Time:    time.Now().UTC().Format(time.RFC3339Nano),
	}
}
