// Package bqadmin prepares BigQuery before a run and builds client options
// that honour the emulator environment variables.
package bqadmin

import (
	"context"
	"errors"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// EnsureTable creates the dataset and table of spec's BigQuery section when
// missing (with DAY partitioning and clustering from the spec), adds
// NULLABLE columns the spec has and the table lacks, and fails with a clear
// error when the table cannot take the spec's rows.
// STUB: being implemented.
func EnsureTable(ctx context.Context, project, dataset, table string, spec *schemas.Spec, create bool) error {
	return errors.New("bigquery sink not implemented yet")
}
