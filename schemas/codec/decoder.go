package codec

import (
	"errors"
	"fmt"
	"github.com/sensorpipe/sensorpipe/schemas"
	"sort"
	"strings"
)

// Decoder turns one payload (a line of a file, or a Pub/Sub message's data)
// into records. Parser is the JSON decoder, ProtoParser the proto one.
type Decoder interface {
	ParseString(dst []schemas.Record, payload, source string) ([]schemas.Record, error)
	// ParseInput is ParseString with what the reader knows besides the
	// payload: a message's attributes, and where to report payload keys
	// the spec does not read.
	ParseInput(dst []schemas.Record, payload, source string, in Input) ([]schemas.Record, error)
	// Readings calls yield with the payload of each reading a Pub/Sub
	// message's data carries, each a slice of data, until yield returns
	// false; an error is the message's own (see Parser.Readings,
	// ProtoParser.Readings and ReadMessage).
	Readings(data []byte, yield func([]byte) bool) error
	// Split is Readings collected, each payload copied.
	Split(data []byte) ([]string, error)
}

// formats maps a payload format (the launcher's --format) to the
// constructor of its decoder. A new format is one entry here.
var formats = map[string]func(*schemas.Spec, EventTimeLimits) (Decoder, error){
	"json": func(s *schemas.Spec, lim EventTimeLimits) (Decoder, error) { return NewParserLimited(s, lim), nil },
	"proto": func(s *schemas.Spec, lim EventTimeLimits) (Decoder, error) {
		p, err := NewProtoParserLimited(s, lim)
		if err != nil {
			return nil, err
		}
		return p, nil
	},
}

// FormatNames lists the payload formats, sorted.
func FormatNames() []string {
	names := make([]string, 0, len(formats))
	for n := range formats {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrFormat marks a payload format with no decoder, or one the spec does
// not fit.
var ErrFormat = errors.New("bad format")

// NewDecoder is the decoder of payload format (one of FormatNames) for
// spec s, taking the event times within lim.
func NewDecoder(format string, s *schemas.Spec, lim EventTimeLimits) (Decoder, error) {
	newDecoder, ok := formats[format]
	if !ok {
		return nil, fmt.Errorf("%w: format %q has no decoder (available: %s)", ErrFormat, format, strings.Join(FormatNames(), ", "))
	}
	d, err := newDecoder(s, lim)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return d, nil
}
