package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/deadletterio"
	"github.com/sensorpipe/sensorpipe/dofns/pubsubio"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/silences"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// preflight checks, before the job starts, every place the job will write:
// that each service has its emulator or credentials (checkEndpoints), the
// dead-letter target, the Bigtable tables (created when missing), the
// subscription of a stream, the BigQuery table a rebuild reads, and the
// BigQuery dataset and tables. Transient
// errors are retried within --startup_timeout. Each failure is one line
// naming the flag and the fix.
//
// A batch's BigQuery marks (cfg.BigQueryMarks) are turned off, with a
// note, when their table is missing and --create_tables is false.
func preflight(ctx context.Context, cfg *pipelines.Config, p plan) error {
	limit := p.startupTimeout
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := checkEndpoints(ctx, *cfg, p); err != nil {
		return err
	}
	if err := checkDeadLetter(ctx, cfg.DeadLetter, limit); err != nil {
		return err
	}
	if err := bigtableio.EnsureTables(ctx, cfg.Bigtable.Project, cfg.Bigtable.Instance, cfg.Spec.Spec, p.createTables, limit); err != nil {
		return fmt.Errorf("--bigtable_project=%s --bigtable_instance=%s: %w", cfg.Bigtable.Project, cfg.Bigtable.Instance, err)
	}
	if cfg.BigQueryMarks {
		ok, err := bigtableio.EnsureMarksTable(ctx, cfg.Bigtable.Project, cfg.Bigtable.Instance, cfg.Spec.Spec, p.createTables, limit)
		if err != nil {
			return fmt.Errorf("--bigtable_project=%s --bigtable_instance=%s: %w", cfg.Bigtable.Project, cfg.Bigtable.Instance, err)
		}
		if !ok {
			t := hours.MarksTable(cfg.Spec.Spec)
			fmt.Fprintf(os.Stderr, "sensorpipe: Bigtable table %s (family %s) is missing: this batch keeps no BigQuery marks and sends every BigQuery row of a stored hour again (create it with cbt createtable %s families=%s, or run with --create_tables=true)\n",
				t, hours.MarksFamily, t, hours.MarksFamily)
			cfg.BigQueryMarks = false
		}
	}
	if rc := p.batch.FromBigtable; rc != nil {
		if err := checkFromTable(ctx, rc, limit); err != nil {
			return err
		}
	}
	if src := p.batch.FromBigQuery; src != nil {
		if err := bigqueryio.CheckSource(ctx, *src, cfg.Spec.Spec); err != nil {
			return fmt.Errorf("--from_table: %w", err)
		}
	}
	if p.streaming {
		if err := pubsubio.CheckSubscription(ctx, p.stream.Source.Subscription); err != nil {
			return fmt.Errorf("--subscription: %w", err)
		}
		if t := cfg.SilencesTopic; t != nil && cfg.Replay == nil {
			if err := pubsubio.CheckTopic(ctx, *t); err != nil {
				return fmt.Errorf("--silences_topic: %w", err)
			}
		}
	}
	if bq := cfg.BigQuery; bq != nil {
		tables := cfg.Spec.BigQueryTables()
		if p.streaming && cfg.Replay == nil && silences.RaisesSilences(cfg.Spec.Spec) {
			tables = append(tables, silences.SilencesBigQuery(cfg.Spec.Spec))
		}
		for i, t := range tables {
			name := t.Table
			if i == 0 {
				name = bq.Table // --bigquery_table may rename the readings table
			}
			notes, err := bigqueryio.EnsureTableNotes(ctx, bq.Project, bq.Dataset, name, t, p.createTables)
			if err != nil {
				return fmt.Errorf("--bigquery_dataset=%s: %w", bq.Dataset, err)
			}
			for _, n := range notes {
				fmt.Fprintln(os.Stderr, n)
			}
			// Upserts replace rows by the table's primary key: a table
			// made without it must get it first.
			if bq.WriteMethod == bigqueryio.WriteUpsert {
				if err := bigqueryio.EnsurePrimaryKey(ctx, bq.Project, bq.Dataset, name, t); err != nil {
					return fmt.Errorf("--bigquery_dataset=%s: %w", bq.Dataset, err)
				}
			}
		}
	}
	return nil
}

// checkDeadLetter checks that the dead-letter target can be written: a
// local folder is created when missing and must take a file; a gs://
// prefix's bucket must be listable; a BigQuery table is created when
// missing (its dataset must exist); a Pub/Sub topic must exist. Transient
// errors are retried for up to limit.
func checkDeadLetter(ctx context.Context, t targets.DeadLetterTarget, limit time.Duration) error {
	if t.Kind == targets.DeadLetterFiles && !strings.HasPrefix(t.Path, "gs://") {
		return checkFolder(t.Path)
	}
	err := retry.Do(ctx, retry.Policy{Deadline: limit, AttemptTimeout: 10 * time.Second}, func(ctx context.Context) error {
		if t.Kind == targets.DeadLetterFiles {
			return listPrefix(ctx, t.Path)
		}
		return deadletterio.EnsureTarget(ctx, t)
	})
	if err != nil {
		return fmt.Errorf("--dead_letter=%s: %w", t, err)
	}
	return nil
}

// checkFolder makes dir if it is missing and writes and removes a probe
// file in it.
func checkFolder(dir string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("--dead_letter=%s is a file, not a folder: give a folder (it is created if missing)", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--dead_letter=%s: cannot create the folder: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".sensorpipe-probe-*")
	if err != nil {
		return fmt.Errorf("--dead_letter=%s: the folder cannot be written: %w", dir, unwrapPath(err))
	}
	probe.Close()
	if err := os.Remove(probe.Name()); err != nil {
		return fmt.Errorf("--dead_letter=%s: %w", dir, err)
	}
	return nil
}

// unwrapPath drops a PathError's path, which the message names already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// listPrefix lists a gs:// prefix, which needs the bucket to exist and be
// readable with the job's credentials.
func listPrefix(ctx context.Context, prefix string) error {
	fs, err := filesystem.New(ctx, prefix)
	if err != nil {
		return err
	}
	defer fs.Close()
	_, err = fs.List(ctx, strings.TrimRight(prefix, "/")+"/*")
	return err
}
