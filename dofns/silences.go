package dofns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
	"github.com/sensorpipe/sensorpipe/schemas/silences"
)

func init() {
	dofnreg.DoFn(&SilenceBatchFn{}, register.Function5x0[context.Context, beam.EventTime, string, schemas.Record, func(beam.EventTime, string, silences.SilenceBatch)])
	register.Emitter3[beam.EventTime, string, silences.SilenceBatch]()
	dofnreg.DoFn(&SilencesFn{}, register.Function6x1[context.Context, state.Provider, timers.Provider, string, silences.SilenceBatch, func(silences.Silence), error])
	register.Emitter1[silences.Silence]()
	dofnreg.DoFn(&SilenceRecordsFn{}, register.Function3x0[silences.Silence, func(hours.BQRow), func(PubSubMessage)])
	register.Emitter1[PubSubMessage]()
	dofnreg.DoFn(&RecoverSilencesFn{}, register.Function3x1[context.Context, []byte, func(string, silences.SilenceBatch), error])
	register.Emitter2[string, silences.SilenceBatch]()

	register.Function1x1(encodeSilenceBatch)
	register.Function1x2(silences.DecodeSilenceBatch)
	register.Function1x1(encodeSilence)
	register.Function1x2(decodeSilence)
	// One element per sensor and bundle crosses the keyed step: the
	// identity once and the event times as varint deltas.
	beam.RegisterCoder(reflect.TypeOf((*silences.SilenceBatch)(nil)).Elem(), encodeSilenceBatch, silences.DecodeSilenceBatch)
	beam.RegisterCoder(reflect.TypeOf((*silences.Silence)(nil)).Elem(), encodeSilence, decodeSilence)
	beam.RegisterType(reflect.TypeOf((*PubSubMessage)(nil)).Elem())
}

// PubSubMessage is one message for a topic: its data and attributes.
type PubSubMessage struct {
	Data       []byte
	Attributes map[string]string
}

// DefaultSilenceBuffered is the most readings a SilenceBatchFn holds before
// it sends every batch it has.
const DefaultSilenceBuffered = 65_536

// SilenceBatchFn packs a bundle's readings, KV<identity, Record>, into one
// silences.SilenceBatch per sensor (its identity and the distinct event
// times, with their silent_after when the spec's cadence field sets it
// per reading), stamped with the batch's earliest event time, so that
// SilencesFn reads and writes each sensor's state once per bundle however
// many readings the bundle holds. It holds at most MaxBuffered readings
// before it sends what it has.
type SilenceBatchFn struct {
	Spec *hours.Compiled
	// MaxBuffered defaults to DefaultSilenceBuffered.
	MaxBuffered int

	batches  map[string]*silenceAcc
	buffered int
	perRead  bool
}

type silenceAcc struct {
	identity []schemas.Value
	times    []silenceTime
}

type silenceTime struct{ at, after int64 }

// Setup notes whether silent_after is set per reading.
func (f *SilenceBatchFn) Setup() {
	_, fixed := silences.SilenceAfter(f.Spec.Spec)
	f.perRead = !fixed
}

// StartBundle starts with nothing held.
func (f *SilenceBatchFn) StartBundle(func(beam.EventTime, string, silences.SilenceBatch)) {
	f.batches, f.buffered = map[string]*silenceAcc{}, 0
}

// ProcessElement adds a reading's event time to its sensor's batch.
func (f *SilenceBatchFn) ProcessElement(_ context.Context, _ beam.EventTime, key string, r schemas.Record, emit func(beam.EventTime, string, silences.SilenceBatch)) {
	a := f.batches[key]
	if a == nil {
		a = &silenceAcc{identity: silences.IdentityValues(f.Spec.Spec, &r)}
		f.batches[key] = a
	}
	t := silenceTime{at: r.EventMs}
	if f.perRead {
		t.after = silences.SilentAfterOf(f.Spec.Spec, &r).Milliseconds()
	}
	a.times = append(a.times, t)
	f.buffered++
	if max := f.MaxBuffered; f.buffered >= max && max > 0 || max <= 0 && f.buffered >= DefaultSilenceBuffered {
		f.flush(emit)
	}
}

// FinishBundle sends every batch.
func (f *SilenceBatchFn) FinishBundle(emit func(beam.EventTime, string, silences.SilenceBatch)) {
	f.flush(emit)
}

