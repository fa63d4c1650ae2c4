package flagsdoc

import (
	"flag"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("zeta", "", "last | first")
	fs.Int("alpha", 3, "a number")
	got := string(Table(fs))
	want := "| flag | default | what |\n| --- | --- | --- |\n| `--alpha` | `3` | a number |\n| `--zeta` |   | last \\| first |\n"
	if got != want {
		t.Errorf("Table = %q; want %q", got, want)
	}
}

func TestReplace(t *testing.T) {
	doc := "# T\n<!-- begin generated: a -->\nold\n<!-- end generated: a -->\ntail\n"
	tests := []struct {
		name, section, body, want, err string
	}{
		{"replaces the section", "a", "new\n", "# T\n<!-- begin generated: a -->\nnew\n<!-- end generated: a -->\ntail\n", ""},
		{"a missing section", "b", "new\n", "", `no section "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Replace([]byte(doc), tt.section, []byte(tt.body))
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("Replace error = %v; want %q", err, tt.err)
			case tt.err == "" && (err != nil || string(got) != tt.want):
				t.Errorf("Replace = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
