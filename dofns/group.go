package dofns

import (
	"context"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/progress"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*schemas.RowMutation)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*schemas.BQRow)(nil)).Elem())
	register.DoFn6x0[context.Context, string, func(*schemas.Record) bool, func(schemas.RowMutation), func(schemas.BQRow), func(schemas.DeadLetter)](&BuildRowsFn{})
	register.Iter1[schemas.Record]()
	register.Emitter1[schemas.RowMutation]()
	register.Emitter1[schemas.BQRow]()
}

// BuildRowsFn takes the readings of one identity in one event-time hour,
// drops duplicates, imputes, and emits one mutation per Bigtable row plus
// one BigQuery row per reading.
type BuildRowsFn struct {
	Spec *schemas.Spec
	// BigQuery turns the BigQuery output on.
	BigQuery bool

	builder    *schemas.Builder
	duplicates beam.Counter
	rows       beam.Counter
}

// Setup compiles the spec.
func (f *BuildRowsFn) Setup() error {
	var err error
	_, f.builder, err = compile(f.Spec)
	f.duplicates = beam.NewCounter("group", "duplicates_dropped")
	f.rows = beam.NewCounter("group", "rows")
	return err
}

// ProcessElement builds the group's rows.
func (f *BuildRowsFn) ProcessElement(ctx context.Context, _ string, readings func(*schemas.Record) bool,
	emitRow func(schemas.RowMutation), emitBQ func(schemas.BQRow), dead func(schemas.DeadLetter)) {
	var recs []schemas.Record
	var r schemas.Record
	for readings(&r) {
		recs = append(recs, r)
		r = schemas.Record{}
	}
	kept, dropped := f.Spec.PrepareGroup(recs)
	f.duplicates.Inc(ctx, int64(dropped))
	progress.Duplicates.Add(int64(dropped))
	muts, rejected := f.builder.Mutations(kept)
	for _, rj := range rejected {
		dead(NewDeadLetter(rj.Origin.Raw, rj.Origin.Source, rj.Err))
	}
	for _, m := range muts {
		f.rows.Inc(ctx, 1)
		emitRow(m)
	}
	if f.BigQuery {
		now := time.Now().UnixMilli()
		for i := range kept {
			emitBQ(f.builder.BQRow(&kept[i], now))
		}
	}
}