func (f *SilenceBatchFn) flush(emit func(beam.EventTime, string, silences.SilenceBatch)) {
	for key, a := range f.batches {
		slices.SortFunc(a.times, func(x, y silenceTime) int {
			if x.at != y.at {
				return int(min(max(x.at-y.at, -1), 1))
			}
			// Of two readings with one millisecond, the larger interval.
			return int(min(max(y.after-x.after, -1), 1))
		})
		b := silences.SilenceBatch{Identity: a.identity, TimesMs: make([]int64, 0, len(a.times))}
		if f.perRead {
			b.AfterMs = make([]int64, 0, len(a.times))
		}
		for i, t := range a.times {
			if i > 0 && t.at == a.times[i-1].at {
				continue
			}
			b.TimesMs = append(b.TimesMs, t.at)
			if f.perRead {
				b.AfterMs = append(b.AfterMs, t.after)
			}
		}
		emit(beam.EventTime(b.TimesMs[0]), key, b)
	}
	f.batches, f.buffered = map[string]*silenceAcc{}, 0
}

// SilencesFn raises a stream's silences: keyed by identity, it keeps each
// sensor's silences.SilenceTrack in state (its newest reading's event time,
// that reading's silent_after, and whether its silence was raised) and an
// event-time timer at the time the sensor turns silent
// (SilenceTrack.DueMs). When the watermark passes it, the timer raises one
// silence record; the sensor's next reading raises one resumed record
// (and the silence too, when the reading came before the watermark passed
// the gap). Each element is one bundle's readings of a sensor
// (SilenceBatchFn): one state read and at most one write per sensor and
// bundle. A timer is set only when the sensor has none pending at or
// before its due time: a newer reading leaves the pending timer where it
// is, and a timer that fires before the sensor's due time sets itself
// again at it, so a sensor that keeps reporting costs one timer per
// silent_after, not one per bundle.
//
// A reading no newer than the sensor's newest changes nothing, so
// redelivered messages raise nothing twice. A restarted local stream
// starts with no state: RecoverSilencesFn reads each sensor's readings of
// the allowed lateness back from Bigtable, and the records the run before
// wrote to the silences table (History batches, SilenceTrack.Prepend and
// SilenceTrack.Restore), so the gaps before and across the restart are
// raised too, a sensor that stopped before it is timed again, a silence
// written before it gets its resumed record, and no record written before
// it is raised again. Without the silences table (a run that writes only
// the topic) the gaps the readings show are raised again, with the same
// ids (silences.SilenceID), for a reader to drop.
//
// The timer's output timestamp is its own time, the silence's
// silent_since, which OnTimer reads to tell a timer set for an older
// reading from the current one: it holds the watermark no further back
// than the input's, since it fires as soon as the input passes it.
type SilencesFn struct {
	// DefaultAfterMs is the spec's silent_after in milliseconds (0: set
	// per reading, by each batch's AfterMs).
	DefaultAfterMs int64

	// Track is the sensor's silences.SilenceTrack (AppendSilenceTrack).
	Track state.Value[[]byte]
	// Timer fires when the sensor turns silent.
	Timer timers.EventTime

	raised, resumed beam.Counter
}

// NewSilencesFn returns a SilencesFn with its state and timer declared.
func NewSilencesFn(spec *hours.Compiled) *SilencesFn {
	d, _ := silences.SilenceAfter(spec.Spec)
	return &SilencesFn{
		DefaultAfterMs: d.Milliseconds(),
		Track:          state.MakeValueState[[]byte]("silence"),
		Timer:          timers.InEventTime("silent"),
	}
}

// Setup makes the counters.
func (f *SilencesFn) Setup() {
	f.raised = beam.NewCounter("silences", "raised")
	f.resumed = beam.NewCounter("silences", "resumed")
}

// ProcessElement takes one bundle's readings of one sensor.
func (f *SilencesFn) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, key string, b silences.SilenceBatch, emit func(silences.Silence)) error {
	if len(b.TimesMs) == 0 && len(b.Stored) == 0 {
		return nil
	}
	tr, err := f.read(sp)
	if err != nil {
		return err
	}
	if tr.Known && !b.History && b.TimesMs[len(b.TimesMs)-1] <= tr.LastMs {
		return nil // nothing newer: a late or redelivered batch
	}
	wasDue, wasSet := tr.DueMs()
	var out []silences.Silence
	if b.History {
		now := time.Now().UnixMilli()
		out = tr.Prepend(b.Identity, b.TimesMs, b.AfterMs, f.DefaultAfterMs, now)
		out = tr.Restore(b.Identity, b.TimesMs, b.Stored, out, now)
	} else {
		out = tr.Observe(b.Identity, b.TimesMs, b.AfterMs, f.DefaultAfterMs, time.Now().UnixMilli())
	}
	if err := f.Track.Write(sp, silences.AppendSilenceTrack(nil, tr)); err != nil {
		return fmt.Errorf("write silence state: %w", err)
	}
	if due, ok := tr.DueMs(); ok && (!wasSet || due < wasDue) {
		f.setTimer(tp, due)
	}
	f.emit(ctx, out, emit)
	return nil
}

