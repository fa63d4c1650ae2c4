// Package yamlcheck checks a YAML document against the Go type it decodes into, so that a mistake is reported by its line, its YAML path and the fix (the keys allowed there, the closest first), never a Go type name.
package yamlcheck

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Check walks a YAML document against the Go type it decodes into,
// before it is decoded, so that a mistake is reported the way the
// spec's author sees it: the line, the YAML path (bigtable.tables[0].row_ky)
// and the fix (the keys allowed there, the closest one first), never a Go
// type name, which is all yaml.v3's own errors give ("field row_ky not found
// in type schemas.TableSpec"). yaml.v3 still does the decoding. path is
// the document's path so far ("" at its root).
func Check(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		return Check(n.Content[0], t, path)
	}
	if n.Kind == yaml.AliasNode {
		return Check(n.Alias, t, path)
	}
	if n.Tag == "!!null" {
		return nil // left at its zero value
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return yamlErr(n, path, "expected a mapping with the keys %s, got %s", strings.Join(yamlKeys(t), ", "), describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := yamlField(t, k.Value)
			if !ok {
				return yamlErr(k, join(path, k.Value), "unknown key%s (keys here: %s)", suggest(k.Value, yamlKeys(t)), strings.Join(yamlKeys(t), ", "))
			}
			if err := Check(v, f.Type, join(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return yamlErr(n, path, "expected a list (- item per line, or [a, b]), got %s", describe(n))
		}
		for i, c := range n.Content {
			if err := Check(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return yamlErr(n, path, "expected a mapping, got %s", describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := Check(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return yamlErr(n, path, "expected %s, got %s", scalarWant(t), describe(n))
		}
		// yaml.v3 would truncate 1.5 into an int field: a whole number
		// must be written as one.
		isInt := t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64
		if err := n.Decode(reflect.New(t).Interface()); err != nil || isInt && n.ShortTag() != "!!int" {
			return yamlErr(n, path, "expected %s, got %q", scalarWant(t), n.Value)
		}
	}
	return nil
}

// yamlErr is an error at node n: "line L: path: message".
func yamlErr(n *yaml.Node, path, format string, args ...any) error {
	if path == "" {
		path = "the top level"
	}
	return fmt.Errorf("line %d: %s: %s", n.Line, path, fmt.Sprintf(format, args...))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlName is a struct field's YAML key.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && yamlName(f) == key && f.Tag.Get("yaml") != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlKeys are the keys a struct takes, in declaration order.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && f.Tag.Get("yaml") != "-" {
			keys = append(keys, yamlName(f))
		}
	}
	return keys
}

// suggest is "; did you mean K?" for the key closest to key, when one is
// close enough to be a typo (an edit distance of at most a third of its
// length, at least 1).
func suggest(key string, keys []string) string {
	type cand struct {
		k string
		d int
	}
	var cs []cand
	for _, k := range keys {
		if d := editDistance(key, k); d <= max(1, len(k)/3) {
			cs = append(cs, cand{k, d})
		}
	}
	if len(cs) == 0 {
		return ""
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	return fmt.Sprintf("; did you mean %s?", cs[0].k)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// describe names what a node is, for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// scalarWant says what a scalar of Go type t must look like in YAML.
func scalarWant(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a single value (a string)"
}
