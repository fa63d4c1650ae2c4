package pipelines

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window/trigger"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/pubsubio"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/silences"
)

// Stream windowing defaults (the launcher's --early_firing,
// --late_firing and --allowed_lateness).
const (
	DefaultEarlyFiring     = 10 * time.Second
	DefaultLateFiring      = time.Second
	DefaultAllowedLateness = 24 * time.Hour
)

// StreamOptions are what a stream reads and when its hours fire.
type StreamOptions struct {
	// Source is the subscription and how to read it (pubsubio.Config;
	// Dataflow set reads with Beam's pubsubio).
	Source pubsubio.Config
	// Windowing is when an hour fires (zero values: the defaults).
	Windowing Windowing
	// MergeStored has each hour's final firings (the on-time one and each
	// late one) read the hour back from Bigtable and build it with every
	// reading stored there, whoever wrote it (see
	// dofns.StreamRowsFn.MergeStored): so streams that share a
	// subscription, or the jobs before and after a drain-and-replace
	// update, leave what one batch over all the readings leaves. Early
	// firings read nothing. A spec with no table that stores every field
	// cannot be read back: the stream then builds each hour from its own
	// readings (the launcher warns of it at start). A replay merges each
	// hour it touches with it, as a batch replay does.
	MergeStored bool
}

// Windowing is when a stream's one-hour event-time windows fire: an
// early firing every EarlyFiring of processing time while the window is
// open, an on-time firing when the watermark passes its end, and a late
// firing LateFiring after late readings arrive, for AllowedLateness after
// the end. Panes discard: each firing holds the readings that arrived
// since the one before, and the row builder keeps the window's state (see
// dofns.StreamRowsFn). Readings later than that are dead-lettered as
// too_late before windowing. Zero values take the defaults.
type Windowing struct {
	EarlyFiring     time.Duration
	LateFiring      time.Duration
	AllowedLateness time.Duration
}

func (w Windowing) withDefaults() Windowing {
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
	case w.EarlyFiring < 0 || w.LateFiring < 0 || w.AllowedLateness < 0:
		return fmt.Errorf("pipelines: early firing, late firing and allowed lateness must not be negative")
	case w.EarlyFiring != 0 && w.EarlyFiring < time.Millisecond, w.LateFiring != 0 && w.LateFiring < time.Millisecond:
		return fmt.Errorf("pipelines: firing periods must be at least a millisecond")
	}
	return nil
}

// options are the beam.WindowInto options of the windowing.
//
// The trigger is AfterEndOfWindow with early and late firings that repeat
// AfterProcessingTime: never AfterCount or OrFinally, whose panes prism
// mishandles (apache/beam#31153).
func (w Windowing) options() []beam.WindowIntoOption {
	w = w.withDefaults()
	tr := trigger.AfterEndOfWindow().
		EarlyFiring(trigger.Repeat(trigger.AfterProcessingTime().PlusDelay(w.EarlyFiring))).
		LateFiring(trigger.Repeat(trigger.AfterProcessingTime().PlusDelay(w.LateFiring)))
	return []beam.WindowIntoOption{beam.Trigger(tr), beam.AllowedLateness(w.AllowedLateness), beam.PanesDiscard()}
}

// Stream builds the streaming graph: Pub/Sub in, Bigtable (and BigQuery)
// out, every rejected record in the dead letter.
func Stream(s beam.Scope, cfg Config, opts StreamOptions) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if err := opts.Windowing.Check(); err != nil {
		return err
	}
	msgs, err := pubsubio.ReadMessages(s, opts.Source)
	if err != nil {
		return err
	}
	if cfg.Replay != nil {
		// A replay's messages are dead-letter records, unwrapped to the
		// payloads they carry (and the rollups' rebuild probes).
		lines := beam.ParDo(s.Scope("ReplayLines"), &dofns.MessageLinesFn{Source: opts.Source.Subscription.String()}, msgs)
		records, parseDead := parseLinesChecked(s, cfg, lines, true, schemas.FutureLimit(cfg.Spec.Spec))
		dead := replayStream(s, cfg, opts.MergeStored, records)
		writeDeadLetters(s, cfg, append(dead, parseDead)...)
		return nil
	}
	records, parseDead := beam.ParDo2(s.Scope("Parse"), &dofns.ParseMessageFn{Spec: cfg.Spec, MaxLineBytes: cfg.MaxLineBytes, MaxDecompressedBytes: cfg.MaxDecompressedBytes,
		Source: opts.Source.Subscription.String(), TimestampAttribute: opts.Source.TimestampAttribute, MaxFuture: schemas.FutureLimit(cfg.Spec.Spec)}, msgs)
	dead := ingestStream(s, cfg, opts.Windowing, opts.MergeStored, records)
	writeDeadLetters(s, cfg, append(dead, parseDead)...)
	return nil
}

