package dofns

import (
	"time"

	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// deadLetter builds a dead letter stamped now.
func deadLetter(sink, payload, source string, err error) deadletter.DeadLetter {
	return deadletter.NewDeadLetter(sink, payload, source, err, time.Now())
}
