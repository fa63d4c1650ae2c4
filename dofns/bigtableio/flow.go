package bigtableio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio/flowcontrol"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// applyBulk is one attempt of writeFn's ApplyBulk under the
// worker's flow controller (dofns/bigtableio/flowcontrol): it waits until the
// entries' mutations and bytes fit under the worker's caps and no
// push-back pause runs, then applies them under the attempt's context (so
// the wait does not eat the attempt's timeout), and reports the call's
// latency and whether Bigtable pushed back (RESOURCE_EXHAUSTED) or ran out
// of time (DEADLINE_EXCEEDED).
func (f *writeFn) applyBulk(ctx context.Context, bo *retry.Backoff, t *bigtable.Table, keys []string, muts []*bigtable.Mutation, entries []entry) ([]error, error) {
	var n, b int64
	for i, e := range entries {
		n += int64(e.cells)
		b += int64(e.bytes + len(keys[i]))
	}
	release, err := f.flow.Acquire(ctx, n, b)
	if err != nil {
		return nil, fmt.Errorf("bigtable flow control: %w", err)
	}
	actx, cancel := bo.AttemptContext(ctx)
	defer cancel()
	start := time.Now()
	errs, err := t.ApplyBulk(actx, keys, muts)
	if err == nil {
		// Bigtable answered (entries it refused have their own errors).
		bo.Answered()
	}
	release(time.Since(start), flowSignal(errs, err))
	return errs, err
}

// flowSignal classifies an ApplyBulk outcome for the flow controller: any
// RESOURCE_EXHAUSTED (for the call or an entry) is push-back, any
// DEADLINE_EXCEEDED a slow call.
func flowSignal(errs []error, err error) flowcontrol.Signal {
	sig := flowcontrol.OK
	for _, e := range append([]error{err}, errs...) {
		if e == nil {
			continue
		}
		switch {
		case status.Code(e) == codes.ResourceExhausted:
			return flowcontrol.Overloaded
		case status.Code(e) == codes.DeadlineExceeded, errors.Is(e, context.DeadlineExceeded):
			sig = flowcontrol.Slow
		}
	}
	return sig
}

// cellBytes approximates a cell's share of a MutateRows request.
func cellBytes(c hours.Cell) int {
	return len(c.Family) + len(c.Qualifier) + len(c.Value) + 16
}