// replayStream builds the hours a stream replay's records touch as a batch
// replay does (dofns.ReplayRowsFn): each bundle's records of one
// identity-hour, one HourBatch (the Pub/Sub reader bounds the bundle),
// are merged, with merge, with what Bigtable holds of the hour, the hour
// is built whole, and each record is written to the sinks its dead letter
// names only; a rollup's dead letter rebuilds its hour's rollup.
// Nothing is windowed, so no record is too late: a dead letter of any age
// is replayed. The merge runs in the bundle that read the messages, so
// each bundle's hours are written before the next bundle reads them back
// (the local reader's bundles run one after another). It returns the
// builder's and the sinks' dead letters.
func replayStream(s beam.Scope, cfg Config, merge bool, records beam.PCollection) []beam.PCollection {
	s = s.Scope("Ingest")
	batches := beam.ParDo(s.Scope("PreGroup"), &dofns.PreGroupFn{MaxReadings: math.MaxInt, MaxBuffered: math.MaxInt}, records)
	fn := dofns.BuildRowsFn{Spec: cfg.Spec, BigQuery: cfg.BigQuery != nil, Retry: cfg.Retry}
	if merge {
		fn.Merge = dofns.Recovery{Project: cfg.Bigtable.Project, Instance: cfg.Bigtable.Instance}
	}
	var b built
	b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s.Scope("BuildRows"), &dofns.ReplayRowsFn{BuildRowsFn: fn}, batches)
	return writeSinks(s, cfg, b)
}

// ingestStream dead-letters the readings too late for their hour, writes
// the others' own cells on arrival (cfg.Local.WriteOnArrival), fires each
// identity-hour as w says, and writes the sinks. It returns the too_late,
// builder's and sinks' dead letters.
func ingestStream(s beam.Scope, cfg Config, w Windowing, merge bool, records beam.PCollection) []beam.PCollection {
	s = s.Scope("Ingest")
	local := LocalRunner{}
	if cfg.Local != nil {
		local = *cfg.Local
	}
	onTime, late := tooLate(s, w, records)
	dead := append([]beam.PCollection{late}, raiseSilences(s, cfg, w.withDefaults().AllowedLateness, onTime)...)
	if local.WriteOnArrival {
		bt, _ := cfg.sinks()
		arrival := beam.ParDo(s.Scope("WriteOnArrival"), &dofns.ArrivalRowsFn{Spec: cfg.Spec}, onTime)
		dead = append(dead, bigtableio.Write(s.Scope("WriteOnArrival"), bt, arrival))
	}
	b := buildStream(s, cfg, w, local, merge, onTime)
	return append(dead, writeSinks(s, cfg, b)...)
}

// tooLate passes the stream's readings that can still join their window
// and dead-letters the others with reason too_late (see dofns.TooLateFn
// for why a wall-clock check before windowing is sound).
func tooLate(s beam.Scope, w Windowing, records beam.PCollection) (onTime, dead beam.PCollection) {
	w = w.withDefaults()
	return beam.ParDo2(s.Scope("TooLate"), &dofns.TooLateFn{WindowSize: time.Hour, AllowedLateness: w.AllowedLateness, Margin: tooLateMargin}, records)
}

// tooLateMargin is how far ahead of the wall clock the too_late check
// looks: a reading whose window closes within it is dead-lettered rather
// than risk the runner dropping it silently after the check.
const tooLateMargin = 30 * time.Second

