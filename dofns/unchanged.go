package dofns

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// storedHour reads back one identity's hour for a batch's merge
// (hours.MergeChanges): its readings and, when the read-back table is the
// spec's first (whose rows the rollup's cells ride in), in the same read,
// the rollup family's cells at the hour's end. With the readings in
// another table the rollup is not read, and an hour with stored readings
// has its rollup written again.
//
// With marks set, the hour's BigQuery marks are read too (marksOf).
func (r *readBacker) storedHour(ctx context.Context, policy retry.Policy, spec *hours.Compiled, identity string, startMs, endMs int64,
	marks *hours.BQMarks) (hours.StoredHour, int, error) {
	sh, skipped, err := r.storedReadings(ctx, policy, spec, identity, startMs, endMs)
	if err == nil && marks != nil {
		sh.Marks, sh.MarksRead = r.marksOf(ctx, policy, marks, endMs)
	}
	return sh, skipped, err
}

// marksOf reads an hour's BigQuery marks (hours.MarksTable): BigQuery
// table reference to fingerprint. A failed read is logged and leaves
// read false: the hour's rows are all sent.
func (r *readBacker) marksOf(ctx context.Context, policy retry.Policy, marks *hours.BQMarks, endMs int64) (map[string][]byte, bool) {
	got := map[string][]byte{}
	err := retry.Do(ctx, policy, func(actx context.Context) error {
		clear(got)
		return r.reader.ReadRows(actx, marks.Table, []rowkey.RowRange{{Start: marks.RowKey, End: marks.RowKey + "\x00"}},
			[]string{hours.MarksFamily}, endMs, endMs+1, func(row hours.ReadRow) {
				for _, c := range row.Cells {
					if _, ok := got[c.Qualifier]; !ok { // the newest version comes first
						got[c.Qualifier] = c.Value
					}
				}
			})
	})
	if err != nil {
		log.Warnf(ctx, "hour %s: its BigQuery marks cannot be read from %s (%v): its BigQuery rows are all sent", marks.RowKey, marks.Table, err)
		return nil, false
	}
	return got, true
}

// storedReadings is storedHour's read of the readings and the rollup.
func (r *readBacker) storedReadings(ctx context.Context, policy retry.Policy, spec *hours.Compiled, identity string, startMs, endMs int64) (hours.StoredHour, int, error) {
	roller := spec.Roller()
	if roller == nil || r.rb.Table() != spec.Bigtable.Tables[0].Name {
		recs, skipped, err := r.windowWithin(ctx, policy, identity, startMs, endMs)
		return hours.StoredHour{Records: recs, RollupRead: roller == nil}, skipped, err
	}
	plan, err := r.rb.PlanWindow(identity, startMs, endMs)
	if err != nil {
		return hours.StoredHour{}, 0, fmt.Errorf("read back %s: %w", r.rb.Table(), err)
	}
	families := r.rb.Families()
	if !contains(families, roller.Family()) {
		families = append(families[:len(families):len(families)], roller.Family())
	}
	var rows []hours.ReadRow
	// The rollup's cells are at the hour's end: read to its millisecond.
	err = r.scanFamilies(ctx, plan, families, startMs, endMs+1, policy, func() { rows = rows[:0] }, func(row hours.ReadRow) {
		rows = append(rows, row)
	})
	if err != nil {
		return hours.StoredHour{}, 0, err
	}
	rollup := map[string]map[string][]byte{}
	for _, row := range rows {
		for _, c := range row.Cells {
			if c.Family == roller.Family() && c.TsMicros == endMs*1000 {
				if rollup[row.Key] == nil {
					rollup[row.Key] = map[string][]byte{}
				}
				rollup[row.Key][c.Qualifier] = c.Value
			}
		}
	}
	recs, skipped := r.rb.Records(rows, identity, startMs, endMs)
	return hours.StoredHour{Records: recs, Rollup: rollup, RollupRead: true}, skipped, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// countUnchanged counts in the run's ledger what a merge left unwritten
// (ledger.Unchanged), per sink table.
func (f *BuildRowsFn) countUnchanged(ctx context.Context, un hours.Unchanged) {
	for _, u := range un.Bigtable {
		f.hour.ctrs.Sink(ctx, deadletter.SinkBigtable, u.Table, u.Kind, ledger.Unchanged, u.N)
	}
	for _, u := range un.BigQuery {
		f.hour.ctrs.Sink(ctx, u.Sink, u.Table, u.Kind, ledger.Unchanged, u.N)
	}
	if un.Hour {
		f.hour.ctrs.Inc(ctx, ledger.UnchangedHours, 1)
	}
}
