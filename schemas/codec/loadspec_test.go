package codec

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// LoadSpec is cli.LoadSpec for this package's tests: a built-in spec by
// name, or a YAML file by path.
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

// mustSpec is LoadSpec or the test's end.
func mustSpec(t testing.TB, name string) *schemas.Spec {
	t.Helper()
	s, err := LoadSpec(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
