package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

var updateSamples = flag.Bool("update_samples", false, "rewrite testdata/formats/vitals.{csv,parquet,avro} from testdata/vitals")

// TestFormatSamples: the samples docs/guide/batch.md reads are the
// acceptance data (testdata/vitals) as CSV, Parquet (written by DuckDB)
// and Avro, made by this test with -update_samples; each maps onto the
// vitals spec.
func TestFormatSamples(t *testing.T) {
	objs := acceptanceObjects(t)
	recs := acceptanceRecords(t, objs)
	dir := "../testdata/formats"
	if *updateSamples {
		writeAcceptanceCSV(t, filepath.Join(dir, "vitals.csv"), objs)
		writeAcceptanceParquet(t, filepath.Join(dir, "vitals.parquet"), recs)
		writeAcceptanceAvro(t, filepath.Join(dir, "vitals.avro"), recs)
	}
	fresh := filepath.Join(t.TempDir(), "vitals.csv")
	writeAcceptanceCSV(t, fresh, objs)
	a, _ := os.ReadFile(fresh)
	b, err := os.ReadFile(filepath.Join(dir, "vitals.csv"))
	if err != nil || !bytes.Equal(a, b) {
		t.Errorf("testdata/formats/vitals.csv is not testdata/vitals as CSV (%v): run go test ./launch -run TestFormatSamples -update_samples", err)
	}
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	c, err := hours.Compile(spec, hours.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"csv", "parquet", "avro"} {
		path := filepath.Join(dir, "vitals."+format)
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", path, err)
		}
		if err := fileio.CheckColumns(context.Background(), path, format, c); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}
