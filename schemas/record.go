// Package schemas is sensorpipe's pure core: record types, the declarative
// dataset spec, row-key templates, validation, imputation and encoding. It
// imports no Beam and does no I/O, so every function here is tested with
// plain table tests.
package schemas

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
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
	Kind Kind
	// Bool sits next to Kind so both share one word: a Value is 64 bytes,
	// not 72, in every record's Values.
	Bool  bool
	Str   string
	Num   float64
	Int   int64
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
	// from, kept so a later write failure can still dead-letter the payload;
	// a file's reading keeps its line's place too (LineSource), so that
	// dead letter names the line.
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
	// ErrUnknownField marks a reading with a payload key the spec does not
	// read, when the spec says unknown_fields: reject.
	ErrUnknownField = errors.New("unknown_field")
	ErrWriteFailed  = errors.New("write_failed")
	ErrTooLate      = errors.New("too_late")
	// ErrTooLarge marks an input line or message over the size limit: it
	// is dead-lettered with a prefix of its payload.
	ErrTooLarge = errors.New("too_large")
	// ErrInternal marks a record that reached code that could not handle
	// it (a bug, not bad data): it is dead-lettered with the error rather
	// than crash the bundle.
	ErrInternal = errors.New("internal")
	// ErrUnreadable marks the part of a CSV, Parquet or Avro file that
	// could not be read (corrupt or truncated): the rows before the
	// damage are read, the rest is one dead letter naming where it stopped.
	ErrUnreadable = errors.New("unreadable")
)

var reasons = []error{ErrMalformed, ErrMissingField, ErrInvalidField, ErrBadTimestamp, ErrOutOfRange, ErrUnknownField, ErrWriteFailed, ErrTooLate, ErrTooLarge, ErrInternal, ErrUnreadable}

// Reasons lists every dead-letter reason code.
func Reasons() []string {
	out := make([]string, len(reasons))
	for i, r := range reasons {
		out[i] = r.Error()
	}
	return out
}

// DefaultMaxLineBytes is the default limit on one input line or message: a
// tenth of a Bigtable cell's 10 MB limit.
const DefaultMaxLineBytes = 1 << 20

// LineLimit is the limit a MaxLineBytes setting means: n, or
// DefaultMaxLineBytes when n is 0 or less.
func LineLimit(n int) int {
	if n <= 0 {
		return DefaultMaxLineBytes
	}
	return n
}

// TooLargePrefix is how much of an over-long payload its dead letter keeps.
const TooLargePrefix = 1 << 10

// TooLarge is the error of a payload of size bytes over limit; prefix is
// the start of the payload, which the dead letter keeps.
func TooLarge(size int64, limit int) error {
	return fmt.Errorf("%w: %d bytes is over the limit of %d (--max_line_bytes); the payload kept is its first %d bytes",
		ErrTooLarge, size, limit, TooLargePrefix)
}

// TooLargeInFile is the error of a line of a file of size bytes over
// limit, whose dead letter names its place and hash (DeadLetter.Length).
func TooLargeInFile(size int64, limit int) error {
	return fmt.Errorf("%w: %d bytes is over the limit of %d (--max_line_bytes); the payload kept is its first %d bytes, and offset, length and sha256 name the record in its file: a replay (--format=deadletter) with --max_line_bytes=%d or more reads it back",
		ErrTooLarge, size, limit, TooLargePrefix, size)
}

// TooLargeReading is the error of one reading of a Pub/Sub message, of
// size bytes over limit; its dead letter keeps the whole reading, so that a
// replay with a larger --max_line_bytes lands it.
func TooLargeReading(size int64, limit int) error {
	return fmt.Errorf("%w: a reading of %d bytes is over the limit of %d (--max_line_bytes); the payload kept is the whole reading: replay it with a larger --max_line_bytes to land it",
		ErrTooLarge, size, limit)
}

