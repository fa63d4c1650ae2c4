package main

import (
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/launch/bench"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// TestDataset: every built-in spec with a required column gives the bench
// a probe cell that its generated readings fill, and row keys that start
// with the sensor's key prefix.
func TestDataset(t *testing.T) {
	for _, name := range schemas.BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			d, err := newDataset(name)
			if err != nil {
				t.Skipf("not benchable: %v", err)
			}
			ms := bench.DefaultStart.UnixMilli() + 1234
			key := d.rowKey(42, ms)
			if !strings.HasPrefix(key, d.keyPrefix(42)) || d.keyPrefix(42) == d.keyPrefix(43) {
				t.Errorf("row key %q, prefixes %q and %q", key, d.keyPrefix(42), d.keyPrefix(43))
			}
			recs, err := d.parser.Parse(nil, d.lines.AppendAt(nil, 42, ms), "t")
			if err != nil {
				t.Fatal(err)
			}
			muts, rej := d.builder.Mutations(recs)
			if len(rej) != 0 {
				t.Fatalf("rejected: %+v", rej)
			}
			found := false
			for _, m := range muts {
				for _, c := range m.Cells {
					found = found || (m.Table == d.table && m.RowKey == key && c.Family == d.family && c.Qualifier == d.qualifier)
				}
			}
			if !found {
				t.Errorf("no %s cell in row %s of %s: %+v", d.cell(), key, d.table, muts)
			}
		})
	}
	if target.spec.Name != schemas.DefaultSpecName() {
		t.Errorf("target is %s; want the default spec", target.spec.Name)
	}
}
