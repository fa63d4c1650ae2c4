// Package readpath is sensorpipe's Bigtable read path: it turns a query
// (equality values for some fields and a look-back window) into the row
// ranges the spec's row-key template allows (schemas.PlanScan: a prefix, a
// time range, reversed bounds under a reverse timestamp, one range per salt
// bucket), reads them, and reports the cells, the rows read and the ranges
// used.
package readpath

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// Query is one read: a table of spec (its first table when empty),
// equality values for fields, a look-back window ending at Now, and an
// optional cap on rows.
type Query struct {
	Table string
	Where map[string]string
	Since time.Duration // 0: no time range
	Now   time.Time
	Limit int // 0: no cap
}

// FromMainQuery fills a Query from the spec's declared main query: its
// table, since and limit; the where values are the caller's.
func FromMainQuery(spec *schemas.Spec, where map[string]string, now time.Time) (Query, error) {
	q := Query{Where: where, Now: now}
	mq := spec.MainQuery()
	if mq == nil {
		return q, fmt.Errorf("spec %s declares no main query", spec.Name)
	}
	q.Table = spec.QueryTable(mq).Name
	q.Limit = mq.Limit
	if mq.Since != "" {
		d, err := schemas.ParseSince(mq.Since)
		if err != nil {
			return q, err
		}
		q.Since = d
	}
	for _, w := range mq.Where {
		if _, ok := where[w]; !ok {
			return q, fmt.Errorf("main query %s needs where %s=...", mq.Name, w)
		}
	}
	return q, nil
}

// Window is the query's event-time window [from, to] in epoch ms; both 0
// when it has none.
func (q Query) Window() (fromMs, toMs int64) {
	if q.Since <= 0 {
		return 0, 0
	}
	to := q.Now.UnixMilli()
	return to - q.Since.Milliseconds(), to
}

// Plan derives the row ranges of q from the table's row-key template.
func Plan(spec *schemas.Spec, q Query) (*schemas.ScanPlan, error) {
	from, to := q.Window()
	return schemas.PlanScan(spec, schemas.KeyQuery{Table: q.Table, Where: q.Where, FromMs: from, ToMs: to})
}

// Cell is one cell read.
type Cell struct {
	RowKey          string `json:"row_key"`
	Family          string `json:"family"`
	Qualifier       string `json:"qualifier"`
	TimestampMicros int64  `json:"timestamp_micros"`
	Value           string `json:"value"`
}

// Result is what a read did: the plan, the rows read and their cells.
type Result struct {
	Plan     *schemas.ScanPlan
	RowsRead int
	RowKeys  []string
	Cells    []Cell
}

// Reader reads rows of a Bigtable table.
type Reader interface {
	ReadRows(ctx context.Context, arg bigtable.RowSet, f func(bigtable.Row) bool, opts ...bigtable.ReadOption) error
}

// Read plans q and reads its ranges from tbl, returning every row read and
// its cells. Only cells inside the query's window are returned (cell
// timestamps are event times). Where fields that could not narrow the scan
// (Plan.Unused) are reported, not filtered: the plan is the point.
func Read(ctx context.Context, tbl Reader, spec *schemas.Spec, q Query) (*Result, error) {
	plan, err := Plan(spec, q)
	if err != nil {
		return nil, err
	}
	res := &Result{Plan: plan}
	var ranges bigtable.RowRangeList
	for _, r := range plan.Ranges {
		ranges = append(ranges, bigtable.NewRange(r.Start, r.End))
	}
	var opts []bigtable.ReadOption
	if from, to := q.Window(); to != 0 {
		// Bigtable's end is exclusive and millisecond-grained: +1 ms keeps "now".
		opts = append(opts, bigtable.RowFilter(bigtable.TimestampRangeFilterMicros(
			bigtable.Timestamp(from*1000), bigtable.Timestamp((to+1)*1000))))
	}
	if q.Limit > 0 {
		opts = append(opts, bigtable.LimitRows(int64(q.Limit)))
	}
	err = tbl.ReadRows(ctx, ranges, func(row bigtable.Row) bool {
		res.RowsRead++
		res.RowKeys = append(res.RowKeys, row.Key())
		fams := make([]string, 0, len(row))
		for f := range row {
			fams = append(fams, f)
		}
		sort.Strings(fams)
		for _, f := range fams {
			for _, it := range row[f] {
				res.Cells = append(res.Cells, Cell{
					RowKey:          row.Key(),
					Family:          f,
					Qualifier:       strings.TrimPrefix(it.Column, f+":"),
					TimestampMicros: int64(it.Timestamp),
					Value:           string(it.Value),
				})
			}
		}
		return true
	}, opts...)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", plan.Table, err)
	}
	return res, nil
}
