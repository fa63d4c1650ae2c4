package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/sensorpipe/sensorpipe/pipelines"
)

// Transform URNs the dry-run summary looks for.
const (
	urnWindowInto     = "beam:transform:window_into:v1"
	urnFixedWindowsFn = "beam:window_fn:fixed_windows:v1"
	urnGlobalWindowFn = "beam:window_fn:global_windows:v1"
)

// dryRunJobPipeline is the member of the --dry_run_out file that holds the
// Beam pipeline graph (the model the job's pipelineUrl would point at once
// staged), beside the Dataflow job's own members.
const dryRunJobPipeline = "beamPipeline"

// dryRunCapture is the Beam logger while the Dataflow runner does a dry
// run. The runner has no API for a dry run's result: it logs the pipeline
// graph (prototext) and the job (JSON), tens of kilobytes of log lines.
// The capture keeps those two for the summary and the --dry_run_out file,
// drops the runner's credential warnings (see credentialNoise), and passes
// every other message on to Beam's default logger.
type dryRunCapture struct {
	mu       sync.Mutex
	pipeline string
	job      string
	next     beamlog.Logger
}

// credentialNoise are the warnings of the Dataflow runner's check of the
// staging and temp buckets' soft-delete policy (dataflow.getJobOptions
// calls checkSoftDeletePolicyEnabled before it looks at --dry_run): the
// check opens a Cloud Storage client, which needs credentials. A dry run
// reads no bucket and needs none, so the warnings say nothing about it.
var credentialNoise = []string{"Error creating GCS client", "Error checking SoftDeletePolicy"}

func (c *dryRunCapture) Log(ctx context.Context, sev beamlog.Severity, calldepth int, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	trimmed := strings.TrimSpace(msg)
	switch {
	case strings.HasPrefix(trimmed, "components:"):
		c.pipeline = trimmed
		return
	case strings.HasPrefix(trimmed, "{") && strings.Contains(trimmed, `"JOB_TYPE_`):
		c.job = trimmed
		return
	case strings.HasPrefix(trimmed, "Dry-run: not submitting job"):
		return
	}
	for _, n := range credentialNoise {
		if strings.HasPrefix(trimmed, n) {
			return
		}
	}
	c.next.Log(ctx, sev, calldepth+1, msg)
}

// runDryRun builds the Dataflow job for p without submitting it (the
// runner's --dry_run), prints a short summary of it to w, and writes the
// full job, with its pipeline graph, to --dry_run_out when given.
func runDryRun(ctx context.Context, w io.Writer, p *beam.Pipeline, cfg pipelines.Config, pl plan) error {
	capture := &dryRunCapture{next: &beamlog.Structural{}}
	beamlog.SetLogger(capture)
	_, err := beam.Run(ctx, pl.runner.name, p)
	beamlog.SetLogger(&beamlog.Structural{}) // Beam's default
	if err != nil {
		return jobError(err)
	}
	if capture.job == "" || capture.pipeline == "" {
		return errors.New("dry run: the Dataflow runner printed no job or no pipeline graph (is --dry_run set and the runner dataflow?)")
	}
	graph := &pipepb.Pipeline{}
	if err := prototext.Unmarshal([]byte(capture.pipeline), graph); err != nil {
		return fmt.Errorf("dry run: the runner's pipeline graph does not parse: %w", err)
	}
	var job dryRunJob
	if err := json.Unmarshal([]byte(capture.job), &job); err != nil {
		return fmt.Errorf("dry run: the runner's job does not parse: %w", err)
	}
	if pl.dryRunOut != "" {
		if err := writeDryRunJob(pl.dryRunOut, capture.job, graph); err != nil {
			return err
		}
	}
	writeDryRunSummary(w, cfg, pl, job, graph)
	return nil
}

// dryRunJob is the part of the Dataflow job the summary shows.
type dryRunJob struct {
	ProjectID   string `json:"projectId"`
	Name        string `json:"name"`
	Type        string `json:"type"`
	Environment struct {
		SdkPipelineOptions struct {
			Options struct {
				Region string `json:"region"`
			} `json:"options"`
		} `json:"sdkPipelineOptions"`
	} `json:"environment"`
}

