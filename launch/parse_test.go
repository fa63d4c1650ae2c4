package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// parseEnv clears the emulator variables parse reads (the local
// defaults), so that each case sets the ones it means.
func parseEnv(t *testing.T, env ...string) {
	t.Helper()
	for _, name := range []string{cli.BigtableEmulatorEnv, bigqueryio.EmulatorHostEnv, bigqueryio.StorageEmulatorHostEnv, cli.PubSubEmulatorEnv} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
}

// specWithout writes vitals.yaml without its lines that start with one of
// prefixes, and returns its path.
func specWithout(t *testing.T, prefixes ...string) string {
	t.Helper()
	b, err := os.ReadFile("../schemas/specs/vitals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		keep := true
		for _, p := range prefixes {
			keep = keep && !strings.HasPrefix(line, p)
		}
		if keep {
			out = append(out, line)
		}
	}
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// specWith writes vitals.yaml with more top-level lines (e.g. "cadence:
// 20m"), and returns its path.
func specWith(t *testing.T, lines ...string) string {
	t.Helper()
	b, err := os.ReadFile("../schemas/specs/vitals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, []byte(string(b)+"\n"+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestParseUsageErrors: every usage error parse returns, each a usage
// error (exit 2) that names the flag, and none of them needing a call.
func TestParseUsageErrors(t *testing.T) {
	dl := t.TempDir()
	batch := []string{"--input=../testdata/vitals/*", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl}
	stream := []string{"--source=pubsub", "--subscription=projects/p/subscriptions/s", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl}
	with := func(base []string, more ...string) []string { return append(append([]string{}, base...), more...) }
	noPrimaryKey := specWithout(t, "  primary_key:", "  max_staleness:")
	cadenced := specWith(t, "cadence: 20m")
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"an unknown flag", nil, with(batch, "--nope"), "flag provided but not defined: -nope"},
		{"a bad value", nil, with(batch, "--print_rows=many"), "invalid value"},
		{"a bad Beam flag value", nil, with(batch, "--dry_run=maybe"), "invalid boolean value"},
		{"a log level", nil, with(batch, "--log_level=loud"), "--log_level"},
		{"an argument", nil, with(batch, "extra"), `unexpected argument "extra"`},
		{"a job server without its endpoint", nil, with(batch, "--runner=flink"), "give its --endpoint"},
		{"an unknown spec", nil, with(batch, "--spec=nope"), "--spec"},
		{"no Bigtable project", nil, []string{"--input=../testdata/vitals/*", "--bigtable_instance=i", "--dead_letter=" + dl}, "--bigtable_project"},
		{"no Bigtable instance", nil, []string{"--input=../testdata/vitals/*", "--bigtable_project=p", "--dead_letter=" + dl}, "--bigtable_instance"},
		{"a negative flow-control cap", nil, with(batch, "--bigtable_max_outstanding_mutations=-1"), "must not be negative"},
		{"a negative target latency", nil, with(batch, "--bigtable_target_latency=-1s"), "must not be negative"},
		{"no BigQuery project", []string{cli.BigtableEmulatorEnv + "=127.0.0.1:1"}, []string{"--input=../testdata/vitals/*", "--dead_letter=" + dl, "--bigquery_dataset=d"}, "--bigquery_project"},
		{"no dead letter", nil, batch[:3], "--dead_letter is required"},
		{"a bad dead letter", nil, with(batch[:3], "--dead_letter=kafka:x"), "--dead_letter"},
		{"a local dead letter on Dataflow", nil, with(batch[1:3], "--input=gs://b/in/*", "--dead_letter="+dl, "--runner=dataflow"), "a local folder"},
		{"replay flags without a replay", nil, with(batch, "--replay_reason=write_failed"), "--format=deadletter only"},
		{"a replay reason", nil, with(batch, "--format=deadletter", "--replay_reason=nope"), "is no reason"},
		{"a replay sink", nil, with(batch, "--format=deadletter", "--replay_sink=nope"), "is no sink"},
		{"a format", nil, with(batch, "--format=xml"), "--format"},
		{"a zero retry deadline", nil, with(batch, "--write_retry_deadline=0"), "--write_retry_deadline"},
		{"a zero attempt timeout", nil, with(batch, "--write_attempt_timeout=0"), "--write_attempt_timeout"},
		{"a small line limit", nil, with(batch, "--max_line_bytes=10"), "--max_line_bytes"},
		{"a small decompression limit", nil, with(batch, "--max_decompressed_message_bytes=10"), "--max_decompressed_message_bytes"},
		{"a batch of no cells", nil, with(batch, "--bigtable_batch_cells=0"), "--bigtable_batch_cells"},
		{"a large BigQuery request", nil, with(batch, "--bigquery_request_bytes=20000000"), "--bigquery_request_bytes"},
		{"a small BigQuery buffer", nil, with(batch, "--bigquery_buffer_bytes=10"), "--bigquery_buffer_bytes"},
		{"upserts without a primary key", nil, with(batch, "--spec="+noPrimaryKey, "--bigquery_dataset=d"), "no bigquery primary_key"},
		{"a write method", nil, with(batch, "--bigquery_dataset=d", "--bigquery_write_method=merge"), "--bigquery_write_method"},
		{"a BigQuery dataset name", nil, with(batch, "--bigquery_dataset=bad-name"), "--bigquery_dataset"},
		{"a source", nil, with(batch, "--source=kafka"), "--source"},
		{"a batch without input", nil, batch[1:], "--input is required"},
		{"a stream flag in a batch", nil, with(batch, "--early_firing=5s"), "--early_firing applies to --source=pubsub only"},
		{"a local input on Dataflow", nil, with(batch[1:3], "--input=../testdata/vitals/*", "--dead_letter=gs://b/dl", "--runner=dataflow"), "this machine's disk"},
		{"a stream with input", nil, with(stream, "--input=x"), "--input applies to --source=files only"},
		{"a stream that skips stored BigQuery rows", nil, with(stream, "--bigquery_skip_stored=false"), "--bigquery_skip_stored applies to batches"},
		{"a stream without a subscription", nil, with(stream[:1], stream[2:]...), "--subscription is required"},
		{"a subscription", nil, with(stream, "--subscription=projects/p/topics/t"), "--subscription"},
		{"a zero early firing", nil, with(stream, "--early_firing=0"), "--early_firing"},
		{"a negative lateness", nil, with(stream, "--allowed_lateness=-1s"), "--allowed_lateness"},
		{"an ack deadline", nil, with(stream, "--pubsub_ack_deadline=5s"), "--pubsub_ack_deadline"},
		{"a silences topic without a cadence", nil, with(stream, "--silences_topic=projects/p/topics/t"), "the spec declares no cadence"},
		{"a silences topic name", nil, with(stream, "--spec="+cadenced, "--silences_topic=projects/p/subscriptions/t"), "--silences_topic"},
		{"a silences topic in a batch", nil, with(batch, "--spec="+cadenced, "--silences_topic=projects/p/topics/t"), "--silences_topic applies to --source=pubsub only"},
		{"a dry run on prism", nil, with(batch, "--dry_run"), "give --runner=dataflow"},
		{"a dry-run file without a dry run", nil, with(batch, "--dry_run_out=job.json"), "add --dry_run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parseEnv(t, tc.env...)
			_, _, err := parse(tc.args)
			if err == nil {
				t.Fatalf("parse(%q) = nil error; want one with %q", tc.args, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse error %q; want it to contain %q", err, tc.want)
			}
			if got := exitCode(err); got != exitUsage {
				t.Errorf("exit code %d for %v; want %d (usage)", got, err, exitUsage)
			}
		})
	}
}

// TestParseDefaults: what each flag left out means, for a batch and a
// stream on prism, and the local defaults with the emulators' variables.
func TestParseDefaults(t *testing.T) {
	dl := t.TempDir()
	parseEnv(t)
	cfg, p, err := parse([]string{"--input=../testdata/vitals/*", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../testdata/vitals/*")
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"runner", p.runner, runner{name: "prism"}},
		{"config's runner", cfg.Runner, "prism"},
		{"local", p.runner.local(), true},
		{"dry run", p.dryRun, false},
		{"streaming", p.streaming, false},
		{"spec", cfg.Spec.Name, schemas.DefaultSpecName()},
		{"--spec", p.spec, schemas.DefaultSpecName()},
		{"--format", p.format, "json"},
		{"input, made absolute", p.batch.Input, abs},
		{"input listed before the run", p.listInput, true},
		{"merge stored", p.batch.MergeStored, true},
		{"Bigtable", cfg.Bigtable.Project + "/" + cfg.Bigtable.Instance, "p/i"},
		{"Bigtable table", cfg.Spec.Bigtable.Tables[0].Name, "patient_vitals"},
		{"app profile", cfg.Bigtable.AppProfile, ""},
		{"batch cells", cfg.Bigtable.BatchCells, bigtableio.DefaultBatchCells},
		{"flow control", cfg.Bigtable.Flow.MaxMutations, bigtableio.DefaultFlow.MaxMutations},
		{"flow control bytes", cfg.Bigtable.Flow.MaxBytes, bigtableio.DefaultFlow.MaxBytes},
		{"target latency", cfg.Bigtable.Flow.TargetLatency, time.Duration(0)},
		{"BigQuery", cfg.BigQuery == nil, true},
		{"dead letter", cfg.DeadLetter.Kind, targets.DeadLetterFiles},
		{"dead letter's run", cfg.DeadLetter.Run, runID},
		{"retry deadline", cfg.Retry, retry.Settings{Deadline: retry.DefaultDeadline, AttemptTimeout: retry.DefaultAttemptTimeout}},
		{"line limit", cfg.MaxLineBytes, schemas.DefaultMaxLineBytes},
		{"decompression limit", cfg.MaxDecompressedBytes, int64(codec.DefaultMaxDecompressedBytes)},
		{"replay", cfg.Replay == nil, true},
		{"local stream settings", cfg.Local == nil, true},
		{"startup timeout", p.startupTimeout, 30 * time.Second},
		{"create tables", p.createTables, true},
		{"progress", p.progressInterval, 5 * time.Second},
		{"local part", p.localPartMB, 64.0},
		{"print rows", p.printRows, 0},
		{"summary", p.summaryJSON, ""},
		{"debug address", p.debugAddr, ""},
		{"all rejected fails", p.allowAllRejected, false},
		{"log level", p.logLevel, "warn"},
		{"warnings", len(p.warnings), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}

	cfg, p, err = parse([]string{"--source=pubsub", "--subscription=projects/p/subscriptions/s", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"streaming", p.streaming, true},
		{"subscription", p.stream.Source.Subscription, targets.Subscription{Project: "p", ID: "s"}},
		{"not Dataflow's source", p.stream.Source.Dataflow, false},
		{"ack deadline", p.stream.Source.AckDeadline, time.Duration(0)},
		{"windowing", p.stream.Windowing, pipelines.Windowing{EarlyFiring: pipelines.DefaultEarlyFiring, LateFiring: pipelines.DefaultLateFiring, AllowedLateness: pipelines.DefaultAllowedLateness}},
		{"merge stored", p.stream.MergeStored, true},
		{"local runner", *cfg.Local, pipelines.LocalRunner{WriteOnArrival: true, Recover: true, DiskState: true}},
		{"input not listed", p.listInput, false},
	} {
		if c.got != c.want {
			t.Errorf("stream: %s = %v; want %v", c.name, c.got, c.want)
		}
	}
}

// TestParseSilences: a stream of a spec with a cadence raises silences to
// the topic --silences_topic names, and says so when it has nowhere to
// write them; a spec without one raises none and warns of nothing.
func TestParseSilences(t *testing.T) {
	parseEnv(t)
	dl := t.TempDir()
	stream := []string{"--source=pubsub", "--subscription=projects/p/subscriptions/s", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl}
	cadenced := specWith(t, "cadence: 20m")
	tests := []struct {
		name    string
		args    []string
		topic   *targets.Topic
		warning string
	}{
		{"no cadence", stream, nil, ""},
		{"a cadence and a topic", append([]string{"--spec=" + cadenced, "--silences_topic=projects/q/topics/silent"}, stream...),
			&targets.Topic{Project: "q", ID: "silent"}, ""},
		{"a cadence and BigQuery", append([]string{"--spec=" + cadenced, "--bigquery_dataset=d"}, stream...), nil, ""},
		{"a cadence and nowhere to write", append([]string{"--spec=" + cadenced}, stream...), nil, "raises no silences"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, p, err := parse(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if (cfg.SilencesTopic == nil) != (tc.topic == nil) || tc.topic != nil && *cfg.SilencesTopic != *tc.topic {
				t.Errorf("silences topic = %v; want %v", cfg.SilencesTopic, tc.topic)
			}
			warned := strings.Join(p.warnings, "\n")
			if tc.warning == "" && strings.Contains(warned, "silences") || tc.warning != "" && !strings.Contains(warned, tc.warning) {
				t.Errorf("warnings %q; want one with %q", warned, tc.warning)
			}
		})
	}
}

// TestParseLocalDefaults: with the emulators' variables set, the Bigtable
// and BigQuery projects and the instance default to make run's.
func TestParseLocalDefaults(t *testing.T) {
	parseEnv(t, cli.BigtableEmulatorEnv+"=127.0.0.1:1", bigqueryio.EmulatorHostEnv+"=127.0.0.1:2")
	cfg, _, err := parse([]string{"--input=../testdata/vitals/*", "--dead_letter=" + t.TempDir(), "--bigquery_dataset=vitals"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Bigtable.Project+"/"+cfg.Bigtable.Instance, cli.LocalProject+"/"+cli.LocalInstance; got != want {
		t.Errorf("Bigtable = %s; want %s", got, want)
	}
	want := bigqueryio.Config{Project: cli.LocalProject, Dataset: "vitals", Table: "readings", WriteMethod: bigqueryio.DefaultWriteMethod,
		MaxRequestBytes: bigqueryio.DefaultBQRequestBytes, MaxBufferedBytes: bigqueryio.DefaultBQBufferedBytes}
	if cfg.BigQuery == nil || *cfg.BigQuery != want {
		t.Errorf("BigQuery = %+v; want %+v", cfg.BigQuery, want)
	}
}

// TestParseRunners: how the runner flags classify the run.
func TestParseRunners(t *testing.T) {
	parseEnv(t)
	tests := []struct {
		name          string
		args          []string
		want          runner
		local, remote bool // runs in the launcher; its workers do not see this disk
	}{
		{"prism", nil, runner{name: "prism"}, true, false},
		{"direct", []string{"--runner=direct"}, runner{name: "direct"}, true, false},
		{"a job server here", []string{"--runner=universal", "--endpoint=localhost:8099", "--environment_type=PROCESS"},
			runner{name: "universal", endpoint: "localhost:8099", envType: "PROCESS"}, false, false},
		{"prism's job server elsewhere", []string{"--endpoint=jobs.example.com:8073", "--environment_type=PROCESS"},
			runner{name: "prism", endpoint: "jobs.example.com:8073", envType: "PROCESS"}, false, true},
		{"Dataflow", []string{"--runner=dataflow"}, runner{name: "dataflow"}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--input=gs://b/in/*", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=gs://b/dl"}, tc.args...)
			_, p, err := parse(args)
			if err != nil {
				t.Fatal(err)
			}
			if p.runner != tc.want || p.runner.local() != tc.local || p.runner.workersSeeDisk() == tc.remote {
				t.Errorf("runner %+v (local %v, workers see the disk %v); want %+v (local %v, workers see the disk %v)",
					p.runner, p.runner.local(), p.runner.workersSeeDisk(), tc.want, tc.local, !tc.remote)
			}
		})
	}
}

// TestParseFromBigQuery: what --source=bigquery reads, from the flags.
func TestParseFromBigQuery(t *testing.T) {
	dl := t.TempDir()
	base := []string{"--source=bigquery", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl}
	ms := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	tests := []struct {
		name string
		env  []string
		args []string
		want bigqueryio.Config
	}{
		{"a dataset's table in the Bigtable project", nil, []string{"--from_table=vitals.readings"},
			bigqueryio.Config{Project: "p", Dataset: "vitals", Table: "readings"}},
		{"the BigQuery project", nil, []string{"--from_table=vitals.readings", "--bigquery_project=bq"},
			bigqueryio.Config{Project: "bq", Dataset: "vitals", Table: "readings"}},
		{"--from_project", nil, []string{"--from_table=vitals.readings", "--bigquery_project=bq", "--from_project=old"},
			bigqueryio.Config{Project: "old", Dataset: "vitals", Table: "readings"}},
		{"PROJECT:DATASET.TABLE", nil, []string{"--from_table=other:vitals.readings", "--from_project=old"},
			bigqueryio.Config{Project: "other", Dataset: "vitals", Table: "readings"}},
		{"PROJECT.DATASET.TABLE", nil, []string{"--from_table=other.vitals.readings"},
			bigqueryio.Config{Project: "other", Dataset: "vitals", Table: "readings"}},
		{"event-time bounds", nil, []string{"--from_table=vitals.readings", "--from_time=2026-03-01T10:00:00Z", "--to_time=2026-03-01T12:00:00.5+01:00"},
			bigqueryio.Config{Project: "p", Dataset: "vitals", Table: "readings", FromMs: ms("2026-03-01T10:00:00Z"), ToMs: ms("2026-03-01T11:00:00.5Z")}},
		{"the emulator's project", []string{bigqueryio.EmulatorHostEnv + "=127.0.0.1:2", cli.BigtableEmulatorEnv + "=127.0.0.1:1"},
			[]string{"--source=bigquery", "--dead_letter=" + dl, "--from_table=vitals.readings"},
			bigqueryio.Config{Project: cli.LocalProject, Dataset: "vitals", Table: "readings"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parseEnv(t, tc.env...)
			args := append(append([]string{}, base...), tc.args...)
			if tc.env != nil {
				args = tc.args
			}
			cfg, p, err := parse(args)
			if err != nil {
				t.Fatal(err)
			}
			if p.batch.FromBigQuery == nil || *p.batch.FromBigQuery != tc.want {
				t.Errorf("FromBigQuery = %+v; want %+v", p.batch.FromBigQuery, tc.want)
			}
			if p.streaming || p.listInput || !p.batch.MergeStored || p.batch.Input != "" {
				t.Errorf("plan: streaming %v, input listed %v, merge stored %v, input %q; want a batch that merges and lists no input",
					p.streaming, p.listInput, p.batch.MergeStored, p.batch.Input)
			}
			if cfg.BigQuery != nil {
				t.Errorf("the BigQuery sink is on (%+v) without --bigquery_dataset", cfg.BigQuery)
			}
		})
	}
	t.Run("the BigQuery sink only when asked", func(t *testing.T) {
		parseEnv(t)
		cfg, _, err := parse(append(append([]string{}, base...), "--from_table=vitals.readings", "--bigquery_dataset=rebuilt"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.BigQuery == nil || cfg.BigQuery.Dataset != "rebuilt" {
			t.Errorf("BigQuery sink = %+v; want dataset rebuilt", cfg.BigQuery)
		}
	})
}

// TestParseFromBigQueryUsageErrors: the usage errors of --source=bigquery
// and of the rebuild flags elsewhere.
func TestParseFromBigQueryUsageErrors(t *testing.T) {
	dl := t.TempDir()
	src := []string{"--source=bigquery", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl, "--from_table=vitals.readings"}
	batch := []string{"--input=../testdata/vitals/*", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl}
	stream := []string{"--source=pubsub", "--subscription=projects/p/subscriptions/s", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl}
	with := func(base []string, more ...string) []string { return append(append([]string{}, base...), more...) }
	noBigQuery := specWithout(t, "bigquery:", "  table: readings", "  time_partitioning:", "  clustering:", "  primary_key:", "  max_staleness:", "  columns:", "    - {name:")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no table", src[:4], "--from_table is required with --source=bigquery"},
		{"a table without its dataset", with(src, "--from_table=readings"), "--from_table=readings: give [PROJECT:]DATASET.TABLE"},
		{"an empty dataset", with(src, "--from_table=p:.readings"), "none of them empty"},
		{"a bad dataset name", with(src, "--from_table=bad-name.readings"), "--from_table=bad-name.readings"},
		{"too many parts", with(src, "--from_table=a:b.c.d"), "give [PROJECT:]DATASET.TABLE"},
		{"a bad from time", with(src, "--from_time=yesterday"), "--from_time=yesterday: give an RFC 3339 time"},
		{"a bad to time", with(src, "--to_time=2026-03-01"), "--to_time=2026-03-01: give an RFC 3339 time"},
		{"bounds out of order", with(src, "--from_time=2026-03-02T00:00:00Z", "--to_time=2026-03-01T00:00:00Z"), "is not before --to_time"},
		{"a spec without a BigQuery table", with(src, "--spec="+noBigQuery), "has no bigquery section"},
		{"a payload format", with(src, "--format=proto"), "--format=proto: --source=bigquery reads a table's rows"},
		{"input", with(src, "--input=x"), "--input applies to --source=files only"},
		{"a stream flag", with(src, "--early_firing=5s"), "--early_firing applies to --source=pubsub only"},
		{"a rebuild flag in a file batch", with(batch, "--from_table=vitals.readings"), "--from_table applies to --source=bigtable or bigquery only"},
		{"a rebuild flag in a stream", with(stream, "--from_time=2026-03-01T00:00:00Z"), "--from_time applies to --source=bigtable or bigquery only"},
		{"a Bigtable-only flag", with(src, "--from_spec=vitals"), "--from_spec applies to --source=bigtable only"},
		{"a Bigtable-only flag in a file batch", with(batch, "--from_instance=i"), "--from_instance applies to --source=bigtable only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parseEnv(t)
			_, _, err := parse(tc.args)
			if err == nil {
				t.Fatalf("parse(%q) = nil error; want one with %q", tc.args, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse error %q; want it to contain %q", err, tc.want)
			}
			if got := exitCode(err); got != exitUsage {
				t.Errorf("exit code %d for %v; want %d (usage)", got, err, exitUsage)
			}
		})
	}
}
