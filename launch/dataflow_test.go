package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Dataflow URNs the dry-run graph is checked for.
const (
	urnFixedWindows = "beam:window_fn:fixed_windows:v1"
	urnGroupByKey   = "beam:transform:group_by_key:v1"
	urnPubSubRead   = "beam:transform:pubsub_read:v1"
)

// stableNames are the transform names a streaming --update relies on: they
// must not change between releases unless the release documents a
// --transform-name-mappings entry (see docs/dataflow.md).
var stableNames = []string{
	"Parse",
	"Ingest",
	hourlyWindows,
	"Ingest/BuildRows",
	"Ingest/bigtable.Write",
	"Ingest/bigquery.Write",
	"deadletter.Write",
}

// hourlyWindows is the composite that windows readings by event-time hour.
const hourlyWindows = "Ingest/HourlyWindows"

// dryRunOutput is what `--runner=dataflow --dry_run --dry_run_out=FILE`
// printed and wrote.
type dryRunOutput struct {
	job      dataflowJob
	pipeline *pipepb.Pipeline
	// summary is the launcher's stdout, stderr its log.
	summary, stderr string
}

// dataflowJob is the part of the written Dataflow job the tests look at.
type dataflowJob struct {
	ProjectID string `json:"projectId"`
	Type      string `json:"type"`
	// Pipeline is the Beam pipeline graph (protojson) the launcher adds.
	Pipeline json.RawMessage `json:"beamPipeline"`
}

