package bigtableio

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio/flowcontrol"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/internal/testrig/faultproxy"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

const mutateRows = "/google.bigtable.v2.Bigtable/MutateRows"

// mutateRowsWatch counts what a proxy sees of MutateRows: the mutations in
// flight, their peak, the calls and the app profiles they carried.
type mutateRowsWatch struct {
	inflight, peak, calls atomic.Int64
	mu                    sync.Mutex
	profiles              map[string]int
}

func (w *mutateRowsWatch) before(method string, req []byte) (int64, error) {
	if method != mutateRows {
		return 0, nil
	}
	var r bigtablepb.MutateRowsRequest
	if err := proto.Unmarshal(req, &r); err != nil {
		return 0, err
	}
	n := mutationsIn(method, req)
	w.calls.Add(1)
	w.mu.Lock()
	if w.profiles == nil {
		w.profiles = map[string]int{}
	}
	w.profiles[r.AppProfileId]++
	w.mu.Unlock()
	cur := w.inflight.Add(n)
	for p := w.peak.Load(); cur > p && !w.peak.CompareAndSwap(p, cur); p = w.peak.Load() {
	}
	return n, nil
}

// hooks are a proxy's hooks that keep the watch, calling onCall as each
// MutateRows call goes through.
func (w *mutateRowsWatch) hooks(onCall func()) emulators.ProxyHooks {
	return emulators.ProxyHooks{
		Before: func(method string, req []byte) error {
			n, err := w.before(method, req)
			if err != nil || n == 0 {
				return err
			}
			onCall()
			return nil
		},
		After: func(method string, req []byte) {
			if n := mutationsIn(method, req); n > 0 {
				w.inflight.Add(-n)
			}
		},
	}
}

// mutationsIn counts the mutations of a MutateRows request.
func mutationsIn(method string, req []byte) int64 {
	var r bigtablepb.MutateRowsRequest
	if method != mutateRows || proto.Unmarshal(req, &r) != nil {
		return 0
	}
	var n int64
	for _, e := range r.Entries {
		n += int64(len(e.Mutations))
	}
	return n
}

// wideRows builds n one-reading rows of cells cells each.
func wideRows(n, cells int) []hours.RowMutation {
	var rows []hours.RowMutation
	for i := 0; i < n; i++ {
		rows = append(rows, row(fmt.Sprintf("r-%04d", i), "f", cells, fmt.Sprintf("reading %d", i)))
	}
	return rows
}

// runWriter drives fn over rows as one bundle (Setup, ProcessElement,
// FinishBundle, Teardown) and returns its dead letters.
func runWriter(ctx context.Context, fn *writeFn, rows []hours.RowMutation) ([]deadletter.DeadLetter, error) {
	var dead []deadletter.DeadLetter
	emit := func(d deadletter.DeadLetter) { dead = append(dead, d) }
	if err := fn.Setup(ctx); err != nil {
		return nil, err
	}
	defer fn.Teardown()
	for _, r := range rows {
		if err := fn.ProcessElement(ctx, r, emit); err != nil {
			return dead, err
		}
	}
	return dead, fn.FinishBundle(ctx, emit)
}

func createTable(t *testing.T, ctx context.Context, project string) {
	t.Helper()
	ac, err := bigtable.NewAdminClient(ctx, project, "i")
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if err := ac.CreateTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := ac.CreateColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}
}

func countCells(t *testing.T, ctx context.Context, project string) (rows, cells int) {
	t.Helper()
	c, err := NewClient(ctx, project, "i")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Open("t").ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		rows++
		cells += len(r["f"])
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, cells
}

