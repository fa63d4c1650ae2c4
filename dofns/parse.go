package dofns

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*schemas.Record)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*deadletter.DeadLetter)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Message)(nil)).Elem())
	dofnreg.DoFn(&ParseFn{}, register.Function5x0[context.Context, string, string, func(beam.EventTime, string, schemas.Record), func(deadletter.DeadLetter)])
	dofnreg.DoFn(&ParseMessageFn{}, register.Function4x0[context.Context, Message, func(beam.EventTime, string, schemas.Record), func(deadletter.DeadLetter)])
	register.Emitter2[string, string]()
	register.Emitter3[beam.EventTime, string, schemas.Record]()
	register.Emitter1[deadletter.DeadLetter]()
}

// ParseFn parses one input line (keyed by its source) into records keyed by
// their identity and stamped with their event time. Lines that fail
// validation go to the dead-letter output with their reason.
type ParseFn struct {
	// Spec is the compiled spec; its options name the payload format.
	Spec *hours.Compiled
	// MaxLineBytes limits a payload (default schemas.DefaultMaxLineBytes);
	// a longer one is dead-lettered as too_large with its first bytes.
	MaxLineBytes int
	// MaxFuture, when set (a stream's replay), dead-letters as
	// out_of_range a line with a reading whose event time is further ahead
	// of the wall clock than it (the spec's max_future).
	MaxFuture time.Duration

	parser  codec.Decoder
	builder *hours.Builder
	buf     []schemas.Record
	ctrs    ledger.Recorder
	unknown unknownKeys
	ahead   clockAhead
}

// NewParseFn returns a ParseFn for spec.
func NewParseFn(spec *hours.Compiled) *ParseFn { return &ParseFn{Spec: spec} }

// Setup takes the compiled spec's row builder and payload decoder.
func (f *ParseFn) Setup() error {
	if f.Spec == nil {
		return errors.New("parse: no compiled spec")
	}
	f.builder, f.parser = f.Spec.Builder(), f.Spec.Decoder()
	return nil
}

// ProcessElement parses line, read from source. Every record it reads is
// counted in the run's ledger: each reading it emits, or the line as one
// rejected record (also when the parser could not handle it: reason
// internal).
func (f *ParseFn) ProcessElement(ctx context.Context, at, line string, emit func(beam.EventTime, string, schemas.Record), dead func(deadletter.DeadLetter)) {
	// at may name the line's place in its file (deadletter.LineSource). The
	// readings keep it as their source, so that a write that fails later
	// dead-letters its reading with the file and line, as a parse does.
	var err error
	max := schemas.LineLimit(f.MaxLineBytes)
	if len(line) > max {
		f.ctrs.Inc(ctx, ledger.InputRecords, 1)
		f.ctrs.Inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(deadletter.SinkParse, schemas.Prefix(line), at, schemas.TooLarge(int64(len(line)), max)))
		return
	}
	in := codec.Input{Unknown: f.unknown.counter(ctx, &f.ctrs)}
	if perr := ledger.Guard(func() { err = f.parse(line, at, in) }); perr != nil {
		err = perr
	}
	if err == nil && f.MaxFuture > 0 {
		err = f.ahead.check(ctx, &f.ctrs, f.Spec, f.buf, time.Now().UnixMilli(), f.MaxFuture)
	}
	if err != nil {
		f.ctrs.Inc(ctx, ledger.InputRecords, 1)
		f.ctrs.Inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(deadletter.SinkParse, line, at, err))
		return
	}
	f.ctrs.Inc(ctx, ledger.InputRecords, int64(len(f.buf)))
	for i := range f.buf {
		r := f.buf[i]
		emit(mtime.FromMilliseconds(r.EventMs), group.IdentityKey(f.Spec.Spec, &r), r)
	}
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (f *ParseFn) FinishBundle(ctx context.Context, _ func(beam.EventTime, string, schemas.Record), _ func(deadletter.DeadLetter)) error {
	return f.ctrs.Commit(ctx)
}

// parse decodes line into f.buf and checks that every record can be built.
func (f *ParseFn) parse(line, source string, in codec.Input) error {
	var err error
	f.buf, err = parsePayload(f.parser, f.builder, f.buf[:0], line, source, in)
	return err
}

