package main

import (
	"flag"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/flagsdoc"
)

// updateGolden rewrites the golden files; the launcher already has an
// --update flag (Beam's Dataflow update option), hence the name.
var updateGolden = flag.Bool("update_golden", false, "rewrite golden files: docs/reference/flags.md")

// launcherFlagSet is a flag set with the launcher's own flags (those
// launch/*.go defines; Beam's runner options are left to --help).
func launcherFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	new(flags).register(fs)
	return fs
}

// TestFlagsReference: docs/reference/flags.md's launch section lists every
// launcher flag with the default and help text --help prints. After adding
// or changing a flag, regenerate it with make generate.
func TestFlagsReference(t *testing.T) {
	fs := launcherFlagSet()
	for _, d := range launcherFlags(t, ".") {
		if fs.Lookup(d.name) == nil {
			t.Fatalf("flag %s is declared in launch/ (%s) but not registered by flags.register", d.name, d.pos)
		}
	}
	if err := flagsdoc.Check(flagsdoc.Path(1), "launch", flagsdoc.Table(fs), *updateGolden); err != nil {
		t.Error(err)
	}
}
