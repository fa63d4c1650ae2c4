package pipelines

import (
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/fileio"
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
	lines, readDead, err := readInput(s, cfg, opts)
	if err != nil {
		return err
	}
	records, parseDead := parseLines(s, cfg, lines, true)
	dead := ingestBatch(s, cfg, opts.MergeStored, records)
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
	writeDeadLetters(s, cfg, append(sinkDead, readDead, parseDead)...)
	return nil
}

// ingestBatch builds each identity-hour of the parsed readings,
// KV<identity, Record> stamped with event time, once from all its
// readings (merged with what is stored when merge is set), and writes the
// sinks. It returns the builder's and the sinks' dead letters.
func ingestBatch(s beam.Scope, cfg Config, merge bool, records beam.PCollection) []beam.PCollection {
	s = s.Scope("Ingest")
	b := buildBatch(s, cfg, merge, records)
	// A batch's bundles run side by side: bound the cells in flight per
	// worker process, not per bundle.
	cfg.Bigtable.WorkerBudget = true
	return writeSinks(s, cfg, b)
}

// buildBatch packs the readings into one element per identity and hour
// (dofns.PreGroupFn), so the hourly GroupByKey carries a few hundred times
// fewer elements, groups them by identity and hour, and builds each hour
// whole (dofns.BuildBatchedRowsFn), merged with the identity's stored
// readings of the hour when merge is set.
func buildBatch(s beam.Scope, cfg Config, merge bool, records beam.PCollection) built {
	batches := beam.ParDo(s.Scope("PreGroup"), &dofns.PreGroupFn{}, records)
	windowed := hourlyWindows(s, batches)
	s = s.Scope("BuildRows")
	grouped := beam.GroupByKey(s, windowed)
	fn := dofns.BuildRowsFn{Spec: cfg.Spec, BigQuery: cfg.BigQuery != nil, Retry: cfg.Retry}
	if merge {
		fn.Merge = dofns.Recovery{Project: cfg.Bigtable.Project, Instance: cfg.Bigtable.Instance}
	}
	var b built
	if cfg.Spec.HasCadence() && cfg.Spec.Rollup != nil {
		// The rollups' coverage needs each sensor's first-seen time: the
		// batch's earliest reading of it, a side input.
		first := dofns.FirstSeen(s, records)
		b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s, &dofns.BuildFirstSeenRowsFn{BuildBatchedRowsFn: dofns.BuildBatchedRowsFn{BuildRowsFn: fn}},
			grouped, beam.SideInput{Input: first})
		return b
	}
	b.Rows, b.BQRows, b.Rollups, b.Dead = beam.ParDo4(s, &dofns.BuildBatchedRowsFn{BuildRowsFn: fn}, grouped)
	return b
}

// readInput reads the batch's input as KV<source, payload>, with the
// read's dead letters: the files' lines, or the readings stored in a
// Bigtable table or a BigQuery table as JSON payloads, which the parse
// reads like lines.
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
