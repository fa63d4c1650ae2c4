// Package emulators starts real Google Cloud emulator processes for tests.
//
// Every helper starts its emulator on a free loopback port in its own process
// group, waits (with a deadline) until it answers, and registers a cleanup that
// kills the whole process group (the emulators are shell wrappers around a
// JVM), so no child process outlives the test.
package emulators

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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

// PubSubEmulatorEnv names an environment variable that may point directly at
// the cloud-pubsub-emulator launcher script, bypassing the gcloud lookup.
const PubSubEmulatorEnv = "SENSORPIPE_PUBSUB_EMULATOR"

// pubsubStartTimeout bounds how long we wait for the emulator to answer.
const pubsubStartTimeout = 90 * time.Second

var (
	emulatorPathOnce sync.Once
	emulatorPath     string
	emulatorPathErr  error
)

// findPubSubEmulator locates the cloud-pubsub-emulator launcher. It honours
// $SENSORPIPE_PUBSUB_EMULATOR, then asks gcloud for its SDK root.
func findPubSubEmulator() (string, error) {
	emulatorPathOnce.Do(func() {
		if p := os.Getenv(PubSubEmulatorEnv); p != "" {
			if _, err := os.Stat(p); err != nil {
				emulatorPathErr = fmt.Errorf("$%s=%q: %w", PubSubEmulatorEnv, p, err)
				return
			}
			emulatorPath = p
			return
		}
		if _, err := exec.LookPath("java"); err != nil {
			emulatorPathErr = errors.New("java is not on PATH (the Pub/Sub emulator needs Java 17+)")
			return
		}
		gcloud, err := exec.LookPath("gcloud")
		if err != nil {
			emulatorPathErr = errors.New("gcloud is not on PATH")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, gcloud, "info", "--format=value(installation.sdk_root)").Output()
		if err != nil {
			emulatorPathErr = fmt.Errorf("gcloud info: %w", err)
			return
		}
		root := strings.TrimSpace(string(out))
		p := filepath.Join(root, "platform", "pubsub-emulator", "bin", "cloud-pubsub-emulator")
		if _, err := os.Stat(p); err != nil {
			emulatorPathErr = fmt.Errorf("pubsub emulator component not installed (gcloud components install pubsub-emulator): %w", err)
			return
		}
		emulatorPath = p
	})
	return emulatorPath, emulatorPathErr
}

// freeLoopbackPort asks the kernel for an unused TCP port on 127.0.0.1.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartPubSub starts a Pub/Sub emulator on a free loopback port and returns
// its "host:port". The emulator (and its JVM child) is killed when the test
// ends. If the emulator is not installed the test is skipped; if it is
// installed but fails to start, the test fails.
//
// Callers normally set PUBSUB_EMULATOR_HOST to the returned address
// (tb.Setenv) so that the Pub/Sub clients connect to it.
func StartPubSub(tb testing.TB) (hostPort string) {
	tb.Helper()
	bin, err := findPubSubEmulator()
	if err != nil {
		tb.Skipf("Pub/Sub emulator not available: %v", err)
	}

	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freeLoopbackPort()
		if err != nil {
			tb.Fatalf("emulators: picking a free port: %v", err)
		}
		hostPort = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = startPubSubOn(tb, bin, hostPort); lastErr == nil {
			return hostPort
		}
		tb.Logf("emulators: pubsub start attempt %d on %s failed: %v", attempt+1, hostPort, lastErr)
	}
	tb.Fatalf("emulators: Pub/Sub emulator did not start: %v", lastErr)
	return ""
}

func startPubSubOn(tb testing.TB, bin, hostPort string) error {
	host, port, _ := net.SplitHostPort(hostPort)
	cmd := exec.Command(bin, "--host="+host, "--port="+port)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logs lockedBuffer
	cmd.Stdout = &logs
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	pgid := cmd.Process.Pid // Setpgid with Pgid 0: the group id is the child's pid.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	stop := func() {
		// Kill the whole process group (launcher script + JVM), politely first.
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		// The launcher may be gone while the JVM lingers: always finish with SIGKILL.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
	}

	if err := waitPubSubReady(hostPort, exited); err != nil {
		stop()
		return fmt.Errorf("%w; emulator output:\n%s", err, tail(logs.String(), 2000))
	}
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			tb.Logf("pubsub emulator output (tail):\n%s", tail(logs.String(), 4000))
		}
	})
	tb.Logf("emulators: Pub/Sub emulator pid %d ready on %s", pgid, hostPort)
	return nil
}

// waitPubSubReady polls the emulator's HTTP endpoint (it serves REST and gRPC
// on the same port; GET / answers "Ok") until it answers or the deadline.
func waitPubSubReady(hostPort string, exited <-chan error) error {
	deadline := time.Now().Add(pubsubStartTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get("http://" + hostPort + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready on %s after %v (last error: %v)", hostPort, pubsubStartTimeout, err)
		}
		select {
		case err := <-exited:
			return fmt.Errorf("emulator exited before becoming ready: %v", err)
		case <-tick.C:
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
