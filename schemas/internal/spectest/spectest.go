// Package spectest loads specs for the tests of schemas' packages, as the
// commands' --spec reads them: a built-in spec by name, or a YAML file by
// path. Only tests import it.
package spectest

import (
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// Load is cli.LoadSpec: a built-in spec by name, or a YAML file by path.
func Load(nameOrPath string) (*schemas.Spec, error) { return cli.LoadSpec(nameOrPath) }

// Must is Load, ending the test on an error.
func Must(t testing.TB, nameOrPath string) *schemas.Spec {
	t.Helper()
	s, err := Load(nameOrPath)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
