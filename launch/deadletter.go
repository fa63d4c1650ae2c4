package main

import (
	"fmt"
	"strings"

	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// validateDeadLetter parses a --dead_letter value, the one place it is
// parsed, into pipelines.Config.DeadLetter: a bigquery:DATASET.TABLE
// target gets defaultProject (the BigQuery project, else the Bigtable
// project), so workers never have to detect one. A local folder is refused
// on a remote runner, where it would land on a worker's disk and be lost.
// Errors are usage errors: one line naming the flag and the accepted forms.
func validateDeadLetter(value, defaultProject string, localRunner bool) (targets.DeadLetterTarget, error) {
	if value == "" {
		return targets.DeadLetterTarget{}, fmt.Errorf("--dead_letter is required: %s for rejected records", targets.DeadLetterTargetForms)
	}
	t, err := targets.ParseDeadLetterTarget(value)
	if err != nil {
		return t, fmt.Errorf("--dead_letter: %w", err)
	}
	switch t.Kind {
	case targets.DeadLetterBigQuery:
		if t.Project == "" && defaultProject == "" {
			return t, fmt.Errorf("--dead_letter=%s: no project to default to: use bigquery:PROJECT:%s.%s", value, t.Dataset, t.Table)
		}
		if t, err = t.WithDefaultProject(defaultProject); err != nil {
			return t, fmt.Errorf("--dead_letter=%s with project %q: %w", value, defaultProject, err)
		}
	case targets.DeadLetterFiles:
		if !localRunner && !strings.HasPrefix(t.Path, "gs://") {
			return t, fmt.Errorf("--dead_letter=%s is a local folder, which a remote runner's workers would write to their own disks: use gs://BUCKET/PREFIX, bigquery:DATASET.TABLE or pubsub:projects/P/topics/T", value)
		}
	}
	return t, nil
}