// buildStream packs each bundle's readings by identity and hour
// (dofns.PreGroupFn, as the batch does), windows them by hour with w's
// trigger, groups each firing's batches by identity and hour, and builds
// each firing's rows.
// The firings meet their window's state in the global window, keyed by
// identity and window (dofns.StreamRowsFn keeps the window's readings in
// state, so each firing costs what it brings): early ones write their new
// readings provisionally imputed, the on-time one re-imputes the window
// and rewrites what that moved, late ones the same, and BigQuery gets each
// reading once (again if it changed).
//
// The stateful steps' names and coders (Ingest/BuildRows/CoGBK, which
// groups HourBatches, Ingest/BuildRows/dofns.PaneBatchFn,
// Ingest/BuildRows/Firings'1/...) are what a running Dataflow stream is
// updated by: keep them.
func buildStream(s beam.Scope, cfg Config, w Windowing, local LocalRunner, merge bool, records beam.PCollection) built {
	w = w.withDefaults()
	batches := beam.ParDo(s.Scope("PreGroup"), &dofns.PreGroupFn{}, records)
	windowed := hourlyWindows(s, batches, w.options()...)
	s = s.Scope("BuildRows")
	grouped := beam.GroupByKey(s, windowed)
	panes := beam.ParDo(s, dofns.PaneBatchFn{}, grouped)
	panes = beam.WindowInto(s.Scope("Firings"), window.NewGlobalWindows(), panes)
	fn := dofns.NewStreamRowsFn(cfg.Spec, cfg.BigQuery != nil, w.AllowedLateness)
	fn.ArrivalWritten = local.WriteOnArrival
	if local.DiskState {
		fn.DiskState = true
		fn.SpillRun = fmt.Sprintf("%x", rand.Uint64())
	}
	rec := dofns.Recovery{Project: cfg.Bigtable.Project, Instance: cfg.Bigtable.Instance}
	if merge {
		// Every final firing reads its window back.
		fn.Recovery, fn.MergeStored = rec, true
	}
	if local.Recover {
		// At start-up, a probe for each window that holds readings in
		// Bigtable; each is read back at its final firing.
		fn.Recovery = rec
		probes := beam.ParDo(s.Scope("Recover"), &dofns.RecoverWindowsFn{Spec: cfg.Spec, Recovery: rec, WindowSize: time.Hour, AllowedLateness: w.AllowedLateness},
			beam.Impulse(s.Scope("Recover")))
		panes = beam.Flatten(s.Scope("Firings"), panes, probes)
	}
	var b built
	b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s.Scope("Firings"), fn, panes)
	return b
}

// raiseSilences tracks each sensor's readings against the spec's cadence
// and writes a silence record when one stops reporting for longer than
// silent_after, and a resumed record when it reports again
// (dofns.SilencesFn), to BigQuery's silences table
// (silences.SilencesTable, in the run's dataset) when the run writes
// BigQuery, and to cfg.SilencesTopic when set. It returns the sinks' dead
// letters. A spec without a cadence (silences.RaisesSilences), or a
// run with neither sink, adds nothing to the graph.
//
// The keyed step Ingest/Silences/dofns.SilencesFn and its state (one
// value, silence, packed bytes) and coder (silences.SilenceBatch) are part
// of the Dataflow update contract: keep them.
func raiseSilences(s beam.Scope, cfg Config, allowedLateness time.Duration, records beam.PCollection) []beam.PCollection {
	_, bq := cfg.sinks()
	if !silences.RaisesSilences(cfg.Spec.Spec) || bq == nil && cfg.SilencesTopic == nil {
		return nil
	}
	s = s.Scope("Silences")
	batches := beam.ParDo(s, &dofns.SilenceBatchFn{Spec: cfg.Spec}, records)
	if cfg.Local != nil && cfg.Local.Recover {
		// At start-up, each sensor's readings of the allowed lateness,
		// read back from Bigtable, and the records the run before wrote to
		// the silences table: what a killed run's state held.
		rec := &dofns.RecoverSilencesFn{Spec: cfg.Spec, AllowedLateness: allowedLateness,
			Recovery: dofns.Recovery{Project: cfg.Bigtable.Project, Instance: cfg.Bigtable.Instance}}
		if bq != nil {
			rec.BigQueryProject, rec.BigQueryDataset = bq.Project, bq.Dataset
		}
		history := beam.ParDo(s.Scope("Recover"), rec, beam.Impulse(s.Scope("Recover")))
		batches = beam.Flatten(s, batches, history)
	}
	raised := beam.ParDo(s, dofns.NewSilencesFn(cfg.Spec), batches)
	rows, msgs := beam.ParDo2(s, &dofns.SilenceRecordsFn{Spec: cfg.Spec, BigQuery: bq != nil, Topic: cfg.SilencesTopic != nil}, raised)
	var dead []beam.PCollection
	if bq != nil {
		t := *bq
		t.Table, t.Sink, t.Columns = silences.SilencesTable, deadletter.SinkSilences, silences.SilencesBigQuery(cfg.Spec.Spec)
		dead = append(dead, bigqueryio.Write(s, t, rows))
	}
	if cfg.SilencesTopic != nil {
		dead = append(dead, pubsubio.Publish(s, pubsubio.PublishConfig{Topic: *cfg.SilencesTopic, Retry: cfg.Retry, Sink: deadletter.SinkSilences}, msgs))
	}
	return dead
}
