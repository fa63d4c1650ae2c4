package bigtableio

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

func init() {
	dofnreg.DoFn(&sampleFn{}, register.Function3x1[context.Context, []byte, func([]byte), error])
	dofnreg.DoFn(&readRowsFn{}, register.Function5x1[context.Context, *sdf.LockRTracker, []byte, func(string, []string), func(deadletter.DeadLetter), error])
	register.Function3x0(eachLine)
	register.Emitter1[[]byte]()
	register.Emitter2[string, string]()
	register.Emitter2[string, []string]()
}

// ReadConfig is what Read reads: a table written under a spec, whose
// readings it rebuilds. Project, Instance and Spec are required.
type ReadConfig struct {
	Project  string
	Instance string
	// Spec is the spec the table was written under; it must be one
	// hours.NewReadBack can read back.
	Spec *hours.Compiled
	// FromMs and ToMs bound the readings' event times to [FromMs, ToMs)
	// (0: no bound).
	FromMs, ToMs int64
	// Keys limits the read to the rows whose keys it holds (a local
	// run's part); the zero KeyRange is the whole table.
	Keys KeyRange
}

// readPolicy bounds reading one key range: each attempt resumes after the
// last row read, so a transient failure costs the row in flight.
var readPolicy = retry.Policy{AttemptTimeout: 30 * time.Minute, Deadline: 2 * time.Hour, MaxAttempts: 6}

// samplePolicy bounds the SampleRowKeys call that splits the read.
var samplePolicy = retry.Policy{AttemptTimeout: time.Minute, Deadline: 5 * time.Minute, MaxAttempts: 5}

// Source is the source the lines of a read name: the table's place.
func Source(project, instance, table string) string {
	return "bigtable://" + project + "/" + instance + "/" + table
}

// Read reads every reading stored in the table of cfg.Spec that
// hours.ReadBack reads back, as KV<source, line>: each reading's observed
// values as a JSON object (Spec.CanonicalJSON), which the spec's JSON
// parser reads as it read the reading first. Imputed values and rollup
// cells are not readings: they are left out, for the new spec's hours to
// rebuild. A reading whose cells cannot be rebuilt is a malformed dead
// letter (sink parse) naming its row.
//
// The read is a splittable DoFn whose restriction is a range of row keys:
// the scan plan's ranges, split at the keys Bigtable's SampleRowKeys gives
// (about one per tablet), and split again while it runs when the runner
// asks, so that the read runs on many workers. A worker holds one row at a
// time.
func Read(s beam.Scope, cfg ReadConfig) (lines, dead beam.PCollection, err error) {
	s = s.Scope("bigtable.Read")
	rows, dead, err := readRows(s, cfg)
	if err != nil {
		return lines, dead, err
	}
	return beam.ParDo(s.Scope("Lines"), eachLine, rows), dead, nil
}

// ReadRows is Read with the readings of each row together, as
// KV<source, lines>: one element per row. A row of a table whose rows hold
// whole hours (hours.ReadBack.HoldsWholeHours) holds whole hours of
// readings, which can then be built with no grouping.
func ReadRows(s beam.Scope, cfg ReadConfig) (rows, dead beam.PCollection, err error) {
	return readRows(s.Scope("bigtable.ReadRows"), cfg)
}

func readRows(s beam.Scope, cfg ReadConfig) (rows, dead beam.PCollection, err error) {
	if cfg.Spec == nil || cfg.Project == "" || cfg.Instance == "" {
		return rows, dead, fmt.Errorf("bigtableio.Read: a spec, a project and an instance are required")
	}
	rb, err := hours.NewReadBack(cfg.Spec.Spec)
	if err != nil {
		return rows, dead, fmt.Errorf("bigtableio.Read: %w", err)
	}
	plan, err := readPlan(rb, cfg.FromMs, cfg.ToMs)
	if err != nil {
		return rows, dead, fmt.Errorf("bigtableio.Read: %w", err)
	}
	plan = cfg.Keys.Clip(plan)
	samples := beam.ParDo(s.Scope("SampleRowKeys"), &sampleFn{Project: cfg.Project, Instance: cfg.Instance, Table: rb.Table()}, beam.Impulse(s))
	rows, dead = beam.ParDo2(s.Scope("ReadRows"), &readRowsFn{Project: cfg.Project, Instance: cfg.Instance, Spec: cfg.Spec,
		Plan: plan, FromMs: cfg.FromMs, ToMs: cfg.ToMs}, samples)
	return rows, dead, nil
}

// eachLine emits the lines of a row one by one.
func eachLine(source string, lines []string, emit func(string, string)) {
	for _, l := range lines {
		emit(source, l)
	}
}

// readPlan is the row ranges that hold the readings of [fromMs, toMs).
func readPlan(rb *hours.ReadBack, fromMs, toMs int64) ([]rowkey.RowRange, error) {
	if fromMs == 0 && toMs == 0 {
		return []rowkey.RowRange{{}}, nil
	}
	to := toMs - 1
	if toMs == 0 {
		to = math.MaxInt64 / 2
	}
	plan, err := rb.PlanSince(fromMs, to)
	if err != nil {
		return nil, err
	}
	return plan.Ranges, nil
}

// sampleFn asks Bigtable for the table's sample row keys (SampleRowKeys),
// the points where readRowsFn's restriction splits, and emits them as one
// element (JSON).
type sampleFn struct {
	Project, Instance, Table string

	reader *Reader
}

func (f *sampleFn) Setup(ctx context.Context) error {
	r, err := OpenReader(ctx, f.Project, f.Instance)
	f.reader = r
	return err
}

func (f *sampleFn) Teardown() error {
	if f.reader != nil {
		return f.reader.Close()
	}
	return nil
}