// dryRunDataflow runs the launcher with --runner=dataflow --dry_run and no
// credentials, and reads the job and pipeline graph it writes to
// --dry_run_out.
func dryRunDataflow(t *testing.T, args ...string) dryRunOutput {
	t.Helper()
	gcloudConfig := t.TempDir()
	env := []string{
		// No credentials: a dry run must not need any, nor warn about them.
		"GOOGLE_APPLICATION_CREDENTIALS=" + filepath.Join(gcloudConfig, "no-credentials.json"),
		"CLOUDSDK_CONFIG=" + gcloudConfig,
	}
	jobFile := filepath.Join(t.TempDir(), "job.json")
	base := []string{
		"--runner=dataflow", "--dry_run", "--dry_run_out=" + jobFile,
		"--project=sensorpipe-test", "--region=europe-west1",
		"--staging_location=gs://sensorpipe-test-bucket/staging",
		"--temp_location=gs://sensorpipe-test-bucket/temp",
		"--bigtable_project=sensorpipe-test", "--bigtable_instance=vitals",
		"--bigquery_dataset=vitals",
		"--dead_letter=gs://sensorpipe-test-bucket/deadletter",
	}
	r := runLauncher(t, env, append(base, args...)...)
	if r.code != 0 {
		t.Fatalf("dry run exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, tail(r.stderr, 4000))
	}
	out := dryRunOutput{summary: r.stdout, stderr: r.stderr}
	b, err := os.ReadFile(jobFile)
	if err != nil {
		t.Fatalf("--dry_run_out: %v\nstdout:\n%s", err, r.stdout)
	}
	if err := json.Unmarshal(b, &out.job); err != nil {
		t.Fatalf("--dry_run_out %s is not a JSON job: %v", jobFile, err)
	}
	if !strings.HasPrefix(out.job.Type, "JOB_TYPE_") {
		t.Fatalf("--dry_run_out holds no Dataflow job type:\n%s", tail(string(b), 2000))
	}
	out.pipeline = &pipepb.Pipeline{}
	if err := protojson.Unmarshal(out.job.Pipeline, out.pipeline); err != nil || len(out.pipeline.GetComponents().GetTransforms()) == 0 {
		t.Fatalf("--dry_run_out: the pipeline graph under beamPipeline does not parse (%v)", err)
	}
	return out
}

// checkSummary asserts the dry run's stdout is a short human summary: the
// job type, the transforms by name, the windowing and the sinks, no log
// lines and no escaped JSON; and that nothing warned about credentials.
func checkSummary(t *testing.T, out dryRunOutput, jobType string, want ...string) {
	t.Helper()
	t.Run("short human summary", func(t *testing.T) {
		s := out.summary
		for _, w := range append([]string{
			"job:", strings.ToLower(strings.TrimPrefix(jobType, "JOB_TYPE_")) + " (" + jobType + ")",
			"windowing:", "Ingest/HourlyWindows: fixed 1h0m0s event-time windows",
			"sinks:", "Bigtable sensorpipe-test/vitals: patient_vitals", "BigQuery sensorpipe-test.vitals: readings",
			"dead letter gs://sensorpipe-test-bucket/deadletter",
			"transforms:", "Ingest/BuildRows", "deadletter.Write",
			"full job:",
		}, want...) {
			if !strings.Contains(s, w) {
				t.Errorf("the summary lacks %q:\n%s", w, s)
			}
		}
		if n := len(s); n > 8<<10 {
			t.Errorf("the summary is %d bytes; want a short one (the job goes to --dry_run_out)", n)
		}
		for _, noise := range []string{"msg=", `\"`, "components:"} {
			if strings.Contains(s, noise) {
				t.Errorf("the summary holds %q: log lines or escaped JSON\n%s", noise, tail(s, 2000))
			}
		}
	})
	t.Run("no credential warnings", func(t *testing.T) {
		for _, w := range []string{"credentials", "GCS client", "SoftDeletePolicy"} {
			if strings.Contains(out.stderr, w) || strings.Contains(out.summary, w) && !strings.Contains(out.summary, "no credentials used") {
				t.Errorf("the dry run mentions %q:\nstderr:\n%s", w, tail(out.stderr, 2000))
			}
		}
	})
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// transformNames returns every transform's unique name, sorted.
func transformNames(p *pipepb.Pipeline) []string {
	var names []string
	for _, tr := range p.GetComponents().GetTransforms() {
		names = append(names, tr.GetUniqueName())
	}
	sort.Strings(names)
	return names
}

func transformByName(p *pipepb.Pipeline, name string) *pipepb.PTransform {
	for _, tr := range p.GetComponents().GetTransforms() {
		if tr.GetUniqueName() == name {
			return tr
		}
	}
	return nil
}

// windowSize returns the fixed-window size of PCollection id, or 0 and the
// window fn's URN when it is not windowed into fixed windows.
func windowSize(t *testing.T, p *pipepb.Pipeline, id string) (time.Duration, string) {
	t.Helper()
	c := p.GetComponents()
	ws := c.GetWindowingStrategies()[c.GetPcollections()[id].GetWindowingStrategyId()]
	fn := ws.GetWindowFn()
	if fn.GetUrn() != urnFixedWindows {
		return 0, fn.GetUrn()
	}
	var payload pipepb.FixedWindowsPayload
	if err := proto.Unmarshal(fn.GetPayload(), &payload); err != nil {
		t.Fatalf("fixed windows payload of %s: %v", id, err)
	}
	return payload.GetSize().AsDuration(), fn.GetUrn()
}

// checkGraph asserts what batch and stream share: the stable names and the
// hourly event-time windows that the grouping sees.
func checkGraph(t *testing.T, p *pipepb.Pipeline) { checkGraphGrouped(t, p, true) }

// checkGraphGrouped is checkGraph for a graph that groups its readings by
// identity and hour or, with grouped false, builds them with no grouping
// (a rekey of rows that hold whole hours): no GroupByKey under
// Ingest/BuildRows, whose input is windowed by the hour.
func checkGraphGrouped(t *testing.T, p *pipepb.Pipeline, grouped bool) {
	t.Helper()
	names := transformNames(p)
	t.Run("stable transform names", func(t *testing.T) {
		for _, want := range stableNames {
			if !slices.Contains(names, want) {
				t.Errorf("no transform named %q; the graph has:\n%s", want, strings.Join(names, "\n"))
			}
		}
	})
	t.Run("one-hour fixed windows", func(t *testing.T) {
		hw := transformByName(p, hourlyWindows)
		if hw == nil || len(hw.GetOutputs()) == 0 {
			t.Fatalf("no %s transform with an output", hourlyWindows)
		}
		for _, id := range hw.GetOutputs() {
			if size, urn := windowSize(t, p, id); size != time.Hour {
				t.Errorf("%s output %s: window fn %s size %v; want %s size 1h0m0s", hourlyWindows, id, urn, size, urnFixedWindows)
			}
		}
		groups := 0
		for _, tr := range p.GetComponents().GetTransforms() {
			if tr.GetSpec().GetUrn() != urnGroupByKey || !strings.HasPrefix(tr.GetUniqueName(), "Ingest/BuildRows/") {
				continue
			}
			groups++
			for _, id := range tr.GetInputs() {
				if size, urn := windowSize(t, p, id); size != time.Hour {
					t.Errorf("%s groups input %s windowed by %s size %v; want %s size 1h0m0s", tr.GetUniqueName(), id, urn, size, urnFixedWindows)
				}
			}
		}
		switch {
		case grouped && groups == 0:
			t.Errorf("no GroupByKey under Ingest/BuildRows")
		case !grouped && groups > 0:
			t.Errorf("%d GroupByKeys under Ingest/BuildRows; want none", groups)
		case !grouped:
			build := transformByName(p, "Ingest/BuildRows")
			if build == nil || len(build.GetInputs()) == 0 {
				t.Fatalf("no Ingest/BuildRows transform with an input")
			}
			for _, id := range build.GetInputs() {
				if size, urn := windowSize(t, p, id); size != time.Hour {
					t.Errorf("Ingest/BuildRows input %s windowed by %s size %v; want %s size 1h0m0s", id, urn, size, urnFixedWindows)
				}
			}
		}
	})
}

// pubsubReads returns the Pub/Sub read transforms of p: Dataflow's native
// read (URN beam:transform:pubsub_read:v1, from pubsubio.Read).
func pubsubReads(p *pipepb.Pipeline) []*pipepb.PTransform {
	var reads []*pipepb.PTransform
	for _, tr := range p.GetComponents().GetTransforms() {
		if tr.GetSpec().GetUrn() == urnPubSubRead || strings.HasSuffix(tr.GetUniqueName(), "pubsubio.Read") {
			reads = append(reads, tr)
		}
	}
	return reads
}

func TestDataflowDryRunBatch(t *testing.T) {
	out := dryRunDataflow(t, "--source=files", "--input=gs://bucket/path/*.jsonl")
	if got, want := out.job.Type, "JOB_TYPE_BATCH"; got != want {
		t.Errorf("job type %s; want %s", got, want)
	}
	if got, want := out.job.ProjectID, "sensorpipe-test"; got != want {
		t.Errorf("job project %q; want %q", got, want)
	}
	if !slices.Contains(transformNames(out.pipeline), "ReadFiles") {
		t.Errorf("no ReadFiles transform")
	}
	if reads := pubsubReads(out.pipeline); len(reads) != 0 {
		t.Errorf("a file batch reads Pub/Sub: %s", reads[0].GetUniqueName())
	}
	checkGraph(t, out.pipeline)
	checkSummary(t, out, "JOB_TYPE_BATCH", "source:     files gs://bucket/path/*.jsonl")
}

// TestDataflowDryRunRekey: a rekey (--source=bigtable) on Dataflow reads
// the stored table with the splittable key-range read, then builds and
// writes like a file batch.
func TestDataflowDryRunRekey(t *testing.T) {
	out := dryRunDataflow(t, "--source=bigtable", "--from_spec=vitals", "--from_table=old_vitals",
		"--spec=../testdata/rekey/vitals_salted.yaml")
	if got, want := out.job.Type, "JOB_TYPE_BATCH"; got != want {
		t.Errorf("job type %s; want %s", got, want)
	}
	names := transformNames(out.pipeline)
	for _, want := range []string{"bigtable.Read", "ReadFiles"} {
		if got := slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, want) }); got != (want == "bigtable.Read") {
			t.Errorf("transform %s in the graph: %v; want %v\n%s", want, got, want == "bigtable.Read", strings.Join(names, "\n"))
		}
	}
	// vitals' rows hold whole hours of the salted spec's sensors: they are
	// built as they are read, with no shuffle.
	checkGraphGrouped(t, out.pipeline, false)
	checkSummary(t, out, "JOB_TYPE_BATCH", "source:     bigtable bigtable://sensorpipe-test/vitals/old_vitals (spec vitals)")
}

