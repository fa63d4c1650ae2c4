package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/cli"
)

// TestExitCodeKeepsTheChain shows which exit code each kind of error gets,
// however deeply it is wrapped: bad usage 2, a failure to build or run the
// pipeline 1, an exitError its own code.
func TestExitCodeKeepsTheChain(t *testing.T) {
	buildErr := buildPipeline(func() error { return errors.New("no such table") })
	panicErr := buildPipeline(func() error { panic(errors.New("graph.AsDoFn: emit parameters expected")) })
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, exitOK},
		{"usagef", usagef("--max_line_bytes=%d: give 1024..104857600", 3), exitUsage},
		{"usage error from internal/cli", cli.Usagef("--bigtable_project is required"), exitUsage},
		{"usage error wrapped with %w", fmt.Errorf("config: %w", usagef("--source=%q: use files or pubsub", "kafka")), exitUsage},
		{"usage error around a cause", cli.Usage(fmt.Errorf("--spec: %w", os.ErrNotExist)), exitUsage},
		{"pipeline construction error", buildErr, exitFailed},
		{"pipeline construction panic", panicErr, exitFailed},
		{"job failure", jobError(errors.New("job failed: caused by: boom")), exitFailed},
		{"plain runtime error", errors.New("bigtable unreachable"), exitFailed},
		{"unbalanced ledger", exitError{exitFailed, errors.New("the run's ledger does not balance")}, exitFailed},
		{"store unavailable", exitError{exitUnavailable, errors.New("Bigtable stayed unavailable")}, exitUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.want {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

// TestBuildPipelineWrapsItsCause shows that a construction failure, returned
// or panicked, keeps its cause for errors.Is.
func TestBuildPipelineWrapsItsCause(t *testing.T) {
	cause := errors.New("emit parameters expected")
	tests := []struct {
		name  string
		build func() error
	}{
		{"returned", func() error { return fmt.Errorf("ingest: %w", cause) }},
		{"panicked error", func() error { panic(fmt.Errorf("beam.ParDo: %w", cause)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := buildPipeline(tc.build)
			if !errors.Is(err, errBuild) || !errors.Is(err, cause) {
				t.Errorf("buildPipeline = %v; want it to wrap errBuild and the cause", err)
			}
		})
	}
	if err := buildPipeline(func() error { panic("not an error") }); !errors.Is(err, errBuild) {
		t.Errorf("a panic with a string: %v; want errBuild", err)
	}
	if err := buildPipeline(func() error { return nil }); err != nil {
		t.Errorf("a graph that builds: %v; want nil", err)
	}
}

// TestJobErrorIsOneLineWithItsCause: a failed job's report is one line
// that ends with the cause, however the runner wrote its message.
func TestJobErrorIsOneLineWithItsCause(t *testing.T) {
	long := strings.Repeat("plan ", 200)
	tests := []struct {
		name, msg, want string
	}{
		{"prism's chain", "job failed: worker failed\n" + long + "\ncaused by:\nbigtable: table \"x\" not found", "job failed: worker failed: bigtable: table \"x\" not found"},
		{"a job server's chain", "job job-001 failed:\nbundle inst004 failed:\n" + long + "\n\tcaused by:\nDoFn[UID:4, Name: bigtableio.WriteFn] failed:\nbigtable client for p/i: no credentials",
			"job job-001 failed: DoFn[UID:4, Name: bigtableio.WriteFn] failed: bigtable client for p/i: no credentials"},
		{"a job server's message", "job go-job-1 failed:\nprocess bundle failed: open input: permission denied", "job go-job-1 failed: process bundle failed: open input: permission denied"},
		{"one line", "connecting to job service: context deadline exceeded", "job failed: connecting to job service: context deadline exceeded"},
		{"inline cause", "job failed: caused by: boom", "job failed: boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := jobError(errors.New(tc.msg)).Error()
			if got != tc.want {
				t.Errorf("jobError(%q) = %q; want %q", cut(tc.msg, 80), got, tc.want)
			}
		})
	}
}

func TestLoopbackEndpoint(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		endpoint string
		want     bool
	}{
		{"localhost:8073", true},
		{"127.0.0.1:8099", true},
		{"[::1]:8099", true},
		{"0.0.0.0:8099", true},
		{host + ":8099", true},
		{"jobs.example.com:8099", false},
		{"10.1.2.3:8099", false},
	} {
		if got := loopbackEndpoint(tc.endpoint); got != tc.want {
			t.Errorf("loopbackEndpoint(%q) = %v; want %v", tc.endpoint, got, tc.want)
		}
	}
}
