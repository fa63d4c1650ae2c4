package main

import (
	"flag"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/flagsdoc"
)

var updateGolden = flag.Bool("update_golden", false, "rewrite golden files: docs/reference/flags.md")

// TestFlagsReference: docs/reference/flags.md has a section per keys
// command listing its flags with the default and help text --help prints.
// After adding or changing a flag, regenerate it with make generate.
func TestFlagsReference(t *testing.T) {
	for _, cmd := range []string{"preview", "lint", "hotspots", "compare"} {
		fs, err := newFlagSet(cmd, &keysFlags{})
		if err != nil {
			t.Fatal(err)
		}
		if err := flagsdoc.Check(flagsdoc.Path(2), "keys "+cmd, flagsdoc.Table(fs), *updateGolden); err != nil {
			t.Error(err)
		}
	}
}
