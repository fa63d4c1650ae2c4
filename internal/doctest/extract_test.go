package doctest

import (
	"reflect"
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	doc := "# Title\n\n```sh\nnot run\n```\n\n```sh doctest\necho hi\necho there\n```\n\n```output\nhi\n\nthere\n```\n\n" +
		"```sh doctest exit=2\nfalse\n```\n\nsome text\n\n```output\nnot this block's\n```\n\n````sh doctest\necho '```'\n````\n\n```sh doctest\nseq 3\n```\n\n```output\n1\n…\n```\n"
	got, err := Extract("doc.md", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: "doc.md", Line: 7, Script: "echo hi\necho there\n", Output: []string{"hi", "there"}},
		{File: "doc.md", Line: 18, Script: "false\n", Exit: 2},
		{File: "doc.md", Line: 28, Script: "echo '```'\n"},
		{File: "doc.md", Line: 32, Script: "seq 3\n", Output: []string{"1"}, Excerpt: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Extract =\n%#v\nwant\n%#v", got, want)
	}
}

func TestExtractRejects(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"unknown option", "```sh doctest retries=3\ntrue\n```\n", "unknown doctest option"},
		{"unclosed fence", "```sh doctest\ntrue\n", "never closed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Extract("doc.md", strings.NewReader(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Extract = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestOutputLines(t *testing.T) {
	got := OutputLines("go: downloading example.com/m v1.0.0\n\nrecords read: 132\n  \nledger: balanced\n")
	want := []string{"records read: 132", "ledger: balanced"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OutputLines = %q, want %q", got, want)
	}
}

func TestMatch(t *testing.T) {
	got := "sensorpipe: prism run finished in 111ms\n  records read: 132\n  ledger: balanced\n"
	tests := []struct {
		name    string
		want    []string
		missing string
	}{
		{"every line, in order", []string{"records read: 132", "ledger: balanced"}, ""},
		{"an elided duration", []string{"sensorpipe: prism run finished in …ms"}, ""},
		{"elision in the middle", []string{"sensorpipe: … run … in 111ms"}, ""},
		{"out of order", []string{"ledger: balanced", "records read: 132"}, "records read: 132"},
		{"a different figure", []string{"records read: 133"}, "records read: 133"},
		{"a part, not the line", []string{"records read"}, "records read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			missing, ok := Match(tc.want, got)
			if ok != (tc.missing == "") || missing != tc.missing {
				t.Errorf("Match = %q, %v; want %q", missing, ok, tc.missing)
			}
		})
	}
}
