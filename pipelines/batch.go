package pipelines

import (
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// BatchOptions are what a batch reads and how it meets what is stored.
type BatchOptions struct {
	// Input is a glob of local paths or gs:// objects (.gz decompressed).
	Input string
	// Format is how the files are read: "" for JSON lines, or a table
	// format (fileio.TableFormats) whose rows the spec's fields map.
	Format string
	// Ranges, when set, limit the read to those parts of the files: a
	// local run whose input is larger than its memory should hold runs one
	// batch per part (launch/parts: whole hours, or one share of their
	// identities).
	Ranges []fileio.FileRange
	// MergeStored has each identity's hour read back from Bigtable and
	// built with the readings stored there by earlier runs (see
	// dofns.BuildRowsFn.Merge), so that batches that split an hour, in
	// any order, or a batch after a stream, leave what one batch over all
	// the readings leaves. A spec with no table that stores every field
	// cannot be read back: the batch then builds each hour from its own
	// readings (the launcher warns of it at start).
	MergeStored bool
	// FromBigtable, when set, is the batch's input instead of Input: the
	// readings stored in a table under another spec (bigtableio.Read),
	// rebuilt under Config.Spec: a rekey.
	FromBigtable *bigtableio.ReadConfig
	// FromBigQuery, when set, is the source instead of Input: the
	// readings of a BigQuery table the spec wrote, read back with the
	// Storage Read API (bigqueryio.Read; its Spec and Retry are the run's).
	FromBigQuery *bigqueryio.Config
}

// Batch builds the historical re-ingestion graph: files (or a stored
// Bigtable table, or a BigQuery table) in, Bigtable (and BigQuery) out,
// every rejected record in the dead letter.
func Batch(s beam.Scope, cfg Config, opts BatchOptions) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if cfg.Local != nil {
		return fmt.Errorf("pipelines: the local-runner options (arrival writes, recovery, disk state) apply to a stream; a batch's windows are read whole")
	}
	var dead []beam.PCollection
	readDead, parseDead := beam.PCollection{}, beam.PCollection{}
	if BuildsWholeHours(cfg, opts) {
		// Each row read holds whole hours: they are built where they are
		// read, with no grouping.
		rows, rdead, err := bigtableio.ReadRows(s, *opts.FromBigtable)
		if err != nil {
			return err
		}
		readDead = rdead
		var batches beam.PCollection
		batches, parseDead = beam.ParDo2(s.Scope("Parse"), &dofns.ParseWholeHoursFn{Spec: cfg.Spec, MaxLineBytes: cfg.MaxLineBytes}, rows)
		dead = ingestWholeHours(s, cfg, opts.MergeStored, batches)
	} else {
		lines, rdead, err := readInput(s, cfg, opts)
		if err != nil {
			return err
		}
		readDead = rdead
		var batches beam.PCollection
		switch {
		case readsRecords(opts):
			batches = preGroup(s, lines)
		case cfg.Replay == nil:
			// The parse packs its readings itself: one DoFn boundary
			// less for every reading (dofns.ParseBatchesFn).
			batches, parseDead = beam.ParDo2(s.Scope("Parse"), &dofns.ParseBatchesFn{Spec: cfg.Spec, MaxLineBytes: cfg.MaxLineBytes}, lines)
		default:
			var records beam.PCollection
			records, parseDead = parseLines(s, cfg, lines, true)
			batches = preGroup(s, records)
		}
		dead = ingestBatches(s, cfg, opts.MergeStored, batches)
	}
	// The sinks' dead letters cross a Reshuffle (random keys, not a fixed
	// key) so the dead-letter write runs in a stage of its own: a failed
	// dead-letter write then retries only that stage, not a whole bundle of
	// Bigtable writes. It also gives the sink stage an output, which keeps
	// prism (Beam v2.77) from busy-polling a stage with none (its effect on
	// a local batch's rate is in docs/performance.md). Only the batch does
	// this: a stream's late dead
	// letters must not meet another grouping that could drop them.
	sinkDead := dead[:0:0]
	for i, d := range dead {
		sinkDead = append(sinkDead, beam.Reshuffle(s.Scope(fmt.Sprintf("deadletter.Detach%d", i)), d))
	}
	readDeads := []beam.PCollection{readDead}
	if parseDead.IsValid() {
		readDeads = append(readDeads, parseDead)
	}
	writeDeadLetters(s, cfg, append(sinkDead, readDeads...)...)
	return nil
}

// readsRecords reports whether the batch's read gives parsed readings
// (a table format's rows, fileio.Read) rather than payloads to parse.
func readsRecords(opts BatchOptions) bool {
	return opts.FromBigtable == nil && opts.FromBigQuery == nil && fileio.IsTableFormat(opts.Format)
}

// BuildsWholeHours reports whether the batch reads a Bigtable table whose
// rows each hold whole hours of the spec's identities
// (hours.ReadBack.HoldsWholeHours), which it then builds where it reads
// them, with no grouping: no step holds more than a row's readings, so a
// local run needs no parts. Not with a cadence's rollups: their coverage
// needs each sensor's first-seen time over the whole batch.
func BuildsWholeHours(cfg Config, opts BatchOptions) bool {
	if opts.FromBigtable == nil || opts.FromBigtable.Spec == nil || cfg.Replay != nil || (cfg.Spec.HasCadence() && cfg.Spec.Rollup != nil) {
		return false
	}
	rb, err := hours.NewReadBack(opts.FromBigtable.Spec.Spec)
	return err == nil && rb.HoldsWholeHours(cfg.Spec.Spec)
}

