package dofns

import (
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// deadLetter builds a dead letter stamped now.
func deadLetter(sink, payload, source string, err error) schemas.DeadLetter {
	return schemas.NewDeadLetter(sink, payload, source, err, time.Now())
}
