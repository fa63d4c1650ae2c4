package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
)

// Emulator is an emulator process started for a benchmark by
// internal/testrig/emulators, in its own process group. Stop it with Stop.
type Emulator struct {
	*emulators.Process
	// Name is the emulator's kind, e.g. "bigtable".
	Name string
}

// StartBigtable starts the Bigtable emulator (cbtemulator) on a free
// loopback port and waits until it listens.
func StartBigtable() (*Emulator, error) { return start(emulators.Bigtable) }

// StartPubSub starts the Pub/Sub emulator on a free loopback port and waits
// until it answers.
func StartPubSub() (*Emulator, error) { return start(emulators.PubSub) }

func start(k emulators.Kind) (*Emulator, error) {
	p, err := k.Launch()
	if err != nil {
		return nil, err
	}
	return &Emulator{Process: p, Name: k.Name}, nil
}

// CPUSeconds is the user+system CPU the emulator's process group has used
// so far (the Pub/Sub emulator is a JVM behind a shell launcher), from
// /proc/<pid>/stat of each live process in the group, 0 where /proc is
// unavailable.
func (e *Emulator) CPUSeconds() float64 {
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0
	}
	total := 0.0
	for _, d := range dirs {
		pgrp, cpu, ok := procStat(d)
		if ok && pgrp == e.PID {
			total += cpu
		}
	}
	return total
}

// procStat reads a /proc/<pid>/stat file: the process group and the
// user+system CPU seconds.
func procStat(path string) (pgrp int, cpu float64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	// Fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return pgrp, (utime + stime) / clockTicks, true
}

// ProcessCPUSeconds is the user+system CPU of one process (not its
// children) so far, from /proc/<pid>/stat, 0 where that is unavailable.
func ProcessCPUSeconds(pid int) float64 {
	_, cpu, _ := procStat(fmt.Sprintf("/proc/%d/stat", pid))
	return cpu
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// ProcStatusMB is a memory field of /proc/<pid>/status (VmRSS, VmHWM, ...)
// in MB, 0 where it is unavailable.
func ProcStatusMB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

// WatchPeakRSS follows a running process's own peak resident memory
// (VmHWM) until the returned function is called, which returns it in MB
// (0 where /proc is unavailable). It polls every 100 ms, so growth in the
// process's last 100 ms may be missed.
//
// Not the rusage Maxrss of the ended process: Linux carries the forking
// process's high-water mark into it at exec (Go forks with CLONE_VM), so
// a child of a bench that held 900 MB reports 900 MB whatever it used.
func WatchPeakRSS(pid int) (stop func() float64) {
	var peak float64 // the goroutine's until finished closes
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, ProcStatusMB(pid, "VmHWM"))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		<-finished
		return peak
	}
}
