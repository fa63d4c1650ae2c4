package pipelines

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// WriteBigQuery writes BQRows and returns the dead letters of rejected rows.
// TODO(bigquery sink): replaced by the Storage Write API sink.
func WriteBigQuery(s beam.Scope, cfg BigQueryConfig, spec *schemas.Spec, rows beam.PCollection) beam.PCollection {
	s = s.Scope("bigquery.Write")
	_ = cfg
	_ = spec
	return beam.Create(s) // placeholder until the sink lands
}
