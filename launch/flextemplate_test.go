package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
)

// metadataPath is the Flex Template metadata that mirrors the launcher's
// flags one to one.
const metadataPath = "flextemplate/metadata.json"

// templateMetadata is the part of a Flex Template metadata file the test
// checks.
type templateMetadata struct {
	Name        string              `json:"name"`
	Description string              `json:"description"`
	Parameters  []templateParameter `json:"parameters"`
}

type templateParameter struct {
	Name       string   `json:"name"`
	Label      string   `json:"label"`
	HelpText   string   `json:"helpText"`
	IsOptional *bool    `json:"isOptional"`
	Regexes    []string `json:"regexes,omitempty"`
}

// declaredFlag is a flag defined with the standard flag package.
type declaredFlag struct {
	name  string
	usage string // "" when the usage is not a string literal
	pos   token.Position
}

// flagArgs gives, per flag package function, the index of the name and the
// usage arguments.
var flagArgs = map[string][2]int{
	"String": {0, 2}, "Bool": {0, 2}, "Int": {0, 2}, "Int64": {0, 2}, "Uint": {0, 2}, "Uint64": {0, 2},
	"Float64": {0, 2}, "Duration": {0, 2}, "Func": {0, 1}, "BoolFunc": {0, 1},
	"StringVar": {1, 3}, "BoolVar": {1, 3}, "IntVar": {1, 3}, "Int64Var": {1, 3}, "UintVar": {1, 3},
	"Uint64Var": {1, 3}, "Float64Var": {1, 3}, "DurationVar": {1, 3}, "TextVar": {1, 3}, "Var": {1, 2},
}

// launcherFlags parses the launcher's source (every non-test file of package
// main in dir, launch/flags.go among them) and returns the flags it defines
// with flag.String, flag.Bool, flag.Duration, flag.StringVar and the rest,
// or with the same methods of a *flag.FlagSet named fs.
func launcherFlags(t *testing.T, dir string) []declaredFlag {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var flags []declaredFlag
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		if f.Name.Name != "main" {
			continue
		}
		flagPkg := importName(f, "flag")
		if flagPkg == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if recv, ok := sel.X.(*ast.Ident); !ok || recv.Name != flagPkg && recv.Name != "fs" {
				return true
			}
			idx, ok := flagArgs[sel.Sel.Name]
			if !ok || len(call.Args) <= idx[1] {
				return true
			}
			nameLit, ok := call.Args[idx[0]].(*ast.BasicLit)
			if !ok || nameLit.Kind != token.STRING {
				t.Errorf("%s: flag.%s with a name that is not a string literal: the metadata test cannot check it",
					fset.Position(call.Pos()), sel.Sel.Name)
				return true
			}
			fl := declaredFlag{name: unquote(t, nameLit.Value), pos: fset.Position(call.Pos())}
			if u, ok := call.Args[idx[1]].(*ast.BasicLit); ok && u.Kind == token.STRING {
				fl.usage = unquote(t, u.Value)
			}
			flags = append(flags, fl)
			return true
		})
	}
	sort.Slice(flags, func(i, j int) bool { return flags[i].name < flags[j].name })
	return flags
}

// importName returns the name file f uses for the package at path, or "".
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

func unquote(t *testing.T, lit string) string {
	t.Helper()
	s, err := strconv.Unquote(lit)
	if err != nil {
		t.Fatalf("unquote %s: %v", lit, err)
	}
	return s
}

// suggestedParameter renders the metadata entry to add for fl.
func suggestedParameter(fl declaredFlag) string {
	words := strings.Split(fl.name, "_")
	words[0] = strings.ToUpper(words[0][:1]) + words[0][1:]
	help := fl.usage
	if help == "" {
		help = "TODO: the usage of --" + fl.name + " (" + fl.pos.String() + ")"
	}
	optional := true
	b, _ := json.MarshalIndent(templateParameter{
		Name: fl.name, Label: strings.Join(words, " "), HelpText: help, IsOptional: &optional,
	}, "    ", "  ")
	return "    " + string(b)
}

