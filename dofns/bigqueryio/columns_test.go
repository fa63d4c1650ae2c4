package bigqueryio

import (
	"slices"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// bqCol returns the index in a BQRow's Values of table t's column name: the
// tests read BigQuery rows by column name, never by position, so a column
// added to or moved in the spec leaves their reading of the others right.
// A name the table lacks panics on the test goroutine, failing the test.
func bqCol(t *schemas.BigQuerySpec, name string) int {
	i := slices.IndexFunc(t.Columns, func(c schemas.BQColumnSpec) bool { return c.Name == name })
	if i < 0 {
		panic("table " + t.Table + " has no column " + name)
	}
	return i
}
