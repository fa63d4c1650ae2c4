// Package pipelines composes sensorpipe's DoFns into the transforms the
// launcher runs: read, parse, window by event-time hour, group, build rows,
// and write Bigtable, BigQuery and the dead letter. Batch and stream share
// Ingest; they differ only in the source and the trigger.
package pipelines

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window/trigger"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/internal/flowcontrol"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// Config says where a run writes and how it windows.
type Config struct {
	// Spec is the dataset spec, compiled once by the caller (its options
	// name the payload format); nothing here checks it again.
	Spec *schemas.Compiled

	BigtableProject  string
	BigtableInstance string
	// BigtableAppProfile is the app profile the writes use ("" is the
	// instance's default); BigtableFlow caps and paces each worker's writes.
	BigtableAppProfile string
	BigtableFlow       flowcontrol.Settings

	// BigQuery is nil when the BigQuery sink is off.
	BigQuery *BigQueryConfig

	// DeadLetter is where rejected records go: a folder, a gs:// prefix,
	// a BigQuery table or a Pub/Sub topic (schemas.ParseDeadLetterTarget,
	// run once by the launcher).
	DeadLetter schemas.DeadLetterTarget

	// Windowing is how readings are grouped into hours and when the groups
	// fire. The zero value is the batch windowing.
	Windowing Windowing

	// WriteOnArrival writes each streamed reading's observed cells to
	// Bigtable in the bundle that reads it, before the windowed firings
	// (see dofns.ArrivalRowsFn). The launcher sets it on the local runners,
	// whose windows live in memory.
	WriteOnArrival bool

	// Retry is the sinks' and dead-letter writers' retry policy (zero:
	// retry.Policy's defaults).
	Retry dofns.RetrySettings

	// BigtableBatchCells is the cells of one ApplyBulk batch (0: the
	// sink's default).
	BigtableBatchCells int

	// MaxLineBytes limits an input line or message; longer ones are
	// dead-lettered as too_large (0: schemas.DefaultMaxLineBytes).
	MaxLineBytes int

	// Recover reads a stream's windows back from Bigtable at their final
	// firings, so that a window a killed or stopped run held in memory is
	// imputed and rolled up from every reading it got, not only those the
	// new run sees (see dofns.StreamRowsFn and dofns.RecoverWindowsFn). It
	// relies on WriteOnArrival; the launcher sets both on the local
	// runners. A spec with no table that stores every field cannot be read
	// back: the pipeline then logs a warning and runs without.
	Recover bool

	// DiskState, on a local runner, keeps a stream's per-hour state (the
	// readings held for the hour's final firings, for the allowed
	// lateness) in files on local disk instead of the runner's memory (see
	// dofns.StreamRowsFn.DiskState). The launcher sets it on the local
	// runners only.
	DiskState bool

	// Merge has a batch read each identity's hour back from Bigtable and
	// build it with the readings stored there by earlier runs (see
	// dofns.BuildRowsFn.Merge), so that batches that split an hour, in
	// any order, or a batch after a stream, leave what one batch over all
	// the readings leaves. A spec with no table that stores every field
	// cannot be read back: the pipeline then logs a warning and each
	// batch builds its hours from its own readings (the launcher says so
	// at start).
	Merge bool

	// Replay is set when the input is dead letters to unwrap
	// (--format=deadletter; see dofns.UnwrapDeadLetterFn).
	Replay *Replay
}

// Replay is what a dead-letter replay takes: the filters on the dead
// letters to replay (empty: all).
type Replay struct {
	Reasons []string
	Sinks   []string
}

// BigQueryConfig is the BigQuery sink's destination.
type BigQueryConfig struct {
	Project     string
	Dataset     string
	Table       string
	WriteMethod string // upsert, storage_write (the DoFn's default) or insert_all; see dofns.WriteUpsert
	// Retry is the sink's retry policy (Ingest sets Config.Retry).
	Retry dofns.RetrySettings
	// MaxRequestBytes caps one request (0: the sink's default, 9 MB).
	MaxRequestBytes int
	// MaxBufferedBytes caps the memory of the Storage Write requests in
	// flight (0: the sink's default, 32 MB; see
	// dofns.BigQueryWriteFn.MaxBufferedBytes).
	MaxBufferedBytes int
}

