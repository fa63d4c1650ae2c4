package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildLauncher builds ./launch into dir as dir/sensorpipe, the binary users
// run, and returns its path.
func BuildLauncher(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "sensorpipe")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./launch")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./launch: %w\n%s", err, out)
	}
	return bin, nil
}

// moduleRoot finds the directory of go.mod from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run from the sensorpipe module")
		}
		dir = parent
	}
}

// WorkDir makes a benchmark's temporary folder named after prefix. With
// keep it says where the folder is and leaves it; otherwise done removes it.
func WorkDir(prefix string, keep bool) (dir string, done func(), err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	if keep {
		fmt.Printf("work directory: %s\n", dir)
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