// writeDryRunJob writes the Dataflow job JSON, as the runner would submit
// it, with the pipeline graph added under dryRunJobPipeline (protojson).
func writeDryRunJob(path, jobJSON string, graph *pipepb.Pipeline) error {
	var job map[string]json.RawMessage
	if err := json.Unmarshal([]byte(jobJSON), &job); err != nil {
		return fmt.Errorf("dry run: the runner's job does not parse: %w", err)
	}
	g, err := protojson.Marshal(graph)
	if err != nil {
		return fmt.Errorf("dry run: encode the pipeline graph: %w", err)
	}
	job[dryRunJobPipeline] = g
	b, err := json.MarshalIndent(job, "", "  ")
	if err != nil {
		return fmt.Errorf("dry run: encode the job: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--dry_run_out: %w", err)
	}
	return nil
}

// writeDryRunSummary prints what the job would do: its type, source,
// windowing, sinks and transforms, in a few lines.
func writeDryRunSummary(w io.Writer, cfg pipelines.Config, pl plan, job dryRunJob, graph *pipepb.Pipeline) {
	out := pl.dryRunOut
	kind := strings.ToLower(strings.TrimPrefix(job.Type, "JOB_TYPE_"))
	fmt.Fprintf(w, "sensorpipe: Dataflow dry run: nothing submitted, no credentials used\n")
	where := "project " + job.ProjectID
	if r := job.Environment.SdkPipelineOptions.Options.Region; r != "" {
		where += ", region " + r
	}
	if job.Name != "" {
		where += ", name " + job.Name
	}
	fmt.Fprintf(w, "  job:        %s (%s), %s\n", kind, job.Type, where)
	fmt.Fprintf(w, "  spec:       %s\n", cfg.Spec.Name)
	if pl.streaming {
		src := "Pub/Sub " + pl.stream.Source.Subscription.String()
		if a := pl.stream.Source.TimestampAttribute; a != "" {
			src += ", event time from attribute " + a
		}
		fmt.Fprintf(w, "  source:     %s\n", src)
	} else if rc := pl.batch.FromBigtable; rc != nil {
		fmt.Fprintf(w, "  source:     bigtable %s (spec %s)\n", bigtableio.Source(rc.Project, rc.Instance, rc.Spec.Bigtable.Tables[0].Name), rc.Spec.Name)
	} else if bq := pl.batch.FromBigQuery; bq != nil {
		fmt.Fprintf(w, "  source:     bigquery %s:%s.%s (Storage Read API)\n", bq.Project, bq.Dataset, bq.Table)
	} else {
		fmt.Fprintf(w, "  source:     files %s\n", pl.batch.Input)
	}
	for i, line := range windowingLines(graph) {
		head := "  windowing:  "
		if i > 0 {
			head = "              "
		}
		fmt.Fprintln(w, head+line)
	}
	for i, line := range sinkLines(cfg, graph) {
		head := "  sinks:      "
		if i > 0 {
			head = "              "
		}
		fmt.Fprintln(w, head+line)
	}
	names := transformTree(graph, 2)
	fmt.Fprintf(w, "  transforms: %d steps in all; the top two levels, as Dataflow names them:\n", len(graph.GetComponents().GetTransforms()))
	for _, n := range names {
		fmt.Fprintf(w, "    %s%s\n", strings.Repeat("  ", strings.Count(n, "/")), n)
	}
	if out != "" {
		fmt.Fprintf(w, "  full job:   %s (the Dataflow job; its Beam pipeline graph under %q)\n", out, dryRunJobPipeline)
	} else {
		fmt.Fprintf(w, "  full job:   not written: give --dry_run_out=FILE for the Dataflow job JSON and its pipeline graph\n")
	}
}

// transformTree returns the unique names of the composites and transforms
// at most depth levels down, in graph order (parents before children).
func transformTree(p *pipepb.Pipeline, depth int) []string {
	ts := p.GetComponents().GetTransforms()
	var out []string
	var walk func(ids []string, level int)
	walk = func(ids []string, level int) {
		for _, id := range ids {
			t := ts[id]
			if t == nil {
				continue
			}
			out = append(out, t.GetUniqueName())
			if level < depth {
				walk(t.GetSubtransforms(), level+1)
			}
		}
	}
	walk(p.GetRootTransformIds(), 1)
	return out
}