// Prefix is the start of payload that a too_large dead letter keeps.
func Prefix(payload string) string {
	if len(payload) <= TooLargePrefix {
		return payload
	}
	return payload[:TooLargePrefix]
}

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
	// Payload is the record as read. One that is not valid UTF-8 (which
	// JSON and BigQuery STRING cannot hold) is shown here by its first
	// TooLargePrefix bytes, invalid bytes replaced, and PayloadBase64 holds
	// it whole and exactly.
	Payload       string `json:"payload"`
	PayloadBase64 string `json:"payload_base64,omitempty"`
	Reason        string `json:"reason"`
	// Sink is the stage that rejected it (SinkParse, SinkBigtable, ...).
	Sink   string `json:"sink"`
	Error  string `json:"error"`
	Source string `json:"source"`
	Time   string `json:"time"`
	// Line is the record's line in its source file, counted from 1, when
	// known; Offset is the byte offset where the line starts, given when
	// the line's number is not known (a block of a large file read on its
	// own).
	Line   int64 `json:"line,omitempty"`
	Offset int64 `json:"offset,omitempty"`
	// Row is the record's place in a Parquet file (its row group and row)
	// or an Avro file (its block and record), counted from 0.
	Row string `json:"row,omitempty"`
	// Length and SHA256 name a too_large record of a file exactly: its
	// bytes from Offset (given then with Line, 0 included), Length of
	// them, line end excluded, and their SHA-256 in hex. A replay with a
	// larger --max_line_bytes reads it back from the file, and knows
	// whether the file changed since.
	Length int64  `json:"length,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Identity (identity field name to its text), WindowStart and
	// WindowEnd (RFC 3339, UTC) name the sensor-hour of a rollup's dead
	// letter, so that a replay rebuilds it.
	Identity    map[string]string `json:"identity,omitempty"`
	WindowStart string            `json:"window_start,omitempty"`
	WindowEnd   string            `json:"window_end,omitempty"`
	// Previous are the failures of the record before this one, oldest
	// first, when it was replayed from the dead letter and failed again.
	Previous []PriorFailure `json:"previous,omitempty"`
}

// MarshalJSON writes d as its fields say, with offset given even when 0
// for a record named by its length (a too_large record at the start of
// its file).
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	type fields DeadLetter
	if d.Length == 0 || d.Offset != 0 {
		return json.Marshal(fields(d))
	}
	return json.Marshal(struct {
		fields
		Offset int64 `json:"offset"`
	}{fields(d), 0})
}

// PriorFailure is an earlier failure of a replayed dead letter.
type PriorFailure struct {
	Reason string `json:"reason"`
	Sink   string `json:"sink"`
	Error  string `json:"error"`
	Time   string `json:"time"`
}

// NewDeadLetter builds the dead letter of payload (read from source) that
// sink could not take because of err, stamped with now (UTC).
func NewDeadLetter(sink, payload, source string, err error, now time.Time) DeadLetter {
	d := DeadLetter{
		Payload: payload,
		Reason:  Reason(err),
		Sink:    sink,
		Error:   strings.ToValidUTF8(err.Error(), "\uFFFD"),
		Source:  source,
		Time:    now.UTC().Format(time.RFC3339Nano),
	}
	d.provenance(source)
	if !utf8.ValidString(payload) {
		d.Payload = strings.ToValidUTF8(Prefix(payload), "\uFFFD")
		d.PayloadBase64 = base64.StdEncoding.EncodeToString([]byte(payload))
	}
	return d
}

// CutPayload returns d with its payload cut to its first keep bytes (a
// valid UTF-8 payload at a character's start), its error saying so and
// why; d is returned as it is when its payload is no longer.
func (d DeadLetter) CutPayload(keep int, why string) DeadLetter {
	b, err := d.PayloadBytes()
	if err != nil {
		b = []byte(d.Payload)
	}
	if len(b) <= keep {
		return d
	}
	cut := b[:keep]
	if utf8.Valid(b) {
		for len(cut) > 0 && !utf8.Valid(cut) {
			cut = cut[:len(cut)-1]
		}
	}
	d.Error = fmt.Sprintf("%s; the payload kept is its first %d of %d bytes (%s)", d.Error, len(cut), len(b), why)
	d.Payload, d.PayloadBase64 = string(cut), ""
	if !utf8.Valid(cut) {
		d.Payload = strings.ToValidUTF8(string(cut), "\uFFFD")
		d.PayloadBase64 = base64.StdEncoding.EncodeToString(cut)
	}
	return d
}

// PayloadBytes is the payload exactly as read.
func (d DeadLetter) PayloadBytes() ([]byte, error) {
	if d.PayloadBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(d.PayloadBase64)
		if err != nil {
			return nil, fmt.Errorf("dead letter payload_base64: %w", err)
		}
		return b, nil
	}
	return []byte(d.Payload), nil
}

// reject builds a validation error carrying its reason sentinel.
func reject(reason error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", reason, fmt.Sprintf(format, args...))
}
