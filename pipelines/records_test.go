package pipelines

import "github.com/apache/beam/sdks/v2/go/pkg/beam"

// ingestBatch is ingestBatches for parsed readings, KV<identity, Record>
// stamped with event time, as the tests build them.
func ingestBatch(s beam.Scope, cfg Config, merge bool, records beam.PCollection) []beam.PCollection {
	return ingestBatches(s, cfg, merge, preGroup(s, records))
}

// buildBatch is buildBatches for parsed readings, KV<identity, Record>.
func buildBatch(s beam.Scope, cfg Config, merge bool, records beam.PCollection) built {
	return buildBatches(s, cfg, merge, preGroup(s, records))
}
