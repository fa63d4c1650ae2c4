package dofns

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

func init() {
	dofnreg.DoFn(&RecoverWindowsFn{}, register.Function3x1[context.Context, []byte, func(string, PaneBatch), error])
}

// Recovery turns on the read-back of a local stream's windows from
// Bigtable (see StreamRowsFn and RecoverWindowsFn): the instance to read.
// The zero value is off, as on Dataflow, whose state is durable.
type Recovery struct {
	Project  string
	Instance string
}

// On reports whether the read-back is on.
func (r Recovery) On() bool { return r.Project != "" && r.Instance != "" }

// The read-back's retry policies (the one policy, internal/retry: errors
// retry.Retryable says are transient are retried with backoff, each
// attempt has a timeout, and after the deadline or the last attempt the
// error is returned).
var (
	// windowReadPolicy bounds reading one window: a sensor-hour is a few
	// thousand readings.
	windowReadPolicy = retry.Policy{AttemptTimeout: 30 * time.Second, Deadline: 2 * time.Minute, MaxAttempts: 4}
	// discoverPolicy bounds the scan, once at start-up, of every window
	// within the allowed lateness.
	discoverPolicy = retry.Policy{AttemptTimeout: 5 * time.Minute, Deadline: 10 * time.Minute, MaxAttempts: 3}
)

// readBacker reads a spec's readings back from Bigtable with the pure
// hours.ReadBack, through the registered store (Stores.OpenTables).
type readBacker struct {
	rb     *hours.ReadBack
	reader TableReader
}

// openReadBacker opens a reader for rec; the error wraps
// hours.ErrNoReadBack when no table of spec can be read back.
func openReadBacker(ctx context.Context, spec *hours.Compiled, rec Recovery) (*readBacker, error) {
	rb, err := hours.NewReadBack(spec.Spec)
	if err != nil {
		return nil, err
	}
	if stores.OpenTables == nil {
		return nil, fmt.Errorf("read back %s: %w", rb.Table(), errNoStore)
	}
	tr, err := stores.OpenTables(ctx, rec.Project, rec.Instance)
	if err != nil {
		return nil, err
	}
	return &readBacker{rb: rb, reader: tr}, nil
}

func (r *readBacker) close() error { return r.reader.Close() }

// window reads back the readings of one identity (its IdentityKey) with
// event times in [startMs, endMs). skipped counts readings whose cells
// could not be rebuilt.
func (r *readBacker) window(ctx context.Context, identity string, startMs, endMs int64) (recs []schemas.Record, skipped int, err error) {
	return r.windowWithin(ctx, windowReadPolicy, identity, startMs, endMs)
}

// windowWithin is window under policy.
func (r *readBacker) windowWithin(ctx context.Context, policy retry.Policy, identity string, startMs, endMs int64) (recs []schemas.Record, skipped int, err error) {
	plan, err := r.rb.PlanWindow(identity, startMs, endMs)
	if err != nil {
		return nil, 0, fmt.Errorf("read back %s: %w", r.rb.Table(), err)
	}
	var rows []hours.ReadRow
	err = r.scan(ctx, plan, startMs, endMs, policy, func() { rows = rows[:0] }, func(row hours.ReadRow) {
		rows = append(rows, row)
	})
	if err != nil {
		return nil, 0, err
	}
	recs, skipped = r.rb.Records(rows, identity, startMs, endMs)
	return recs, skipped, nil
}

// discover lists the windows of size that hold readings with event times
// from fromMs on, as StreamRowsFn keys them (identity@start), sorted.
func (r *readBacker) discover(ctx context.Context, fromMs int64, size time.Duration) (keys []string, skipped int, err error) {
	plan, err := r.rb.PlanSince(fromMs, time.Now().Add(365*24*time.Hour).UnixMilli())
	if err != nil {
		return nil, 0, fmt.Errorf("read back %s: %w", r.rb.Table(), err)
	}
	found := map[string]bool{}
	err = r.scan(ctx, plan, fromMs, math.MaxInt64, discoverPolicy, func() { skipped = 0 }, func(row hours.ReadRow) {
		recs, n := r.rb.Records([]hours.ReadRow{row}, "", fromMs, math.MaxInt64)
		skipped += n
		for i := range recs {
			found[stateKey(group.IdentityKey(r.rb.Spec(), &recs[i]), hours.WindowStart(recs[i].EventMs, size))] = true
		}
	})
	if err != nil {
		return nil, 0, err
	}
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, skipped, nil
}