// Check reports a run configuration that cannot run: a missing spec,
// store or dead-letter location, or windowing durations that cannot work.
// The spec itself was checked when it was compiled.
func (c Config) Check() error {
	switch {
	case c.Spec == nil:
		return fmt.Errorf("pipelines: no compiled dataset spec (schemas.Compile)")
	case c.BigtableProject == "" || c.BigtableInstance == "":
		return fmt.Errorf("pipelines: bigtable project and instance are required")
	case c.DeadLetter == (schemas.DeadLetterTarget{}):
		return fmt.Errorf("pipelines: a dead-letter location is required")
	}
	return c.Windowing.Check()
}

// ReadFiles reads every line of the files matching glob (local paths or
// gs://, .gz decompressed) as KV<file, line>, and dead letters for lines
// over maxLine bytes (too_large; 0: the default limit) and files that
// cannot be read to the end. Non-empty ranges limit the read to those
// parts of the files (a local run's part: see internal/parts).
func ReadFiles(s beam.Scope, glob string, ranges []dofns.FileRange, maxLine int) (lines, dead beam.PCollection) {
	s = s.Scope("ReadFiles")
	matches := fileio.MatchFiles(s, glob, fileio.MatchEmptyAllow())
	files := fileio.ReadMatches(s, matches)
	return beam.ParDo2(s, &dofns.ReadLinesFn{MaxLineBytes: maxLine, Ranges: ranges}, files)
}

// Parse turns KV<source, line> of JSON into KV<identity, Record> stamped
// with event time, and the dead letters of lines that fail validation.
func Parse(s beam.Scope, spec *schemas.Compiled, lines beam.PCollection) (records, dead beam.PCollection) {
	return ParseLimited(s, spec, 0, lines)
}

// ParseLimited is Parse with payloads over maxLine bytes (0: the default
// limit) dead-lettered as too_large. The payload format is the compiled
// spec's.
func ParseLimited(s beam.Scope, spec *schemas.Compiled, maxLine int, lines beam.PCollection) (records, dead beam.PCollection) {
	s = s.Scope("Parse")
	return beam.ParDo2(s, &dofns.ParseFn{Spec: spec, MaxLineBytes: maxLine}, lines)
}

// ParseInput parses the lines as cfg says: a replay's (cfg.Replay)
// unwrapped from their dead letters first (UnwrapDeadLetters), the
// rollups' rebuild probes joining the parsed readings. The dead letters
// are the parse's and the unwrapping's.
func ParseInput(s beam.Scope, cfg Config, lines beam.PCollection) (records, dead beam.PCollection) {
	if cfg.Replay == nil {
		return ParseLimited(s, cfg.Spec, cfg.MaxLineBytes, lines)
	}
	payloads, probes, unwrapDead := UnwrapDeadLetters(s, cfg.Spec, *cfg.Replay, lines)
	records, parseDead := ParseLimited(s, cfg.Spec, cfg.MaxLineBytes, payloads)
	if !cfg.Windowing.Streaming {
		// A stream's firings take readings only: a rollup's dead letter
		// is replayed by a batch.
		records = beam.Flatten(s.Scope("Replay"), records, probes)
	}
	return records, beam.Flatten(s.Scope("Replay"), parseDead, unwrapDead)
}

// UnwrapDeadLetters reads KV<source, line> of dead letters (a replay) as
// KV<source, payload> for Parse, the rollups' rebuild probes as
// KV<identity, Record>, and the dead letters of lines that are not dead
// letters (see dofns.UnwrapDeadLetterFn).
func UnwrapDeadLetters(s beam.Scope, spec *schemas.Compiled, r Replay, lines beam.PCollection) (payloads, probes, dead beam.PCollection) {
	s = s.Scope("UnwrapDeadLetters")
	fn := &dofns.UnwrapDeadLetterFn{Spec: spec, Filter: schemas.ReplayFilter{Reasons: r.Reasons, Sinks: r.Sinks}}
	return beam.ParDo3(s, fn, lines)
}

