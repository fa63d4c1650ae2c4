package silences

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
)

// A stream raises a silence when a sensor's readings stop: when event
// time passes its last reading plus the spec's silent_after (by default
// three times its cadence), one silence record; when the sensor reports
// again, one resumed record. SilenceTrack is the rule, one sensor's
// account of it; the stream keeps one per identity in state.

// SilencesTable is the BigQuery table of the silence and resumed records,
// in the run's dataset.
const SilencesTable = "sensor_silences"

// Kinds of silence records.
const (
	// SilenceRaised says a sensor went silent: no reading for more than
	// silent_after after LastSeen.
	SilenceRaised = "silence"
	// SilenceResumed says the sensor of a silence reported again.
	SilenceResumed = "resumed"
)

// Columns of the silences table (and keys of its Pub/Sub messages),
// after the identity fields.
const (
	SilenceColID          = "silence_id"
	SilenceColKind        = "kind"
	SilenceColLastSeen    = "last_seen"
	SilenceColSilentSince = "silent_since"
	SilenceColDetectedAt  = "detected_at"
	SilenceColResumedAt   = "resumed_at"
)

// DefaultSilentAfterCadences is silent_after in cadences when the spec
// sets none.
const DefaultSilentAfterCadences = 3

// SilenceAfter is how long after its last reading a sensor counts as
// silent: silent_after, else DefaultSilentAfterCadences × cadence. It is
// false when the spec sets neither (or one that is not a positive
// duration; the spec's validation rejects those).
func SilenceAfter(s *schemas.Spec) (time.Duration, bool) {
	if d, ok := positiveDuration(s.SilentAfter); ok {
		return d, true
	}
	if d := s.CadenceDuration(); d > 0 {
		return DefaultSilentAfterCadences * d, true
	}
	return 0, false
}

// RaisesSilences reports whether a stream of the spec tracks silences: the
// spec declares a cadence, a cadence field or silent_after.
func RaisesSilences(s *schemas.Spec) bool {
	if _, ok := SilenceAfter(s); ok {
		return true
	}
	return s.CadenceField != "" && s.FieldIndex(s.CadenceField) >= 0
}

// SilentAfterOf is silent_after for one reading: the spec's SilenceAfter,
// else DefaultSilentAfterCadences × the reading's own interval in the
// cadence field (coverage.CadenceOf). It is 0
// when the reading carries no usable interval: the sensor's last known
// one then holds.
func SilentAfterOf(s *schemas.Spec, r *schemas.Record) time.Duration {
	if d, ok := SilenceAfter(s); ok {
		return d
	}
	if d, ok := coverage.ReadingCadence(s, r); ok {
		return DefaultSilentAfterCadences * d
	}
	return 0
}

