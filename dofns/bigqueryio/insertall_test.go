package bigqueryio

import (
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// TestInsertIDColumn: the insertAll insertId comes from the spec's key,
// never from a column's name: the column bound to $reading_id, else a
// one-column primary key, else none.
func TestInsertIDColumn(t *testing.T) {
	cols := []schemas.BQColumnSpec{
		{Name: "reading_id", Type: "STRING", Value: "sensor"}, // named like the id, bound to a field
		{Name: "rid", Type: "STRING", Value: schemas.ValueReadingID},
		{Name: "k", Type: "STRING", Value: "k"},
	}
	for _, tt := range []struct {
		name string
		bq   schemas.BigQuerySpec
		want int
	}{
		{"the $reading_id column", schemas.BigQuerySpec{Columns: cols}, 1},
		{"$reading_id before the primary key", schemas.BigQuerySpec{Columns: cols, PrimaryKey: []string{"k"}}, 1},
		{"a one-column primary key", schemas.BigQuerySpec{Columns: []schemas.BQColumnSpec{cols[0], cols[2]}, PrimaryKey: []string{"k"}}, 1},
		{"a two-column primary key gives none", schemas.BigQuerySpec{Columns: []schemas.BQColumnSpec{cols[0], cols[2]}, PrimaryKey: []string{"reading_id", "k"}}, -1},
		{"no key: none, whatever the column names", schemas.BigQuerySpec{Columns: []schemas.BQColumnSpec{cols[0], cols[2]}}, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := insertIDColumn(&tt.bq); got != tt.want {
				t.Errorf("insertIDColumn = %d; want %d", got, tt.want)
			}
		})
	}
}
