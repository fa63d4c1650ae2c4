package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// specDocPath is the spec format's reference, generated from the same
// JSON Schema: go test ./schemas -run TestSpecReference -update.
const specDocPath = "../docs/reference/spec.md"

// schemaNode is the part of a JSON Schema the reference reads.
type schemaNode struct {
	Ref         string                 `json:"$ref"`
	Type        string                 `json:"type"`
	Description string                 `json:"description"`
	Properties  orderedProps           `json:"properties"`
	Required    []string               `json:"required"`
	Items       *schemaNode            `json:"items"`
	Enum        []any                  `json:"enum"`
	Default     any                    `json:"default"`
	Examples    []any                  `json:"examples"`
	Defs        map[string]*schemaNode `json:"$defs"`
}

// orderedProps keeps the properties in the order of the Go fields.
type orderedProps struct {
	keys []string
	m    map[string]*schemaNode
}

func (o *orderedProps) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	o.m = map[string]*schemaNode{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		k := tok.(string)
		var n schemaNode
		if err := dec.Decode(&n); err != nil {
			return err
		}
		o.keys = append(o.keys, k)
		o.m[k] = &n
	}
	_, err := dec.Token()
	return err
}

// specReference renders every key of the spec format as one table row:
// its YAML path, type, whether it is required, its default, an example
// and what it is (the Go comment).
func specReference(t *testing.T) []byte {
	t.Helper()
	var root schemaNode
	if err := json.Unmarshal(specJSONSchema(t), &root); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString(`# The spec format

<!-- Generated from the spec's Go types (schemas/spec.go, proto.go, query.go)
     by go test ./schemas -run TestSpecReference -update.
     Edit the Go comments and jsonschema tags, not this file. -->

A dataset spec is one YAML file: what a reading looks like, how it is
validated, and how it lands in Bigtable and BigQuery. The launcher, ` + "`query`" + `,
` + "`keys`" + ` and ` + "`publish`" + ` take it with ` + "`--spec=FILE`" + ` (or a built-in name:
` + "`vitals`, `traffic`, `user_events`, `heroic_metrics`" + `, in ` + "`schemas/specs/`" + `).
It is checked once, at launch: an unknown key, a wrong type or a broken
template is one error naming the file, the YAML path and the fix.

Its JSON Schema, ` + "`schemas/spec.schema.json`" + `, carries the same keys for
editors; put this first line in a spec for completion and checks with the
YAML language server, with the schema's path relative to the spec (here, a
spec in the checkout's top folder; the built-in specs use
` + "`../spec.schema.json`" + `):

` + "```yaml" + `
# yaml-language-server: $schema=schemas/spec.schema.json
` + "```" + `

Templates (` + "`row_key`" + `, ` + "`qualifier`" + `) and their functions (` + "`hour`, `pad:N`, `reverse`, `salt:N`" + `, …)
are in [row keys](row-keys.md) and ` + "[schemas/README.md](../../schemas/README.md)" + `;
[your own dataset](../guide/your-own-dataset.md) writes a spec from
nothing. A column's or query's ` + "`value`" + ` names a field, or one of the computed
values ` + "`$event_time`, `$reading_id`" + ` (hex of the first 16 bytes of SHA-256 of
the identity and event millisecond) and ` + "`$ingested_at`" + `.

| key | type | required | default | example | what |
| --- | --- | --- | --- | --- | --- |
`)
	var walk func(prefix string, n *schemaNode, depth int)
	resolve := func(n *schemaNode) *schemaNode {
		for n != nil && n.Ref != "" {
			n = root.Defs[strings.TrimPrefix(n.Ref, "#/$defs/")]
		}
		return n
	}
	walk = func(prefix string, n *schemaNode, depth int) {
		n = resolve(n)
		if n == nil || depth > 6 {
			return
		}
		req := map[string]bool{}
		for _, r := range n.Required {
			req[r] = true
		}
		for _, k := range n.Properties.keys {
			p := n.Properties.m[k]
			path := prefix + k
			typ, desc := p.Type, p.Description
			var child *schemaNode
			switch {
			case p.Ref != "":
				typ, child = "object", resolve(p)
				if desc == "" {
					desc = child.Description
				}
			case p.Type == "array" && p.Items != nil && p.Items.Ref != "":
				child = resolve(p.Items)
				typ = "list of objects"
				if desc == "" {
					desc = child.Description
				}
			case p.Type == "array" && p.Items != nil:
				typ = "list of " + p.Items.Type
			}
			if len(p.Enum) > 0 {
				var vs []string
				for _, v := range p.Enum {
					vs = append(vs, fmt.Sprint(v))
				}
				typ += ": " + strings.Join(vs, ", ")
			}
			def, ex := "", ""
			if p.Default != nil {
				def = "`" + fmt.Sprint(p.Default) + "`"
			}
			if len(p.Examples) > 0 {
				ex = "`" + fmt.Sprint(p.Examples[0]) + "`"
			}
			yes := ""
			if req[k] {
				yes = "yes"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", path, typ, yes, cell(def), cell(ex), cell(desc))
			if child != nil {
				sep := "."
				if typ == "list of objects" {
					sep = "[]."
				}
				walk(path+sep, child, depth+1)
			}
		}
	}
	walk("", &root, 0)
	return b.Bytes()
}

// cell makes text fit one Markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// TestSpecReference: docs/reference/spec.md lists every key of the spec
// format as the Go types declare it. Regenerate it with
// go test ./schemas -run TestSpecReference -update.
func TestSpecReference(t *testing.T) {
	got := specReference(t)
	if *updateSchema {
		if err := os.WriteFile(specDocPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(specDocPath)
	if err != nil {
		t.Fatalf("%v: generate it with go test ./schemas -run TestSpecReference -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the Go types: regenerate it with go test ./schemas -run TestSpecReference -update", specDocPath)
	}
}
