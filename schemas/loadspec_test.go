package schemas

import (
	"fmt"
	"os"
	"path/filepath"
)

// LoadSpec is cli.LoadSpec for this package's tests: a built-in spec by
// name, or a YAML file by path.
func LoadSpec(nameOrPath string) (*Spec, error) {
	if !IsSpecPath(nameOrPath) {
		return BuiltinSpec(nameOrPath)
	}
	data, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	return ParseSpec(filepath.Base(nameOrPath), data)
}
