package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/cli"
)

func runKeys(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	err := run(args, &out, &errb)
	var ex exitError
	switch {
	case err == nil:
	case errors.As(err, &ex):
		code = int(ex)
	default:
		errb.WriteString(err.Error())
		code = cli.ExitCode(err)
	}
	return out.String(), errb.String(), code
}

// TestExitCodes: bad flags and arguments exit 2 in one line, a file that
// cannot be read exits 1.
func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "Usage"},
		{"unknown command", []string{"nope"}, 2, "unknown command"},
		{"unknown flag", []string{"lint", "--nope"}, 2, "flag provided but not defined: -nope"},
		{"no --schema alias", []string{"lint", "--schema", "vitals"}, 2, "flag provided but not defined: -schema"},
		{"unknown spec", []string{"lint", "--spec", "nope"}, 2, "unknown spec"},
		{"no input", []string{"preview", "--spec", "vitals"}, 2, "--input is required"},
		{"input missing", []string{"preview", "--spec", "vitals", "--input", "/nonexistent.jsonl"}, 1, "no such file"},
		{"help", []string{"lint", "--help"}, 0, "-spec"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runKeys(tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
			if code == 2 && tc.name != "no command" && strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("stderr %q: want one line", errOut)
			}
		})
	}
}

func TestLintExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		schema   string
		wantCode int
		wantOut  string
	}{
		{"built-in vitals passes", "vitals", 0, ""},
		{"built-in heroic passes", "heroic_metrics", 0, ""},
		{"timestamp first fails", "../../testdata/specs/timestamp-first.yaml", 1, "error timestamp-first:"},
		{"needless reverse only warns", "../../testdata/specs/needless-reverse-timestamp.yaml", 0, "warning needless-reverse-timestamp:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runKeys("lint", "--spec", tc.schema)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr %s", code, tc.wantCode, errOut)
			}
			if tc.wantOut == "" && out != "" {
				t.Errorf("want no findings, got:\n%s", out)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("output lacks %q:\n%s", tc.wantOut, out)
			}
		})
	}
}

func TestPreviewCommand(t *testing.T) {
	out, errOut, code := runKeys("preview", "--spec", "heroic_metrics", "--input", "../../testdata/samples/heroic_metrics.jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	want := `{"table":"heroic_metrics","row_key":"system,cpu-type=idle,site=gew,system-component=cpu,unit=%,what=cpu-idle-percentage,1297080123392,database.example.com,pod-example-123-abc","cells":[{"family":"points","qualifier":"2919876608","timestamp_micros":1300000000000000,"value":"42"}]}`
	if first != want {
		t.Errorf("first line\n got %s\nwant %s", first, want)
	}
}

func TestHotspotsCommandWritesHeatmap(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := runKeys("hotspots", "--spec", "vitals", "--input", "../../testdata/samples/vitals_fleet.jsonl", "--tablets", "4", "--slices", "6", "--out", dir, "--name", "v")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "4 tablets") || !strings.Contains(out, "summary:") {
		t.Errorf("report:\n%s", out)
	}
	for _, f := range []string{"v.png", "v.html"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestBadUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frob"}, "unknown command"},
		{"no --schema alias", []string{"lint", "--schema", "vitals"}, "flag provided but not defined: -schema"},
		{"unknown schema", []string{"lint", "--spec", "nope"}, "unknown spec"},
		{"missing input", []string{"preview", "--spec", "vitals"}, "--input is required"},
		{"bad tablets", []string{"hotspots", "--spec", "vitals", "--input", "x", "--tablets", "0"}, "at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runKeys(tc.args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want non-zero and %q", code, errOut, tc.want)
			}
		})
	}
}

// TestHotspotsWritesToAnIgnoredFolderByDefault: without --out the heatmap
// goes to DefaultOut under the working folder, which the repository's
// .gitignore ignores, and not to the working folder itself.
func TestHotspotsWritesToAnIgnoredFolderByDefault(t *testing.T) {
	if git, err := exec.LookPath("git"); err == nil {
		cmd := exec.Command(git, "check-ignore", "-q", filepath.Join(DefaultOut, "hotspots.png"))
		cmd.Dir = "../.."
		if err := cmd.Run(); err != nil {
			t.Errorf("git check-ignore %s/hotspots.png: %v; want the default folder ignored (.gitignore)", DefaultOut, err)
		}
	}
	input, err := filepath.Abs("../../testdata/samples/vitals_fleet.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if _, errOut, code := runKeys("hotspots", "--spec", "vitals", "--input", input, "--tablets", "2", "--slices", "2"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, f := range []string{"hotspots.png", "hotspots.html"} {
		if _, err := os.Stat(filepath.Join(dir, DefaultOut, f)); err != nil {
			t.Errorf("%s is not in %s: %v", f, DefaultOut, err)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was written to the working folder", f)
		}
	}
}

// TestSpecDefaultsToTheDefaultSpec: without --spec, keys reads the
// default spec (vitals), as every command does; its output is --spec
// vitals's.
func TestSpecDefaultsToTheDefaultSpec(t *testing.T) {
	out, errOut, code := runKeys("lint")
	if code != 0 {
		t.Fatalf("lint: exit %d: %s", code, errOut)
	}
	outSpec, errSpec, code := runKeys("lint", "--spec", "vitals")
	if code != 0 {
		t.Errorf("lint --spec vitals: exit %d, stderr %q; want 0", code, errSpec)
	}
	if out != outSpec {
		t.Errorf("lint printed %q, --spec vitals %q; want the same", out, outSpec)
	}
}
