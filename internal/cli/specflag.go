package cli

import (
	"flag"
	"fmt"
	"io"
)

// SpecFlag is the --spec flag every command takes: a built-in spec name or
// a YAML file. It also accepts --schema, the name query and keys once used,
// as a deprecated alias that says so on stderr when given.
type SpecFlag struct {
	// Value is the spec given, by either name.
	Value string
	// Deprecated records that --schema was used.
	Deprecated bool
}

// Register adds --spec and its deprecated alias --schema to fs.
func (f *SpecFlag) Register(fs *flag.FlagSet, help string) {
	fs.StringVar(&f.Value, "spec", f.Value, help)
	fs.Var(schemaAlias{f}, "schema", "deprecated: use --spec")
}

// Warn prints the deprecation notice when --schema was used.
func (f *SpecFlag) Warn(w io.Writer, tool string) {
	if f.Deprecated {
		fmt.Fprintf(w, "%s: --schema is deprecated; use --spec (same value)\n", tool)
	}
}

// schemaAlias is --schema: it sets the SpecFlag's value and marks the use.
type schemaAlias struct{ f *SpecFlag }

func (a schemaAlias) String() string {
	if a.f == nil {
		return ""
	}
	return a.f.Value
}

func (a schemaAlias) Set(v string) error {
	a.f.Value = v
	a.f.Deprecated = true
	return nil
}
