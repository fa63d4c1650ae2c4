// Package flagsdoc renders a command's flags as its section of
// docs/reference/flags.md, and checks or rewrites that section: each
// command's TestFlagsReference (launch, launch/publish, launch/query,
// launch/keys) owns the section between its markers, so that the file
// lists every command's flags as its --help prints them. make generate
// rewrites every section.
package flagsdoc

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Path is the flags reference, relative to a command's folder under
// launch/ (../docs/reference/flags.md from launch/, ../../ from below it).
func Path(depth int) string {
	return strings.Repeat("../", depth) + "docs/reference/flags.md"
}

// Table renders fs's flags, sorted by name, as a Markdown table: name,
// default and help text, as --help prints them.
func Table(fs *flag.FlagSet) []byte {
	var all []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { all = append(all, f) })
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	var b bytes.Buffer
	b.WriteString("| flag | default | what |\n| --- | --- | --- |\n")
	for _, f := range all {
		def := " "
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, def, escapeCell(f.Usage))
	}
	return b.Bytes()
}

// escapeCell makes text safe inside a Markdown table cell.
func escapeCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// markers are the lines around a section's generated text.
func markers(section string) (begin, end string) {
	return "<!-- begin generated: " + section + " -->\n", "<!-- end generated: " + section + " -->\n"
}

// Replace returns doc with the text between section's markers replaced by
// body, or an error when doc lacks them.
func Replace(doc []byte, section string, body []byte) ([]byte, error) {
	begin, end := markers(section)
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, fmt.Errorf("no section %q: the file lacks the lines %q and %q around it", section, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(begin)])
	out.Write(body)
	out.Write(doc[j:])
	return out.Bytes(), nil
}

// Check compares section of the file at path with body, or, with update,
// rewrites it there. The error says how to regenerate it.
func Check(path, section string, body []byte, update bool) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	got, err := Replace(doc, section, body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if update {
		return os.WriteFile(path, got, 0o644)
	}
	if !bytes.Equal(got, doc) {
		return fmt.Errorf("%s: the %s section differs from the command's flags: regenerate it with make generate", path, section)
	}
	return nil
}