func positiveDuration(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// IdentityValues are r's identity fields' values, in Spec.Identity order.
func IdentityValues(s *schemas.Spec, r *schemas.Record) []schemas.Value {
	out := make([]schemas.Value, len(s.Identity))
	for i, name := range s.Identity {
		if fi := s.FieldIndex(name); fi >= 0 && fi < len(r.Values) {
			out[i] = r.Values[fi]
		}
	}
	return out
}

// Silence is one silence or resumed record of one sensor's gap.
type Silence struct {
	// Kind is SilenceRaised or SilenceResumed.
	Kind string
	// Identity are the sensor's identity fields' values, in
	// Spec.Identity order.
	Identity []schemas.Value
	// LastSeenMs is the event time of the sensor's last reading before
	// the gap; SilentSinceMs is when it counted as silent, LastSeenMs plus
	// silent_after; DetectedAtMs is the wall-clock time the stream raised
	// the record; ResumedAtMs is the event time of the reading that ended
	// the gap (a resumed record's only). Epoch milliseconds.
	LastSeenMs, SilentSinceMs, DetectedAtMs, ResumedAtMs int64
}

// SilenceID is a record's deterministic id: the hex of the first 16 bytes
// of SHA-256 over the identity fields' text joined by "|", then "|", the
// gap's silent_since in epoch milliseconds, "|" and the kind. A gap raised
// again (a restarted stream that reads its readings again) has the same
// id, so the BigQuery upsert keeps one row and a Pub/Sub reader drops the
// repeat by it.
func SilenceID(s *schemas.Spec, x Silence) string {
	var b []byte
	for _, v := range x.Identity {
		b = schemas.AppendText(b, v)
		b = append(b, '|')
	}
	b = strconv.AppendInt(b, x.SilentSinceMs, 10)
	b = append(b, '|')
	b = append(b, x.Kind...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// SilenceJSON is x as one JSON object: the identity fields, then
// silence_id, kind, last_seen, silent_since, detected_at and (a resumed
// record's) resumed_at, times in RFC 3339 UTC with milliseconds. It is the
// data of a silences topic's message.
func SilenceJSON(s *schemas.Spec, x Silence) []byte {
	b := []byte{'{'}
	key := func(name string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, name)
		b = append(b, ':')
	}
	str := func(v string) {
		q, _ := json.Marshal(v)
		b = append(b, q...)
	}
	at := func(ms int64) { str(time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")) }
	for i, name := range s.Identity {
		key(name)
		if i >= len(x.Identity) {
			b = append(b, "null"...)
			continue
		}
		switch v := x.Identity[i]; v.Kind {
		case schemas.KindInt, schemas.KindFloat, schemas.KindBool:
			b = schemas.AppendText(b, v)
		case schemas.KindNull:
			b = append(b, "null"...)
		case schemas.KindTime:
			at(v.Int)
		default:
			str(string(schemas.AppendText(nil, v)))
		}
	}
	key(SilenceColID)
	str(SilenceID(s, x))
	key(SilenceColKind)
	str(x.Kind)
	key(SilenceColLastSeen)
	at(x.LastSeenMs)
	key(SilenceColSilentSince)
	at(x.SilentSinceMs)
	key(SilenceColDetectedAt)
	at(x.DetectedAtMs)
	if x.Kind == SilenceResumed {
		key(SilenceColResumedAt)
		at(x.ResumedAtMs)
	}
	return append(b, '}')
}

// SilenceTrack is one sensor's account of its silences: its newest
// reading's event time, that reading's silent_after, and whether a
// silence was raised for it. It is all the stream keeps per sensor.
type SilenceTrack struct {
	// Known is false until the track has seen a reading.
	Known    bool
	Identity []schemas.Value
	// LastMs is the newest reading's event time; AfterMs its silent_after
	// (0: none known, so no silence is raised). FirstMs is the oldest
	// reading this track has seen (Observe), for Prepend.
	LastMs, AfterMs, FirstMs int64
	// Open says the silence after LastMs was raised (by Expire) and its
	// resumed record is still to come.
	Open bool
}

// DueMs is when, in event time, the sensor turns silent unless it reports:
// one millisecond past LastMs plus silent_after, since a gap is a silence
// when it is longer than silent_after. It is false when there is nothing
// to wait for (no reading yet, no silent_after, or the silence is raised).
func (t *SilenceTrack) DueMs() (int64, bool) {
	if !t.Known || t.AfterMs <= 0 || t.Open {
		return 0, false
	}
	return t.LastMs + t.AfterMs + 1, true
}

// Observe takes a batch of the sensor's readings' event times, ascending
// and distinct, with each one's silent_after in afterMs (nil: every one's
// is defaultAfterMs; 0: the last known holds), and returns the records
// their gaps raise, each detected at detectedMs:
//
//   - A reading no newer than LastMs changes nothing: it is late, or a
//     redelivery.
//   - The first reading after LastMs ends the gap after it if a silence
//     was raised for it (Open), or if the gap is longer than silent_after
//     (a gap the watermark had not passed when the reading came): its
//     silence, unless already raised, then its resumed record.
//   - Each later gap in the batch longer than silent_after raises both.
//
// A gap gives the same records however its readings are split into
// batches, and a batch seen twice gives nothing the second time.
func (t *SilenceTrack) Observe(identity []schemas.Value, timesMs, afterMs []int64, defaultAfterMs, detectedMs int64) []Silence {
	var out []Silence
	if t.Identity == nil {
		t.Identity = identity
	}
	for i, at := range timesMs {
		if t.Known && at <= t.LastMs {
			continue
		}
		if t.Known && t.AfterMs > 0 && (t.Open || at-t.LastMs > t.AfterMs) {
			x := Silence{Identity: t.Identity, LastSeenMs: t.LastMs, SilentSinceMs: t.LastMs + t.AfterMs, DetectedAtMs: detectedMs}
			if !t.Open {
				x.Kind = SilenceRaised
				out = append(out, x)
			}
			x.Kind, x.ResumedAtMs = SilenceResumed, at
			out = append(out, x)
		}
		after := defaultAfterMs
		if afterMs != nil && i < len(afterMs) {
			after = afterMs[i]
		}
		if after <= 0 {
			after = t.AfterMs
		}
		if !t.Known {
			t.FirstMs = at
		}
		t.Known, t.LastMs, t.AfterMs, t.Open = true, at, after, false
	}
	return out
}

// Prepend takes the sensor's earlier readings, read back from the store
// after a restart (ascending and distinct, with silent_afters as Observe
// takes them), and returns the records of their gaps: those of the
// readings before FirstMs among themselves, and the gap from the last of
// them to FirstMs. Readings from FirstMs to LastMs were seen already;
// readings after LastMs (the track saw a redelivered older reading first)
// are taken as Observe takes them. Records raised before the restart come
// again with the same ids (SilenceID), for the sinks to dedupe and
// Restore to drop. A track that has seen nothing takes them as Observe
// does.
func (t *SilenceTrack) Prepend(identity []schemas.Value, timesMs, afterMs []int64, defaultAfterMs, detectedMs int64) []Silence {
	if !t.Known {
		return t.Observe(identity, timesMs, afterMs, defaultAfterMs, detectedMs)
	}
	n := 0
	for n < len(timesMs) && timesMs[n] < t.FirstMs {
		n++
	}
	m := len(timesMs)
	for m > n && timesMs[m-1] > t.LastMs {
		m--
	}
	var out []Silence
	if n > 0 {
		var head SilenceTrack
		var headAfter []int64
		if afterMs != nil {
			headAfter = afterMs[:min(n, len(afterMs))]
		}
		out = head.Observe(t.Identity, timesMs[:n], headAfter, defaultAfterMs, detectedMs)
		if head.AfterMs > 0 && t.FirstMs-head.LastMs > head.AfterMs {
			x := Silence{Identity: t.Identity, LastSeenMs: head.LastMs, SilentSinceMs: head.LastMs + head.AfterMs, DetectedAtMs: detectedMs}
			x.Kind = SilenceRaised
			out = append(out, x)
			x.Kind, x.ResumedAtMs = SilenceResumed, t.FirstMs
			out = append(out, x)
		}
		t.FirstMs = timesMs[0]
	}
	if m < len(timesMs) {
		var tailAfter []int64
		if afterMs != nil && m < len(afterMs) {
			tailAfter = afterMs[m:]
		}
		out = append(out, t.Observe(t.Identity, timesMs[m:], tailAfter, defaultAfterMs, detectedMs)...)
	}
	return out
}

// Expire raises the silence after LastMs when event time has reached
// DueMs (atMs, an event-time timer's time). It is false when the track
// has moved on since the timer was set (a newer reading, or the silence
// already raised), so a stale or repeated timer raises nothing.
func (t *SilenceTrack) Expire(atMs, detectedMs int64) (Silence, bool) {
	due, ok := t.DueMs()
	if !ok || atMs < due {
		return Silence{}, false
	}
	t.Open = true
	return Silence{Kind: SilenceRaised, Identity: t.Identity, LastSeenMs: t.LastMs, SilentSinceMs: t.LastMs + t.AfterMs, DetectedAtMs: detectedMs}, true
}
