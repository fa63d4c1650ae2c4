package main

import (
	"context"
	"fmt"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// sourceBigtable is the --source of a batch over the readings stored in
// a Bigtable table (a rekey).
const sourceBigtable = "bigtable"

// readsStored reports whether --source names a store of readings written
// before (a batch over them under --spec): a Bigtable table
// (--source=bigtable) or a BigQuery table (--source=bigquery), which the
// --from_* flags describe.
func readsStored(source string) bool {
	return source == sourceBigtable || source == sourceBigQuery
}

// parseFromBigtable reads the flags of a batch over a stored Bigtable
// table (--source=bigtable) into p: the table's spec and place, and the
// event-time bounds. spec is --spec's, target the sink's place.
func parseFromBigtable(f *flags, given map[string]bool, spec *schemas.Spec, target bigtableio.Config, p *plan) error {
	if f.input != "" {
		return usagef("--input applies to --source=files only; --source=bigtable reads --from_table")
	}
	for _, name := range streamFlags {
		if given[name] {
			return usagef("--%s applies to --source=pubsub only", name)
		}
	}
	if f.format != "json" {
		return usagef("--format=%s: --source=bigtable reads the readings back from their cells; leave --format out", f.format)
	}
	fromMs, toMs, err := parseTimeBounds(f.fromTime, f.toTime)
	if err != nil {
		return err
	}
	name := f.fromSpec
	if name == "" {
		name = f.spec
	}
	from, err := cli.LoadSpec(name)
	if err != nil {
		return usagef("--from_spec: %w", err)
	}
	first := from.Bigtable.Tables[0].Name
	if f.fromTable != "" {
		if err := from.ReadTableFirst(f.fromTable); err != nil {
			return cli.Usage(err)
		}
		first = f.fromTable
	}
	rb, err := hours.NewReadBack(from)
	if err != nil {
		return usagef("--from_spec=%s cannot be read back from Bigtable, so --source=bigtable cannot read it: %w", name, err)
	}
	if f.fromTable != "" && rb.Table() != first {
		return usagef("--from_table=%s cannot be read back (it does not store every field of spec %s); table %s can", f.fromTable, from.Name, rb.Table())
	}
	if err := sameFields(from, spec); err != nil {
		return usagef("--from_spec=%s and --spec=%s: %w", name, f.spec, err)
	}
	compiled, err := hours.Compile(from, hours.CompileOptions{Format: "json"})
	if err != nil {
		return usagef("--from_spec: %w", err)
	}
	rc := &bigtableio.ReadConfig{Project: f.fromProject, Instance: f.fromInstance, Spec: compiled, FromMs: fromMs, ToMs: toMs}
	if rc.Project == "" {
		rc.Project = target.Project
	}
	if rc.Instance == "" {
		rc.Instance = target.Instance
	}
	if rc.Project == target.Project && rc.Instance == target.Instance && spec.Table(rb.Table()) != nil {
		return usagef("--from_table=%s is also a table --spec=%s writes: write the new layout to a table of its own (--bigtable_table=NEW)", rb.Table(), f.spec)
	}
	p.batch.FromBigtable = rc
	p.batch.MergeStored = f.mergeStored
	return nil
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

// sameFields checks that every field of to is a field of from with the
// same JSON path and type: the readings read back under from are parsed
// under to.
func sameFields(from, to *schemas.Spec) error {
	for _, f := range to.Fields {
		i := from.FieldIndex(f.Name)
		if i < 0 {
			if f.Required {
				return fmt.Errorf("field %s of spec %s is not in spec %s, and it is required", f.Name, to.Name, from.Name)
			}
			continue
		}
		g := from.Fields[i]
		if path(g) != path(f) || g.Type != f.Type {
			return fmt.Errorf("field %s is %s at %q in spec %s but %s at %q in spec %s: give both specs the field alike", f.Name, g.Type, path(g), from.Name, f.Type, path(f), to.Name)
		}
	}
	return nil
}

func path(f schemas.FieldSpec) string {
	if f.Path != "" {
		return f.Path
	}
	return f.Name
}

// fromTablePolicy bounds the check that the stored table exists.
var fromTablePolicy = retry.Policy{AttemptTimeout: 10 * time.Second}

// checkFromTable checks that the table --source=bigtable reads exists and
// answers, within the start-up timeout.
func checkFromTable(ctx context.Context, rc *bigtableio.ReadConfig, limit time.Duration) error {
	rb, err := hours.NewReadBack(rc.Spec.Spec)
	if err != nil {
		return err
	}
	r, err := bigtableio.OpenReader(ctx, rc.Project, rc.Instance)
	if err != nil {
		return fmt.Errorf("--from_project=%s --from_instance=%s: %w", rc.Project, rc.Instance, err)
	}
	defer r.Close()
	policy := fromTablePolicy
	policy.Deadline = limit
	err = retry.Do(ctx, policy, func(ctx context.Context) error {
		_, err := r.SampleRowKeys(ctx, rb.Table())
		return err
	})
	if err != nil {
		return fmt.Errorf("--from_table=%s in %s/%s cannot be read: %w", rb.Table(), rc.Project, rc.Instance, err)
	}
	return nil
}
