package main

import (
	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/bqschema"
)

// sourceBigQuery is the --source of a batch over a BigQuery table's
// readings.
const sourceBigQuery = "bigquery"

// parseFromBigQuery reads the flags of a batch over a BigQuery table
// (--source=bigquery) into p: the table (--from_table, its project
// defaulting to --from_project, then the BigQuery project) and the
// event-time bounds (--from_time, --to_time).
func parseFromBigQuery(f *flags, given map[string]bool, spec *schemas.Spec, p *plan) error {
	if f.input != "" {
		return usagef("--input applies to --source=files only; --source=bigquery reads --from_table")
	}
	for _, name := range streamFlags {
		if given[name] {
			return usagef("--%s applies to --source=pubsub only", name)
		}
	}
	for _, name := range bigtableOnlyFlags {
		if given[name] {
			return usagef("--%s applies to --source=bigtable only; --source=bigquery reads --from_table", name)
		}
	}
	if _, err := bqschema.NewReadPlan(spec); err != nil {
		return usagef("--source=bigquery: %w", err)
	}
	if f.fromTable == "" {
		return usagef("--from_table is required with --source=bigquery: give [PROJECT:]DATASET.TABLE, the table the spec's bigquery section wrote")
	}
	project := f.fromProject
	if project == "" {
		var err error
		if project, err = cli.BigQueryProject(f.bqProject, f.btProject); err != nil {
			return usagef("--from_table=%s names no project: give PROJECT:DATASET.TABLE or --from_project (%w)", f.fromTable, err)
		}
	}
	ref, err := bqschema.ParseTableRef(f.fromTable, project)
	if err != nil {
		return usagef("--from_table=%s: %w", f.fromTable, err)
	}
	fromMs, toMs, err := parseTimeBounds(f.fromTime, f.toTime)
	if err != nil {
		return err
	}
	p.batch.MergeStored = f.mergeStored
	p.batch.FromBigQuery = &bigqueryio.Config{Project: ref.Project, Dataset: ref.Dataset, Table: ref.Table, FromMs: fromMs, ToMs: toMs}
	return nil
}
