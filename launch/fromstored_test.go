package main

import (
	"strings"
	"testing"
	"time"
)

// TestParseFromBigtable: what --source=bigtable's flags mean, and its
// usage errors, each one line naming the flag, none needing a call.
func TestParseFromBigtable(t *testing.T) {
	dl := t.TempDir()
	base := []string{"--source=bigtable", "--spec=../testdata/rekey/vitals_salted.yaml", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl}
	with := func(more ...string) []string { return append(append([]string{}, base...), more...) }
	ms := func(s string) int64 { t, _ := time.Parse(time.RFC3339, s); return t.UnixMilli() }

	t.Run("defaults", func(t *testing.T) {
		parseEnv(t)
		tests := []struct {
			name                   string
			args                   []string
			project, instance, tbl string
			fromMs, toMs           int64
			fromSpec               string
		}{
			{"the target's place, --spec's first table", with("--from_spec=vitals"), "p", "i", "patient_vitals", 0, 0, "vitals"},
			{"a table, a place and a span", with("--from_spec=vitals", "--from_table=old", "--from_project=q", "--from_instance=j",
				"--from_time=2026-03-01T00:00:00Z", "--to_time=2026-03-02T00:00:00Z"), "q", "j", "old", ms("2026-03-01T00:00:00Z"), ms("2026-03-02T00:00:00Z"), "vitals"},
			{"--from_spec defaults to --spec", with("--from_project=q"), "q", "i", "patient_vitals_salted", 0, 0, "vitals_salted"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, p, err := parse(tc.args)
				if err != nil {
					t.Fatalf("parse(%q): %v", tc.args, err)
				}
				rc := p.batch.FromBigtable
				if rc == nil || p.streaming || p.listInput {
					t.Fatalf("parse(%q): plan %+v; want a batch from Bigtable that lists no input", tc.args, p.batch)
				}
				if rc.Project != tc.project || rc.Instance != tc.instance || rc.Spec.Bigtable.Tables[0].Name != tc.tbl ||
					rc.FromMs != tc.fromMs || rc.ToMs != tc.toMs || rc.Spec.Name != tc.fromSpec || !p.batch.MergeStored {
					t.Errorf("parse(%q): read %s/%s/%s of spec %s in [%d, %d), merge %v; want %s/%s/%s of %s in [%d, %d), merge true",
						tc.args, rc.Project, rc.Instance, rc.Spec.Bigtable.Tables[0].Name, rc.Spec.Name, rc.FromMs, rc.ToMs, p.batch.MergeStored,
						tc.project, tc.instance, tc.tbl, tc.fromSpec, tc.fromMs, tc.toMs)
				}
			})
		}
	})

	t.Run("usage errors", func(t *testing.T) {
		parseEnv(t)
		tests := []struct {
			name string
			args []string
			want string
		}{
			{"a spec that cannot be read back", with("--from_spec=heroic_metrics"), "--from_spec=heroic_metrics cannot be read back"},
			{"an unknown from-spec", with("--from_spec=nope"), "--from_spec"},
			{"another spec's fields", with("--from_spec=traffic"), "--from_spec=traffic and --spec"},
			{"the table it writes", with("--from_spec=vitals", "--from_table=patient_vitals_salted"), "also a table --spec"},
			{"a bad from time", with("--from_spec=vitals", "--from_time=yesterday"), "--from_time=yesterday"},
			{"a bad to time", with("--from_spec=vitals", "--to_time=2026-03-01"), "--to_time=2026-03-01"},
			{"an empty span", with("--from_spec=vitals", "--from_time=2026-03-02T00:00:00Z", "--to_time=2026-03-01T00:00:00Z"), "is not before --to_time"},
			{"an input", with("--from_spec=vitals", "--input=x"), "--input applies to --source=files only"},
			{"a stream flag", with("--from_spec=vitals", "--subscription=projects/p/subscriptions/s"), "--subscription applies to --source=pubsub only"},
			{"a format", with("--from_spec=vitals", "--format=proto"), "--format=proto"},
			{"a from flag in a file batch", []string{"--input=../testdata/vitals/*", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl, "--from_table=t"},
				"--from_table applies to --source=bigtable or bigquery only"},
			{"a from flag in a stream", []string{"--source=pubsub", "--subscription=projects/p/subscriptions/s", "--bigtable_project=p", "--bigtable_instance=i",
				"--dead_letter=" + dl, "--from_time=2026-03-01T00:00:00Z"}, "--from_time applies to --source=bigtable or bigquery only"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, _, err := parse(tc.args)
				if err == nil {
					t.Fatalf("parse(%q) = nil error; want one with %q", tc.args, tc.want)
				}
				if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("parse error %q; want one line containing %q", err, tc.want)
				}
				if got := exitCode(err); got != exitUsage {
					t.Errorf("exit code %d for %v; want %d (usage)", got, err, exitUsage)
				}
			})
		}
	})
}