// ingestWholeHours builds each identity-hour of the HourBatches, each of
// which holds all the hour's readings (dofns.ParseWholeHoursFn), and
// writes the sinks, as ingestBatches does after its grouping. It returns the
// builder's and the sinks' dead letters.
func ingestWholeHours(s beam.Scope, cfg Config, merge bool, batches beam.PCollection) []beam.PCollection {
	s = s.Scope("Ingest")
	windowed := hourlyWindows(s, batches)
	fn := buildRowsFn(cfg, merge)
	b := built{Marked: fn.BQMarks.Table != ""}
	b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s.Scope("BuildRows"), &dofns.BuildWholeHourRowsFn{BuildRowsFn: fn}, windowed)
	cfg.Bigtable.WorkerBudget = true // as in ingestBatches
	return writeSinks(s, cfg, b)
}

// ingestBatches builds each identity-hour of the readings' batches,
// KV<identity, HourBatch> (preGroup's, or dofns.ParseBatchesFn's), once
// from all its readings (merged with what is stored when merge is set),
// and writes the sinks. It returns the builder's and the sinks' dead
// letters.
func ingestBatches(s beam.Scope, cfg Config, merge bool, batches beam.PCollection) []beam.PCollection {
	s = s.Scope("Ingest")
	b := buildBatches(s, cfg, merge, batches)
	// A batch's bundles run side by side: bound the cells in flight per
	// worker process, not per bundle.
	cfg.Bigtable.WorkerBudget = true
	return writeSinks(s, cfg, b)
}

// preGroup packs readings, KV<identity, Record>, into one element per
// identity and hour (dofns.PreGroupFn), so the hourly GroupByKey carries a
// few hundred times fewer elements.
func preGroup(s beam.Scope, records beam.PCollection) beam.PCollection {
	return beam.ParDo(s.Scope("PreGroup"), &dofns.PreGroupFn{}, records)
}

// buildBatches groups the readings' batches (preGroup's) by identity and
// hour, and builds each hour whole (dofns.BuildBatchedRowsFn), merged with
// the identity's stored readings of the hour when merge is set.
func buildBatches(s beam.Scope, cfg Config, merge bool, batches beam.PCollection) built {
	windowed := hourlyWindows(s, batches)
	s = s.Scope("BuildRows")
	grouped := beam.GroupByKey(s, windowed)
	fn := buildRowsFn(cfg, merge)
	b := built{Marked: fn.BQMarks.Table != ""}
	if cfg.Spec.HasCadence() && cfg.Spec.Rollup != nil {
		// The rollups' coverage needs each sensor's first-seen time: the
		// batch's earliest reading of it, a side input.
		first := dofns.FirstSeen(s, batches)
		b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s, &dofns.BuildFirstSeenRowsFn{BuildBatchedRowsFn: dofns.BuildBatchedRowsFn{BuildRowsFn: fn}},
			grouped, beam.SideInput{Input: first})
		return b
	}
	b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s, &dofns.BuildBatchedRowsFn{BuildRowsFn: fn}, grouped)
	return b
}

// buildRowsFn is the hour builder of a batch, which merges each hour with
// what is stored when merge is set, keeping BigQuery marks with
// Config.BigQueryMarks.
func buildRowsFn(cfg Config, merge bool) dofns.BuildRowsFn {
	fn := dofns.BuildRowsFn{Spec: cfg.Spec, BigQuery: cfg.BigQuery != nil, Retry: cfg.Retry}
	if merge {
		fn.Merge = dofns.Recovery{Project: cfg.Bigtable.Project, Instance: cfg.Bigtable.Instance}
		fn.BQMarks = cfg.bigQueryMarks()
	}
	return fn
}

// readInput reads the batch's input as KV<source, payload>, with the
// read's dead letters: the files' lines, or the readings stored in a
// Bigtable table or a BigQuery table as JSON payloads, which the parse
// reads like lines; or, for table files (readsRecords), their readings
// already parsed.
func readInput(s beam.Scope, cfg Config, opts BatchOptions) (lines, dead beam.PCollection, err error) {
	switch {
	case opts.FromBigtable != nil && opts.FromBigQuery != nil:
		return lines, dead, fmt.Errorf("pipelines: a batch reads one source: FromBigtable or FromBigQuery, not both")
	case opts.FromBigtable != nil:
		return bigtableio.Read(s, *opts.FromBigtable)
	case opts.FromBigQuery != nil:
		src := *opts.FromBigQuery
		src.Spec, src.Retry = cfg.Spec, cfg.Retry
		lines, dead = bigqueryio.Read(s, src)
		return lines, dead, nil
	}
	lines, dead = fileio.Read(s, fileio.Config{Glob: opts.Input, Ranges: opts.Ranges, MaxLineBytes: cfg.MaxLineBytes,
		Format: opts.Format, Spec: cfg.Spec})
	return lines, dead, nil
}
