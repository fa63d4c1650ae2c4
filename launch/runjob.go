package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	// Every runner --runner may name (dataflow, direct, ...), registered
	// as beamx.Run has them.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/localprism"
	"github.com/sensorpipe/sensorpipe/internal/loopback"
)

// jobRun is a pipeline run and the runner's account of it.
type jobRun struct {
	// Counters are the runner's counters at the end (or at the stop).
	Counters ledger.Counters
	// Err is the job's failure, if it failed.
	Err error
	// Stopped is set when the run was interrupted (a stream's normal end).
	Stopped bool
	// CountsFrom says where the ledger's counts come from: the run's
	// durable record or the runner's metrics (ledger.Ledger.CountsFrom).
	CountsFrom string
}

// jobRunner runs a launch's jobs (a local batch's parts, one after another)
// on its runner: on a job server, through one client of its job service.
// Beam reads a job's runner options from its own flag variables (jobopts):
// the job name, prism's endpoint and its LOOPBACK default are set there.
type jobRunner struct {
	runner runner
	// client is the client of the job service the runs submit to (nil
	// before the first), and ran the ids of the jobs that have run on it.
	client jobpb.JobServiceClient
	ran    map[string]bool
}

// run runs p on the runner. On a Beam job server
// (prism's, which it starts in this process when no --endpoint is given,
// or any other at --endpoint) it polls the job's counters from the job
// service while the job runs (progress is called with them every
// interval, when interval > 0; watch, when set, with every poll) and,
// when ctx is cancelled (Ctrl-C),
// cancels the job and still reads them. Other runners report their
// counters when the job ends (Dataflow: the job's counters).
func (j *jobRunner) run(ctx context.Context, p *beam.Pipeline, interval time.Duration, progress, watch func(ledger.Counters)) jobRun {
	if !j.runner.jobServer() {
		pr, err := beam.Run(context.WithoutCancel(ctx), j.runner.name, p)
		if ctx.Err() != nil {
			return jobRun{Stopped: true, Counters: resultCounters(pr)}
		}
		return jobRun{Err: err, Counters: resultCounters(pr)}
	}
	client, err := j.jobService(ctx)
	if err != nil {
		return jobRun{Err: err}
	}
	// The run's loopback placeholder goes in a temp folder of its own,
	// removed when the run ends (internal/loopback).
	restore, err := loopback.Private()
	if err != nil {
		return jobRun{Err: err}
	}
	defer restore()
	// The job is found on its job service by its name: a job server may
	// run other jobs too.
	name := *jobopts.JobName
	if name == "" {
		*jobopts.JobName = fmt.Sprintf("sensorpipe-%d-%d", os.Getpid(), time.Now().UnixNano())
		defer func() { *jobopts.JobName = "" }()
	}
	name = *jobopts.JobName
	done := make(chan jobResult, 1)
	go func() {
		// Not ctx: a stop cancels the job through its job service, and the
		// run ends when the job has.
		pr, err := beam.Run(context.WithoutCancel(ctx), j.runner.name, p)
		done <- jobResult{pr, err}
	}()
	var (
		jobID string
		last  ledger.Counters
	)
	// The parts of a local batch run one after another on the same job
	// service, under the same --job_name if one is given: the next part's
	// job is the one not run.
	defer func() {
		if jobID != "" {
			j.ran[jobID] = true
		}
	}()
	poll := func() error {
		if jobID == "" {
			jobID = findJob(ctx, client, name, j.ran)
		}
		if jobID == "" {
			return errors.New("the job is not on its job service")
		}
		c, err := jobCounters(client, jobID)
		if err == nil {
			last = c
		}
		return err
	}
	// The counters a job ends with are its ledger: a failed read of them
	// is tried again, and a ledger that is an earlier read says so.
	settle := func() {
		deadline := time.Now().Add(finalCountersWait)
		err := poll()
		for err != nil && jobID != "" && time.Now().Before(deadline) {
			time.Sleep(time.Second)
			err = poll()
		}
		if err != nil && last != nil {
			fmt.Fprintf(os.Stderr, "sensorpipe: the job's final counters cannot be read (%v); the ledger is their last read, from before the job ended\n", err)
		}
	}
	tick := time.NewTicker(max(interval, 500*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			settle()
			if last == nil {
				last = resultCounters(r.pr)
			}
			return jobRun{Err: r.err, Counters: last}
		case <-tick.C:
			_ = poll() // a read that fails leaves the last one
			if interval > 0 && last != nil {
				progress(last)
			}
			if watch != nil && last != nil {
				watch(last)
			}
		case <-ctx.Done():
			_ = poll() // the job's id, and its counters so far
			if jobID != "" {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, _ = client.Cancel(cctx, &jobpb.CancelJobRequest{JobId: jobID})
				cancel()
			}
			// Bundles in flight end uncommitted; wait a little for the
			// job to settle, then read what it committed.
			select {
			case <-done:
			case <-time.After(15 * time.Second):
			}
			settle()
			return jobRun{Stopped: true, Counters: last}
		}
	}
}