// windowingLines describes each WindowInto of the graph: where, the window
// function, and the trigger, lateness and accumulation of its output.
func windowingLines(p *pipepb.Pipeline) []string {
	c := p.GetComponents()
	var lines []string
	for _, t := range c.GetTransforms() {
		if t.GetSpec().GetUrn() != urnWindowInto {
			continue
		}
		for _, out := range t.GetOutputs() {
			ws := c.GetWindowingStrategies()[c.GetPcollections()[out].GetWindowingStrategyId()]
			if ws == nil {
				continue
			}
			line := strings.TrimSuffix(t.GetUniqueName(), "/WindowInto") + ": " + windowFnText(ws.GetWindowFn())
			if trig := triggerText(ws.GetTrigger()); trig != "" {
				line += "; fires " + trig
			}
			if l := ws.GetAllowedLateness(); l > 0 {
				line += fmt.Sprintf("; allowed lateness %v", time.Duration(l)*time.Millisecond)
			}
			if ws.GetAccumulationMode() == pipepb.AccumulationMode_ACCUMULATING {
				line += "; accumulating panes"
			}
			lines = append(lines, line)
		}
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		lines = []string{"none (one global window)"}
	}
	return lines
}

func windowFnText(fn *pipepb.FunctionSpec) string {
	switch fn.GetUrn() {
	case urnFixedWindowsFn:
		var fw pipepb.FixedWindowsPayload
		if err := proto.Unmarshal(fn.GetPayload(), &fw); err == nil {
			return fmt.Sprintf("fixed %v event-time windows", fw.GetSize().AsDuration())
		}
	case urnGlobalWindowFn:
		return "the global window"
	}
	return fn.GetUrn()
}

// triggerText renders a trigger in words, "" for the default one.
func triggerText(t *pipepb.Trigger) string {
	switch {
	case t == nil, t.GetDefault() != nil:
		return ""
	case t.GetAfterEndOfWindow() != nil:
		e := t.GetAfterEndOfWindow()
		s := "at the watermark"
		if early := triggerText(e.GetEarlyFirings()); early != "" {
			s = "early " + early + ", " + s
		}
		if late := triggerText(e.GetLateFirings()); late != "" {
			s += ", late " + late
		}
		return s
	case t.GetRepeat() != nil:
		return "repeatedly " + triggerText(t.GetRepeat().GetSubtrigger())
	case t.GetAfterProcessingTime() != nil:
		var delay time.Duration
		for _, tt := range t.GetAfterProcessingTime().GetTimestampTransforms() {
			if d := tt.GetDelay(); d != nil {
				delay += time.Duration(d.GetDelayMillis()) * time.Millisecond
			}
		}
		return fmt.Sprintf("%v after the first element (processing time)", delay)
	case t.GetElementCount() != nil:
		return fmt.Sprintf("after %d elements", t.GetElementCount().GetElementCount())
	case t.GetAlways() != nil:
		return "on every element"
	case t.GetNever() != nil:
		return "never"
	}
	// AfterAll, AfterAny, AfterEach, OrFinally, ...: their kind.
	return strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", t.GetTrigger()), "*pipeline_v1.Trigger_"), "_")
}

// sinkLines names where the job writes: each store, its tables, and the
// write transforms of the graph that feed it.
func sinkLines(cfg pipelines.Config, p *pipepb.Pipeline) []string {
	steps := func(suffix string) string {
		var names []string
		for _, t := range p.GetComponents().GetTransforms() {
			if n := t.GetUniqueName(); strings.HasSuffix(n, suffix) && !strings.Contains(strings.TrimSuffix(n, suffix), suffix) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		if len(names) == 0 {
			return ""
		}
		return " (" + strings.Join(names, ", ") + ")"
	}
	var tables []string
	for _, t := range cfg.Spec.Bigtable.Tables {
		tables = append(tables, t.Name)
	}
	lines := []string{fmt.Sprintf("Bigtable %s/%s: %s%s", cfg.Bigtable.Project, cfg.Bigtable.Instance, strings.Join(tables, ", "), steps("bigtable.Write"))}
	if bq := cfg.BigQuery; bq != nil {
		what := bq.Table
		if cfg.Spec.Rollup != nil {
			what += " and the hourly rollups"
		}
		lines = append(lines, fmt.Sprintf("BigQuery %s.%s: %s, %s%s", bq.Project, bq.Dataset, what, bq.WriteMethod, steps("bigquery.Write")))
	}
	return append(lines, fmt.Sprintf("dead letter %s%s", cfg.DeadLetter, steps("deadletter.Write")))
}
