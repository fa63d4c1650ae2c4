package schemas

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	jsval "github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

var updateSchema = flag.Bool("update", false, "rewrite spec.schema.json from the Go types")

// specSchemaPath is the spec format's JSON Schema, generated from Spec and
// checked in for editors (yaml-language-server) and other tools.
const specSchemaPath = "spec.schema.json"

// specJSONSchema reflects the spec types into a JSON Schema: the yaml tags
// name the keys, the jsonschema tags add required keys, enums, defaults
// and examples, and the Go comments give the descriptions. Unknown keys
// are refused, as ParseSpec refuses them.
func specJSONSchema(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{FieldNameTag: "yaml", RequiredFromJSONSchemaTags: true}
	if err := r.AddGoComments("github.com/sensorpipe/sensorpipe/schemas", "."); err != nil {
		t.Fatal(err)
	}
	s := r.Reflect(&Spec{})
	s.ID = "" // no $id: a spec names this file by its path in the checkout
	s.Title = "sensorpipe dataset spec"
	s.Description = "A dataset spec: what a reading looks like, how it is validated, and how it lands in Bigtable and BigQuery (docs/reference/spec.md). Generated from the Go types by go test ./schemas -run TestSpecJSONSchema -update."
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// TestSpecJSONSchema: spec.schema.json is what the Go types give. After
// changing a spec type, regenerate it with
// go test ./schemas -run TestSpecJSONSchema -update.
func TestSpecJSONSchema(t *testing.T) {
	got := specJSONSchema(t)
	if *updateSchema {
		if err := os.WriteFile(specSchemaPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(specSchemaPath)
	if err != nil {
		t.Fatalf("%v: generate it with go test ./schemas -run TestSpecJSONSchema -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the Go types: regenerate it with go test ./schemas -run TestSpecJSONSchema -update", specSchemaPath)
	}
}

// repoSpecs are every spec in the repository: the built-in ones and those
// under testdata/.
func repoSpecs(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, root := range []string{"specs", "../testdata"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "fuzz" {
				return filepath.SkipDir
			}
			if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(files)
	return files
}

// compileSpecSchema compiles the checked-in schema with a JSON Schema
// validator of its own (not the generator), so the file is checked as
// editors and other tools read it.
func compileSpecSchema(t *testing.T) *jsval.Schema {
	t.Helper()
	f, err := os.Open(specSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsval.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsval.NewCompiler()
	if err := c.AddResource(specSchemaPath, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(specSchemaPath)
	if err != nil {
		t.Fatalf("compile %s: %v", specSchemaPath, err)
	}
	return s
}

// yamlAsJSON decodes a YAML document into the values a JSON Schema
// validator takes (JSON numbers, string keys).
func yamlAsJSON(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsval.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRepoSpecsValidateAgainstJSONSchema: every spec in the repository,
// built in or under testdata/, is valid under the JSON Schema.
func TestRepoSpecsValidateAgainstJSONSchema(t *testing.T) {
	s := compileSpecSchema(t)
	files := repoSpecs(t)
	if len(files) < 10 {
		t.Fatalf("found %d specs, want the built-in ones and testdata's: %v", len(files), files)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(yamlAsJSON(t, data)); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		})
	}
}

// TestJSONSchemaRefusesWhatParseSpecRefuses: the schema is no rubber
// stamp: a misspelt key, a missing required key and a value outside an
// enum fail it, as they fail ParseSpec.
func TestJSONSchemaRefusesWhatParseSpecRefuses(t *testing.T) {
	s := compileSpecSchema(t)
	base, err := os.ReadFile("specs/vitals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, from, to string }{
		{"a misspelt key", "row_key:", "row_ky:"},
		{"a missing required key", "event_time: timestamp\n", "\n"},
		{"an unknown field type", "type: float", "type: double"},
		{"an unknown BigQuery type", "type: FLOAT64", "type: FLOAT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(base, []byte(tc.from)) {
				t.Fatalf("vitals.yaml has no %q", tc.from)
			}
			bad := bytes.Replace(base, []byte(tc.from), []byte(tc.to), 1)
			if _, err := ParseSpec("vitals.yaml", bad); err == nil {
				t.Errorf("ParseSpec accepted the spec with %q", tc.to)
			}
			if err := s.Validate(yamlAsJSON(t, bad)); err == nil {
				t.Errorf("the JSON Schema accepted the spec with %q", tc.to)
			}
		})
	}
}