func (f *sampleFn) ProcessElement(ctx context.Context, _ []byte, emit func([]byte)) error {
	var keys []string
	err := retry.Do(ctx, samplePolicy, func(actx context.Context) error {
		var err error
		keys, err = f.reader.SampleRowKeys(actx, f.Table)
		return err
	})
	if err != nil {
		return fmt.Errorf("sample the row keys of %s: %w", f.Table, err)
	}
	b, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	emit(b)
	return nil
}

// readRowsFn reads the rows of its restriction (a KeyRange) within the
// plan's ranges and emits the readings of each row as lines. Its element is the
// table's sample row keys (sampleFn).
type readRowsFn struct {
	Project, Instance string
	Spec              *hours.Compiled
	Plan              []rowkey.RowRange
	FromMs, ToMs      int64

	rb     *hours.ReadBack
	reader *Reader
	source string
	rows   beam.Counter
	ctrs   ledger.Recorder
}

func (f *readRowsFn) Setup(ctx context.Context) error {
	rb, err := hours.NewReadBack(f.Spec.Spec)
	if err != nil {
		return err
	}
	f.rb = rb
	f.source = Source(f.Project, f.Instance, rb.Table())
	f.rows = beam.NewCounter("bigtable_read", "rows")
	f.reader, err = OpenReader(ctx, f.Project, f.Instance)
	return err
}

func (f *readRowsFn) Teardown() error {
	if f.reader != nil {
		return f.reader.Close()
	}
	return nil
}

// CreateInitialRestriction is the smallest key range that holds the plan.
func (f *readRowsFn) CreateInitialRestriction(_ []byte) KeyRange { return boundsOf(f.Plan) }

// SplitRestriction splits the range at the sample row keys.
func (f *readRowsFn) SplitRestriction(samples []byte, rest KeyRange) []KeyRange {
	var keys []string
	if err := json.Unmarshal(samples, &keys); err != nil {
		return []KeyRange{rest}
	}
	var out []KeyRange
	for _, r := range rest.SplitAt(keys) {
		if len(r.Clip(f.Plan)) > 0 {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return []KeyRange{rest}
	}
	return out
}

// RestrictionSize weighs every range alike: the sample keys cut the table
// into chunks of about one size.
func (f *readRowsFn) RestrictionSize(_ []byte, _ KeyRange) float64 { return 1 }

// CreateTracker tracks a key range.
func (f *readRowsFn) CreateTracker(rest KeyRange) *sdf.LockRTracker {
	return sdf.NewLockRTracker(newKeyRangeTracker(rest))
}

// FinishBundle writes the bundle's counts to the run's ledger record.
func (f *readRowsFn) FinishBundle(ctx context.Context, _ func(string, []string), _ func(deadletter.DeadLetter)) error {
	return f.ctrs.Commit(ctx)
}

// ProcessElement reads the rows of the restriction, claiming each before
// it emits the row's readings; a claim refused (the runner split the range
// there) ends the read. A read that fails transiently resumes after the
// last row claimed, within readPolicy.
func (f *readRowsFn) ProcessElement(ctx context.Context, rt *sdf.LockRTracker, _ []byte, emit func(string, []string), dead func(deadletter.DeadLetter)) error {
	if _, ok := rt.GetRestriction().(KeyRange); !ok {
		return fmt.Errorf("read %s: restriction %T is not a key range", f.rb.Table(), rt.GetRestriction())
	}
	toMs := f.ToMs
	if toMs == 0 {
		toMs = math.MaxInt64
	}
	var last string
	claimed, stopped := false, false
	err := retry.Do(ctx, readPolicy, func(actx context.Context) error {
		rest, _ := rt.GetRestriction().(KeyRange)
		if claimed {
			rest.Start = last + "\x00"
		}
		ranges := rest.Clip(f.Plan)
		if len(ranges) == 0 {
			return nil
		}
		return f.reader.readRows(actx, f.rb.Table(), ranges, f.rb.Families(), f.FromMs, toMs, func(row hours.ReadRow) bool {
			if !rt.TryClaim(row.Key) {
				stopped = true
				return false
			}
			last, claimed = row.Key, true
			f.rows.Inc(ctx, 1)
			f.emitRow(ctx, row, toMs, emit, dead)
			return true
		})
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", f.rb.Table(), err)
	}
	if !stopped {
		rt.TryClaim(endOfRange{})
	}
	return rt.GetError()
}

// emitRow emits the readings of one row, and a dead letter for each
// reading whose cells could not be rebuilt.
func (f *readRowsFn) emitRow(ctx context.Context, row hours.ReadRow, toMs int64, emit func(string, []string), dead func(deadletter.DeadLetter)) {
	recs, skipped := f.rb.Records([]hours.ReadRow{row}, "", f.FromMs, toMs)
	if len(recs) > 0 {
		lines := make([]string, len(recs))
		for i := range recs {
			lines[i] = recs[i].Raw
		}
		emit(f.source, lines)
	}
	if skipped == 0 {
		return
	}
	f.ctrs.Inc(ctx, ledger.InputRecords, int64(skipped))
	f.ctrs.Inc(ctx, ledger.InputRejected, int64(skipped))
	payload, _ := json.Marshal(map[string]string{"row_key": row.Key})
	err := fmt.Errorf("%w: a reading of row %q of %s could not be rebuilt from its cells (a cell that does not decode, a required field with no cell, or a row key that does not render back)",
		schemas.ErrMalformed, row.Key, f.rb.Table())
	now := time.Now()
	for range skipped {
		dead(deadletter.NewDeadLetter(deadletter.SinkParse, string(payload), f.source, err, now))
	}
}