// HourlyWindows windows readings into fixed one-hour event-time windows, the
// UTC hours of the row keys.
func HourlyWindows(s beam.Scope, records beam.PCollection, opts ...beam.WindowIntoOption) beam.PCollection {
	return beam.WindowInto(s.Scope("HourlyWindows"), window.NewFixedWindows(time.Hour), records, opts...)
}

// Ingest is the one composite both runs share: it takes parsed readings,
// KV<identity, Record> stamped with event time, windows them by hour as
// cfg.Windowing says, and writes Bigtable (readings and hourly rollups) and,
// when configured, BigQuery. It returns the dead letters: readings too late
// for their window (streams only) and failed writes.
//
// Batch and stream differ only in cfg.Windowing (and the source in front).
func Ingest(s beam.Scope, cfg Config, records beam.PCollection) []beam.PCollection {
	s = s.Scope("Ingest")
	var dead []beam.PCollection
	if cfg.Windowing.Streaming {
		var late beam.PCollection
		records, late = DeadLetterTooLate(s, cfg.Windowing, records)
		dead = append(dead, late)
		if cfg.WriteOnArrival {
			arrival := beam.ParDo(s.Scope("WriteOnArrival"), &dofns.ArrivalRowsFn{Spec: cfg.Spec}, records)
			dead = append(dead, WriteBigtable(s.Scope("WriteOnArrival"), cfg, arrival))
		}
	}
	var rec dofns.Recovery
	if cfg.Windowing.Streaming && cfg.Recover {
		rec = dofns.Recovery{Project: cfg.BigtableProject, Instance: cfg.BigtableInstance}
	}
	if !cfg.Windowing.Streaming {
		// One shuffle element per identity and hour batch, not per reading.
		records = PreGroup(s, records)
	}
	if !cfg.Windowing.Streaming && cfg.Merge {
		rec = dofns.Recovery{Project: cfg.BigtableProject, Instance: cfg.BigtableInstance}
	}
	arrival := cfg.Windowing.Streaming && cfg.WriteOnArrival
	b := buildRows(s, cfg.Spec, cfg.BigQuery != nil, HourlyWindows(s, records, cfg.Windowing.Options()...), rec, arrival, cfg.DiskState, cfg.Retry)
	dead = append(dead, b.Dead, WriteBigtable(s, cfg, b.Rows))
	if cfg.BigQuery != nil {
		bq := *cfg.BigQuery
		bq.Retry = cfg.Retry
		dead = append(dead, WriteBigQuery(s, bq, schemas.SinkBigQuery, cfg.Spec.BigQuery, b.BQRows))
		if roller := cfg.Spec.Roller(); roller != nil {
			bq.Table = roller.BigQuery().Table
			dead = append(dead, WriteBigQuery(s.Scope("rollups"), bq, schemas.SinkBigQueryRollups, roller.BigQuery(), b.Rollups))
		}
	}
	return dead
}

// PreGroup packs a batch's KV<identity, Record> into KV<identity,
// dofns.HourBatch>, one identity's readings of one hour per element,
// stamped with the hour's start (dofns.PreGroupFn), so the hourly
// GroupByKey carries a few hundred times fewer elements. BuildRowsAndRollups
// takes either form.
func PreGroup(s beam.Scope, records beam.PCollection) beam.PCollection {
	return beam.ParDo(s.Scope("PreGroup"), &dofns.PreGroupFn{}, records)
}

// DeadLetterTooLate passes the stream's readings that can still join their
// window and dead-letters the others with reason too_late (see
// dofns.TooLateFn for why a wall-clock check before windowing is sound).
func DeadLetterTooLate(s beam.Scope, w Windowing, records beam.PCollection) (onTime, dead beam.PCollection) {
	s = s.Scope("TooLate")
	w = w.withDefaults()
	return beam.ParDo2(s, &dofns.TooLateFn{WindowSize: time.Hour, AllowedLateness: w.AllowedLateness, Margin: tooLateMargin}, records)
}

// tooLateMargin is how far ahead of the wall clock the too_late check
// looks: a reading whose window closes within it is dead-lettered rather
// than risk the runner dropping it silently after the check.
const tooLateMargin = 30 * time.Second