// OnTimer raises the sensor's silence, unless a newer reading came since
// the timer was set: then it sets the timer again at the sensor's due
// time.
func (f *SilencesFn) OnTimer(ctx context.Context, at beam.EventTime, sp state.Provider, tp timers.Provider, key string, timer timers.Context, emit func(silences.Silence)) error {
	tr, err := f.read(sp)
	if err != nil {
		return err
	}
	x, ok := tr.Expire(at.Milliseconds(), time.Now().UnixMilli())
	if !ok {
		if due, ok := tr.DueMs(); ok && due > at.Milliseconds() {
			f.setTimer(tp, due)
		}
		return nil
	}
	if err := f.Track.Write(sp, silences.AppendSilenceTrack(nil, tr)); err != nil {
		return fmt.Errorf("write silence state: %w", err)
	}
	f.emit(ctx, []silences.Silence{x}, emit)
	return nil
}

// setTimer sets the sensor's timer at dueMs, its output timestamp the
// same.
func (f *SilencesFn) setTimer(tp timers.Provider, dueMs int64) {
	f.Timer.Set(tp, time.UnixMilli(dueMs), timers.WithOutputTimestamp(time.UnixMilli(dueMs)))
}

func (f *SilencesFn) read(sp state.Provider) (silences.SilenceTrack, error) {
	b, ok, err := f.Track.Read(sp)
	if err != nil {
		return silences.SilenceTrack{}, fmt.Errorf("read silence state: %w", err)
	}
	if !ok || len(b) == 0 {
		return silences.SilenceTrack{}, nil
	}
	return silences.DecodeSilenceTrack(b)
}

func (f *SilencesFn) emit(ctx context.Context, out []silences.Silence, emit func(silences.Silence)) {
	for _, x := range out {
		if x.Kind == silences.SilenceRaised {
			f.raised.Inc(ctx, 1)
		} else {
			f.resumed.Inc(ctx, 1)
		}
		emit(x)
	}
}

// SilenceRecordsFn renders each silence record for its sinks: a row of
// the silences table (silences.SilenceBQRow) when BigQuery is on, and
// a message for the silences topic when Topic is set, its data the
// record's JSON, with attributes silence_id (for a reader to drop a
// repeat) and kind.
type SilenceRecordsFn struct {
	Spec     *hours.Compiled
	BigQuery bool
	Topic    bool
}

// ProcessElement renders one record.
func (f *SilenceRecordsFn) ProcessElement(x silences.Silence, row func(hours.BQRow), msg func(PubSubMessage)) {
	if f.BigQuery {
		row(silences.SilenceBQRow(f.Spec.Spec, x))
	}
	if f.Topic {
		msg(PubSubMessage{Data: silences.SilenceJSON(f.Spec.Spec, x), Attributes: map[string]string{
			silences.SilenceColID: silences.SilenceID(f.Spec.Spec, x), silences.SilenceColKind: x.Kind}})
	}
}

func encodeSilenceBatch(b silences.SilenceBatch) []byte { return silences.AppendSilenceBatch(nil, b) }

// encodeSilence writes a record as its kind, the four times as varints,
// then the identity (a SilenceBatch with no times).
func encodeSilence(x silences.Silence) []byte {
	b := binary.AppendUvarint(nil, uint64(len(x.Kind)))
	b = append(b, x.Kind...)
	for _, t := range []int64{x.LastSeenMs, x.SilentSinceMs, x.DetectedAtMs, x.ResumedAtMs} {
		b = binary.AppendVarint(b, t)
	}
	return silences.AppendSilenceBatch(b, silences.SilenceBatch{Identity: x.Identity})
}

func decodeSilence(p []byte) (silences.Silence, error) {
	var x silences.Silence
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return x, fmt.Errorf("%w: silence: bad kind", packed.ErrCodec)
	}
	x.Kind, p = string(p[k:k+int(n)]), p[k+int(n):]
	for _, t := range []*int64{&x.LastSeenMs, &x.SilentSinceMs, &x.DetectedAtMs, &x.ResumedAtMs} {
		v, k := binary.Varint(p)
		if k <= 0 {
			return x, fmt.Errorf("%w: silence: bad time", packed.ErrCodec)
		}
		*t, p = v, p[k:]
	}
	b, err := silences.DecodeSilenceBatch(p)
	if err != nil {
		return x, err
	}
	x.Identity = b.Identity
	return x, nil
}

