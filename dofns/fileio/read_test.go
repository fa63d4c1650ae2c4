package fileio

import (
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/internal/loopback"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

func init() {
	register.Function2x1(sourceAndLine)
	register.Function1x1(reasonAndSource)
}

// TestMain runs the package's pipeline tests on prism unless --runner says
// otherwise.
func TestMain(m *testing.M) { loopback.TestMain(m) }

func sourceAndLine(source, line string) string { return filepath.Base(source) + " " + line }

func reasonAndSource(d deadletter.DeadLetter) string {
	return fmt.Sprintf("%s %s line %d", d.Reason, filepath.Base(d.Source), d.Line)
}

// at is a line's source as the reader names it: its file, and its line
// number or, in a range that does not start the file, its byte offset.
func at(file string, line, offset int64) string { return deadletter.LineSource(file, line, offset) }

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeGzip(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadGivesEveryLineWithItsPlace reads plain and gzipped files: every
// line arrives once, named by its file and line number, a byte-order mark
// and CRLF ends are dropped, a line over the limit and a file that ends
// mid-stream become dead letters (a file that cannot be read has no line
// to name), and nothing else is lost.
func TestReadGivesEveryLineWithItsPlace(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.jsonl"), "\ufeffa1\r\na2\n"+strings.Repeat("x", 2000)+"\na4")
	writeGzip(t, filepath.Join(dir, "b.jsonl.gz"), "b1\nb2\n")
	write(t, filepath.Join(dir, "c.jsonl.gz"), "not gzip at all\n")

	p, s := beam.NewPipelineWithRoot()
	lines, dead := Read(s, Config{Glob: filepath.Join(dir, "*"), MaxLineBytes: 1024})
	passert.Equals(s, beam.ParDo(s, sourceAndLine, lines),
		at("a.jsonl", 1, 0)+" a1", at("a.jsonl", 2, 0)+" a2", at("a.jsonl", 4, 0)+" a4", at("b.jsonl.gz", 1, 0)+" b1", at("b.jsonl.gz", 2, 0)+" b2")
	passert.Equals(s, beam.ParDo(s, reasonAndSource, dead), "too_large a.jsonl line 3", "malformed c.jsonl.gz line 0")
	ptest.RunAndValidate(t, p)
}

// TestReadRangesReadsOnlyTheirLines: with ranges, only the named files
// are read, and of each only the lines that start in its range.
func TestReadRangesReadsOnlyTheirLines(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.jsonl")
	write(t, a, "a1\na2\na3\n") // lines start at 0, 3 and 6
	write(t, filepath.Join(dir, "b.jsonl"), "b1\n")

	p, s := beam.NewPipelineWithRoot()
	lines, dead := Read(s, Config{Glob: filepath.Join(dir, "*"), Ranges: []FileRange{{Path: a, Start: 1, End: 6}}})
	passert.Equals(s, beam.ParDo(s, sourceAndLine, lines), at("a.jsonl", 0, 3)+" a2")
	passert.Empty(s, dead)
	ptest.RunAndValidate(t, p)
}

// TestReadSkipsFolders: a glob that matches a folder beside the files (a
// dead-letter folder's _ledger, say) reads the files and skips the
// folder, with no dead letter and no failure.
func TestReadSkipsFolders(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.jsonl"), "a1\na2\n")
	if err := os.MkdirAll(filepath.Join(dir, "_ledger", "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "_ledger", "run", "bundle-1.json"), "[]\n")

	p, s := beam.NewPipelineWithRoot()
	lines, dead := Read(s, Config{Glob: filepath.Join(dir, "*")})
	passert.Equals(s, beam.ParDo(s, sourceAndLine, lines), at("a.jsonl", 1, 0)+" a1", at("a.jsonl", 2, 0)+" a2")
	passert.Empty(s, dead)
	ptest.RunAndValidate(t, p)
	if !IsDir(filepath.Join(dir, "_ledger")) || IsDir(filepath.Join(dir, "a.jsonl")) || IsDir("gs://bucket/dir") {
		t.Errorf("IsDir: want true for the folder only")
	}
}
