package hours

import (
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
)

// prepared parses lines and prepares them as one group.
func prepared(t *testing.T, s *schemas.Spec, lines ...string) []schemas.Record {
	t.Helper()
	kept, _ := group.Prepare(s, readingtest.Parse(t, s, lines...))
	return kept
}
