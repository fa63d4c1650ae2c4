// Package loopback cleans up after Beam's universal runner in loopback mode
// (prism's default here): for every pipeline run it creates an empty
// placeholder worker file, os.TempDir()/beamloopbackworker-*, which the
// loopback worker never executes and Beam never removes
// (runnerlib.Execute; apache/beam#27569). Every launcher run and pipeline
// test left one behind: thousands in /tmp on a development machine.
//
// The placeholder is staged as the job's artifact before the job is
// submitted, so it must exist until then: removing the placeholders in the
// shared temp dir that a run had made (as this package first did) also
// removed those of runs in other processes that were still staging, and
// failed them ("failed to stage /tmp/beamloopbackworker-...: no such
// file"). Private gives a run a temp dir of its own instead, and removes
// only that.
//
// A local stream also keeps its hours' state in that folder
// (dofns.StreamRowsFn.DiskState), so a killed run, which cannot remove it,
// could leave gigabytes behind. Each folder names its process in a file
// (ownerFile), and Private removes the folders of processes that are gone.
package loopback

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

// ownerFile, in a run's folder, holds the id of the process that made it.
const ownerFile = "owner.pid"

// Private points this process's temp dir (TMPDIR, which os.TempDir reads)
// at a new folder of its own inside the current one, so that the
// placeholder of a run that starts now is this process's alone. The
// returned func, called when the run has ended, points TMPDIR back and
// removes the folder with everything in it. Calls in one process must not
// overlap: a second Private before the first's func would be undone by it.
func Private() (restore func(), err error) {
	sweep(os.TempDir())
	dir, err := os.MkdirTemp("", "sensorpipe-run-")
	if err != nil {
		return nil, fmt.Errorf("a temp folder for the run's loopback placeholder: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("a temp folder for the run: %w", err)
	}
	old, had := os.LookupEnv("TMPDIR")
	if err := os.Setenv("TMPDIR", dir); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("a temp folder for the run's loopback placeholder: %w", err)
	}
	return func() {
		if had {
			os.Setenv("TMPDIR", old)
		} else {
			os.Unsetenv("TMPDIR")
		}
		os.RemoveAll(dir)
	}, nil
}

// sweep removes the run folders in parent whose process is gone (killed
// runs). A folder without an owner file (made by an older launcher) or
// whose process is alive stays.
func sweep(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, "sensorpipe-run-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}

// Run runs fn, the runs of a whole test binary (ptest.MainRet), inside one
// Private folder, and returns fn's exit code; it is 1, with the reason on
// stderr, when the folder cannot be made.
func Run(fn func() int) int {
	restore, err := Private()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer restore()
	return fn()
}

// TestMain is a package's TestMain for pipeline tests: it runs them on
// prism, unless --runner says otherwise, inside one Private folder, and
// exits with their code.
func TestMain(m *testing.M) {
	os.Exit(Run(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}
