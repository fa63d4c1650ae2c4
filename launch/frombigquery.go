package main

import (
	"strings"
	"time"

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
	ref, err := parseBigQueryTableRef(f.fromTable, project)
	if err != nil {
		return err
	}
	fromMs, toMs, err := parseTimeBounds(f.fromTime, f.toTime)
	if err != nil {
		return err
	}
	p.batch.MergeStored = f.mergeStored
	p.batch.FromBigQuery = &bigqueryio.Config{Project: ref.project, Dataset: ref.dataset, Table: ref.table, FromMs: fromMs, ToMs: toMs}
	return nil
}

// bigQueryTableRef is a table --from_table names.
type bigQueryTableRef struct{ project, dataset, table string }

// parseBigQueryTableRef parses [PROJECT:]DATASET.TABLE (or
// PROJECT.DATASET.TABLE); project is the default project.
func parseBigQueryTableRef(v, project string) (bigQueryTableRef, error) {
	ref := bigQueryTableRef{project: project}
	rest := v
	if i := strings.IndexByte(v, ':'); i >= 0 {
		ref.project, rest = v[:i], v[i+1:]
	}
	parts := strings.Split(rest, ".")
	switch {
	case len(parts) == 3 && !strings.Contains(v, ":"):
		ref.project, ref.dataset, ref.table = parts[0], parts[1], parts[2]
	case len(parts) == 2:
		ref.dataset, ref.table = parts[0], parts[1]
	default:
		return ref, usagef("--from_table=%s: give [PROJECT:]DATASET.TABLE", v)
	}
	if ref.project == "" || ref.dataset == "" || ref.table == "" {
		return ref, usagef("--from_table=%s: give [PROJECT:]DATASET.TABLE, none of them empty", v)
	}
	if err := bqschema.CheckBigQueryDataset(ref.dataset); err != nil {
		return ref, usagef("--from_table=%s: %w", v, err)
	}
	if err := bqschema.CheckBigQueryTable(ref.table); err != nil {
		return ref, usagef("--from_table=%s: %w", v, err)
	}
	return ref, nil
}

// parseTimeBounds parses --from_time and --to_time (RFC 3339) into epoch
// milliseconds, 0 for an empty one; from must be before to.
func parseTimeBounds(from, to string) (fromMs, toMs int64, err error) {
	parse := func(name, v string) (int64, error) {
		if v == "" {
			return 0, nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return 0, usagef("--%s=%s: give an RFC 3339 time such as 2026-03-01T00:00:00Z", name, v)
		}
		if t.Before(schemas.EarliestEventTime) || t.After(schemas.LatestEventTime) {
			return 0, usagef("--%s=%s: give a time from %s to %s", name, v, schemas.EarliestEventTime.Format(time.RFC3339), schemas.LatestEventTime.Format(time.RFC3339))
		}
		ms := t.UnixMilli()
		if ms == 0 && name == "to_time" {
			return 0, usagef("--to_time=%s: nothing is before it; give a later time", v)
		}
		return ms, nil // --from_time at the epoch is no bound: nothing is before it
	}
	if fromMs, err = parse("from_time", from); err != nil {
		return 0, 0, err
	}
	if toMs, err = parse("to_time", to); err != nil {
		return 0, 0, err
	}
	if fromMs != 0 && toMs != 0 && fromMs >= toMs {
		return 0, 0, usagef("--from_time=%s is not before --to_time=%s", from, to)
	}
	return fromMs, toMs, nil
}
