// Package gobuild builds the programs that end-to-end tests run as
// subprocesses (the launcher, query, publish, the PROCESS environment's
// boot), as a user's go build would, without the DWARF debug sections
// (-ldflags=-w): nothing debugs these binaries, and leaving DWARF out
// takes about a third off each link, which the test suite repeats for
// every binary it runs. The symbol table stays, so Beam's function lookup
// by symbol works as in a normal build.
package gobuild

import (
	"fmt"
	"os/exec"
	"testing"
)

// linkFlags leave DWARF out. go test's own binaries are linked without it
// already (and without the symbol table); a go build -o is not.
const linkFlags = "-ldflags=-w"

// Build runs go build of pkg (an import path, or a directory relative to
// the test's working directory) into out, and fails the test with the
// compiler's output when it does not build.
func Build(tb testing.TB, out, pkg string) {
	tb.Helper()
	if err := Run(out, pkg); err != nil {
		tb.Fatal(err)
	}
}

// Run is Build's error form, for a build done once for a whole test
// binary (sync.Once) whose error each test reports.
func Run(out, pkg string) error {
	if b, err := exec.Command("go", "build", linkFlags, "-o", out, pkg).CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}