// scan reads the plan's ranges, cells with timestamps in [fromMs, toMs)
// of the readings' families, calling row for each row. It retries as
// policy says, from the start, calling restart before each attempt.
func (r *readBacker) scan(ctx context.Context, plan *rowkey.ScanPlan, fromMs, toMs int64, policy retry.Policy,
	restart func(), row func(hours.ReadRow)) error {
	return r.scanFamilies(ctx, plan, r.rb.Families(), fromMs, toMs, policy, restart, row)
}

// scanFamilies is scan over the given column families.
func (r *readBacker) scanFamilies(ctx context.Context, plan *rowkey.ScanPlan, families []string, fromMs, toMs int64, policy retry.Policy,
	restart func(), row func(hours.ReadRow)) error {
	err := retry.Do(ctx, policy, func(actx context.Context) error {
		restart()
		return r.reader.ReadRows(actx, r.rb.Table(), plan.Ranges, families, fromMs, toMs, row)
	})
	if err != nil {
		return fmt.Errorf("read back %s: %w", r.rb.Table(), err)
	}
	return nil
}

// stateKey is StreamRowsFn's key: the identity and the window's start.
func stateKey(identity string, startMs int64) string {
	return identity + "@" + strconv.FormatInt(startMs, 10)
}

// stateIdentity is the identity of a StreamRowsFn key.
func stateIdentity(key string) string {
	if i := strings.LastIndexByte(key, '@'); i >= 0 {
		return key[:i]
	}
	return key
}

// RecoverWindowsFn finds, once when a local stream starts, every window
// within the allowed lateness that holds readings in Bigtable, and sends
// StreamRowsFn a recovery probe for each (a PaneBatch with Recover set and
// no readings). A local stream keeps its windows in memory, so a killed or
// stopped one loses them; the readings it had acknowledged are in Bigtable,
// written on arrival. StreamRowsFn reads each probed window back at its
// final firing, so windows that no reading of the new run touches are
// finished too (their readings imputed from all of them, rolled up, and
// sent to BigQuery), not left as the early firings wrote them.
//
// A scan that fails after its retries fails the bundle: on prism that stops
// the stream at start-up, with every message not yet acknowledged left to
// the next run.
type RecoverWindowsFn struct {
	Spec            *hours.Compiled
	Recovery        Recovery
	WindowSize      time.Duration
	AllowedLateness time.Duration

	reader         *readBacker
	found, skipped beam.Counter
}

// Setup opens the Bigtable client. A spec with no table to read back
// from has nothing to recover (the launcher says so at start).
func (f *RecoverWindowsFn) Setup(ctx context.Context) error {
	f.found = beam.NewCounter("recover", "windows_found")
	f.skipped = beam.NewCounter("recover", "readings_skipped")
	r, err := openReadBacker(ctx, f.Spec, f.Recovery)
	if errors.Is(err, hours.ErrNoReadBack) {
		return nil
	}
	f.reader = r
	return err
}

// Teardown closes the client.
func (f *RecoverWindowsFn) Teardown() error {
	if f.reader != nil {
		return f.reader.close()
	}
	return nil
}

// ProcessElement scans the windows that have not closed yet (their end
// plus the allowed lateness is ahead of the clock) and emits their probes.
func (f *RecoverWindowsFn) ProcessElement(ctx context.Context, _ []byte, emit func(string, PaneBatch)) error {
	if f.reader == nil {
		return nil
	}
	now := time.Now().UnixMilli()
	size := f.WindowSize
	if size <= 0 {
		size = time.Hour
	}
	from := hours.WindowStart(now-f.AllowedLateness.Milliseconds(), size)
	if hours.TooLate(from, now, size, f.AllowedLateness) {
		from += size.Milliseconds()
	}
	keys, skipped, err := f.reader.discover(ctx, from, size)
	if err != nil {
		return fmt.Errorf("recover windows: %w", err)
	}
	f.found.Inc(ctx, int64(len(keys)))
	if skipped > 0 {
		f.skipped.Inc(ctx, int64(skipped))
		log.Warnf(ctx, "recover: %d readings in %s could not be rebuilt from their cells", skipped, f.reader.rb.Table())
	}
	if len(keys) > 0 {
		log.Infof(ctx, "recover: %d windows since %s hold readings in %s; each is read back at its final firing",
			len(keys), time.UnixMilli(from).UTC().Format(time.RFC3339), f.reader.rb.Table())
	}
	for _, k := range keys {
		start, err := strconv.ParseInt(k[strings.LastIndexByte(k, '@')+1:], 10, 64)
		if err != nil {
			return fmt.Errorf("recover windows: key %q: %w", k, err) // cannot happen: stateKey made it
		}
		emit(k, PaneBatch{StartMs: start, EndMs: start + size.Milliseconds(), Recover: true})
	}
	return nil
}