// RecoverSilencesFn, once when a restarted local stream starts, reads
// back from Bigtable every reading with an event time within the allowed
// lateness (written on arrival by the run before) and, when the run
// writes BigQuery, the records of the silences table with silent_since
// within StoredSilencesLookback, and emits each sensor's event times and
// records as one History batch for SilencesFn, which a killed or stopped
// run's state lost. A read that fails after its retries fails the
// bundle: on prism that stops the stream at start-up, with every message
// not yet acknowledged left to the next run.
type RecoverSilencesFn struct {
	Spec            *hours.Compiled
	Recovery        Recovery
	AllowedLateness time.Duration
	// BigQueryProject and BigQueryDataset hold the silences table ("":
	// the run writes no BigQuery, so no records are read back).
	BigQueryProject, BigQueryDataset string

	reader *readBacker
	found  beam.Counter
}

// Setup opens the Bigtable client. A spec with no table to read back
// from has nothing to recover (the launcher says so at start).
func (f *RecoverSilencesFn) Setup(ctx context.Context) error {
	f.found = beam.NewCounter("silences", "sensors_recovered")
	r, err := openReadBacker(ctx, f.Spec, f.Recovery)
	if errors.Is(err, hours.ErrNoReadBack) {
		return nil
	}
	f.reader = r
	return err
}

// Teardown closes the client.
func (f *RecoverSilencesFn) Teardown() error {
	if f.reader != nil {
		return f.reader.close()
	}
	return nil
}

// ProcessElement scans the readings and emits a History batch per sensor.
func (f *RecoverSilencesFn) ProcessElement(ctx context.Context, _ []byte, emit func(string, silences.SilenceBatch)) error {
	if f.reader == nil {
		return nil
	}
	from := time.Now().Add(-f.AllowedLateness).UnixMilli()
	plan, err := f.reader.rb.PlanSince(from, time.Now().Add(365*24*time.Hour).UnixMilli())
	if err != nil {
		return fmt.Errorf("recover silences: read back %s: %w", f.reader.rb.Table(), err)
	}
	acc := &SilenceBatchFn{Spec: f.Spec, MaxBuffered: math.MaxInt}
	acc.Setup()
	acc.StartBundle(nil)
	err = f.reader.scan(ctx, plan, from, math.MaxInt64, discoverPolicy, func() { acc.StartBundle(nil) }, func(row hours.ReadRow) {
		recs, _ := f.reader.rb.Records([]hours.ReadRow{row}, "", from, math.MaxInt64)
		for i := range recs {
			acc.ProcessElement(ctx, 0, group.IdentityKey(f.reader.rb.Spec(), &recs[i]), recs[i], nil)
		}
	})
	if err != nil {
		return fmt.Errorf("recover silences: %w", err)
	}
	stored := map[string][]silences.Silence{}
	if f.BigQueryDataset != "" && stores.ReadSilences != nil {
		xs, err := stores.ReadSilences(ctx, f.BigQueryProject, f.BigQueryDataset, f.Spec.Spec, time.Now().Add(-StoredSilencesLookback).UnixMilli())
		if err != nil {
			return fmt.Errorf("recover silences: %w", err)
		}
		for _, x := range xs {
			key := group.IdentityKey(f.Spec.Spec, &schemas.Record{Values: f.identityRecord(x.Identity)})
			stored[key] = append(stored[key], x)
		}
	}
	f.found.Inc(ctx, int64(len(acc.batches)))
	acc.flush(func(_ beam.EventTime, key string, b silences.SilenceBatch) {
		b.History, b.Stored = true, stored[key]
		delete(stored, key)
		emit(key, b)
	})
	// Sensors with records but no reading within the allowed lateness.
	for key, xs := range stored {
		emit(key, silences.SilenceBatch{Identity: xs[0].Identity, History: true, Stored: xs})
	}
	return nil
}

// StoredSilencesLookback is how far back, by silent_since, a restarted
// local stream reads the silences table: a sensor silent for longer at
// the restart gets no resumed record when it reports again.
const StoredSilencesLookback = 30 * 24 * time.Hour

// identityRecord places identity values at their fields' positions, as a
// record's values, for group.IdentityKey.
func (f *RecoverSilencesFn) identityRecord(identity []schemas.Value) []schemas.Value {
	vals := make([]schemas.Value, len(f.Spec.Fields))
	for i, name := range f.Spec.Identity {
		if fi := f.Spec.FieldIndex(name); fi >= 0 && fi < len(vals) && i < len(identity) {
			vals[fi] = identity[i]
		}
	}
	return vals
}
