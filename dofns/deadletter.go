package dofns

import (
	"time"

	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// deadLetter builds a dead letter stamped now.
func deadLetter(sink, payload, source string, err error) codec.DeadLetter {
	return codec.NewDeadLetter(sink, payload, source, err, time.Now())
}
