package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// TestLocalBatchGC: a local batch's collector runs at localBatchGCPercent
// under localBatchMemoryLimit, unless GOGC or GOMEMLIMIT is set, which
// then leaves both as the runtime read them.
func TestLocalBatchGC(t *testing.T) {
	prevPercent, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	})
	for _, tc := range []struct {
		env                  []string
		wantPercent, wantLim int64
	}{
		{nil, localBatchGCPercent, localBatchMemoryLimit},
		{[]string{"GOGC"}, 100, math.MaxInt64},
		{[]string{"GOMEMLIMIT"}, 100, math.MaxInt64},
	} {
		for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
		for _, name := range tc.env {
			t.Setenv(name, "set") // only its presence counts here
		}
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		localBatchGC()
		if got := debug.SetGCPercent(100); int64(got) != tc.wantPercent {
			t.Errorf("with %v set: GOGC %d; want %d", tc.env, got, tc.wantPercent)
		}
		if got := debug.SetMemoryLimit(math.MaxInt64); got != tc.wantLim {
			t.Errorf("with %v set: memory limit %d; want %d", tc.env, got, tc.wantLim)
		}
	}
}
