package pipelines

import (
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window/trigger"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/pubsubio"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/dofns/pubsubread"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// Stream windowing defaults (the launcher's --early_firing,
// --late_firing and --allowed_lateness).
const (
	DefaultEarlyFiring     = 10 * time.Second
	DefaultLateFiring      = time.Second
	DefaultAllowedLateness = 24 * time.Hour
)

// Windowing is how readings are grouped into fixed one-hour event-time
// windows and when a window fires. The zero value is the batch windowing:
// Beam's default trigger, one firing per window once the input is read.
type Windowing struct {
	// Streaming turns on the stream trigger: an early firing every
	// EarlyFiring of processing time while the window is open, an on-time
	// firing when the watermark passes its end, and a late firing
	// LateFiring after late readings arrive, for AllowedLateness after
	// the end. Panes discard: each firing holds the readings that arrived
	// since the one before, and the row builder keeps the window's state
	// (see BuildRowsAndRollups). Readings later than that are
	// dead-lettered as too_late before windowing.
	Streaming       bool
	EarlyFiring     time.Duration
	LateFiring      time.Duration
	AllowedLateness time.Duration
}

// StreamWindowing is the stream windowing with the given early-firing
// period and allowed lateness (zero values take the defaults).
func StreamWindowing(earlyFiring, allowedLateness time.Duration) Windowing {
	return Windowing{Streaming: true, EarlyFiring: earlyFiring, AllowedLateness: allowedLateness}.withDefaults()
}

func (w Windowing) withDefaults() Windowing {
	if !w.Streaming {
		return w
	}
	if w.EarlyFiring == 0 {
		w.EarlyFiring = DefaultEarlyFiring
	}
	if w.LateFiring == 0 {
		w.LateFiring = DefaultLateFiring
	}
	if w.AllowedLateness == 0 {
		w.AllowedLateness = DefaultAllowedLateness
	}
	return w
}

// Check reports durations that cannot work.
func (w Windowing) Check() error {
	switch {
	case !w.Streaming && (w.EarlyFiring != 0 || w.LateFiring != 0 || w.AllowedLateness != 0):
		return fmt.Errorf("pipelines: early firing, late firing and allowed lateness apply to streams only")
	case w.EarlyFiring < 0 || w.LateFiring < 0 || w.AllowedLateness < 0:
		return fmt.Errorf("pipelines: early firing, late firing and allowed lateness must not be negative")
	case w.EarlyFiring != 0 && w.EarlyFiring < time.Millisecond, w.LateFiring != 0 && w.LateFiring < time.Millisecond:
		return fmt.Errorf("pipelines: firing periods must be at least a millisecond")
	}
	return nil
}

// Options are the beam.WindowInto options of the windowing.
//
// The stream trigger is AfterEndOfWindow with early and late firings that
// repeat AfterProcessingTime: never AfterCount or OrFinally, whose panes
// prism mishandles (apache/beam#31153).
func (w Windowing) Options() []beam.WindowIntoOption {
	if !w.Streaming {
		return nil
	}
	w = w.withDefaults()
	tr := trigger.AfterEndOfWindow().
		EarlyFiring(trigger.Repeat(trigger.AfterProcessingTime().PlusDelay(w.EarlyFiring))).
		LateFiring(trigger.Repeat(trigger.AfterProcessingTime().PlusDelay(w.LateFiring)))
	return []beam.WindowIntoOption{beam.Trigger(tr), beam.AllowedLateness(w.AllowedLateness), beam.PanesDiscard()}
}

// PubSubSource is a stream's source.
type PubSubSource struct {
	// Subscription is the subscription, parsed once by the launcher.
	Subscription schemas.Subscription
	// TimestampAttribute names the attribute holding the event time (epoch
	// milliseconds); empty uses the publish time. The parsed reading's own
	// timestamp field is its event time in the rows either way.
	TimestampAttribute string
	// IDAttribute names an attribute with a unique record id, for
	// deduplicating redeliveries.
	IDAttribute string
	// Dataflow reads with Beam's pubsubio, which only Dataflow runs;
	// otherwise with pubsubread, which honours PUBSUB_EMULATOR_HOST.
	Dataflow bool
	// AckDeadline is pubsubread's lease extension (0: its default).
	AckDeadline time.Duration
}

// ReadPubSub reads the subscription's messages (pubsubread.Message), the
// input of ParseMessages.
//
// Locally, pubsubread stamps each message with its timestamp attribute
// (the publish time when it has none or cannot be read) and holds the
// watermark at it. On Dataflow, pubsubio reads each message with its
// attributes at its publish time, and is not given the timestamp
// attribute: its native source would not take a message that lacks it.
// On both, ParseMessages stamps each reading with its payload's event time
// and counts a missing, unparseable or disagreeing attribute alike.
func ReadPubSub(s beam.Scope, src PubSubSource) (beam.PCollection, error) {
	s = s.Scope("ReadPubSub")
	if src.Dataflow {
		msgs := pubsubio.Read(s, src.Subscription.Project, pubsubio.ReadOptions{
			Subscription:   src.Subscription.ID,
			IDAttribute:    src.IDAttribute,
			WithAttributes: true,
		})
		return beam.ParDo(s, &dofns.FromPubsubMessageFn{}, msgs), nil
	}
	return pubsubread.TryRead(s, pubsubread.Config{
		Subscription:       src.Subscription,
		TimestampAttribute: src.TimestampAttribute,
		IDAttribute:        src.IDAttribute,
		AckDeadline:        src.AckDeadline,
	})
}

// ParseMessages turns Pub/Sub messages into KV<identity, Record> stamped
// with event time, one per reading a message carries, and the dead letters
// of the readings that fail validation (dofns.ParseMessageFn).
func ParseMessages(s beam.Scope, spec *schemas.Compiled, src PubSubSource, maxLine int, msgs beam.PCollection) (records, dead beam.PCollection) {
	s = s.Scope("Parse")
	return beam.ParDo2(s, &dofns.ParseMessageFn{Spec: spec, MaxLineBytes: maxLine, Source: src.Subscription.String(),
		TimestampAttribute: src.TimestampAttribute}, msgs)
}

// Stream builds the streaming pipeline: Pub/Sub in, the same Ingest as
// Batch with the stream windowing, every rejected record in the dead letter.
func Stream(s beam.Scope, cfg Config, src PubSubSource) error {
	if !cfg.Windowing.Streaming {
		cfg.Windowing = StreamWindowing(0, 0)
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	msgs, err := ReadPubSub(s, src)
	if err != nil {
		return err
	}
	var records, parseDead beam.PCollection
	if cfg.Replay != nil {
		// A replay's messages are dead-letter records, unwrapped to the
		// payloads they carry.
		lines := beam.ParDo(s.Scope("ReplayLines"), &dofns.MessageLinesFn{Source: src.Subscription.String()}, msgs)
		records, parseDead = ParseInput(s, cfg, lines)
	} else {
		records, parseDead = ParseMessages(s, cfg.Spec, src, cfg.MaxLineBytes, msgs)
	}
	dead := Ingest(s, cfg, records)
	WriteDeadLetters(s, cfg.DeadLetter, cfg.Retry, append(dead, parseDead)...)
	return nil
}
