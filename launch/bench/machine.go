package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine describes where figures were measured.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	OS         string `json:"goos"`
	Arch       string `json:"goarch"`
	CPUModel   string `json:"cpu_model"`
	Go         string `json:"go"`
}

// ThisMachine reads runtime facts and the CPU model from /proc/cpuinfo
// ("unknown" where that file is absent).
func ThisMachine() Machine {
	return Machine{
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		CPUModel:   cpuModel(),
		Go:         runtime.Version(),
	}
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func (m Machine) String() string {
	return fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d), %s, %s", m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, m.CPUModel, m.Go)
}