func readMetadata(t *testing.T) templateMetadata {
	t.Helper()
	b, err := os.ReadFile(metadataPath)
	if err != nil {
		t.Fatal(err)
	}
	var md templateMetadata
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&md); err != nil {
		t.Fatalf("%s: %v", metadataPath, err)
	}
	return md
}

// TestFlexTemplateMetadataMirrorsFlags fails when launch/flextemplate/
// metadata.json lacks a flag of the launcher, lists one that no longer
// exists, or has a parameter without help text.
func TestFlexTemplateMetadataMirrorsFlags(t *testing.T) {
	flags := launcherFlags(t, ".")
	if len(flags) == 0 {
		t.Fatal("found no flag definitions in the launcher's source")
	}
	md := readMetadata(t)
	if md.Name == "" || md.Description == "" {
		t.Errorf("%s: name and description are required", metadataPath)
	}

	params := map[string]templateParameter{}
	for _, p := range md.Parameters {
		if _, dup := params[p.Name]; dup {
			t.Errorf("%s: parameter %q is listed twice", metadataPath, p.Name)
		}
		params[p.Name] = p
	}
	declared := map[string]bool{}
	var missing []string
	for _, fl := range flags {
		declared[fl.name] = true
		if _, ok := params[fl.name]; !ok {
			missing = append(missing, suggestedParameter(fl))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s lacks %d flag(s) of the launcher; add these to \"parameters\" (and refine label, isOptional, regexes):\n%s",
			metadataPath, len(missing), strings.Join(missing, ",\n"))
	}
	var stale []string
	for _, p := range md.Parameters {
		if !declared[p.Name] {
			stale = append(stale, p.Name)
		}
	}
	if len(stale) > 0 {
		t.Errorf("%s lists parameters the launcher no longer defines; remove: %s", metadataPath, strings.Join(stale, ", "))
	}

	for _, p := range md.Parameters {
		switch {
		case strings.TrimSpace(p.HelpText) == "":
			t.Errorf("%s: parameter %q has an empty helpText", metadataPath, p.Name)
		case strings.TrimSpace(p.Label) == "":
			t.Errorf("%s: parameter %q has an empty label", metadataPath, p.Name)
		case p.IsOptional == nil:
			t.Errorf("%s: parameter %q does not say isOptional", metadataPath, p.Name)
		}
	}
}

// TestFlexTemplateRegexesAcceptDefaults checks every regex compiles and
// accepts the flag's non-empty default, so an optional parameter left at its
// default is never rejected.
func TestFlexTemplateRegexesAcceptDefaults(t *testing.T) {
	for _, p := range readMetadata(t).Parameters {
		for _, expr := range p.Regexes {
			re, err := regexp.Compile(expr)
			if err != nil {
				t.Errorf("%s: parameter %q regex %q: %v", metadataPath, p.Name, expr, err)
				continue
			}
			f := launcherFlagSet().Lookup(p.Name)
			if f == nil || f.DefValue == "" {
				continue
			}
			if !re.MatchString(f.DefValue) {
				t.Errorf("%s: parameter %q regex %q rejects the default %q", metadataPath, p.Name, expr, f.DefValue)
			}
		}
	}
}

