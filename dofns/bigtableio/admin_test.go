package bigtableio

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// TestEnsureMarksTable: a missing marks table, or one without its family,
// is no error without create (the batch keeps no marks); with create it
// is made, and then found.
func TestEnsureMarksTable(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx := context.Background()
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	ensure := func(create bool) bool {
		t.Helper()
		ok, err := EnsureMarksTable(ctx, "p", "i", spec, create, 10*time.Second)
		if err != nil {
			t.Fatalf("EnsureMarksTable(create=%v): %v", create, err)
		}
		return ok
	}
	if ensure(false) {
		t.Error("a missing marks table was found")
	}
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if err := ac.CreateTable(ctx, hours.MarksTable(spec)); err != nil {
		t.Fatal(err)
	}
	if ensure(false) {
		t.Errorf("a marks table without family %s was found", hours.MarksFamily)
	}
	if !ensure(true) {
		t.Error("create did not make the marks table")
	}
	if !ensure(false) {
		t.Error("the marks table create made was not found")
	}
}
