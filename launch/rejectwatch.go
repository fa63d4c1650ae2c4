package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
)

// rejectWarnEvery is how often, at most, a stream warns that it rejects
// everything it reads.
const rejectWarnEvery = time.Minute

// rejectWatch watches a running stream's counters and says, in one line
// at most once every rejectWarnEvery, when every record it read in that
// time was rejected: a stream has no exit code to say so, and its dead
// letters fill in silence when --format or --spec does not fit what is
// published.
type rejectWatch struct {
	every time.Duration
	// format and spec are the run's --format and --spec, for the likely
	// cause.
	format, spec string
	since        ledger.Counters // the counters at the start of the period
	at           time.Time
}

// observe takes the counters at now. Once a period of w.every has
// passed, it returns the warning for that period, if every record read in
// it was rejected (ok), and starts the next period.
func (w *rejectWatch) observe(c ledger.Counters, now time.Time) (line string, ok bool) {
	if w.since == nil || now.Before(w.at) {
		w.since, w.at = c, now
		return "", false
	}
	took := now.Sub(w.at)
	if took < w.every {
		return "", false
	}
	prev := w.since
	w.since, w.at = c, now
	d := func(k ledger.Key) int64 { return c[k] - prev[k] }
	read := d(ledger.InputRecords)
	rejected := d(ledger.InputRejected) + d(ledger.TooLate)
	if read <= 0 || rejected < read {
		return "", false
	}
	return allRejectedLine(read, took, deadLetterDeltas(prev, c), w.format, w.spec), true
}

// sinkReasonCount is a number of dead letters of one sink and reason.
type sinkReasonCount struct {
	sink, reason string
	n            int64
}

// deadLetterDeltas are the dead letters of each sink and reason counted
// between prev and cur, most first.
func deadLetterDeltas(prev, cur ledger.Counters) []sinkReasonCount {
	var out []sinkReasonCount
	for k, n := range cur {
		if k.Namespace != "deadletter" {
			continue
		}
		sink, reason, ok := strings.Cut(k.Name, ".")
		if n -= prev[k]; ok && n > 0 {
			out = append(out, sinkReasonCount{sink, reason, n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].sink+"."+out[i].reason < out[j].sink+"."+out[j].reason
	})
	return out
}

// allRejectedLine is the warning that all read records in took were
// rejected, naming the top reasons and what the first suggests.
func allRejectedLine(read int64, took time.Duration, reasons []sinkReasonCount, format, spec string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sensorpipe: warning: every record read in the last %v was rejected (%d records)", took.Round(time.Second), read)
	if len(reasons) == 0 {
		b.WriteString("; see the dead letters for why")
		return b.String()
	}
	b.WriteString(": ")
	for i, r := range reasons[:min(3, len(reasons))] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d (%s)", r.reason, r.n, r.sink)
	}
	b.WriteString("; " + likelyCause(reasons[0].reason, causeOf{stream: true, format: format, spec: spec}))
	return b.String()
}
