package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	// Every runner --runner may name (dataflow, direct, ...), registered
	// as beamx.Run has them.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
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
}

// runPipeline runs p on the configured runner. On prism it serves its own
// job service, so that while the job runs it can poll the runner's counters
// (progress is called with them every interval, when interval > 0) and, when
// ctx is cancelled (Ctrl-C), cancel the job and still read them. Other
// runners report their counters when the job ends (Dataflow: the job's
// counters).
func runPipeline(ctx context.Context, p *beam.Pipeline, interval time.Duration, progress func(ledger.Counters)) jobRun {
	if runnerName() != "prism" {
		pr, err := beam.Run(context.WithoutCancel(ctx), runnerName(), p)
		if ctx.Err() != nil {
			return jobRun{Stopped: true, Counters: resultCounters(pr)}
		}
		return jobRun{Err: err, Counters: resultCounters(pr)}
	}
	client, err := startPrism(ctx)
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
	done := make(chan error, 1)
	go func() {
		// Not ctx: a stop cancels the job through its job service, and the
		// run ends when the job has.
		_, err := beam.Run(context.WithoutCancel(ctx), "prism", p)
		done <- err
	}()
	var (
		jobID string
		last  ledger.Counters
	)
	// One job at a time: the parts of a local batch run one after another
	// on the same job service, and the next part's job is the one not run.
	defer func() {
		if jobID != "" {
			ranJobs[jobID] = true
		}
	}()
	poll := func() {
		if jobID == "" {
			jobID = findJob(ctx, client)
		}
		if jobID != "" {
			if c, err := jobCounters(client, jobID); err == nil {
				last = c
			}
		}
	}
	tick := time.NewTicker(max(interval, 500*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			poll()
			return jobRun{Err: err, Counters: last}
		case <-tick.C:
			poll()
			if interval > 0 && last != nil {
				progress(last)
			}
		case <-ctx.Done():
			poll()
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
			poll()
			return jobRun{Stopped: true, Counters: last}
		}
	}
}

// prismJobs is the job service startPrism started (nil before), and
// ranJobs the ids of the jobs that have run on it.
var (
	prismJobs jobpb.JobServiceClient
	ranJobs   = map[string]bool{}
)

// startPrism starts prism's job service in this process on a free port and
// points the Beam options at it, as prism.Execute does when no endpoint is
// given, and returns a client of it; later calls return the same one.
func startPrism(ctx context.Context) (jobpb.JobServiceClient, error) {
	if prismJobs != nil {
		return prismJobs, nil
	}
	if *jobopts.Endpoint != "" {
		return nil, fmt.Errorf("--endpoint=%s: the launcher runs prism's job service itself; leave --endpoint unset", *jobopts.Endpoint)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("prism: find a free port: %w", err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client, err := prism.CreateJobServer(cctx, prism.Options{Port: port})
	if err != nil {
		return nil, fmt.Errorf("prism: start its job service on port %d: %w", port, err)
	}
	*jobopts.Endpoint = fmt.Sprintf("localhost:%d", port)
	if *jobopts.EnvironmentType == "" {
		*jobopts.EnvironmentType = "loopback"
	}
	prismJobs = client
	return client, nil
}

// findJob returns the id of the job prism runs (the one not run before),
// or "".
func findJob(ctx context.Context, client jobpb.JobServiceClient) string {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	resp, err := client.GetJobs(cctx, &jobpb.GetJobsRequest{})
	if err != nil {
		return ""
	}
	for _, j := range resp.GetJobInfo() {
		if !ranJobs[j.GetJobId()] {
			return j.GetJobId()
		}
	}
	return ""
}

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

// jobFailure is a failed job: its message is the runner's first line and
// cause (the runner's full message holds the whole plan and stack, which
// the runner has already logged), and it wraps the runner's error.
type jobFailure struct {
	short string
	err   error
}

func (e *jobFailure) Error() string { return e.short }
func (e *jobFailure) Unwrap() error { return e.err }

// jobError wraps a failed job's error for a one-line report.
func jobError(err error) error {
	msg := err.Error()
	if i := strings.Index(msg, "caused by:"); i >= 0 {
		cause := strings.TrimSpace(msg[i+len("caused by:"):])
		if j := strings.IndexAny(cause, "\n\t"); j >= 0 {
			cause = cause[:j]
		}
		first := msg
		if j := strings.Index(first, "\n"); j >= 0 {
			first = first[:j]
		}
		msg = strings.TrimSpace(first) + ": " + cause
	}
	if len(msg) > 600 {
		msg = msg[:600] + "…"
	}
	return &jobFailure{short: "job failed: " + msg + " (the runner's log has the details; --log_level=info shows more)", err: err}
}