// TestFlexTemplateRegexes shows the regexes accept documented values and
// reject typical mistakes.
func TestFlexTemplateRegexes(t *testing.T) {
	tests := []struct {
		param, value string
		want         bool
	}{
		{"dead_letter", "gs://bucket/deadletter", true},
		{"dead_letter", "bigquery:ops.dead_letters", true},
		{"dead_letter", "bigquery:my-project:ops.dead_letters", true},
		{"dead_letter", "pubsub:projects/p/topics/dead-letters", true},
		{"dead_letter", "/tmp/deadletter", false}, // a worker's local disk
		{"subscription", "projects/p/subscriptions/s", true},
		{"subscription", "projects/p/topics/t", false},
		{"input", "gs://bucket/path/*.jsonl", true},
		{"input", "testdata/*.jsonl", false},
		{"allowed_lateness", "6h", true},
		{"allowed_lateness", "1h30m", true},
		{"allowed_lateness", "6 hours", false},
		{"source", "pubsub", true},
		{"source", "kafka", false},
		{"source", "bigquery", true},
		{"from_table", "vitals.readings", true},
		{"from_table", "my-project:vitals.readings", true},
		{"from_table", "old_vitals", true}, // a Bigtable table (--source=bigtable)
		{"from_table", "two words", false},
		{"from_time", "2026-03-01T00:00:00Z", true},
		{"from_time", "2026-03-01T00:00:00.5+01:00", true},
		{"from_time", "yesterday", false},
		{"to_time", "2026-03-01", false},
		{"format", "proto", true},
		{"format", "parquet", true},
		{"format", "xml", false},
		{"bigtable_app_profile", "batch-backfill", true},
		{"bigtable_app_profile", "two words", false},
		{"bigtable_target_latency", "500ms", true},
		{"bigtable_target_latency", "fast", false},
		{"bigtable_max_outstanding_mutations", "100000", true},
		{"bigtable_max_outstanding_mutations", "-1", false},
		{"bigquery_write_method", "upsert", true},
		{"bigquery_write_method", "storage_write", true},
		{"bigquery_write_method", "merge", false},
	}
	params := map[string]templateParameter{}
	for _, p := range readMetadata(t).Parameters {
		params[p.Name] = p
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s=%s", tt.param, tt.value), func(t *testing.T) {
			p, ok := params[tt.param]
			if !ok || len(p.Regexes) == 0 {
				t.Fatalf("parameter %q has no regexes", tt.param)
			}
			got := true
			for _, expr := range p.Regexes {
				if !regexp.MustCompile(expr).MatchString(tt.value) {
					got = false
				}
			}
			if got != tt.want {
				t.Errorf("regexes %q accept %q: %v; want %v", p.Regexes, tt.value, got, tt.want)
			}
		})
	}
}

// TestFlexTemplateDefaultsAreTheFlags: each parameter whose help gives a
// literal default ("Default: 30s.") gives the launcher flag's own default,
// which is the edge's (bigqueryio.DefaultWriteMethod,
// bigtableio.DefaultBatchCells, retry.DefaultAttemptTimeout, ...): one
// default per setting, whoever reads it.
func TestFlexTemplateDefaultsAreTheFlags(t *testing.T) {
	literal := regexp.MustCompile(`Default: ([A-Za-z0-9_.\-]+?)[.]?(?:\s|$)`)
	checked := 0
	for _, p := range readMetadata(t).Parameters {
		m := literal.FindStringSubmatch(p.HelpText)
		f := launcherFlagSet().Lookup(p.Name)
		if m == nil || f == nil || m[1] == "the" || launcherFlagSet().Lookup(m[1]) != nil { // "Default: bigtable_project": another flag's value
			continue
		}
		got, want := m[1], f.DefValue
		if d, err := time.ParseDuration(got); err == nil {
			if w, err := time.ParseDuration(want); err == nil && d == w {
				checked++
				continue
			}
		}
		if got != want {
			t.Errorf("%s: the template's help says Default: %s; the flag's default is %s", metadataPath, got, want)
		}
		checked++
	}
	if launcherFlagSet().Lookup("bigquery_write_method").DefValue != bigqueryio.DefaultWriteMethod {
		t.Errorf("--bigquery_write_method defaults to %s; the sink's default is %s", launcherFlagSet().Lookup("bigquery_write_method").DefValue, bigqueryio.DefaultWriteMethod)
	}
	if checked < 10 {
		t.Fatalf("only %d parameters give a literal default; the pattern no longer reads the template", checked)
	}
}
