package readpath

import (
	"context"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// maxBoundsRanges caps the ranges an empty answer's bounds read looks at.
const maxBoundsRanges = 16

// Bounds is what a table holds under a query's prefix, ignoring its
// window: the oldest and newest cell timestamps of the first and last rows
// of each range (exact when the time follows the prefix in the key).
type Bounds struct {
	Found          bool
	Oldest, Newest int64 // epoch ms
	RowsRead       int
	Reads          int
}

// readBounds reads the first and the last row (a reverse scan) of each
// range of q without its window, at most maxBoundsRanges ranges: a bounded
// read that says how old the data under the prefix is.
func readBounds(ctx context.Context, tbl Reader, spec *schemas.Spec, q Query) (*Bounds, error) {
	nq := q
	nq.Since, nq.From, nq.To = 0, time.Time{}, time.Time{}
	nq.Where, nq.Ranges = map[string]string{}, map[string]schemas.Range{}
	for k, v := range q.Where {
		if k != spec.EventTime {
			nq.Where[k] = v
		}
	}
	for k, v := range q.Ranges {
		if k != spec.EventTime {
			nq.Ranges[k] = v
		}
	}
	nq.AllowScan, nq.Latest, nq.NewestFirst, nq.Aggregate = true, false, false, nil
	plan, err := Plan(spec, nq)
	if err != nil {
		return nil, err
	}
	b := &Bounds{}
	fam := familyFilter(spec, plan.Table)
	for i, r := range plan.Ranges {
		if i == maxBoundsRanges {
			break
		}
		for _, reverse := range []bool{false, true} {
			opts := append(chain(fam), bigtable.LimitRows(1))
			if reverse {
				opts = append(opts, bigtable.ReverseScan())
			}
			b.Reads++
			err := tbl.ReadRows(ctx, bigtable.NewRange(r.Start, r.End), func(row bigtable.Row) bool {
				b.RowsRead++
				for _, c := range rowCells(row) {
					ms := c.TimestampMicros / 1000
					if !b.Found || ms < b.Oldest {
						b.Oldest = ms
					}
					if !b.Found || ms > b.Newest {
						b.Newest = ms
					}
					b.Found = true
				}
				return false
			}, opts...)
			if err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}
