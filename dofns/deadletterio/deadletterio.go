// Package deadletterio is sensorpipe's dead-letter edge: it writes the
// records that did not land (schemas.DeadLetter: payload, reason, sink,
// error, source) to a folder, a gs:// prefix, a BigQuery table or a
// Pub/Sub topic (Write, WriteFn), and prepares that target before a run
// (EnsureTarget).
package deadletterio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// Write writes each PCollection of dead letters to target under the
// retry policy. They are written separately, not flattened, since they
// may be windowed differently.
func Write(s beam.Scope, target schemas.DeadLetterTarget, policy retry.Settings, dead ...beam.PCollection) {
	s = s.Scope("deadletter.Write")
	for _, d := range dead {
		beam.ParDo0(s, &WriteFn{Target: target, Retry: policy}, d)
	}
}

// WriteReporting is Write for prism, and every runner but Dataflow: each
// writer (ReportingWriteFn) also emits, at the end of a bundle, the count
// of dead letters it made durable, into a step that discards it behind a
// fusion break (beam.Reshuffle, which prism turns into just that).
//
// Every stage with a sink ends in a dead-letter writer, so the count
// gives each such stage a data output that closes only after its sinks
// and writers have finished the bundle. prism (Beam v2.77) busy-waits on a
// bundle whose data outputs have all closed, or that has none, until the
// SDK reports the bundle done; a sink waits for its writes in FinishBundle,
// after its stage's other outputs closed, so without this prism spun a
// core for as long as the writes took (docs/upstream/prism-busy-wait.md).
// The writers stay fused with their producers: a bundle still commits
// only once its dead letters are durable.
func WriteReporting(s beam.Scope, target schemas.DeadLetterTarget, policy retry.Settings, dead ...beam.PCollection) {
	s = s.Scope("deadletter.Write")
	for _, d := range dead {
		written := beam.ParDo(s, &ReportingWriteFn{WriteFn{Target: target, Retry: policy}}, d)
		beam.ParDo0(s, discardReport, beam.Reshuffle(s, written))
	}
}
