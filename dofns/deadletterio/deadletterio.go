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