// BuildRows groups windowed KV<identity, Record> by identity and hour and
// returns the Bigtable row mutations, the BigQuery rows (empty unless
// withBigQuery) and the dead letters of records that could not be built.
func BuildRows(s beam.Scope, spec *schemas.Compiled, withBigQuery bool, windowed beam.PCollection) (rows, bqRows, dead beam.PCollection) {
	b := BuildRowsAndRollups(s, spec, withBigQuery, windowed)
	return b.Rows, b.BQRows, b.Dead
}

// Built is what BuildRowsAndRollups returns.
type Built struct {
	// Rows are Bigtable RowMutations: the readings each firing writes or
	// rewrites, with the rollup cells in the first table's rows.
	Rows beam.PCollection
	// BQRows are BigQuery rows of the readings, each sent once per window
	// (again only when a late firing changes its imputed values).
	BQRows beam.PCollection
	// Rollups are BigQuery rows of the rollup table, one per on-time or
	// late firing (empty without BigQuery or a rollup section).
	Rollups beam.PCollection
	// Dead are the records that could not be built.
	Dead beam.PCollection
}

// BuildRowsAndRollups groups windowed KV<identity, Record> by identity and
// window and builds each firing's rows. A window that fires once (batch)
// is built whole by dofns.BuildRowsFn. One that can fire more than once
// (early or late firings) has discarding panes, and dofns.StreamRowsFn
// keeps the window's readings in state, so each firing costs what it
// brings: early ones write their new readings provisionally imputed, the
// on-time one re-imputes the window and rewrites what that moved, late ones
// the same, and BigQuery gets each reading once (again if it changed).
// It expects discarding panes, as Windowing.Options gives.
func BuildRowsAndRollups(s beam.Scope, spec *schemas.Compiled, withBigQuery bool, windowed beam.PCollection) Built {
	return buildRows(s, spec, withBigQuery, windowed, dofns.Recovery{}, false, false, dofns.RetrySettings{})
}

// buildRows is BuildRowsAndRollups, with the windows read back from
// Bigtable when rec is on (a stream's at their final firing, a batch's
// merged with what earlier runs stored), their state on local disk with disk, and
// early firings that leave out what the arrival write
// stored when arrival is set (see dofns.StreamRowsFn.ArrivalWritten).
func buildRows(s beam.Scope, spec *schemas.Compiled, withBigQuery bool, windowed beam.PCollection, rec dofns.Recovery, arrival, disk bool, retry dofns.RetrySettings) Built {
	s = s.Scope("BuildRows")
	grouped := beam.GroupByKey(s, windowed)
	var b Built
	if ws := windowed.WindowingStrategy(); firesMoreThanOnce(ws) {
		// The firings meet their window's state in the global window,
		// keyed by identity and window (see dofns.StreamRowsFn).
		panes := beam.ParDo(s, dofns.PaneBatchFn{}, grouped)
		panes = beam.WindowInto(s.Scope("Firings"), window.NewGlobalWindows(), panes)
		lateness := time.Duration(ws.AllowedLateness) * time.Millisecond
		fn := dofns.NewStreamRowsFn(spec, withBigQuery, lateness)
		fn.ArrivalWritten = arrival
		if disk {
			fn.DiskState = true
			fn.SpillRun = fmt.Sprintf("%x", rand.Uint64())
		}
		if rec.On() {
			if _, err := schemas.NewReadBack(spec.Spec); err != nil {
				log.Warnf(context.Background(), "a window held in memory by a run that is killed or stopped will be finished from the readings the next run sees only: %v", err)
			} else {
				// At start-up, a probe for each window that holds readings
				// in Bigtable; each is read back at its final firing.
				fn.Recovery = rec
				probes := beam.ParDo(s.Scope("Recover"), &dofns.RecoverWindowsFn{Spec: spec, Recovery: rec, WindowSize: time.Hour, AllowedLateness: lateness},
					beam.Impulse(s.Scope("Recover")))
				panes = beam.Flatten(s.Scope("Firings"), panes, probes)
			}
		}
		b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s.Scope("Firings"), fn, panes)
	} else {
		fn := dofns.BuildRowsFn{Spec: spec, BigQuery: withBigQuery, Retry: retry}
		if rec.On() {
			if _, err := schemas.NewReadBack(spec.Spec); err != nil {
				log.Warnf(context.Background(), "a batch that splits an hour recomputes its rollup from the batch's readings only: %v", err)
			} else {
				fn.Merge = rec
			}
		}
		if typex.IsKV(windowed.Type()) && windowed.Type().Components()[1].Type() == reflect.TypeOf(dofns.HourBatch{}) {
			b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s, &dofns.BuildBatchedRowsFn{BuildRowsFn: fn}, grouped)
		} else {
			b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s, &fn, grouped)
		}
	}
	return b
}