func TestDataflowDryRunFromBigQuery(t *testing.T) {
	out := dryRunDataflow(t, "--source=bigquery", "--from_table=old:vitals.readings", "--from_time=2026-03-01T00:00:00Z")
	if got, want := out.job.Type, "JOB_TYPE_BATCH"; got != want {
		t.Errorf("job type %s; want %s", got, want)
	}
	names := transformNames(out.pipeline)
	if !slices.Contains(names, "bigquery.Read") || slices.Contains(names, "ReadFiles") {
		t.Errorf("transforms %v; want bigquery.Read and no ReadFiles", names)
	}
	checkGraph(t, out.pipeline)
	checkSummary(t, out, "JOB_TYPE_BATCH", "source:     bigquery old:vitals.readings (Storage Read API)")
}

func TestDataflowDryRunStreaming(t *testing.T) {
	const sub = "projects/P/subscriptions/S"
	out := dryRunDataflow(t, "--source=pubsub", "--subscription="+sub)
	if got, want := out.job.Type, "JOB_TYPE_STREAMING"; got != want {
		t.Errorf("job type %s; want %s", got, want)
	}
	t.Run("pubsub read", func(t *testing.T) {
		reads := pubsubReads(out.pipeline)
		if len(reads) == 0 {
			t.Fatalf("no Pub/Sub read (URN %s or a pubsubio.Read transform); the graph has:\n%s",
				urnPubSubRead, strings.Join(transformNames(out.pipeline), "\n"))
		}
		for _, tr := range reads {
			if tr.GetSpec().GetUrn() != urnPubSubRead {
				continue
			}
			var payload pipepb.PubSubReadPayload
			if err := proto.Unmarshal(tr.GetSpec().GetPayload(), &payload); err != nil {
				t.Fatalf("%s payload: %v", tr.GetUniqueName(), err)
			}
			if got := payload.GetSubscription(); got != sub {
				t.Errorf("%s reads subscription %q; want %q", tr.GetUniqueName(), got, sub)
			}
		}
	})
	checkGraph(t, out.pipeline)
	checkSummary(t, out, "JOB_TYPE_STREAMING", "source:     Pub/Sub "+sub, "at the watermark", "allowed lateness")
	t.Run("the guide's stateful steps", func(t *testing.T) {
		checkStatefulSteps(t, out.pipeline, false)
	})
}

