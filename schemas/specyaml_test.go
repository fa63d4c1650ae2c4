package schemas

import (
	"errors"
	"strings"
	"testing"
)

// TestSpecYAMLErrors checks that a spec's YAML mistakes are reported with
// the line, the YAML path and the fix, and never with a Go type name.
func TestSpecYAMLErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown top-level key, close to one", "name: x\nbigtabel: {}\n", `line 2: bigtabel: unknown key; did you mean bigtable? (keys here: name, description,`},
		{"unknown nested key", "name: x\nbigtable:\n  tables:\n    - name: t\n      row_ky: '{a}'\n", `line 5: bigtable.tables[0].row_ky: unknown key; did you mean row_key? (keys here: name, row_key, escape, families)`},
		{"unknown key, nothing close", "name: x\ncolour: red\n", `line 2: colour: unknown key (keys here: name,`},
		{"a mapping where a list goes", "name: x\nfields:\n  name: a\n", `line 3: fields: expected a list`},
		{"a scalar where a mapping goes", "name: x\nbigtable: yes\n", `line 2: bigtable: expected a mapping with the keys tables, inventory, got "yes"`},
		{"not a bool", "name: x\nfields:\n  - name: a\n    required: maybe\n", `line 4: fields[0].required: expected true or false, got "maybe"`},
		{"not a number", "name: x\nfields:\n  - name: a\n    min: low\n", `line 4: fields[0].min: expected a number, got "low"`},
		{"not a whole number", "name: x\nbigtable:\n  tables:\n    - families:\n        - gc: {max_versions: 1.5}\n", `line 5: bigtable.tables[0].families[0].gc.max_versions: expected a whole number, got "1.5"`},
		{"a list where a value goes", "name: [a, b]\n", `line 1: name: expected a single value (a string), got a list`},
		{"empty file", "", `the file is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSpec("s.yaml", []byte(tt.yaml))
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("ParseSpec error %v; want ErrSpec", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "s.yaml: "+tt.want) {
				t.Errorf("ParseSpec error\n got %s\nwant it to contain %q", msg, "s.yaml: "+tt.want)
			}
			if strings.Contains(msg, "schemas.") || strings.Contains(msg, "float64") {
				t.Errorf("ParseSpec error %q names a Go type", msg)
			}
		})
	}
}