// firesMoreThanOnce reports whether a windowing strategy may fire a window
// more than once: any trigger but the default, or late data allowed.
func firesMoreThanOnce(ws *window.WindowingStrategy) bool {
	if ws == nil {
		return false
	}
	if ws.AllowedLateness > 0 {
		return true
	}
	switch ws.Trigger.(type) {
	case nil, *trigger.DefaultTrigger, trigger.DefaultTrigger:
		return false
	}
	return true
}

// WriteBigtable writes RowMutations to cfg's Bigtable instance under its
// retry policy and returns the dead letters of those that failed, in the
// global window. Rows may come in any window and pane: the sink takes
// them in the global window, where its end-of-bundle dead letters are
// emitted.
func WriteBigtable(s beam.Scope, cfg Config, rows beam.PCollection) beam.PCollection {
	s = s.Scope("bigtable.Write")
	fn := dofns.NewBigtableWriteFn(cfg.BigtableProject, cfg.BigtableInstance)
	fn.Retry, fn.BatchCells = cfg.Retry, cfg.BigtableBatchCells
	fn.AppProfile, fn.Flow = cfg.BigtableAppProfile, cfg.BigtableFlow
	fn.WorkerBudget = !cfg.Windowing.Streaming
	return beam.ParDo(s, fn, globalWindow(s, rows))
}

// WriteDeadLetters writes each PCollection of dead letters to target (see
// dofns.WriteDeadLettersFn) under the retry policy. They are written
// separately, not flattened, since they may be windowed differently.
func WriteDeadLetters(s beam.Scope, target schemas.DeadLetterTarget, retry dofns.RetrySettings, dead ...beam.PCollection) {
	s = s.Scope("deadletter.Write")
	for _, d := range dead {
		beam.ParDo0(s, &dofns.WriteDeadLettersFn{Target: target, Retry: retry}, d)
	}
}

// Batch builds the historical re-ingestion pipeline: files in, Bigtable (and
// BigQuery) out, with every rejected record in the dead letter.
func Batch(s beam.Scope, cfg Config, glob string) error {
	return BatchPart(s, cfg, glob, nil)
}

// BatchPart is Batch over the given ranges of the files glob matches (all
// of them when ranges is empty). A local run whose input is larger than
// its memory should hold runs one BatchPart per part (internal/parts: whole
// hours, or one share of their identities).
func BatchPart(s beam.Scope, cfg Config, glob string, ranges []dofns.FileRange) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if cfg.Windowing.Streaming {
		return fmt.Errorf("pipelines: a batch run takes the batch windowing")
	}
	lines, readDead := ReadFiles(s, glob, ranges, cfg.MaxLineBytes)
	records, parseDead := ParseInput(s, cfg, lines)
	dead := Ingest(s, cfg, records)
	// The sinks' dead letters cross a Reshuffle (random keys, not a fixed
	// key) so the dead-letter write runs in a stage of its own: a failed
	// dead-letter write then retries only that stage, not a whole bundle of
	// Bigtable writes. It also gives the sink stage an output, which keeps
	// prism (Beam v2.77) from busy-polling a stage with none: measured, the
	// local batch goes from 0.66 to 0.9 of the plain writer's rate (docs/performance.md).
	// Only the batch does this: a stream's late dead letters must not meet
	// another grouping that could drop them.
	sinkDead := dead[:0:0]
	for i, d := range dead {
		sinkDead = append(sinkDead, beam.Reshuffle(s.Scope(fmt.Sprintf("deadletter.Detach%d", i)), d))
	}
	WriteDeadLetters(s, cfg.DeadLetter, cfg.Retry, append(sinkDead, readDead, parseDead)...)
	return nil
}
