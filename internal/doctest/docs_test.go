package doctest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	// The emulator answers queries through its SQL engine.
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	_ "github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu/sqlengine"
)

// blockTimeout bounds one example; the first go run of the launcher
// compiles Beam, which takes minutes on a cold build cache.
const blockTimeout = 10 * time.Minute

// docFiles are README.md and every Markdown file under docs/, relative to
// the repository root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files[1:])
	return files
}

// TestDocs runs every runnable example of README.md and docs/ (package
// comment) against a Bigtable and a BigQuery emulator of its own, as a
// reader would after eval "$(make env)": from the repository root, in
// bash, one file's blocks in order sharing their exported variables. A
// block that exits otherwise than the docs say, whose output lacks what
// the docs show, or prints more lines than an output block that is not
// marked as an excerpt shows, fails.
func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the docs' examples against emulators: skipped under -short")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found: the examples are shell")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var all [][]Block
	for _, f := range docFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Extract(f, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) > 0 {
			all = append(all, blocks)
		}
	}
	if len(all) == 0 {
		t.Fatal("no runnable examples found: blocks are marked ```sh doctest")
	}
	env := docEnv(t)
	bt := emulators.StartBigtable(t)
	rest, grpcAddr := bqemu.StartForTest(t)
	env = append(env,
		"BIGTABLE_EMULATOR_HOST="+bt,
		"BIGQUERY_EMULATOR_HOST="+strings.TrimPrefix(rest, "http://"),
		"BIGQUERY_STORAGE_EMULATOR_HOST="+grpcAddr)
	_, bqErr := exec.LookPath("bq")
	for _, blocks := range all {
		t.Run(blocks[0].File, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "exports")
			for _, b := range blocks {
				if bqErr != nil && strings.Contains(b.Script, "bq ") {
					t.Skipf("%s:%d runs the bq CLI, which is not installed (it comes with the gcloud SDK)", b.File, b.Line)
				}
				runBlock(t, bash, root, env, state, b)
				if t.Failed() {
					return // later blocks build on this one
				}
			}
		})
	}
}

// docEnv is the examples' environment: the test's own, without any
// emulator or credential variable, with a home of its own (bq keeps its
// configuration there) and Go's caches where they were.
func docEnv(t *testing.T) []string {
	t.Helper()
	goEnv := map[string]string{}
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		goEnv[name] = strings.TrimSpace(string(out))
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "BIGTABLE_EMULATOR_HOST", "BIGQUERY_EMULATOR_HOST", "BIGQUERY_STORAGE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST",
			"GOOGLE_APPLICATION_CREDENTIALS", "HOME", "CLOUDSDK_CONFIG", "GOCACHE", "GOMODCACHE", "GOPATH",
			"MAKEFLAGS", "MAKELEVEL", "MFLAGS":
			continue
		}
		env = append(env, kv)
	}
	home := t.TempDir()
	env = append(env, "HOME="+home, "CLOUDSDK_CONFIG="+filepath.Join(home, "gcloud"), "CLOUDSDK_CORE_DISABLE_PROMPTS=1")
	for name, v := range goEnv {
		env = append(env, name+"="+v)
	}
	return env
}

// runBlock runs one example in bash with -euo pipefail, after the
// variables the file's earlier blocks exported, and saves its exports for
// the next.
func runBlock(t *testing.T, bash, root string, env []string, state string, b Block) {
	t.Helper()
	script := "set -euo pipefail\n[ -f '" + state + "' ] && source '" + state + "'\n" +
		"trap 'export -p > \"" + state + "\"' EXIT\n" + b.Script
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", script)
	cmd.Dir = root
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s:%d: %v", b.File, b.Line, err)
	}
	t.Logf("%s:%d: exit %d in %v", b.File, b.Line, code, time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Errorf("%s:%d: still running after %v:\n%s\n--- output:\n%s", b.File, b.Line, blockTimeout, b.Script, out.String())
		return
	}
	if code != b.Exit {
		t.Errorf("%s:%d: exit %d, the docs say %d:\n%s\n--- output:\n%s", b.File, b.Line, code, b.Exit, b.Script, out.String())
		return
	}
	if b.Output != nil {
		if missing, ok := Match(b.Output, out.String()); !ok {
			t.Errorf("%s:%d: the output lacks the line the docs show\n  %s\n(lines match in order; … elides)\n--- script:\n%s--- output:\n%s", b.File, b.Line, missing, b.Script, out.String())
			return
		}
		if n := len(OutputLines(out.String())); !b.Excerpt && n != len(b.Output) {
			t.Errorf("%s:%d: the output block shows %d lines of the %d the block prints, and does not say it is an excerpt: show them all, or add a line \"…\" where lines are left out\n--- script:\n%s--- output:\n%s", b.File, b.Line, len(b.Output), n, b.Script, out.String())
		}
	}
}
