// Package schemas is sensorpipe's pure core: record types, the declarative
// dataset spec, row-key templates, validation, imputation and encoding. It
// imports no Beam and does no I/O, so every function here is tested with
// plain table tests.
package schemas

import (
	"errors"
	"fmt"
	"time"
)

// Kind is the type of a Value.
type Kind = uint8

// Value kinds. KindNull is the zero value: absent, null or not computed.
const (
	KindNull Kind = iota
	KindString
	KindFloat
	KindInt
	KindBool
	KindTime // Int holds epoch milliseconds
	KindTags // Pairs holds sorted key/value pairs
	KindBytes
)

// Pair is one key/value of a tag set.
type Pair struct {
	K string
	V string
}

// Value is one typed field value. Only the member matching Kind is set.
type Value struct {
	Kind  Kind
	Str   string
	Num   float64
	Int   int64
	Bool  bool
	Pairs []Pair
}

// Null reports whether v holds no value.
func (v Value) Null() bool { return v.Kind == KindNull }

// Float returns v as a float64, for numeric kinds.
func (v Value) Float() float64 {
	switch v.Kind {
	case KindFloat:
		return v.Num
	case KindInt, KindTime:
		return float64(v.Int)
	}
	return 0
}

// Record is one validated reading. Values holds the spec's fields in
// declaration order, followed by the imputed flags.
type Record struct {
	Values  []Value
	EventMs int64
	// Raw is the input line and Source the file or subscription it came
	// from, kept so a later write failure can still dead-letter the payload.
	Raw    string
	Source string
}

// Dead-letter reasons. Each is a sentinel error so callers can use errors.Is.
var (
	ErrMalformed    = errors.New("malformed")
	ErrMissingField = errors.New("missing_field")
	ErrInvalidField = errors.New("invalid_field")
	ErrBadTimestamp = errors.New("bad_timestamp")
	ErrOutOfRange   = errors.New("out_of_range")
	ErrWriteFailed  = errors.New("write_failed")
	ErrTooLate      = errors.New("too_late")
	// ErrInternal marks a record that reached code that could not handle
	// it (a bug, not bad data): it is dead-lettered with the error rather
	// than crash the bundle.
	ErrInternal = errors.New("internal")
)

var reasons = []error{ErrMalformed, ErrMissingField, ErrInvalidField, ErrBadTimestamp, ErrOutOfRange, ErrWriteFailed, ErrTooLate, ErrInternal}

// Reason returns the dead-letter reason code of err ("malformed", ...). An
// error wrapping none of the sentinels is reported as "malformed" when it came
// from parsing; callers that know better pass their own sentinel.
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r) {
			return r.Error()
		}
	}
	return ErrMalformed.Error()
}

// Sinks a dead letter names: the stage that could not take its record.
const (
	// SinkParse is reading and validation: the record never became a
	// reading.
	SinkParse = "parse"
	// SinkWindow is the stream's windowing: the reading came after its
	// hour closed (too_late).
	SinkWindow = "window"
	// SinkBigtable, SinkBigQuery and SinkBigQueryRollups are the writes:
	// a reading (or a rollup row) one store did not take. The others may
	// hold it: a reading BigQuery rejects keeps its Bigtable cells.
	SinkBigtable        = "bigtable"
	SinkBigQuery        = "bigquery"
	SinkBigQueryRollups = "bigquery_rollups"
)

// Sinks lists the sinks in ledger order.
var Sinks = []string{SinkParse, SinkWindow, SinkBigtable, SinkBigQuery, SinkBigQueryRollups}

// DeadLetter is one record that could not be written, with why and where.
// It is written as one JSON object per line.
type DeadLetter struct {
	Payload string `json:"payload"`
	Reason  string `json:"reason"`
	// Sink is the stage that rejected it (SinkParse, SinkBigtable, ...).
	Sink   string `json:"sink"`
	Error  string `json:"error"`
	Source string `json:"source"`
	Time   string `json:"time"`
}

// NewDeadLetter builds the dead letter of payload (read from source) that
// sink could not take because of err, stamped with now (UTC).
func NewDeadLetter(sink, payload, source string, err error, now time.Time) DeadLetter {
	return DeadLetter{
		Payload: payload,
		Reason:  Reason(err),
		Sink:    sink,
		Error:   err.Error(),
		Source:  source,
		Time:    now.UTC().Format(time.RFC3339Nano),
	}
}

// reject builds a validation error carrying its reason sentinel.
func reject(reason error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", reason, fmt.Sprintf(format, args...))
}
