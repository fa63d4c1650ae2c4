package emulators

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
	"testing"
	"time"
)

// BigtableEmulatorEnv names an environment variable that may point directly
// at the cbtemulator binary, bypassing the gcloud lookup.
const BigtableEmulatorEnv = "SENSORPIPE_BIGTABLE_EMULATOR"

// bigtableStartTimeout bounds how long we wait for the emulator to listen.
const bigtableStartTimeout = 30 * time.Second

var (
	cbtPathOnce sync.Once
	cbtPath     string
	cbtPathErr  error
)

// findBigtableEmulator locates cbtemulator: $SENSORPIPE_BIGTABLE_EMULATOR,
// then <gcloud SDK root>/platform/bigtable-emulator/cbtemulator.
func findBigtableEmulator() (string, error) {
	cbtPathOnce.Do(func() {
		if p := os.Getenv(BigtableEmulatorEnv); p != "" {
			if _, err := os.Stat(p); err != nil {
				cbtPathErr = fmt.Errorf("$%s=%q: %w", BigtableEmulatorEnv, p, err)
				return
			}
			cbtPath = p
			return
		}
		gcloud, err := exec.LookPath("gcloud")
		if err != nil {
			cbtPathErr = errors.New("gcloud is not on PATH, and $" + BigtableEmulatorEnv + " is not set")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, gcloud, "info", "--format=value(installation.sdk_root)").Output()
		if err != nil {
			cbtPathErr = fmt.Errorf("gcloud info: %w", err)
			return
		}
		p := filepath.Join(strings.TrimSpace(string(out)), "platform", "bigtable-emulator", "cbtemulator")
		if _, err := os.Stat(p); err != nil {
			cbtPathErr = fmt.Errorf("cbtemulator not installed (gcloud components install bigtable): %w", err)
			return
		}
		cbtPath = p
	})
	return cbtPath, cbtPathErr
}

// StartBigtable starts a Bigtable emulator (cbtemulator) on a free loopback
// port and returns its "host:port". The process is killed by its PID when
// the test ends. The test is skipped under -short, or when cbtemulator is not
// installed; it fails when cbtemulator is installed but does not start.
//
// Callers normally set BIGTABLE_EMULATOR_HOST to the returned address
// (tb.Setenv) so the Bigtable clients connect to it.
func StartBigtable(tb testing.TB) (hostPort string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("skipping the Bigtable emulator test under -short")
	}
	bin, err := findBigtableEmulator()
	if err != nil {
		tb.Skipf("Bigtable emulator not available: %v", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := bigtableFreePort()
		if err != nil {
			tb.Fatalf("emulators: picking a free port: %v", err)
		}
		hostPort = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = startBigtableOn(tb, bin, port); lastErr == nil {
			return hostPort
		}
		tb.Logf("emulators: bigtable start attempt %d on %s failed: %v", attempt+1, hostPort, lastErr)
	}
	tb.Fatalf("emulators: Bigtable emulator did not start: %v", lastErr)
	return ""
}

func startBigtableOn(tb testing.TB, bin string, port int) error {
	hostPort := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
	var logs strings.Builder
	var mu sync.Mutex
	cmd.Stdout = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill() // cbtemulator is one Go process: kill it by its PID
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
	}
	output := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	if err := waitListening(hostPort, exited); err != nil {
		stop()
		return fmt.Errorf("%w; emulator output:\n%s", err, output())
	}
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			tb.Logf("bigtable emulator output:\n%s", output())
		}
	})
	tb.Logf("emulators: Bigtable emulator pid %d ready on %s", pid, hostPort)
	return nil
}

// waitListening polls until hostPort accepts a TCP connection, the process
// exits, or the deadline passes.
func waitListening(hostPort string, exited <-chan error) error {
	deadline := time.Now().Add(bigtableStartTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", hostPort, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v (last error: %v)", hostPort, bigtableStartTimeout, err)
		}
		select {
		case err := <-exited:
			return fmt.Errorf("emulator exited before listening: %v", err)
		case <-tick.C:
		}
	}
}

// bigtableFreePort asks the kernel for an unused TCP port on 127.0.0.1.
func bigtableFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
