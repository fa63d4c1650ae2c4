// Package schemas is the dataset spec: its YAML and validation, the fields'
// values and records, the row-key template language, timestamps and the
// proto declaration. Its subpackages build on it (rowkey, codec, hours,
// bqschema, targets); like them it imports no Beam and does no I/O.
package schemas

import (
	"errors"
	"fmt"
	"math"
	"slices"
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

// Same reports whether v and o hold the same value: the same kind and the
// same member of it, a float by its bits (so a NaN is the same as itself,
// and -0 is not 0).
func (v *Value) Same(o *Value) bool {
	if v.Kind != o.Kind {
		return false
	}
	switch v.Kind {
	case KindNull:
		return true
	case KindString, KindBytes:
		return v.Str == o.Str
	case KindFloat:
		return math.Float64bits(v.Num) == math.Float64bits(o.Num)
	case KindInt, KindTime:
		return v.Int == o.Int
	case KindBool:
		return v.Bool == o.Bool
	case KindTags:
		return slices.Equal(v.Pairs, o.Pairs)
	}
	return false
}

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

var ReasonErrors = []error{ErrMalformed, ErrMissingField, ErrInvalidField, ErrBadTimestamp, ErrOutOfRange, ErrUnknownField, ErrWriteFailed, ErrTooLate, ErrTooLarge, ErrInternal, ErrUnreadable}

// Reasons lists every dead-letter reason code.
func Reasons() []string {
	out := make([]string, len(ReasonErrors))
	for i, r := range ReasonErrors {
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
	for _, r := range ReasonErrors {
		if errors.Is(err, r) {
			return r.Error()
		}
	}
	return ErrMalformed.Error()
}

// Reject builds a validation error carrying its reason sentinel.
func Reject(reason error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", reason, fmt.Sprintf(format, args...))
}

// Observed sets dst to r's observed values: an imputed value (its flag
// true) and every flag are left null, as a parsed record has them.
func (s *Spec) Observed(dst []Value, r *Record) {
	clear(dst)
	n := len(s.Fields)
	copy(dst[:n], r.Values[:min(n, len(r.Values))])
	for i, im := range s.Impute {
		if f := n + i; f < len(r.Values) && r.Values[f].Bool {
			dst[s.FieldIndex(im.Field)] = Value{}
		}
	}
}
