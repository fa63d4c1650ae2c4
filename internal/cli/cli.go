// Package cli is what sensorpipe's commands (launch, query, keys, publish)
// share: one set of local defaults, the project and instance `make run`
// uses, applied the same way by every tool, and one convention for exit
// codes.
//
// The local defaults apply only when the emulator variable of the service
// is set (BIGTABLE_EMULATOR_HOST for Bigtable, PUBSUB_EMULATOR_HOST for
// Pub/Sub, BIGQUERY_EMULATOR_HOST for BigQuery): against the emulators the
// project and instance are names the run makes up, while against Google
// Cloud (and on Dataflow, where the variables are not set) an implicit
// project would write to the wrong place, so there the flag is required.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// The local defaults: the names make run, make stream and the tests' own
// emulators use (the Makefile's PROJECT and INSTANCE).
const (
	LocalProject  = "local-project"
	LocalInstance = "local-instance"
)

// LocalTopic is the Pub/Sub topic make stream publishes to: named after
// the default spec (schemas/specs/DEFAULT).
var LocalTopic = schemas.DefaultSpecName()

// The emulator variables the Google Cloud clients honour.
const (
	BigtableEmulatorEnv = "BIGTABLE_EMULATOR_HOST"
	BigQueryEmulatorEnv = "BIGQUERY_EMULATOR_HOST"
	PubSubEmulatorEnv   = "PUBSUB_EMULATOR_HOST"
)

// The emulators' local addresses (scripts/emulators.sh, the Makefile).
const (
	LocalBigtableHost = "127.0.0.1:8086"
	LocalBigQueryHost = "127.0.0.1:9050"
	LocalPubSubHost   = "127.0.0.1:8085"
)

// Emulator returns the host of the emulator that env names, if set.
func Emulator(env string) (host string, ok bool) {
	host = os.Getenv(env)
	return host, host != ""
}

// Bigtable resolves the Bigtable project and instance flags: the values
// given, else the local defaults when BIGTABLE_EMULATOR_HOST is set, else a
// usage error naming the flag and the fix.
func Bigtable(project, instance string) (string, string, error) {
	_, local := Emulator(BigtableEmulatorEnv)
	switch {
	case project == "" && !local:
		return "", "", Usagef("--bigtable_project is required (against the local emulator, export %s=%s and the project defaults to %s)", BigtableEmulatorEnv, LocalBigtableHost, LocalProject)
	case instance == "" && !local:
		return "", "", Usagef("--bigtable_instance is required (against the local emulator, export %s=%s and the instance defaults to %s)", BigtableEmulatorEnv, LocalBigtableHost, LocalInstance)
	}
	if project == "" {
		project = LocalProject
	}
	if instance == "" {
		instance = LocalInstance
	}
	return project, instance, nil
}

// BigQueryProject resolves the BigQuery project: the flag's value, else
// the Bigtable project when that was given on the command line, else the
// local project when BIGQUERY_EMULATOR_HOST is set, else a usage error. So
// a Bigtable project that defaulted to the local one (Bigtable emulator)
// never reaches real BigQuery.
func BigQueryProject(value, bigtableFlag string) (string, error) {
	switch {
	case value != "":
		return value, nil
	case bigtableFlag != "":
		return bigtableFlag, nil
	}
	if _, ok := Emulator(BigQueryEmulatorEnv); ok {
		return LocalProject, nil
	}
	return "", Usagef("--bigquery_project is required (or --bigtable_project; against the local emulator, export %s=%s and it defaults to %s)", BigQueryEmulatorEnv, LocalBigQueryHost, LocalProject)
}

// Topic resolves a Pub/Sub topic flag: the value given, else the local
// topic projects/local-project/topics/<LocalTopic> when PUBSUB_EMULATOR_HOST is
// set, else a usage error.
func Topic(topic string) (string, error) {
	if topic != "" {
		return topic, nil
	}
	if _, ok := Emulator(PubSubEmulatorEnv); ok {
		return "projects/" + LocalProject + "/topics/" + LocalTopic, nil
	}
	return "", Usagef("--topic is required (against the local emulator, export %s=%s and it defaults to projects/%s/topics/%s)", PubSubEmulatorEnv, LocalPubSubHost, LocalProject, LocalTopic)
}

// DefaultsHelp is the paragraph each tool's --help prints about the
// defaults.
var DefaultsHelp = `Local defaults: with ` + BigtableEmulatorEnv + ` set (make emulators: ` + LocalBigtableHost + `),
--bigtable_project and --bigtable_instance default to ` + LocalProject + ` and
` + LocalInstance + `, the names make run writes; with ` + PubSubEmulatorEnv + ` set, the
topic defaults to projects/` + LocalProject + `/topics/` + LocalTopic + `. Without the
emulator variable the flags are required: on Google Cloud and Dataflow an
implicit project would be the wrong one.`

// UsageError is a bad flag or argument: the command exits 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e UsageError) Unwrap() error { return e.Err }

// Usagef formats a usage error.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// Usage marks err as a usage error (nil stays nil).
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return UsageError{err}
}

// Exit codes of every sensorpipe command.
const (
	ExitOK      = 0
	ExitRuntime = 1 // the work failed: a service unreachable, a read or write failed
	ExitUsage   = 2 // bad flags or arguments
)

// ExitCode maps a command's error to its exit code: nil and --help 0, a
// UsageError (or a flag parsing error) 2, anything else 1.
func ExitCode(err error) int {
	var ue UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		return ExitUsage
	}
	return ExitRuntime
}

// Report prints err as one line "tool: message" to w (nothing for nil or
// --help) and returns the exit code.
func Report(w io.Writer, tool string, err error) int {
	code := ExitCode(err)
	if code != ExitOK {
		fmt.Fprintf(w, "%s: %s\n", tool, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return code
}

// LoadSpec reads the --spec value: a built-in spec by name, or a YAML
// file by path.
func LoadSpec(nameOrPath string) (*schemas.Spec, error) {
	if !schemas.IsSpecPath(nameOrPath) {
		return schemas.BuiltinSpec(nameOrPath)
	}
	data, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	return schemas.ParseSpec(filepath.Base(nameOrPath), data)
}