// jobResult is what beam.Run returned.
type jobResult struct {
	pr  beam.PipelineResult
	err error
}

// jobService returns a client of the job service: prism's, started in this
// process on a free port (as prism.Execute does when no --endpoint is
// given), or the one at --endpoint. On prism the environment defaults to
// LOOPBACK, as prism.Execute has it. Later calls return the same client.
func (j *jobRunner) jobService(ctx context.Context) (jobpb.JobServiceClient, error) {
	if j.client != nil {
		return j.client, nil
	}
	if j.ran == nil {
		j.ran = map[string]bool{}
	}
	if j.runner.prism() && *jobopts.EnvironmentType == "" {
		*jobopts.EnvironmentType = "loopback"
	}
	if j.runner.endpoint == "" {
		if !j.runner.prism() {
			return nil, usagef("--runner=%s submits to a Beam job server: give its --endpoint=HOST:PORT", j.runner.name)
		}
		c, err := localprism.Start(ctx)
		if err != nil {
			return nil, err
		}
		j.client = c
		return j.client, nil
	}
	conn, err := grpc.NewClient(j.runner.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("--endpoint=%s: %w", j.runner.endpoint, err)
	}
	j.client = jobpb.NewJobServiceClient(conn)
	return j.client, nil
}

// findJob returns the id of the job named name that has not run before
// (is not in ran), or "".
func findJob(ctx context.Context, client jobpb.JobServiceClient, name string, ran map[string]bool) string {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	resp, err := client.GetJobs(cctx, &jobpb.GetJobsRequest{})
	if err != nil {
		return ""
	}
	for _, j := range resp.GetJobInfo() {
		if j.GetJobName() == name && !ran[j.GetJobId()] {
			return j.GetJobId()
		}
	}
	return ""
}

// finalCountersWait bounds the reads of a job's counters once it has
// ended (a read that times out after 5 s is tried again).
const finalCountersWait = 30 * time.Second

// jobCounters reads a job's counters from its job service.
func jobCounters(client jobpb.JobServiceClient, jobID string) (ledger.Counters, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := client.GetJobMetrics(ctx, &jobpb.GetJobMetricsRequest{JobId: jobID})
	if err != nil {
		return nil, fmt.Errorf("get job metrics: %w", err)
	}
	m := resp.GetMetrics()
	return ledger.FromMetrics(metricsx.FromMonitoringInfos(nil, m.GetAttempted(), m.GetCommitted())), nil
}

// resultCounters are a pipeline result's counters (none without one).
func resultCounters(pr beam.PipelineResult) ledger.Counters {
	if pr == nil {
		return nil
	}
	defer func() { _ = recover() }() // a result without metrics
	r := pr.Metrics()
	return ledger.FromMetrics(&r)
}

// jobFailure is a failed job: its message is one line, the runner's first
// line and the cause (the runner's full message holds the whole plan and
// stack), and it wraps the runner's error.
type jobFailure struct {
	short string
	err   error
}

func (e *jobFailure) Error() string { return e.short }
func (e *jobFailure) Unwrap() error { return e.err }

// jobError wraps a failed job's error for a one-line report: the message's
// first line and its cause, the lines after its last "caused by:" (Beam's
// errors chain their causes so, innermost last), else its last line (a job
// server's message: "job ID failed:" and the error it reported). Each is
// cut to a few hundred bytes, so that the cause is always in the line.
func jobError(err error) error {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return &jobFailure{short: "job failed", err: err}
	}
	first, cause := lines[0], ""
	for i := len(lines) - 1; i >= 0 && cause == ""; i-- {
		if j := strings.LastIndex(lines[i], "caused by:"); j >= 0 {
			// The cause runs to the end: a failed DoFn's name on one
			// line, its error on the next.
			cause = strings.TrimSpace(strings.Join(append([]string{lines[i][j+len("caused by:"):]}, lines[i+1:]...), " "))
			if j > 0 && i == 0 {
				first = strings.TrimSpace(lines[0][:j])
			}
		}
	}
	if cause == "" && len(lines) > 1 {
		cause = lines[len(lines)-1]
	}
	msg := cut(strings.TrimSuffix(first, ":"), 300)
	if cause != "" && cause != first {
		msg += ": " + cut(cause, 500)
	}
	if !strings.HasPrefix(msg, "job ") {
		msg = "job failed: " + msg
	}
	return &jobFailure{short: msg, err: err}
}

// cut shortens s to at most n bytes, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
