package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// TestStreamProgressSaysWhatIsProvisional: mid-stream, most readings are
// in open hours and Bigtable has more writes than readings read; the
// progress line says which writes are provisional and which final, where
// a batch's says read and written.
func TestStreamProgressSaysWhatIsProvisional(t *testing.T) {
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := hours.Compile(spec, hours.CompileOptions{Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	table := spec.Bigtable.Tables[0].Name
	cur := ledger.Counters{
		ledger.InputRecords:  952,
		ledger.InputRejected: 17,
		ledger.Readings:      53,
		ledger.SinkKey(deadletter.SinkBigtable, table, hours.OriginReading, ledger.Written):      53,
		ledger.SinkKey(deadletter.SinkBigtable, table, hours.OriginProvisional, ledger.Written):  904,
		ledger.SinkKey(deadletter.SinkBigQuery, "readings", hours.OriginReading, ledger.Written): 53,
	}
	got := progressLine(compiled, true, ledger.Counters{}, cur, 30*time.Second, 30*time.Second)
	for _, want := range []string{"read 952 (882 in open hours, provisional; 53 final, their hour closed; 17 rejected)",
		"Bigtable 904 provisional writes, 53 final", "BigQuery 53 final"} {
		if !strings.Contains(got, want) {
			t.Errorf("stream progress %q lacks %q", got, want)
		}
	}
	if got := progressLine(compiled, false, ledger.Counters{}, cur, 30*time.Second, 30*time.Second); !strings.Contains(got, "read 952, written 957 (bigquery 53)") {
		t.Errorf("batch progress %q; want read and written", got)
	}
}
