// Package pipelines builds sensorpipe's two graphs from the edges
// (dofns/fileio, dofns/pubsubio, dofns/bigtableio, dofns/bigqueryio,
// dofns/deadletterio) and the core transforms (dofns): Batch, files (or a
// BigQuery table's readings) in, and Stream, Pub/Sub in. Both parse, window by the UTC hour of event
// time, build each identity-hour's rows, and write Bigtable, BigQuery
// and the dead letter; they differ in how an hour is grouped and fired.
//
//	Batch:  fileio.Read (or bigtableio.Read, a rekey; or bigqueryio.Read) → parse into batches (ParseBatchesFn; a table file's rows are parsed in the read, then PreGroup) → Ingest{HourlyWindows → BuildRows{GBK → BuildBatchedRowsFn}} → sinks
//	Stream: pubsubio.ReadMessages → parse → Ingest{TooLate → [arrival write] → HourlyWindows(triggered) → BuildRows{GBK → PaneBatchFn → StreamRowsFn}} → sinks
//	Stream replay: pubsubio.ReadMessages → unwrap → parse → Ingest{PreGroup → BuildRows{ReplayRowsFn}} → sinks
package pipelines

import (
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/deadletterio"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// Config is what both graphs take: the spec, where they write, and how.
type Config struct {
	// Spec is the dataset spec, compiled once by the caller (its options
	// name the payload format); nothing here checks it again.
	Spec *hours.Compiled

	// Bigtable is the Bigtable sink (its Retry is set from Retry).
	Bigtable bigtableio.Config
	// BigQuery is the BigQuery sink, nil when it is off (its Retry is set
	// from Retry, its Table defaults to the spec's).
	BigQuery *bigqueryio.Config

	// DeadLetter is where rejected records go: a folder, a gs:// prefix,
	// a BigQuery table or a Pub/Sub topic (targets.ParseDeadLetterTarget,
	// run once by the launcher).
	DeadLetter targets.DeadLetterTarget

	// Retry is the sinks', read-backs' and dead-letter writers' retry
	// policy (zero: retry.Policy's defaults).
	Retry retry.Settings

	// MaxLineBytes limits an input line, or one reading of a message;
	// longer ones are dead-lettered as too_large (0:
	// schemas.DefaultMaxLineBytes).
	MaxLineBytes int
	// MaxDecompressedBytes bounds a gzip Pub/Sub message once
	// decompressed (0: codec.DefaultMaxDecompressedBytes).
	MaxDecompressedBytes int64

	// Replay is set when the input is dead letters to unwrap
	// (--format=deadletter; see dofns.UnwrapDeadLetterFn).
	Replay *Replay

	// Runner names the runner the graph is for, as --runner does ("" is
	// the local default, prism). Check refuses Local on Dataflow.
	Runner string

	// SilencesTopic is the Pub/Sub topic a stream publishes its silence
	// records to, besides BigQuery's silences table (nil: none; see
	// raiseSilences).
	SilencesTopic *targets.Topic

	// BigQueryMarks has a batch that merges with stored hours keep, per
	// sensor-hour, a mark of what each BigQuery table holds of it, in
	// Bigtable table hours.MarksTable (which must exist), and leave out
	// the rows a table holds already (hours.MergeChanges).
	BigQueryMarks bool

	// Local are a stream's options for runners that keep its windows in
	// their workers' memory: every runner but Dataflow, whose state is
	// durable. nil: none.
	Local *LocalRunner
}

// LocalRunner are the options of a stream whose windows live in its
// workers' memory (prism, direct, a job server's workers): a killed or
// stopped run loses them, and these make up for it.
type LocalRunner struct {
	// WriteOnArrival writes each reading's observed cells to Bigtable in
	// the bundle that reads it, before the windowed firings (see
	// dofns.ArrivalRowsFn), so that what is acknowledged is stored.
	WriteOnArrival bool
	// Recover reads each window back from Bigtable at its final firing,
	// so that a window a killed or stopped run held in memory is imputed
	// and rolled up from every reading it got, not only those the new run
	// sees (see dofns.StreamRowsFn and dofns.RecoverWindowsFn). It relies
	// on WriteOnArrival. A spec with no table that stores every field
	// cannot be read back: the stream then runs without (the launcher
	// warns of it at start).
	Recover bool
	// DiskState keeps the hours' state (the readings held for their final
	// firings, for the allowed lateness) in files on the workers' local
	// disk instead of the runner's memory (see dofns.StreamRowsFn.DiskState).
	DiskState bool
}

// Replay is what a dead-letter replay takes: the filters on the dead
// letters to replay (empty: all).
type Replay struct {
	Reasons []string
	Sinks   []string
}

// Check reports a configuration that cannot run: a missing spec, store or
// dead-letter location, or local-runner options on Dataflow. The spec
// itself was checked when it was compiled.
func (c Config) Check() error {
	switch {
	case c.Spec == nil:
		return fmt.Errorf("pipelines: no compiled dataset spec (hours.Compile)")
	case c.Bigtable.Project == "" || c.Bigtable.Instance == "":
		return fmt.Errorf("pipelines: bigtable project and instance are required")
	case c.DeadLetter == (targets.DeadLetterTarget{}):
		return fmt.Errorf("pipelines: a dead-letter location is required")
	case c.Local != nil && isDataflow(c.Runner):
		return fmt.Errorf("pipelines: the local-runner options (arrival writes, recovery, disk state) are for runners that keep windows in their workers' memory, not %s, whose state is durable: leave Config.Local nil", c.Runner)
	}
	return nil
}

// writeDeadLetters writes each PCollection of dead letters to the
// configured target; on every runner but Dataflow the writers report
// (deadletterio.Config.Reporting), which keeps prism from busy-waiting
// through the bundles of a stage that ends in sinks.
func writeDeadLetters(s beam.Scope, cfg Config, dead ...beam.PCollection) {
	deadletterio.Write(s, deadletterio.Config{Target: cfg.DeadLetter, Retry: cfg.Retry, Reporting: !isDataflow(cfg.Runner)}, dead...)
}

// isDataflow reports whether runner names Dataflow.
func isDataflow(runner string) bool {
	return runner == "dataflow" || runner == "DataflowRunner"
}

// sinks returns cfg's sink configurations with the run's retry policy.
func (c Config) sinks() (bigtableio.Config, *bigqueryio.Config) {
	bt := c.Bigtable
	bt.Retry = c.Retry
	if c.BigQuery == nil {
		return bt, nil
	}
	bq := *c.BigQuery
	bq.Retry = c.Retry
	return bt, &bq
}

// runSinks are the sinks a run of c has: parse, window and Bigtable, and
// BigQuery's readings and rollups when it writes them.
func (c Config) runSinks() []string {
	out := []string{deadletter.SinkParse, deadletter.SinkWindow, deadletter.SinkBigtable}
	if c.BigQuery != nil {
		out = append(out, deadletter.SinkBigQuery)
		if c.Spec != nil && c.Spec.Roller() != nil {
			out = append(out, deadletter.SinkBigQueryRollups)
		}
	}
	return out
}

// parseLines parses KV<source, line> into KV<identity, Record> stamped
// with event time, with the parse's dead letters (dofns.ParseFn); a
// replay's lines (cfg.Replay) are unwrapped from their dead letters first
// (dofns.UnwrapDeadLetterFn), and with withProbes the rollups' rebuild
// probes join the parsed readings (a stream's firings take readings only:
// a rollup's dead letter is replayed by a batch).
func parseLines(s beam.Scope, cfg Config, lines beam.PCollection, withProbes bool) (records, dead beam.PCollection) {
	return parseLinesChecked(s, cfg, lines, withProbes, 0)
}

// parseLinesChecked is parseLines that, with maxFuture set (a stream's),
// dead-letters as out_of_range the lines with a reading further ahead of
// the wall clock than maxFuture (dofns.ParseFn.MaxFuture).
func parseLinesChecked(s beam.Scope, cfg Config, lines beam.PCollection, withProbes bool, maxFuture time.Duration) (records, dead beam.PCollection) {
	if cfg.Replay == nil {
		return beam.ParDo2(s.Scope("Parse"), &dofns.ParseFn{Spec: cfg.Spec, MaxLineBytes: cfg.MaxLineBytes, MaxFuture: maxFuture}, lines)
	}
	fn := &dofns.UnwrapDeadLetterFn{Spec: cfg.Spec, Filter: deadletter.ReplayFilter{Reasons: cfg.Replay.Reasons, Sinks: cfg.Replay.Sinks},
		Sinks: cfg.runSinks(), MaxLineBytes: cfg.MaxLineBytes}
	payloads, probes, unwrapDead := beam.ParDo3(s.Scope("UnwrapDeadLetters"), fn, lines)
	records, parseDead := beam.ParDo2(s.Scope("Parse"), &dofns.ParseFn{Spec: cfg.Spec, MaxLineBytes: cfg.MaxLineBytes, MaxFuture: maxFuture}, payloads)
	if withProbes {
		records = beam.Flatten(s.Scope("Replay"), records, probes)
	}
	return records, beam.Flatten(s.Scope("Replay"), parseDead, unwrapDead)
}

// hourlyWindows windows readings into fixed one-hour event-time windows,
// the UTC hours of the row keys.
func hourlyWindows(s beam.Scope, records beam.PCollection, opts ...beam.WindowIntoOption) beam.PCollection {
	return beam.WindowInto(s.Scope("HourlyWindows"), window.NewFixedWindows(time.Hour), records, opts...)
}

// built is what an hour builder gives the sinks.
type built struct {
	// Rows are Bigtable RowMutations: the readings each firing writes or
	// rewrites, with the rollup cells in the first table's rows.
	Rows beam.PCollection
	// BQRows are BigQuery rows of the readings, each sent once per window
	// (a stream's again only when a late firing changes its imputed
	// values).
	BQRows beam.PCollection
	// Rollups are BigQuery rows of the rollup table, one per window (a
	// stream's per on-time or late firing; empty without BigQuery or a
	// rollup section).
	Rollups beam.PCollection
	// Dead are the records that could not be built.
	Dead beam.PCollection
	// Marked says the BigQuery rows carry marks (hours.BQMark), which
	// the BigQuery sinks hand to Bigtable once their rows land.
	Marked bool
}

// bigQueryTables are the BigQuery sinks of c: the readings' table and the
// rollups' (nil when the spec has no rollup); both nil without BigQuery.
func (c Config) bigQueryTables() (readings, rollups *bigqueryio.Config) {
	_, bq := c.sinks()
	if bq == nil {
		return nil, nil
	}
	if bq.Table == "" {
		bq.Table = c.Spec.BigQuery.Table
	}
	r := *bq
	r.Sink, r.Columns = deadletter.SinkBigQuery, c.Spec.BigQuery
	if roller := c.Spec.Roller(); roller != nil {
		ru := *bq
		ru.Table = roller.BigQuery().Table
		ru.Sink, ru.Columns = deadletter.SinkBigQueryRollups, roller.BigQuery()
		rollups = &ru
	}
	return &r, rollups
}

// writeSinks writes b's rows to Bigtable and, when configured, BigQuery
// (the readings, and the rollups when the spec has them), and returns the
// sinks' dead letters and the builder's. The marks of b's BigQuery rows
// (b.Marked) go to Bigtable once BigQuery holds their rows.
func writeSinks(s beam.Scope, cfg Config, b built) []beam.PCollection {
	bt, _ := cfg.sinks()
	dead := []beam.PCollection{b.Dead, bigtableio.Write(s, bt, b.Rows)}
	readings, rollups := cfg.bigQueryTables()
	if readings == nil {
		return dead
	}
	var marks []beam.PCollection
	write := func(s beam.Scope, cfg bigqueryio.Config, rows beam.PCollection) {
		if !b.Marked {
			dead = append(dead, bigqueryio.Write(s, cfg, rows))
			return
		}
		d, m := bigqueryio.WriteMarked(s, cfg, rows)
		dead, marks = append(dead, d), append(marks, m)
	}
	write(s, *readings, b.BQRows)
	if rollups != nil {
		write(s.Scope("rollups"), *rollups, b.Rollups)
	}
	if b.Marked {
		mbt := bt
		mbt.Uncounted = true
		bigtableio.Write(s.Scope("marks"), mbt, beam.Flatten(s.Scope("marks"), marks...))
	}
	return dead
}

// bigQueryMarks are where a batch's hours keep their BigQuery marks
// (Config.BigQueryMarks), or the zero value when they keep none.
func (c Config) bigQueryMarks() hours.BQMarks {
	readings, rollups := c.bigQueryTables()
	if !c.BigQueryMarks || readings == nil {
		return hours.BQMarks{}
	}
	m := hours.BQMarks{Table: hours.MarksTable(c.Spec.Spec), Readings: bqDest(readings)}
	if rollups != nil {
		m.Rollups = bqDest(rollups)
	}
	return m
}

func bqDest(c *bigqueryio.Config) hours.BQDest {
	return hours.BQDest{Ref: c.Project + ":" + c.Dataset + "." + c.Table, Table: c.Table}
}
