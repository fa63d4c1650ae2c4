package main

import (
	"flag"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/flagsdoc"
)

var updateGolden = flag.Bool("update_golden", false, "rewrite golden files: docs/reference/flags.md")

// TestFlagsReference: docs/reference/flags.md's publish section lists
// every flag of publish with the default and help text --help prints.
// After adding or changing a flag, regenerate it with make generate.
func TestFlagsReference(t *testing.T) {
	var c config
	if err := flagsdoc.Check(flagsdoc.Path(2), "publish", flagsdoc.Table(newFlagSet(&c)), *updateGolden); err != nil {
		t.Error(err)
	}
}