// parsePayload decodes one reading's payload into dst and checks that
// every record can be built.
func parsePayload(dec codec.Decoder, b *hours.Builder, dst []schemas.Record, payload, source string, in codec.Input) ([]schemas.Record, error) {
	dst, err := dec.ParseInput(dst, payload, source, in)
	if err != nil {
		return dst, err
	}
	for i := range dst {
		if err := b.Check(&dst[i]); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// maxUnknownKeys bounds the distinct payload keys one DoFn instance counts
// by name; further keys are counted together, so that a payload of
// arbitrary keys cannot make unbounded counters.
const maxUnknownKeys = 100

// otherUnknownKeys names the count of the keys past maxUnknownKeys.
const otherUnknownKeys = "(other keys)"

// unknownKeys counts payload keys the spec does not read, one ledger
// counter per key.
type unknownKeys map[string]bool

// counter returns the Unknown callback of a codec.Input that counts into
// ctrs.
func (u *unknownKeys) counter(ctx context.Context, ctrs *ledger.Recorder) func(string) {
	return func(key string) {
		if *u == nil {
			*u = unknownKeys{}
		}
		if !(*u)[key] {
			if len(*u) >= maxUnknownKeys {
				key = otherUnknownKeys
			} else {
				(*u)[key] = true
			}
		}
		ctrs.Inc(ctx, ledger.UnknownFieldKey(key), 1)
	}
}

// maxClockAheadSensors bounds the sensors one DoFn instance counts by name
// for a clock ahead; further sensors are counted together.
const maxClockAheadSensors = 100

// otherClockAheadSensors names the count of the sensors past
// maxClockAheadSensors.
const otherClockAheadSensors = "(other sensors)"

// clockAhead checks a stream's readings against the spec's max_future and
// counts, per sensor, those it rejects (ledger.ClockAheadKey).
type clockAhead map[string]bool

// check returns the out_of_range error of the first of recs whose event
// time is more than maxFuture ahead of nowMs, the wall clock at its
// arrival, counting it for its sensor. A payload is accepted or rejected
// whole, as the parse treats it, so a replay of its dead letter gives
// back every reading it held.
func (c *clockAhead) check(ctx context.Context, ctrs *ledger.Recorder, spec *hours.Compiled, recs []schemas.Record, nowMs int64, maxFuture time.Duration) error {
	for i := range recs {
		err := schemas.CheckFuture(spec.EventTime, recs[i].EventMs, nowMs, maxFuture)
		if err == nil {
			continue
		}
		sensor := strings.Join(hours.IdentityTexts(spec.Spec, group.IdentityKey(spec.Spec, &recs[i])), "/")
		if *c == nil {
			*c = clockAhead{}
		}
		if !(*c)[sensor] {
			if len(*c) >= maxClockAheadSensors {
				sensor = otherClockAheadSensors
			} else {
				(*c)[sensor] = true
			}
		}
		ctrs.Inc(ctx, ledger.ClockAheadKey(sensor), 1)
		return err
	}
	return nil
}

// ParseMessageFn parses one Pub/Sub message into the readings it carries,
// as a file is read: one per line (NDJSON), one per element of a JSON
// array, or one per element of the spec's protobuf batch wrapper, after
// decompressing a gzip message (codec.ReadMessage). The readings are
// read one after another from the message's bytes, never copied whole. Each is
// parsed, validated and dead-lettered on its own, so a bad line does not
// lose the good ones beside it, and each takes the message's attributes
// for the fields that name one. The ledger counts the message
// (input/messages) and each reading (input/records).
//
// With TimestampAttribute set, the message's attribute is compared with
// each reading's event time, which stays the payload's: a missing or
// unparseable attribute, and a reading further from it than the spec's
// timestamp_attribute_tolerance, are counted in the ledger, and the first
// disagreement is logged with its example. Dataflow's pubsubio and the
// local reader give this DoFn the same message, so both runners count
// alike.
type ParseMessageFn struct {
	Spec *hours.Compiled
	// MaxLineBytes limits each reading of a message: a line, an array
	// element, a protobuf batch's element (default
	// schemas.DefaultMaxLineBytes); a longer one is dead-lettered whole as
	// too_large, and the others land. A message is bounded only by
	// Pub/Sub's own limit (codec.MaxPubSubMessageBytes).
	MaxLineBytes int
	// MaxDecompressedBytes bounds a gzip message once decompressed
	// (default codec.DefaultMaxDecompressedBytes); a larger one is
	// dead-lettered whole as too_large.
	MaxDecompressedBytes int64
	// Source names the subscription in dead letters.
	Source             string
	TimestampAttribute string
	// MaxFuture, when set, dead-letters as out_of_range a reading whose
	// event time is further ahead of the wall clock at its arrival than it
	// (the spec's max_future): a device clock far ahead.
	MaxFuture time.Duration

	parser    codec.Decoder
	builder   *hours.Builder
	tolerance int64
	buf       []schemas.Record
	unzipped  []byte
	ctrs      ledger.Recorder
	unknown   unknownKeys
	ahead     clockAhead
	logged    bool
}

// Setup takes the compiled spec's row builder and payload decoder.
func (f *ParseMessageFn) Setup() error {
	if f.Spec == nil {
		return errors.New("parse message: no compiled spec")
	}
	f.builder, f.parser = f.Spec.Builder(), f.Spec.Decoder()
	f.tolerance = f.Spec.AttributeTolerance().Milliseconds()
	return nil
}

// maxKeptUnzipped is the most decompression buffer a ParseMessageFn keeps
// between messages; a larger one is dropped once its message is read.
const maxKeptUnzipped = 16 << 20

// ProcessElement reads m's readings one after another and parses each.
// A reading over MaxLineBytes is dead-lettered whole as too_large; a
// message that cannot be read (a corrupt or too large gzip stream, data
// that is not text, a broken protobuf batch) is one dead letter holding
// the whole message as received.
func (f *ParseMessageFn) ProcessElement(ctx context.Context, m Message, emit func(beam.EventTime, string, schemas.Record), dead func(deadletter.DeadLetter)) {
	f.ctrs.Inc(ctx, ledger.InputMessages, 1)
	reject := func(payload string, err error) {
		f.ctrs.Inc(ctx, ledger.InputRecords, 1)
		f.ctrs.Inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(deadletter.SinkParse, payload, f.Source, err))
	}
	attrMs, attrOK := f.attributeTime(ctx, m)
	max := schemas.LineLimit(f.MaxLineBytes)
	in := codec.Input{Attributes: m.Attributes, Unknown: f.unknown.counter(ctx, &f.ctrs)}
	reading := func(b []byte) bool {
		if len(b) > max {
			reject(string(b), schemas.TooLargeReading(int64(len(b)), max))
			return true
		}
		part := string(b)
		var err error
		if perr := ledger.Guard(func() { f.buf, err = parsePayload(f.parser, f.builder, f.buf[:0], part, f.Source, in) }); perr != nil {
			err = perr
		}
		if err == nil && f.MaxFuture > 0 {
			err = f.ahead.check(ctx, &f.ctrs, f.Spec, f.buf, time.Now().UnixMilli(), f.MaxFuture)
		}
		if err != nil {
			reject(part, err)
			return true
		}
		f.ctrs.Inc(ctx, ledger.InputRecords, int64(len(f.buf)))
		for i := range f.buf {
			r := f.buf[i]
			if attrOK {
				f.compare(ctx, m, attrMs, &r)
			}
			emit(mtime.FromMilliseconds(r.EventMs), group.IdentityKey(f.Spec.Spec, &r), r)
		}
		return true
	}
	var err error
	if perr := ledger.Guard(func() {
		f.unzipped, err = codec.ReadMessage(f.parser, m.Data, m.Attributes, f.MaxDecompressedBytes, f.unzipped, reading)
	}); perr != nil {
		err = perr
	}
	if cap(f.unzipped) > maxKeptUnzipped {
		f.unzipped = nil
	}
	if err != nil {
		reject(string(m.Data), err)
	}
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (f *ParseMessageFn) FinishBundle(ctx context.Context, _ func(beam.EventTime, string, schemas.Record), _ func(deadletter.DeadLetter)) error {
	return f.ctrs.Commit(ctx)
}

// attributeTime is the message's timestamp attribute, counting it when
// missing or unparseable.
func (f *ParseMessageFn) attributeTime(ctx context.Context, m Message) (int64, bool) {
	if f.TimestampAttribute == "" {
		return 0, false
	}
	v, ok := m.Attributes[f.TimestampAttribute]
	if !ok {
		f.ctrs.Inc(ctx, ledger.TimestampAttributeMissing, 1)
		return 0, false
	}
	ms, err := ParseEventTime(v)
	if err != nil {
		f.ctrs.Inc(ctx, ledger.TimestampAttributeUnparseable, 1)
		return 0, false
	}
	return ms, true
}

// compare counts a reading whose event time is further from its message's
// timestamp attribute than the tolerance, and logs the first.
func (f *ParseMessageFn) compare(ctx context.Context, m Message, attrMs int64, r *schemas.Record) {
	d := r.EventMs - attrMs
	if d < 0 {
		d = -d
	}
	if d <= f.tolerance {
		return
	}
	f.ctrs.Inc(ctx, ledger.TimestampAttributeDisagrees, 1)
	if !f.logged {
		f.logged = true
		log.Warnf(ctx, "parse: message %s: timestamp attribute %s=%s is %v from the reading's event time %s (tolerance %v, the spec's timestamp_attribute_tolerance); the reading keeps its payload's time, the watermark follows the attribute; further disagreements are counted in the ledger, not logged",
			m.ID, f.TimestampAttribute, m.Attributes[f.TimestampAttribute], time.Duration(d)*time.Millisecond,
			time.UnixMilli(r.EventMs).UTC().Format(time.RFC3339Nano), f.Spec.AttributeTolerance())
	}
}