// TestDataflowDryRunStreamingSilences: a spec with a cadence adds the
// silence steps, which the guide lists with the others; without one the
// graph has none of them (TestDataflowDryRunStreaming).
func TestDataflowDryRunStreamingSilences(t *testing.T) {
	out := dryRunDataflow(t, "--source=pubsub", "--subscription=projects/P/subscriptions/S", "--spec="+specWith(t, "cadence: 30s"),
		"--silences_topic=projects/P/topics/silences")
	names := transformNames(out.pipeline)
	for _, want := range []string{"Ingest/Silences/dofns.SilenceBatchFn", "Ingest/Silences/dofns.SilencesFn", "Ingest/Silences/bigquery.Write", "Ingest/Silences/pubsub.Publish"} {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("no step %s in the graph", want)
		}
	}
	checkStatefulSteps(t, out.pipeline, true)
}

// checkStatefulSteps holds the Dataflow guide's list of the stream's
// stateful steps (its "The stateful steps and their coders" section), by
// which Dataflow matches a running stream on update, to the stream's graph:
// each is a step of it.
//
// The steps under Ingest/Silences/ are those of a spec with a cadence
// (silences): without it they must be absent, so that the stream's graph is
// the one it is without the feature.
func checkStatefulSteps(t *testing.T, p *pipepb.Pipeline, silences bool) {
	t.Helper()
	b, err := os.ReadFile("../docs/guide/dataflow.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := regexp.MustCompile(`(?s)### The stateful steps and their coders\n(.*?)\n#`).FindSubmatch(b)
	if sec == nil {
		t.Fatal(`docs/guide/dataflow.md has no "### The stateful steps and their coders" section`)
	}
	steps := regexp.MustCompile("(?m)^- `(Ingest/[^`]+)`").FindAllSubmatch(sec[1], -1)
	if len(steps) < 3 {
		t.Fatalf("docs/guide/dataflow.md's stateful-steps section lists %d stateful steps (- `Ingest/...`); want the grouping, PaneBatchFn and StreamRowsFn", len(steps))
	}
	names := transformNames(p)
	for _, m := range steps {
		if !silences && strings.HasPrefix(string(m[1]), "Ingest/Silences/") {
			if slices.Contains(names, string(m[1])) {
				t.Errorf("a spec without a cadence has the silence step %q", m[1])
			}
			continue
		}
		if !slices.Contains(names, string(m[1])) {
			t.Errorf("docs/guide/dataflow.md lists %q as a stateful step, which is no step of the stream", m[1])
		}
	}
}

// TestDryRunFlagsAreUsage: --dry_run on a local runner, and --dry_run_out
// without --dry_run, are bad usage (exit 2, one line).
func TestDryRunFlagsAreUsage(t *testing.T) {
	base := []string{"--input=../testdata/vitals/*", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + t.TempDir()}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"dry run on prism", append(base, "--dry_run"), "give --runner=dataflow"},
		{"dry run file without a dry run", append(base, "--dry_run_out=job.json"), "add --dry_run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runLauncher(t, nil, tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line containing %q", r.code, r.stderr, tc.want)
			}
		})
	}
}
