package readpath

import (
	"context"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// readLatest reads the newest row of each key prefix in the plan's ranges:
// the prefix is the key up to its reverse timestamp, so the first row under
// it is the newest. It reads one row, takes its prefix, and, with a window,
// seeks to the prefix's first row at or before the window's end when that
// row is newer; then it seeks past the prefix. Each prefix costs one or two
// one-row reads, however many rows it holds: no range is scanned whole.
func readLatest(ctx context.Context, tbl Reader, spec *schemas.Spec, q Query, plan *rowkey.ScanPlan, check *checker, res *Result) error {
	from, to := q.Window()
	var winLo, winHi string // the window as time-segment text, newest first
	if to != 0 {
		var err error
		if winLo, err = rowkey.TimeKeyText(spec, plan.Table, to); err != nil {
			return err
		}
		if winHi, err = rowkey.TimeKeyText(spec, plan.Table, from); err != nil {
			return err
		}
	}
	fam := familyFilter(spec, plan.Table)
	for _, r := range plan.Ranges {
		cursor := r.Start
		for {
			row, ok, err := readOne(ctx, tbl, cursor, r.End, res, fam)
			if err != nil || !ok {
				if err != nil {
					return err
				}
				break
			}
			prefix, hasTime, err := rowkey.TimePrefix(spec, plan.Table, row.Key())
			if err != nil {
				return err
			}
			if !hasTime {
				prefix = row.Key()
			}
			switch k := row.Key(); {
			case to == 0:
				res.keep(row, check, 0, 0)
			case k < prefix+winLo:
				// Newer than the window: seek to its end within the prefix.
				lo, hi := prefix+winLo, minEnd(rowkey.PrefixSuccessor(prefix+winHi), r.End)
				if newest, ok, err := readOne(ctx, tbl, lo, hi, res, windowFilter(q), fam); err != nil {
					return err
				} else if ok {
					res.keep(newest, check, from, to)
				}
			case k < rowkey.PrefixSuccessor(prefix+winHi):
				res.keep(row, check, from, to)
			}
			// Older than the window's start: nothing for this prefix.
			next := rowkey.PrefixSuccessor(prefix)
			if next == "" || (r.End != "" && next >= r.End) {
				break
			}
			if q.Limit > 0 && len(res.RowKeys) >= q.Limit {
				return nil
			}
			cursor = next
		}
	}
	return nil
}

// readOne reads the first row of [start, end) that passes the filters.
func readOne(ctx context.Context, tbl Reader, start, end string, res *Result, filters ...bigtable.Filter) (bigtable.Row, bool, error) {
	var got bigtable.Row
	opts := append(chain(filters...), bigtable.LimitRows(1))
	res.Reads++
	err := tbl.ReadRows(ctx, bigtable.NewRange(start, end), func(row bigtable.Row) bool {
		got = row
		return false
	}, opts...)
	if got != nil {
		res.RowsRead++
	}
	return got, got != nil, err
}

// minEnd is the smaller of two range ends ("" is the end of the table).
func minEnd(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case a < b:
		return a
	}
	return b
}
