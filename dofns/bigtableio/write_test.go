package bigtableio

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	register.Function1x1(deadLetterSummary)
}

func deadLetterSummary(d deadletter.DeadLetter) string { return d.Reason + " " + d.Payload }

// row builds a one-reading row mutation with n cells in family fam.
func row(key, fam string, n int, payload string) hours.RowMutation {
	m := hours.RowMutation{Table: "t", RowKey: key}
	for i := 0; i < n; i++ {
		m.Cells = append(m.Cells, hours.Cell{Family: fam, Qualifier: fmt.Sprintf("q%d", i), TsMicros: 1000, Value: []byte("v")})
	}
	m.Origins = []hours.Origin{{Raw: payload, Source: "src", Cells: n}}
	return m
}

func TestBigtableWriteFnLandsGoodRowsAndDeadLettersFailures(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx := context.Background()
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if err := ac.CreateTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := ac.CreateColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}

	var rows []hours.RowMutation
	for i := 0; i < 50; i++ {
		rows = append(rows, row(fmt.Sprintf("good-%02d", i), "f", 3, fmt.Sprintf("good %d", i)))
	}
	rows = append(rows,
		row("bad-family", "nope", 2, "bad family"), // the family does not exist: a permanent error
		row("", "f", 1, "empty key"),               // an empty row key is invalid
		row("no-cells", "f", 0, "nothing to write"),
	)
	p, s := beam.NewPipelineWithRoot()
	fn := newWriteFn("p", "i")
	fn.MaxInflight = 2
	dead := beam.ParDo(s, fn, beam.CreateList(s, rows))
	passert.Equals(s, beam.ParDo(s, deadLetterSummary, dead), "write_failed bad family", "write_failed empty key")
	ptest.RunAndValidate(t, p)

	c, err := NewClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys []string
	cells := 0
	err = c.Open("t").ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		keys = append(keys, r.Key())
		cells += len(r["f"])
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	if len(keys) != 50 || cells != 150 || !strings.HasPrefix(keys[0], "good-") {
		t.Fatalf("table has rows %v with %d cells; want the 50 good rows with 150 cells", keys, cells)
	}
}

func TestSplitEntriesCutsBetweenReadings(t *testing.T) {
	m := hours.RowMutation{Table: "t", RowKey: "k"}
	// Three readings of 40,000 cells: no entry may exceed 100,000 mutations,
	// and no reading may be cut in two.
	for r := 0; r < 3; r++ {
		for i := 0; i < 40_000; i++ {
			m.Cells = append(m.Cells, hours.Cell{Family: "f", Qualifier: "q", TsMicros: int64(r*100_000 + i), Value: []byte("v")})
		}
		m.Origins = append(m.Origins, hours.Origin{Raw: fmt.Sprint(r), Cells: 40_000})
	}
	entries := splitEntries(m)
	if len(entries) != 2 || entries[0].cells != 80_000 || entries[1].cells != 40_000 ||
		len(entries[0].origins) != 2 || len(entries[1].origins) != 1 {
		var got []string
		for _, e := range entries {
			got = append(got, fmt.Sprintf("%d cells/%d readings", e.cells, len(e.origins)))
		}
		t.Fatalf("entries = %v; want 80000 cells/2 readings and 40000 cells/1 reading", got)
	}
}
