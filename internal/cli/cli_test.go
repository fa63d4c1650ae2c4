package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func TestBigtableDefaultsOnlyAgainstTheEmulator(t *testing.T) {
	tests := []struct {
		name, emulator, project, instance string
		wantP, wantI, wantErr             string
	}{
		{"emulator, no flags: local defaults", "127.0.0.1:8086", "", "", LocalProject, LocalInstance, ""},
		{"emulator, flags win", "127.0.0.1:8086", "p", "i", "p", "i", ""},
		{"cloud, flags given", "", "p", "i", "p", "i", ""},
		{"cloud, no project: required", "", "", "i", "", "", "--bigtable_project is required"},
		{"cloud, no instance: required", "", "p", "", "", "", "--bigtable_instance is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(BigtableEmulatorEnv, tc.emulator)
			p, i, err := Bigtable(tc.project, tc.instance)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || ExitCode(err) != ExitUsage {
					t.Fatalf("err = %v (exit %d), want a usage error containing %q", err, ExitCode(err), tc.wantErr)
				}
				return
			}
			if err != nil || p != tc.wantP || i != tc.wantI {
				t.Errorf("Bigtable(%q, %q) = %q, %q, %v; want %q, %q", tc.project, tc.instance, p, i, err, tc.wantP, tc.wantI)
			}
		})
	}
}

func TestBigQueryProjectNeverDefaultsAcrossEmulators(t *testing.T) {
	tests := []struct {
		name, emulator, value, bigtable, want string
		usage                                 bool
	}{
		{"given", "", "bq", "bt", "bq", false},
		{"the Bigtable flag", "", "", "bt", "bt", false},
		{"the BigQuery emulator", "127.0.0.1:9050", "", "", LocalProject, false},
		{"no flag, no BigQuery emulator (the Bigtable project may have defaulted)", "", "", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(BigQueryEmulatorEnv, tc.emulator)
			got, err := BigQueryProject(tc.value, tc.bigtable)
			if got != tc.want || (ExitCode(err) == ExitUsage) != tc.usage {
				t.Errorf("BigQueryProject(%q, %q) = %q, %v; want %q, usage error %v", tc.value, tc.bigtable, got, err, tc.want, tc.usage)
			}
		})
	}
}

func TestTopicDefault(t *testing.T) {
	t.Setenv(PubSubEmulatorEnv, "127.0.0.1:8085")
	if got, err := Topic(""); err != nil || got != "projects/local-project/topics/vitals" {
		t.Errorf("Topic(\"\") under the emulator = %q, %v", got, err)
	}
	t.Setenv(PubSubEmulatorEnv, "")
	if _, err := Topic(""); ExitCode(err) != ExitUsage {
		t.Errorf("Topic(\"\") without the emulator: err = %v, want a usage error", err)
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{flag.ErrHelp, ExitOK},
		{Usagef("--x is required"), ExitUsage},
		{fmt.Errorf("wrapped: %w", Usagef("bad")), ExitUsage},
		{errors.New("bigtable unreachable"), ExitRuntime},
	}
	for _, tc := range tests {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	var buf bytes.Buffer
	if code := Report(&buf, "query", errors.New("a\nb")); code != ExitRuntime || buf.String() != "query: a b\n" {
		t.Errorf("Report = %d, %q; want 1 and one line", code, buf.String())
	}
}

// TestMakefileUsesTheSameDefaults keeps the Makefile's and the stream
// script's defaults equal to the Go ones, so make run's tables are the ones
// the tools read by default.
func TestMakefileUsesTheSameDefaults(t *testing.T) {
	checks := map[string][]string{
		"../../Makefile": {
			`(?m)^PROJECT \?= ` + LocalProject + `$`,
			`(?m)^INSTANCE \?= ` + LocalInstance + `$`,
			`BIGTABLE_EMULATOR_HOST \?= ` + regexp.QuoteMeta(LocalBigtableHost),
			`BIGQUERY_EMULATOR_HOST \?= ` + regexp.QuoteMeta(LocalBigQueryHost),
			`PUBSUB_EMULATOR_HOST \?= ` + regexp.QuoteMeta(LocalPubSubHost),
		},
		"../../scripts/stream.sh": {
			`PROJECT:=` + LocalProject, `INSTANCE:=` + LocalInstance, `TOPIC:=` + LocalTopic,
		},
	}
	for file, res := range checks {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range res {
			if !regexp.MustCompile(re).Match(b) {
				t.Errorf("%s does not match %s: keep it in step with internal/cli", file, re)
			}
		}
	}
}

// TestMakeHelpListsEveryTarget runs make help and checks that it lists
// every target the Makefile defines, each with a description.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	// A target: a rule at the start of a line, not a variable assignment
	// (:=) and not a file rule whose name has a path or a variable.
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z-]*):([^=]|$)`).FindAllStringSubmatch(string(b), -1) {
		targets = append(targets, m[1])
	}
	if len(targets) < 9 {
		t.Fatalf("found only %d targets in the Makefile (%v): the parsing is wrong", len(targets), targets)
	}
	out, err := exec.Command("make", "-s", "-C", "../..", "help").Output()
	if err != nil {
		t.Fatalf("make help: %v", err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && !strings.HasPrefix(line, "   ") {
			listed[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for _, target := range targets {
		if listed[target] == "" {
			t.Errorf("make help does not list %s with a description; give it a '## %s: ...' line. make help said:\n%s", target, target, out)
		}
	}
}
