package hours

import (
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// parseAll parses lines as the spec's JSON readings.
func parseAll(t *testing.T, s *schemas.Spec, lines ...string) []schemas.Record {
	t.Helper()
	p := codec.NewParser(s)
	var recs []schemas.Record
	for _, l := range lines {
		var err error
		if recs, err = p.Parse(recs, []byte(l), "f"); err != nil {
			t.Fatalf("Parse(%s): %v", l, err)
		}
	}
	return recs
}

// prepared parses lines and prepares them as one group.
func prepared(t *testing.T, s *schemas.Spec, lines ...string) []schemas.Record {
	t.Helper()
	kept, _ := PrepareGroup(s, parseAll(t, s, lines...))
	return kept
}
