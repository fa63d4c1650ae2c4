package bigqueryio

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	register.Function1x1(markText)
}

// markText renders a mark's mutation as "table row family:qualifier@ts=value".
func markText(m hours.RowMutation) string {
	c := m.Cells[0]
	return fmt.Sprintf("%s %s %s:%s@%d=%s", m.Table, m.RowKey, c.Family, c.Qualifier, c.TsMicros, c.Value)
}

// TestWriteMarkedEmitsAMarkOnceAllItsRowsLand: a mark is emitted once
// BigQuery holds every row that carries it; not when one of its rows did
// not come (it went to another bundle), and not from a bundle in which a
// row failed.
func TestWriteMarkedEmitsAMarkOnceAllItsRowsLand(t *testing.T) {
	mark := func(hour string, rows int64) hours.BQMark {
		return hours.BQMark{Table: "t_bqmarks", RowKey: "s#" + hour, Qualifier: "p:d.t", Value: []byte("fp-" + hour), TsMicros: 7, Rows: rows}
	}
	for i, tc := range []struct {
		name     string
		failOne  bool
		wantDead int
		want     []string
	}{
		{name: "every row lands", want: []string{"t_bqmarks s#1 bigquery:p:d.t@7=fp-1"}},
		{name: "a row fails", failOne: true, wantDead: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("marked_%d", i)
			_, spec := startBigQuery(t, table)
			rows := vitalsRows(t, spec, 10, time.Now().UTC().Add(-time.Hour).Truncate(time.Minute))
			for j := range rows {
				switch {
				case j < 6:
					rows[j].Mark = mark("1", 6)
				case j < 9:
					rows[j].Mark = mark("2", 4) // its fourth row is not here
				}
			}
			if tc.failOne {
				rows[9].Values[bqCol(spec.BigQuery, "sensor_id")] = schemas.Value{}
			}
			p, s := beam.NewPipelineWithRoot()
			dead, marks := WriteMarked(s, Config{Project: bqProject, Dataset: bqDataset, Table: table, WriteMethod: WriteStorageWrite,
				Sink: deadletter.SinkBigQuery, Columns: spec.BigQuery}, beam.CreateList(s, rows))
			passert.Count(s, dead, "dead letters", tc.wantDead)
			got := beam.ParDo(s, markText, marks)
			if len(tc.want) == 0 {
				passert.Empty(s, got)
			} else {
				passert.Equals(s, got, toAny(tc.want)...)
			}
			if err := ptest.Run(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
