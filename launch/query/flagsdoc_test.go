package main

import (
	"flag"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/flagsdoc"
)

var updateGolden = flag.Bool("update_golden", false, "rewrite golden files: docs/reference/flags.md")

// TestFlagsReference: docs/reference/flags.md's query section lists every
// flag of query with the default and help text --help prints. After
// adding or changing a flag, regenerate it with make generate.
func TestFlagsReference(t *testing.T) {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	registerFlags(fs, &queryFlags{})
	if err := flagsdoc.Check(flagsdoc.Path(2), "query", flagsdoc.Table(fs), *updateGolden); err != nil {
		t.Error(err)
	}
}
