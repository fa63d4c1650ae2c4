package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BigtableEmulatorEnv names an environment variable that may point directly
// at the cbtemulator binary, bypassing the gcloud lookup (as in
// internal/emulators).
const BigtableEmulatorEnv = "SENSORPIPE_BIGTABLE_EMULATOR"

// Emulator is a running cbtemulator process.
type Emulator struct {
	HostPort string
	PID      int

	cmd    *exec.Cmd
	exited chan error
	mu     sync.Mutex
	logs   strings.Builder
}

// FindBigtableEmulator locates cbtemulator: $SENSORPIPE_BIGTABLE_EMULATOR,
// then <gcloud SDK root>/platform/bigtable-emulator/cbtemulator. It is the
// lookup of internal/emulators, which only serves tests (it takes a
// testing.TB).
func FindBigtableEmulator() (string, error) {
	if p := os.Getenv(BigtableEmulatorEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s=%q: %w", BigtableEmulatorEnv, p, err)
		}
		return p, nil
	}
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return "", errors.New("gcloud is not on PATH, and $" + BigtableEmulatorEnv + " is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, gcloud, "info", "--format=value(installation.sdk_root)").Output()
	if err != nil {
		return "", fmt.Errorf("gcloud info: %w", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "platform", "bigtable-emulator", "cbtemulator")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("cbtemulator not installed (gcloud components install bigtable): %w", err)
	}
	return p, nil
}

// StartBigtable starts cbtemulator (bin) on a free loopback port and waits
// until it listens. Stop it with Stop.
func StartBigtable(bin string) (*Emulator, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		e, err := startOn(bin, port)
		if err == nil {
			return e, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("bigtable emulator did not start: %w", lastErr)
}

func startOn(bin string, port int) (*Emulator, error) {
	e := &Emulator{HostPort: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exited: make(chan error, 1)}
	e.cmd = exec.Command(bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
	e.cmd.Stdout = writerFunc(func(p []byte) (int, error) { e.mu.Lock(); defer e.mu.Unlock(); return e.logs.Write(p) })
	e.cmd.Stderr = e.cmd.Stdout
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	e.PID = e.cmd.Process.Pid
	go func() { e.exited <- e.cmd.Wait() }()
	if err := waitListening(e.HostPort, e.exited, 30*time.Second); err != nil {
		e.Stop()
		return nil, fmt.Errorf("%w; emulator output:\n%s", err, e.Output())
	}
	return e, nil
}

// Output is what the emulator has printed.
func (e *Emulator) Output() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.String()
}

// Stop kills the emulator by its PID (cbtemulator is one Go process) and
// waits for it to exit.
func (e *Emulator) Stop() {
	_ = e.cmd.Process.Kill()
	select {
	case <-e.exited:
	case <-time.After(5 * time.Second):
	}
}

// waitListening polls until hostPort accepts a TCP connection, the process
// exits, or the timeout passes.
func waitListening(hostPort string, exited <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", hostPort, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v (last error: %v)", hostPort, timeout, err)
		}
		select {
		case err := <-exited:
			return fmt.Errorf("emulator exited before listening: %v", err)
		case <-tick.C:
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// CPUSeconds is the user+system CPU the emulator has used so far, from
// /proc/<pid>/stat (0 where that is unavailable).
func (e *Emulator) CPUSeconds() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.PID))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100
