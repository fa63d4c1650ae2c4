// Package loopback cleans up after Beam's universal runner in loopback mode
// (prism's default here): for every pipeline run it creates an empty
// placeholder worker file, os.TempDir()/beamloopbackworker-*, which the
// loopback worker never executes and Beam never removes
// (runnerlib.Execute; apache/beam#27569). Every launcher run and pipeline
// test left one behind: thousands in /tmp on a development machine.
package loopback

import (
	"os"
	"path/filepath"
	"time"
)

// Pattern is the placeholders' name in os.TempDir().
const Pattern = "beamloopbackworker-*"

// Sweep removes the empty placeholders in os.TempDir() last modified at or
// after since (the run's start, so that older files are left to whoever
// made them), and returns how many it removed. A placeholder is never
// read, so removing one that a concurrent run made is harmless.
func Sweep(since time.Time) int {
	paths, err := filepath.Glob(filepath.Join(os.TempDir(), Pattern))
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 || fi.ModTime().Before(since.Add(-time.Second)) {
			continue
		}
		if os.Remove(p) == nil {
			n++
		}
	}
	return n
}
