// Package emulators starts real Google Cloud emulator processes: the gcloud
// SDK's Bigtable emulator (cbtemulator) and Pub/Sub emulator (a JVM behind a
// shell launcher).
//
// Each emulator starts on a free loopback port in its own process group,
// is polled (with a deadline) until it answers, and is stopped by killing
// that process group, so no child outlives its owner. Tests use StartBigtable
// and StartPubSub, which skip when the emulator is not installed and stop it
// at the end of the test; programs such as the benchmark use Launch.
package emulators

import (
	"bytes"
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
	"syscall"
	"testing"
	"time"
)

// Kind describes one emulator: where it is installed and how to start it.
type Kind struct {
	// Name is for messages, e.g. "bigtable".
	Name string
	// Env names a variable that may hold the emulator's path directly.
	Env string
	// SDKPath is its path under the gcloud SDK root.
	SDKPath string
	// NeedsJava is true for the JVM-based emulators.
	NeedsJava bool
	// Args are the command-line arguments to listen on host:port.
	Args func(host, port string) []string
	// Ready reports nil once the emulator answers at hostPort.
	Ready func(hostPort string) error
	// StartTimeout bounds the wait for Ready.
	StartTimeout time.Duration
}

var (
	sdkRootOnce sync.Once
	sdkRoot     string
	sdkRootErr  error
)

// SDKRoot is the gcloud SDK's installation root.
func SDKRoot() (string, error) {
	sdkRootOnce.Do(func() {
		gcloud, err := exec.LookPath("gcloud")
		if err != nil {
			sdkRootErr = errors.New("gcloud is not on PATH")
			return
		}
		// gcloud is bin/gcloud under the root, often behind a symlink:
		// that answers without gcloud info, a Python start of seconds.
		if real, err := filepath.EvalSymlinks(gcloud); err == nil {
			root := filepath.Dir(filepath.Dir(real))
			if _, err := os.Stat(filepath.Join(root, "platform")); err == nil {
				sdkRoot = root
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, gcloud, "info", "--format=value(installation.sdk_root)").Output()
		if err != nil {
			sdkRootErr = fmt.Errorf("gcloud info: %w", err)
			return
		}
		sdkRoot = strings.TrimSpace(string(out))
	})
	return sdkRoot, sdkRootErr
}

// Find returns the emulator's path: $Env if set, else under the SDK root.
func (k Kind) Find() (string, error) {
	if p := os.Getenv(k.Env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s=%q: %w", k.Env, p, err)
		}
		return p, nil
	}
	if k.NeedsJava {
		if _, err := exec.LookPath("java"); err != nil {
			return "", fmt.Errorf("java is not on PATH (the %s emulator needs Java 17+)", k.Name)
		}
	}
	root, err := SDKRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, k.SDKPath)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s emulator not installed (gcloud SDK component, $%s to override): %w", k.Name, k.Env, err)
	}
	return p, nil
}

// Process is a running emulator.
type Process struct {
	// HostPort is where it listens, e.g. "127.0.0.1:41234".
	HostPort string
	// PID is the process (and process group) id.
	PID    int
	exited chan error
	logs   *SyncBuffer
	once   sync.Once
}

// Launch starts the emulator on a free loopback port (trying up to three
// ports) and waits until it answers.
func (k Kind) Launch() (*Process, error) {
	bin, err := k.Find()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreeLoopbackPort()
		if err != nil {
			return nil, fmt.Errorf("emulators: picking a free port: %w", err)
		}
		p, err := k.launchOn(bin, "127.0.0.1", strconv.Itoa(port))
		if err == nil {
			return p, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("emulators: %s emulator did not start: %w", k.Name, lastErr)
}

func (k Kind) launchOn(bin, host, port string) (*Process, error) {
	cmd := exec.Command(bin, k.Args(host, port)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &Process{HostPort: net.JoinHostPort(host, port), PID: cmd.Process.Pid, exited: make(chan error, 1), logs: logs}
	go func() { p.exited <- cmd.Wait() }()
	if err := p.waitReady(k); err != nil {
		p.Stop()
		return nil, fmt.Errorf("%w; emulator output:\n%s", err, tail(logs.String(), 2000))
	}
	return p, nil
}

// waitReady polls Ready until it succeeds, the process exits, or the
// deadline passes.
func (p *Process) waitReady(k Kind) error {
	deadline := time.Now().Add(k.StartTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := k.Ready(p.HostPort)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready on %s after %v (last error: %w)", p.HostPort, k.StartTimeout, err)
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			return fmt.Errorf("emulator exited before it was ready: %w", err)
		case <-tick.C:
		}
	}
}

// Stop ends the emulator's process group: SIGTERM, then SIGKILL.
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.PID, syscall.SIGTERM)
		select {
		case <-p.exited:
			return
		case <-time.After(5 * time.Second):
		}
		_ = syscall.Kill(-p.PID, syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
	})
}

// Output is what the emulator has printed, last n bytes.
func (p *Process) Output(n int) string { return tail(p.logs.String(), n) }

// StartForTest launches the emulator for a test and stops it when the test
// ends. It skips under -short or when the emulator is not installed, and
// fails when it is installed but does not start.
func (k Kind) StartForTest(tb testing.TB) (hostPort string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("skipping the %s emulator test under -short", k.Name)
	}
	if _, err := k.Find(); err != nil {
		tb.Skipf("%s emulator not available: %v", k.Name, err)
	}
	p, err := k.Launch()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("%s emulator output (tail):\n%s", k.Name, p.Output(4000))
		}
	})
	tb.Logf("emulators: %s emulator pid %d ready on %s", k.Name, p.PID, p.HostPort)
	return p.HostPort
}

// FreeLoopbackPort asks the kernel for an unused TCP port on 127.0.0.1.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// SyncBuffer is a bytes.Buffer safe for concurrent writes and reads: a
// process's output that a test reads while the process runs.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Shared is one emulator process for a whole test binary: started on its
// first use, stopped by Stop, which TestMain calls after m.Run. Tests that
// share it keep apart by the names they use (topics, subscriptions), so
// none sees another's data. Starting one per test costs a JVM start-up
// each for the Pub/Sub emulator; a test that kills or faults its emulator
// starts its own with StartForTest or Launch.
type Shared struct {
	Kind Kind

	once sync.Once
	proc *Process
	err  error
}

// HostPort starts the emulator on first use and returns its "host:port".
// Like StartForTest, it skips under -short or when the emulator is not
// installed, and fails when it is installed but does not start; a test
// that fails gets the emulator's output in its log.
func (s *Shared) HostPort(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("skipping the %s emulator test under -short", s.Kind.Name)
	}
	if _, err := s.Kind.Find(); err != nil {
		tb.Skipf("%s emulator not available: %v", s.Kind.Name, err)
	}
	s.once.Do(func() {
		s.proc, s.err = s.Kind.Launch()
	})
	if s.err != nil {
		tb.Fatal(s.err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("shared %s emulator output (tail):\n%s", s.Kind.Name, s.proc.Output(4000))
		}
	})
	return s.proc.HostPort
}

// Stop stops the emulator if it was started.
func (s *Shared) Stop() {
	if s.proc != nil {
		s.proc.Stop()
	}
}
