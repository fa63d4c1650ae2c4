package readpath

import (
	"context"
	"fmt"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// CreateTables creates spec's tables with their column families (no GC
// rule), for tests and local emulators. Existing tables are an error.
func CreateTables(ctx context.Context, admin *bigtable.AdminClient, spec *schemas.Spec) error {
	for _, ts := range spec.Bigtable.Tables {
		fams := map[string]bigtable.GCPolicy{}
		for _, f := range ts.Families {
			fams[f.Name] = bigtable.NoGcPolicy()
		}
		if err := admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: ts.Name, Families: fams}); err != nil {
			return fmt.Errorf("create table %s: %w", ts.Name, err)
		}
	}
	return nil
}

// WriteMutations applies row mutations built by hours.Builder, one bulk
// call per table.
func WriteMutations(ctx context.Context, client *bigtable.Client, muts []hours.RowMutation) error {
	byTable := map[string][]hours.RowMutation{}
	var order []string
	for _, m := range muts {
		if _, ok := byTable[m.Table]; !ok {
			order = append(order, m.Table)
		}
		byTable[m.Table] = append(byTable[m.Table], m)
	}
	for _, table := range order {
		ms := byTable[table]
		keys := make([]string, len(ms))
		bms := make([]*bigtable.Mutation, len(ms))
		for i, m := range ms {
			keys[i] = m.RowKey
			bm := bigtable.NewMutation()
			for _, c := range m.Cells {
				bm.Set(c.Family, c.Qualifier, bigtable.Timestamp(c.TsMicros), c.Value)
			}
			bms[i] = bm
		}
		errs, err := client.Open(table).ApplyBulk(ctx, keys, bms)
		if err != nil {
			return fmt.Errorf("apply %s: %w", table, err)
		}
		for i, e := range errs {
			if e != nil {
				return fmt.Errorf("apply %s row %q: %w", table, keys[i], e)
			}
		}
	}
	return nil
}