// TestFlowControlCapsOutstandingMutations writes 200 rows of 1,000 cells
// (ten 20,000-cell batches, up to four in flight) through a proxy that
// counts the mutations of the MutateRows calls in flight, with a cap of
// 30,000 per worker: the proxy never sees more than the cap at once. The
// first call is held at the proxy until the next batch is seen waiting in
// the flow controller, so the cap is shown to hold under pressure. The
// writes carry the sink's app profile.
func TestFlowControlCapsOutstandingMutations(t *testing.T) {
	host := emulators.StartBigtable(t)
	var watch mutateRowsWatch
	held, open := make(chan struct{}), make(chan struct{})
	var first sync.Once
	proxy := emulators.StartProxy(t, host, watch.hooks(func() { first.Do(func() { close(held); <-open }) }))
	t.Setenv("BIGTABLE_EMULATOR_HOST", proxy.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const project, limit = "flow-cap", 30_000
	createTable(t, ctx, project)

	fn := newWriteFn(project, "i")
	fn.MaxInflight = 4
	fn.AppProfile = "backfill"
	fn.Flow = flowcontrol.Settings{MaxMutations: limit}
	type result struct {
		dead []deadletter.DeadLetter
		err  error
	}
	done := make(chan result, 1)
	go func() {
		dead, err := runWriter(ctx, fn, wideRows(200, 1000))
		done <- result{dead, err}
	}()
	<-held
	ctl := flowcontrol.ForWorker(project+"/i/backfill", fn.Flow)
	deadline := time.Now().Add(time.Minute)
	for ctl.Stats().Waiting == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no batch waited for the first one: stats %+v", ctl.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(open)
	res := <-done
	if res.err != nil || len(res.dead) > 0 {
		t.Fatalf("write: err %v, %d dead letters", res.err, len(res.dead))
	}
	if rows, cells := countCells(t, ctx, project); rows != 200 || cells != 200_000 {
		t.Fatalf("table holds %d rows, %d cells; want 200 and 200000", rows, cells)
	}
	s := ctl.Stats()
	t.Logf("proxy: %d MutateRows calls, peak %d mutations in flight; controller %+v", watch.calls.Load(), watch.peak.Load(), s)
	if p := watch.peak.Load(); p > limit || p == 0 {
		t.Errorf("peak mutations in flight at the proxy = %d, want 1..%d", p, limit)
	}
	if s.PeakMutations > limit || s.Throttled == 0 {
		t.Errorf("controller stats %+v: want a peak <= %d and throttled requests", s, limit)
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.profiles) != 1 || watch.profiles["backfill"] == 0 {
		t.Errorf("MutateRows app profiles = %v, want every call on \"backfill\"", watch.profiles)
	}
}

// TestWorkerBoundsCellsInFlightAcrossInstances runs four writers side by
// side, as a runner runs bundles of one stage, each with up to four
// batches of 2,000 cells in flight, through a proxy that slows every
// MutateRows call and counts the mutations in flight: together they never
// have more than the worker's budget (4 x 2,000 cells) at the proxy,
// against up to 32,000 bounded per instance, and every row lands.
func TestWorkerBoundsCellsInFlightAcrossInstances(t *testing.T) {
	host := emulators.StartBigtable(t)
	var watch mutateRowsWatch
	proxy := emulators.StartProxy(t, host, watch.hooks(func() { time.Sleep(20 * time.Millisecond) }))
	t.Setenv("BIGTABLE_EMULATOR_HOST", proxy.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const project, writers, batch = "worker-budget", 4, 2_000
	createTable(t, ctx, project)

	rows := wideRows(writers*40, 1000)
	errs := make(chan error, writers)
	for w := range writers {
		fn := newWriteFn(project, "i")
		fn.MaxInflight, fn.BatchCells, fn.WorkerBudget = 4, batch, true
		go func() {
			dead, err := runWriter(ctx, fn, rows[w*40:(w+1)*40])
			if err == nil && len(dead) > 0 {
				err = fmt.Errorf("%d dead letters", len(dead))
			}
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if n, cells := countCells(t, ctx, project); n != len(rows) || cells != len(rows)*1000 {
		t.Fatalf("table holds %d rows, %d cells; want %d and %d", n, cells, len(rows), len(rows)*1000)
	}
	t.Logf("proxy: %d MutateRows calls, peak %d mutations in flight", watch.calls.Load(), watch.peak.Load())
	if p := watch.peak.Load(); p > 4*batch || p <= batch {
		t.Errorf("peak mutations in flight at the proxy = %d; want more than one batch (%d) and at most the worker's budget %d", p, batch, 4*batch)
	}
}

// TestFlowControlBacksOffOnResourceExhausted fails the first three
// MutateRows calls with RESOURCE_EXHAUSTED at the fault proxy
// (internal/testrig/faultproxy) in front of the emulator: the flow controller
// counts the push-backs, cuts the worker's mutation limit (x0.7) and
// pauses the writes; the sink retries and every row lands, with no dead
// letter.
func TestFlowControlBacksOffOnResourceExhausted(t *testing.T) {
	host := emulators.StartBigtable(t)
	proxy, err := faultproxy.Start(host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.SetRules(faultproxy.Rule{Method: "/MutateRows", Share: 1, Limit: 3, When: faultproxy.Before, Code: codes.ResourceExhausted})
	t.Setenv("BIGTABLE_EMULATOR_HOST", proxy.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const project = "flow-pushback"
	createTable(t, ctx, project)

	fn := newWriteFn(project, "i")
	fn.Retry = retry.Settings{Initial: 10 * time.Millisecond}
	fn.Flow = flowcontrol.Settings{MaxMutations: 100_000}
	dead, err := runWriter(ctx, fn, wideRows(50, 10))
	if err != nil || len(dead) > 0 {
		t.Fatalf("write: err %v, dead letters %v", err, dead)
	}
	if rows, cells := countCells(t, ctx, project); rows != 50 || cells != 500 {
		t.Fatalf("table holds %d rows, %d cells; want 50 and 500", rows, cells)
	}
	s := flowcontrol.ForWorker(project+"/i/", fn.Flow).Stats()
	st := proxy.Stats()
	calls, faults := faultproxy.Total(st.Calls, "/MutateRows"), faultproxy.Total(st.Faults, "/MutateRows")
	t.Logf("%d MutateRows calls, %d failed; controller %+v", calls, faults, s)
	if calls != 4 || faults != 3 {
		t.Errorf("MutateRows calls = %d with %d faults, want 4 and 3 (three pushed back, one landed)", calls, faults)
	}
	if s.PushBacks != 3 || s.Cuts < 1 || s.Limit != 70_000 || s.PausedUntil.IsZero() {
		t.Errorf("controller %+v: want 3 push-backs, the limit cut once to 70000 (within one period), a pause", s)
	}
}

func TestFlowSignal(t *testing.T) {
	re := status.Error(codes.ResourceExhausted, "quota")
	de := status.Error(codes.DeadlineExceeded, "slow")
	un := status.Error(codes.Unavailable, "gone")
	tests := []struct {
		name string
		errs []error
		err  error
		want flowcontrol.Signal
	}{
		{"ok", nil, nil, flowcontrol.OK},
		{"call exhausted", nil, re, flowcontrol.Overloaded},
		{"one entry exhausted", []error{nil, re}, nil, flowcontrol.Overloaded},
		{"deadline", []error{de}, nil, flowcontrol.Slow},
		{"exhausted beats deadline", []error{de, re}, nil, flowcontrol.Overloaded},
		{"unavailable is not load", []error{un}, nil, flowcontrol.OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := flowSignal(tc.errs, tc.err); got != tc.want {
				t.Errorf("flowSignal = %v, want %v", got, tc.want)
			}
		})
	}
}
