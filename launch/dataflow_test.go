package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/encoding/prototext"
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

// dryRunOutput is what `--runner=dataflow --dry_run` printed.
type dryRunOutput struct {
	job      dataflowJob
	pipeline *pipepb.Pipeline
}

// dataflowJob is the part of the printed Dataflow job the tests look at.
type dataflowJob struct {
	ProjectID string `json:"projectId"`
	Type      string `json:"type"`
}

// dryRunDataflow runs the launcher with --runner=dataflow --dry_run and no
// credentials, and parses the job and pipeline graph it logs.
func dryRunDataflow(t *testing.T, args ...string) dryRunOutput {
	t.Helper()
	gcloudConfig := t.TempDir()
	env := []string{
		// No credentials: a dry run must not need any. The Dataflow runner's
		// soft-delete check on the staging bucket then logs a warning and
		// goes on, without waiting for a metadata server.
		"GOOGLE_APPLICATION_CREDENTIALS=" + filepath.Join(gcloudConfig, "no-credentials.json"),
		"CLOUDSDK_CONFIG=" + gcloudConfig,
	}
	base := []string{
		"--runner=dataflow", "--dry_run",
		"--log_level=info", // the runner prints the job and graph at info
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
	var out dryRunOutput
	for _, msg := range logMessages(r.stdout + "\n" + r.stderr) {
		switch {
		case strings.HasPrefix(msg, "{") && strings.Contains(msg, `"type"`):
			var job dataflowJob
			if err := json.Unmarshal([]byte(msg), &job); err == nil && strings.HasPrefix(job.Type, "JOB_TYPE_") {
				out.job = job
			}
		case strings.HasPrefix(msg, "components:"):
			p := &pipepb.Pipeline{}
			if err := prototext.Unmarshal([]byte(msg), p); err != nil {
				t.Fatalf("the printed pipeline graph does not parse: %v", err)
			}
			out.pipeline = p
		}
	}
	if out.job.Type == "" {
		t.Fatalf("the dry run printed no Dataflow job\nstderr:\n%s", tail(r.stderr, 4000))
	}
	if out.pipeline == nil {
		t.Fatalf("the dry run printed no pipeline graph\nstderr:\n%s", tail(r.stderr, 4000))
	}
	return out
}

// logMessages returns the msg="..." values of Beam's slog text lines.
func logMessages(logs string) []string {
	var msgs []string
	for _, line := range strings.Split(logs, "\n") {
		i := strings.Index(line, " msg=")
		if i < 0 {
			continue
		}
		rest := line[i+len(" msg="):]
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			if s, err := strconv.Unquote(q); err == nil {
				msgs = append(msgs, s)
			}
			continue
		}
		msgs = append(msgs, strings.SplitN(rest, " ", 2)[0])
	}
	return msgs
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
func checkGraph(t *testing.T, p *pipepb.Pipeline) {
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
		grouped := 0
		for _, tr := range p.GetComponents().GetTransforms() {
			if tr.GetSpec().GetUrn() != urnGroupByKey || !strings.HasPrefix(tr.GetUniqueName(), "Ingest/BuildRows/") {
				continue
			}
			grouped++
			for _, id := range tr.GetInputs() {
				if size, urn := windowSize(t, p, id); size != time.Hour {
					t.Errorf("%s groups input %s windowed by %s size %v; want %s size 1h0m0s", tr.GetUniqueName(), id, urn, size, urnFixedWindows)
				}
			}
		}
		if grouped == 0 {
			t.Errorf("no GroupByKey under Ingest/BuildRows")
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
}

func TestLogMessagesUnquotesSlogText(t *testing.T) {
	logs := strings.Join([]string{
		`time=2026-01-01T00:00:00.000Z level=INFO msg="Dry-run: not submitting job!"`,
		`time=2026-01-01T00:00:00.000Z level=INFO msg="components:{a:\"b\\n\"}"`,
		`time=2026-01-01T00:00:00.000Z level=INFO msg=plain`,
		`not a log line`,
	}, "\n")
	got := logMessages(logs)
	want := []string{"Dry-run: not submitting job!", `components:{a:"b\n"}`, "plain"}
	if !slices.Equal(got, want) {
		t.Fatalf("logMessages = %q; want %q", got, want)
	}
}
