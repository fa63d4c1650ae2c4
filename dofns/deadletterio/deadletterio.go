// Package deadletterio is sensorpipe's dead-letter edge: it writes the
// records that did not land (deadletter.DeadLetter: payload, reason, sink,
// error, source) to a folder, a gs:// prefix, a BigQuery table or a
// Pub/Sub topic (Write, writeFn), and prepares that target before a run
// (EnsureTarget).
package deadletterio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// Config is where and how Write writes dead letters. Its zero value
// writes nowhere useful: Target is required.
type Config struct {
	// Target is where the dead letters go.
	Target targets.DeadLetterTarget
	// Retry is the writes' retry policy (zero: retry.Policy's defaults).
	Retry retry.Settings
	// Reporting has each writer also emit, at the end of a bundle, the
	// count of dead letters it made durable, into a step that discards it
	// behind a fusion break (beam.Reshuffle, which prism turns into just
	// that). Set it on every runner but Dataflow.
	//
	// A stage whose every branch ends in a sink and a dead-letter writer
	// has no data output, and prism (Beam v2.77) busy-waits through each
	// of its bundles: it selects on the bundle's outputs-done channel,
	// closed from the start, until the SDK reports the bundle done,
	// spinning a core for as long as the sinks wait for their writes
	// (docs/upstream/prism-busy-wait.md). The count is such a stage's data
	// output. The writers stay fused with their producers: a bundle still
	// commits only once its dead letters are durable.
	Reporting bool
}

// Write writes each PCollection of dead letters to cfg.Target under
// cfg.Retry. They are written separately, not flattened, since they may
// be windowed differently.
func Write(s beam.Scope, cfg Config, dead ...beam.PCollection) {
	s = s.Scope("deadletter.Write")
	for _, d := range dead {
		w := writeFn{Target: cfg.Target, Retry: cfg.Retry}
		if !cfg.Reporting {
			beam.ParDo0(s, &w, d)
			continue
		}
		written := beam.ParDo(s, &reportingWriteFn{writeFn: w}, d)
		beam.ParDo0(s, discardReport, beam.Reshuffle(s, written))
	}
}
