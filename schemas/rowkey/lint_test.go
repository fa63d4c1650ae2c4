package rowkey

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

func TestBuiltinSpecsPassLint(t *testing.T) {
	for _, name := range schemas.BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			s, err := spectest.Load(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range Lint(s) {
				t.Errorf("finding: %s", f)
			}
		})
	}
}

// TestLintCatchesEachBadSpec lints every known-bad spec in testdata/specs,
// each named after the rule it breaks, and wants that rule reported with
// its severity.
func TestLintCatchesEachBadSpec(t *testing.T) {
	rules := map[string]string{
		RuleTimestampFirst:   SeverityError,
		RuleSequentialFirst:  SeverityError,
		RuleLowCardinality:   SeverityError,
		RuleHashedKey:        SeverityError,
		RuleRawBytes:         SeverityError,
		RulePIIInKey:         SeverityError,
		RuleKeyTooLong:       SeverityError,
		RuleUnboundedWideRow: SeverityError,
		RuleNeedlessReverse:  SeverityWarning,
		RuleTooManyFamilies:  SeverityError,
		RuleMainQueryScan:    SeverityError,
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "specs", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, file := range files {
		rule := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(rule, func(t *testing.T) {
			wantSev, ok := rules[rule]
			if !ok {
				t.Fatalf("%s is not named after a lint rule", file)
			}
			covered[rule] = true
			s, err := spectest.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			findings := Lint(s)
			for _, f := range findings {
				if f.Rule == rule && f.Severity == wantSev {
					return
				}
			}
			t.Errorf("no %s %s finding; got %v", wantSev, rule, findings)
		})
	}
	for rule := range rules {
		if !covered[rule] {
			t.Errorf("no known-bad spec testdata/specs/%s.yaml", rule)
		}
	}
}

func lintSpec(t *testing.T, rowKey, qualifier, queries string) []Finding {
	t.Helper()
	src := `
name: l
event_time: ts
identity: [id]
fields:
  - {name: id, type: string, required: true}
  - {name: kind, type: string, cardinality: low}
  - {name: ts, type: timestamp, required: true}
  - {name: v, type: float}
bigtable:
  tables:
    - name: t
      row_key: "` + rowKey + `"
      families:
        - name: f
          columns:
            - {qualifier: "` + qualifier + `", value: v}
` + queries
	s, err := schemas.ParseSpec("l.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return Lint(s)
}

func TestLintRules(t *testing.T) {
	main := "queries:\n  - {name: q, main: true, where: [id], since: 1h}\n"
	tests := []struct {
		name, key, qualifier, queries string
		want                          []string // rules, in order; none for a clean key
	}{
		{"clean bucketed key", "{id}#{ts|hour}", "v", main, nil},
		{"constant prefix then id", "vitals#{id}#{ts|hour}", "v", main, nil},
		{"salt makes a low-cardinality field fine", "{salt:8|id}#{kind}#{ts|ms|pad:13}", "v", "queries:\n  - {name: q, main: true, where: [kind], since: 1h}\n", []string{RuleSaltedScan}},
		{"salt over a where field is one scan", "{salt:8|id}#{id}#{ts|hour}", "v", main, nil},
		{"timestamp first", "{ts|hour}#{id}", "v", main, []string{RuleTimestampFirst, RuleMainQueryScan}},
		{"reverse timestamp first", "{ts|reverse}#{id}", "v", "queries:\n  - {name: q, main: true, where: [], since: 1h, newest_first: true}\n", []string{RuleTimestampFirst}},
		{"low cardinality first", "{kind}#{id}#{ts|hour}", "v", main, []string{RuleLowCardinality, RuleMainQueryScan}},
		{"field after the time", "{ts|hour}", "v", main, []string{RuleTimestampFirst, RuleMainQueryScan}},
		{"no time after the where fields", "{id}#{kind}#{ts|hour}", "v", main, []string{RuleMainQueryScan}},
		{"no queries", "{id}#{ts|hour}", "v", "", []string{RuleNoMainQuery}},
		{"bounded wide row", "{id}#{ts|day}", "{ts|ms}", main, nil},
		{"unbounded wide row", "{id}", "{ts|ms}", "queries:\n  - {name: q, main: true, where: [id]}\n", []string{RuleUnboundedWideRow}},
		{"a hashed where field still gives a prefix", "{id|hash}#{id}#{ts|hour}", "v", main, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range lintSpec(t, tc.key, tc.qualifier, tc.queries) {
				got = append(got, f.Rule)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("rules = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFindingString(t *testing.T) {
	f := Finding{Severity: SeverityError, Rule: RuleTimestampFirst, Table: "t", Message: "why"}
	if got, want := f.String(), "error timestamp-first: table t: why"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestBadSpecsAreValidSpecs(t *testing.T) {
	// Lint is about design, not validity: every bad spec loads.
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "specs", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no known-bad specs")
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
		if _, err := spectest.Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
