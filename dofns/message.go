package dofns

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
)

func init() {
	dofnreg.DoFn(&MessageLinesFn{}, register.Function2x0[Message, func(string, string)])
	register.Emitter2[string, string]()
}

// Message is one Pub/Sub message as the parse reads it
// (ParseMessageFn): the stream's source emits it.
type Message struct {
	// ID is the Pub/Sub message id.
	ID string
	// Data is the message payload.
	Data []byte
	// Attributes are the message attributes (nil if none).
	Attributes map[string]string
	// PublishTime is the publish time, epoch milliseconds.
	PublishTime int64
	// EventTime is the element's event timestamp, epoch milliseconds.
	EventTime int64
	// TimestampError is non-empty when the source was given a timestamp
	// attribute that is missing or unparseable on this message; EventTime
	// is then PublishTime.
	TimestampError string
}

// MessageLinesFn reads messages as KV<source, line>, the input of a
// replay's dead-letter unwrapping: each non-empty line of a message is a
// dead-letter record (the dead-letter topic carries one a message), and
// Source, the subscription, names them all.
type MessageLinesFn struct {
	Source string
}

// ProcessElement emits each non-empty line of m.
func (f *MessageLinesFn) ProcessElement(m Message, emit func(string, string)) {
	for line := range strings.SplitSeq(string(m.Data), "\n") {
		if strings.TrimSpace(line) != "" {
			emit(f.Source, line)
		}
	}
}

// Event times outside [minEventMs, maxEventMs] (years 1000..9999) are
// rejected as unparseable: they are certainly bad data, and far-out values
// would collide with Beam's timestamp sentinels.
var (
	minEventMs = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxEventMs = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli()
)

// ParseEventTime parses a timestamp attribute value: epoch milliseconds
// (an integer, optionally signed), or an RFC 3339 timestamp (fractional
// seconds allowed). It returns epoch milliseconds.
func ParseEventTime(v string) (int64, error) {
	s := strings.TrimSpace(v)
	if s == "" {
		return 0, fmt.Errorf("empty timestamp")
	}
	var ms int64
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		ms = n
	} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		ms = t.UnixMilli()
	} else {
		return 0, fmt.Errorf("timestamp %q is neither epoch milliseconds nor RFC 3339", truncateAttr(v, 64))
	}
	if ms < minEventMs || ms > maxEventMs || ms < int64(mtime.MinTimestamp) || ms > int64(mtime.MaxTimestamp) {
		return 0, fmt.Errorf("timestamp %q is out of range", truncateAttr(v, 64))
	}
	return ms, nil
}

func truncateAttr(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
