package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// allRejected reports whether a batch's ledger read records and rejected
// every one: none became a reading.
func allRejected(l *ledger.Ledger) bool {
	return l.Read > 0 && l.Readings == 0 && l.Duplicates == 0 && l.Rejected >= l.Read
}

// reasonCount is one reason's rejected records.
type reasonCount struct {
	reason string
	n      int64
}

// rejectedReasons are the reasons of a ledger's rejected records (the
// parse and window dead letters), most first.
func rejectedReasons(l *ledger.Ledger) []reasonCount {
	by := map[string]int64{}
	for _, sink := range []string{deadletter.SinkParse, deadletter.SinkWindow} {
		for r, n := range l.DeadLetters[sink] {
			by[r] += n
		}
	}
	out := make([]reasonCount, 0, len(by))
	for r, n := range by {
		if n > 0 {
			out = append(out, reasonCount{r, n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].n > out[j].n || out[i].n == out[j].n && out[i].reason < out[j].reason
	})
	return out
}

// allRejectedMessage is the one line of a batch that rejected every record
// it read: its top reasons with their counts, and the likely cause the
// leading reason points to.
func allRejectedMessage(l *ledger.Ledger, format, spec string, dl targets.DeadLetterTarget) string {
	reasons := rejectedReasons(l)
	var top []string
	for i, rc := range reasons {
		if i == 3 {
			top = append(top, "...")
			break
		}
		top = append(top, fmt.Sprintf("%s %d", rc.reason, rc.n))
	}
	lead := ""
	if len(reasons) > 0 {
		lead = reasons[0].reason
	}
	return fmt.Sprintf("every one of the %d records read was rejected (%s): %s; the dead letters in %s hold each record with its error (--allow_all_rejected exits 0 for such a run)",
		l.Read, strings.Join(top, ", "), likelyCause(lead, causeOf{unknownKeys: len(l.FieldsNotInSpec) > 0, format: format, spec: spec}), dl)
}

// causeOf is what likelyCause knows of the run.
type causeOf struct {
	stream       bool   // a stream: readings are late against --allowed_lateness
	unknownKeys  bool   // the records held keys the spec does not read
	format, spec string // the run's --format and --spec
}

// likelyCause says what a run that rejected every record most likely got
// wrong, from its leading reason.
func likelyCause(reason string, c causeOf) string {
	switch reason {
	case schemas.ErrMalformed.Error():
		return fmt.Sprintf("likely a wrong --format: the records are not %s payloads (--format=%s; the formats are json, proto and deadletter)", c.format, c.format)
	case schemas.ErrMissingField.Error(), schemas.ErrUnknownField.Error(), schemas.ErrInvalidField.Error():
		why := "the records lack fields it requires or hold fields it refuses"
		if reason == schemas.ErrMissingField.Error() && c.unknownKeys {
			why = "the records lack fields it requires and hold keys it does not read"
		}
		return fmt.Sprintf("likely a wrong --spec: spec %s does not describe these records (%s; the dead letters name the field)", c.spec, why)
	case schemas.ErrOutOfRange.Error(), schemas.ErrBadTimestamp.Error():
		cause := fmt.Sprintf("likely the unit of the timestamps: if the times are numbers, check the unit spec %s gives its timestamp field (unit: ms, the default, s, us or ns); else its accepted event-time range", c.spec)
		if c.stream && reason == schemas.ErrOutOfRange.Error() {
			cause += ", or the devices' clocks are ahead (the spec's max_future; the dead letters say)"
		}
		return cause
	case schemas.ErrTooLarge.Error():
		return "likely --max_line_bytes, or an input that is not line-delimited"
	case schemas.ErrTooLate.Error():
		if c.stream {
			return "likely old readings: they are older than --allowed_lateness; load old data with a batch"
		}
		return "likely the event times: every record fell outside the hours the run takes"
	}
	return "see the dead letters' errors for the cause"
}
