package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sensorpipe/sensorpipe/internal/emulators"
)

// Emulator is an emulator process started for a benchmark by
// internal/emulators, in its own process group. Stop it with Stop.
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
