package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// updateGolden rewrites the golden files; the launcher already has an
// --update flag (Beam's Dataflow update option), hence the name.
var updateGolden = flag.Bool("update_golden", false, "rewrite golden files: docs/reference/flags.md")

// flagsDocPath is the flags reference, generated from the launcher's
// flags: go test ./launch -run TestFlagsReference -update_golden rewrites it.
const flagsDocPath = "../docs/reference/flags.md"

// flagsReference renders the launcher's own flags (those launch/*.go
// defines; Beam's runner options are left to --help) as the Markdown
// reference: name, default and help text, as --help prints them.
func flagsReference(t *testing.T) []byte {
	t.Helper()
	var names []string
	for _, d := range launcherFlags(t, ".") {
		names = append(names, d.name)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString(`# Flags

<!-- Generated from the launcher's flags by
     go test ./launch -run TestFlagsReference -update_golden
     Do not edit by hand: the test fails when this file and --help differ. -->

The launcher's flags (` + "`go run ./launch --help`" + ` prints them, with Beam's runner
options such as ` + "`--runner`, `--project`, `--region`, `--job_name`" + `). The Flex
Template takes the same names as parameters
(` + "`launch/flextemplate/metadata.json`" + `). The other commands print their own:
` + "`go run ./launch/query --help`, `go run ./launch/keys --help`, `go run ./launch/publish --help`" + `.

| flag | default | what |
| --- | --- | --- |
`)
	for _, name := range names {
		f := flag.CommandLine.Lookup(name)
		if f == nil {
			t.Fatalf("flag %s is declared in launch/ but not registered", name)
		}
		def := f.DefValue
		if def == "" {
			def = " "
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", name, def, escapeCell(f.Usage))
	}
	return b.Bytes()
}

// escapeCell makes text safe inside a Markdown table cell.
func escapeCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// TestFlagsReference: docs/reference/flags.md lists every launcher flag
// with the default and help text --help prints. After adding or changing
// a flag, regenerate it with go test ./launch -run TestFlagsReference -update_golden.
func TestFlagsReference(t *testing.T) {
	got := flagsReference(t)
	if *updateGolden {
		if err := os.WriteFile(flagsDocPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(flagsDocPath)
	if err != nil {
		t.Fatalf("%v: generate it with go test ./launch -run TestFlagsReference -update_golden", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the launcher's flags: regenerate it with go test ./launch -run TestFlagsReference -update_golden", flagsDocPath)
	}
}
