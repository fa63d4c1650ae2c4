package pipelines

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// WriteBigQuery writes BQRows to cfg's table with cfg's write method
// (upsert, storage_write, the default, or insert_all) and returns the dead letters
// of the rows BigQuery rejected, as PCollection<schemas.DeadLetter> in the
// global window. Each DoFn instance writes on its own: there is no
// grouping onto a fixed key.
//
// sink names the sink in dead letters and the run's ledger
// (schemas.SinkBigQuery or schemas.SinkBigQueryRollups); table describes
// the table's columns: the spec's BigQuery section, or the hourly rollup
// table. Rows may come in any window and pane: the sink takes them in the
// global window, where its end-of-bundle dead letters are emitted.
func WriteBigQuery(s beam.Scope, cfg BigQueryConfig, sink string, table *schemas.BigQuerySpec, rows beam.PCollection) beam.PCollection {
	s = s.Scope("bigquery.Write")
	fn := dofns.NewBigQueryWriteFn(cfg.Project, cfg.Dataset, cfg.Table, cfg.WriteMethod, table)
	fn.Sink, fn.Retry, fn.MaxRequestBytes, fn.MaxBufferedBytes = sink, cfg.Retry, cfg.MaxRequestBytes, cfg.MaxBufferedBytes
	return beam.ParDo(s, fn, globalWindow(s, rows))
}

// globalWindow re-windows col into the global window. A sink emits its
// dead letters from FinishBundle, where Beam Go has no element window and
// uses the global one; its input must be there too, or the dead letters'
// window coder fails on them.
func globalWindow(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.WindowInto(s.Scope("GlobalWindow"), window.NewGlobalWindows(), col)
}
