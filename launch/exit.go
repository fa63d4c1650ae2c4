package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sensorpipe/sensorpipe/internal/cli"
)

// exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	// exitUnavailable: the job ran and its ledger balances, but a store
	// stayed unavailable and records were dead-lettered for it.
	exitUnavailable = 3
)

// usageError is a bad flag or flag combination: the one usage error type of
// every sensorpipe command (internal/cli), so a usage error from cli (e.g.
// cli.Bigtable's) exits 2 whether or not the launcher wraps it again.
type usageError = cli.UsageError

// usagef is a usageError formatted like fmt.Errorf (%w keeps the chain).
func usagef(format string, args ...any) error { return cli.Usagef(format, args...) }

// exitError ends the run with its code after the run has reported itself.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// exitCode is the exit code for run's error: a usage error (anywhere in the
// chain) 2, an exitError its code, anything else, a failure to build the
// pipeline or to run it among them, 1.
func exitCode(err error) int {
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	}
	return exitFailed
}

func fail(code int, err error) {
	fmt.Fprintf(os.Stderr, "sensorpipe: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	os.Exit(code)
}
