package pipelines

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// WriteBigQuery writes BQRows to cfg's table with cfg's write method
// (storage_write, the default, or insert_all) and returns the dead letters
// of the rows BigQuery rejected, as PCollection<schemas.DeadLetter>. Each
// DoFn instance writes on its own: there is no grouping onto a fixed key.
//
// table describes the table's columns: the spec's BigQuery section, or the
// hourly rollup table.
func WriteBigQuery(s beam.Scope, cfg BigQueryConfig, table *schemas.BigQuerySpec, rows beam.PCollection) beam.PCollection {
	s = s.Scope("bigquery.Write")
	return beam.ParDo(s, dofns.NewBigQueryWriteFn(cfg.Project, cfg.Dataset, cfg.Table, cfg.WriteMethod, table), rows)
}
