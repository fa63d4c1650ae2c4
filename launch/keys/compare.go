package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/digest"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// storedTable is one side of keys compare: a table written under a spec.
type storedTable struct {
	label             string // "A" or "B"
	project, instance string
	spec              *schemas.Spec
	rb                *hours.ReadBack
	rollupFamily      string             // "" when the spec has no rollups
	reader            *bigtableio.Reader // hour's, opened on its first call
}

// compareSide is one side of keys compare: a Bigtable table written under
// a spec (storedTable), or a BigQuery readings table (bigQueryTable).
type compareSide interface {
	fmt.Stringer
	// name is the side's label in the differences: "A" or "B".
	name() string
	// hasRollups reports whether the side holds rollups to compare;
	// dropRollups stops comparing them.
	hasRollups() bool
	dropRollups()
	// summarize reads the side's readings in [fromMs, toMs) and the
	// rollups of the hours that start then, reading up to workers parts
	// at once.
	summarize(ctx context.Context, fromMs, toMs int64, workers int) (*tableSummary, error)
	// hour reads one sensor-hour whole, to name what differs.
	hour(ctx context.Context, h digest.SensorHour) (hourDetail, error)
	close()
}

func (st *storedTable) name() string     { return st.label }
func (st *storedTable) hasRollups() bool { return st.rollupFamily != "" }
func (st *storedTable) dropRollups()     { st.rollupFamily = "" }

func (st *storedTable) summarize(ctx context.Context, fromMs, toMs int64, workers int) (*tableSummary, error) {
	return st.scanParallel(ctx, fromMs, toMs, workers)
}

func (st *storedTable) hour(ctx context.Context, h digest.SensorHour) (hourDetail, error) {
	if st.reader == nil {
		r, err := bigtableio.OpenReader(ctx, st.project, st.instance)
		if err != nil {
			return hourDetail{}, err
		}
		st.reader = r
	}
	return st.readHour(ctx, st.reader, h)
}

func (st *storedTable) close() {
	if st.reader != nil {
		st.reader.Close()
	}
}

// openStored prepares one side: spec's table that can be read back,
// renamed to table when given.
func openStored(label, specName, table, project, instance string) (*storedTable, error) {
	spec, err := cli.LoadSpec(specName)
	if err != nil {
		return nil, err
	}
	// Rollups are in the rows of the spec's first table.
	first := table == "" || table == spec.Bigtable.Tables[0].Name || spec.Table(table) == nil
	var roller *hours.Roller
	if c, err := hours.Compile(spec, hours.CompileOptions{Format: "json"}); err == nil {
		roller = c.Roller()
	}
	if table != "" {
		if err := spec.ReadTableFirst(table); err != nil {
			return nil, err
		}
	}
	rb, err := hours.NewReadBack(spec)
	if err != nil {
		return nil, fmt.Errorf("spec %s cannot be read back from Bigtable, so keys compare cannot read it: %w", specName, err)
	}
	if table != "" && rb.Table() != table {
		return nil, fmt.Errorf("table %s of spec %s cannot be read back (it does not store every field); table %s can", table, spec.Name, rb.Table())
	}
	st := &storedTable{label: label, project: project, instance: instance, spec: spec, rb: rb}
	if roller != nil && first {
		st.rollupFamily = roller.Family()
	}
	return st, nil
}

func (st *storedTable) String() string {
	return fmt.Sprintf("%s %s/%s/%s (%s)", st.label, st.project, st.instance, st.rb.Table(), st.spec.Name)
}

// families are the families compare reads: the readings' and the
// rollups'.
func (st *storedTable) families() []string {
	f := append([]string(nil), st.rb.Families()...)
	if st.rollupFamily != "" {
		f = append(f, st.rollupFamily)
	}
	return f
}

// tableSummary is what compare keeps of a table: each sensor-hour's
// digests, and the readings that could not be rebuilt.
type tableSummary struct {
	hours    map[digest.SensorHour]digest.HourSummary
	readings int64
	skipped  int
}

// rowSummary adds one row's readings in [fromMs, toMs) and its rollup
// cells of hours starting in that span to sum. A rollup cell (at its
// hour's end) belongs to the identity of the row's readings.
func (st *storedTable) rowSummary(row hours.ReadRow, fromMs, toMs int64, sum *tableSummary) {
	recs, skipped := st.rb.Records([]hours.ReadRow{row}, "", fromMs, toMs)
	sum.skipped += skipped
	identity := ""
	for i := range recs {
		h := digest.HourOf(st.spec, &recs[i])
		hs := sum.hours[h]
		hs.Readings.Add(digest.ReadingText(st.spec, &recs[i]))
		sum.hours[h] = hs
		sum.readings++
		identity = h.Identity
	}
	if st.rollupFamily == "" {
		return
	}
	for _, c := range row.Cells {
		if c.Family != st.rollupFamily {
			continue
		}
		start := c.TsMicros/1000 - digest.HourMs
		if start < fromMs || start >= toMs {
			continue
		}
		id := identity
		if id == "" {
			id = st.rowIdentity(row.Key)
		}
		h := digest.SensorHour{Identity: id, StartMs: start}
		hs := sum.hours[h]
		hs.Rollup.Add(digest.RollupText(c))
		sum.hours[h] = hs
	}
}

// rowIdentity names a row that holds rollup cells and no reading in the
// span: by its key, which no identity matches.
func (st *storedTable) rowIdentity(key string) string { return "row " + key }

// comparePolicy bounds the read of one key range.
var comparePolicy = retry.Policy{AttemptTimeout: 30 * time.Minute, Deadline: time.Hour, MaxAttempts: 4}

// scanParallel reads the whole table, split at its sample row keys, with
// up to workers ranges at once, and summarises it.
func (st *storedTable) scanParallel(ctx context.Context, fromMs, toMs int64, workers int) (*tableSummary, error) {
	r, err := bigtableio.OpenReader(ctx, st.project, st.instance)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var samples []string
	err = retry.Do(ctx, retry.Policy{AttemptTimeout: time.Minute, Deadline: 3 * time.Minute, MaxAttempts: 4}, func(ctx context.Context) error {
		samples, err = r.SampleRowKeys(ctx, st.rb.Table())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: sample its row keys: %w", st, err)
	}
	ranges := bigtableio.KeyRange{}.SplitAt(samples)
	parts := make([]*tableSummary, len(ranges))
	errs := make([]error, len(ranges))
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	readTo := toMs
	if readTo != math.MaxInt64 {
		readTo += digest.HourMs + 1 // the rollup cells at the last hour's end
	}
	for i, kr := range ranges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = retry.Do(ctx, comparePolicy, func(ctx context.Context) error {
				part := &tableSummary{hours: map[digest.SensorHour]digest.HourSummary{}}
				parts[i] = part
				return r.ReadRows(ctx, st.rb.Table(), []rowkey.RowRange{{Start: kr.Start, End: kr.End}}, st.families(), fromMs, readTo,
					func(row hours.ReadRow) { st.rowSummary(row, fromMs, toMs, part) })
			})
		}()
	}
	wg.Wait()
	sum := &tableSummary{hours: map[digest.SensorHour]digest.HourSummary{}}
	for i, p := range parts {
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: read %v: %w", st, ranges[i], errs[i])
		}
		sum.readings += p.readings
		sum.skipped += p.skipped
		for h, hs := range p.hours {
			cur := sum.hours[h]
			sum.hours[h] = digest.HourSummary{Readings: cur.Readings.Plus(hs.Readings), Rollup: cur.Rollup.Plus(hs.Rollup)}
		}
	}
	return sum, nil
}

// hourDetail is one sensor-hour of a table read whole: its readings'
// observed fields by event time, and its rollup cells.
type hourDetail struct {
	readings map[int64][]string
	rollup   map[string]string
}

// readHour reads one sensor-hour back (the ranges ReadBack plans for it).
func (st *storedTable) readHour(ctx context.Context, r *bigtableio.Reader, h digest.SensorHour) (hourDetail, error) {
	d := hourDetail{readings: map[int64][]string{}, rollup: map[string]string{}}
	end := h.StartMs + digest.HourMs
	plan, err := st.rb.PlanWindow(h.Identity, h.StartMs, end)
	if err != nil {
		return d, err
	}
	var rows []hours.ReadRow
	err = retry.Do(ctx, retry.Policy{AttemptTimeout: time.Minute, Deadline: 5 * time.Minute, MaxAttempts: 4}, func(ctx context.Context) error {
		rows = rows[:0]
		return r.ReadRows(ctx, st.rb.Table(), plan.Ranges, st.families(), h.StartMs, end+1, func(row hours.ReadRow) { rows = append(rows, row) })
	})
	if err != nil {
		return d, err
	}
	for _, row := range rows {
		recs, _ := st.rb.Records([]hours.ReadRow{row}, "", h.StartMs, end)
		mine := false
		for i := range recs {
			if group.IdentityKey(st.spec, &recs[i]) == h.Identity {
				d.readings[recs[i].EventMs] = digest.ObservedFields(st.spec, &recs[i])
				mine = true
			}
		}
		if !mine && st.rowIdentity(row.Key) != h.Identity {
			continue
		}
		for _, c := range row.Cells {
			if c.Family == st.rollupFamily && c.TsMicros == end*1000 {
				d.rollup[c.Qualifier] = string(c.Value)
			}
		}
	}
	return d, nil
}

// compareOptions are keys compare's flags, parsed.
type compareOptions struct {
	a, b         compareSide
	fromMs, toMs int64 // toMs math.MaxInt64: no end
	maxDiffs     int
	workers      int
}

// compareTables reads both sides in parallel, prints one line of counts
// and then the first sensor-hours that differ, naming what differs, and
// reports whether they are equal.
func compareTables(ctx context.Context, w io.Writer, o compareOptions) (equal bool, err error) {
	defer o.a.close()
	defer o.b.close()
	rollups := ""
	switch {
	case !o.a.hasRollups() && !o.b.hasRollups():
	case !o.a.hasRollups() || !o.b.hasRollups():
		// One side holds no rollups under its spec (the second table
		// of a spec that writes two layouts, or a BigQuery dataset
		// without the rollup table): compare the readings.
		none := o.a
		if o.a.hasRollups() {
			none = o.b
		}
		rollups = fmt.Sprintf("; rollups not compared (%s holds none)", none.name())
		o.a.dropRollups()
		o.b.dropRollups()
	}
	var sa, sb *tableSummary
	var ea, eb error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); sa, ea = o.a.summarize(ctx, o.fromMs, o.toMs, o.workers) }()
	go func() { defer wg.Done(); sb, eb = o.b.summarize(ctx, o.fromMs, o.toMs, o.workers) }()
	wg.Wait()
	if ea != nil {
		return false, ea
	}
	if eb != nil {
		return false, eb
	}
	var onlyA, onlyB, readingsDiffer, rollupsDiffer int
	var differ []digest.SensorHour
	for h, ha := range sa.hours {
		hb, ok := sb.hours[h]
		switch {
		case !ok:
			onlyA++
		case ha.Readings != hb.Readings:
			readingsDiffer++
		case ha.Rollup != hb.Rollup:
			rollupsDiffer++
		default:
			continue
		}
		differ = append(differ, h)
	}
	for h := range sb.hours {
		if _, ok := sa.hours[h]; !ok {
			onlyB++
			differ = append(differ, h)
		}
	}
	fmt.Fprintf(w, "keys compare: %s: %d readings in %d sensor-hours; %s: %d readings in %d sensor-hours",
		o.a, sa.readings, len(sa.hours), o.b, sb.readings, len(sb.hours))
	fmt.Fprint(w, rollups)
	if sa.skipped+sb.skipped > 0 {
		fmt.Fprintf(w, "; readings whose cells could not be rebuilt: %d in A, %d in B", sa.skipped, sb.skipped)
	}
	if len(differ) == 0 {
		fmt.Fprintln(w, "; equal")
		return true, nil
	}
	fmt.Fprintf(w, "; %d sensor-hours differ (%d only in A, %d only in B, %d with other readings, %d with another rollup)\n",
		len(differ), onlyA, onlyB, readingsDiffer, rollupsDiffer)
	sort.Slice(differ, func(i, j int) bool {
		if differ[i].Identity != differ[j].Identity {
			return differ[i].Identity < differ[j].Identity
		}
		return differ[i].StartMs < differ[j].StartMs
	})
	for i, h := range differ {
		if i == o.maxDiffs {
			fmt.Fprintf(w, "... and %d more sensor-hours (--max_diffs)\n", len(differ)-i)
			break
		}
		da, err := o.a.hour(ctx, h)
		if err != nil {
			return false, fmt.Errorf("%s: read %s: %w", o.a, h, err)
		}
		db, err := o.b.hour(ctx, h)
		if err != nil {
			return false, fmt.Errorf("%s: read %s: %w", o.b, h, err)
		}
		fmt.Fprintf(w, "%s: %s\n", h, strings.Join(describeDiff(da, db, 5), "; "))
	}
	return false, nil
}

// describeDiff names what differs between two reads of one sensor-hour:
// readings only in one, readings whose observed values differ (field by
// field), and rollup values; at most max items of each kind.
func describeDiff(a, b hourDetail, max int) []string {
	var out []string
	var times []int64
	for ms := range a.readings {
		times = append(times, ms)
	}
	for ms := range b.readings {
		if _, ok := a.readings[ms]; !ok {
			times = append(times, ms)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	n := 0
	for _, ms := range times {
		fa, inA := a.readings[ms]
		fb, inB := b.readings[ms]
		at := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
		var d string
		switch {
		case !inB:
			d = "reading " + at + " only in A"
		case !inA:
			d = "reading " + at + " only in B"
		default:
			if fd := fieldDiff(fa, fb); fd != "" {
				d = "reading " + at + ": " + fd
			}
		}
		if d == "" {
			continue
		}
		if n++; n > max {
			out = append(out, "more readings differ")
			break
		}
		out = append(out, d)
	}
	if len(a.readings) != len(b.readings) {
		out = append(out, fmt.Sprintf("%d readings in A, %d in B", len(a.readings), len(b.readings)))
	}
	if fd := fieldDiff(pairs(a.rollup), pairs(b.rollup)); fd != "" {
		out = append(out, "rollup: "+fd)
	}
	if len(out) == 0 {
		out = append(out, "differs in the full scan but not when read again (a table written meanwhile?)")
	}
	return out
}

// pairs renders a rollup as sorted "name=value" texts (its values are
// hours.EncodeValue's text).
func pairs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// fieldDiff names the fields ("name=value" texts) that differ between a
// and b: "heart_rate 70 in A, 71 in B", "spO2 98 in A, none in B".
func fieldDiff(a, b []string) string {
	ma, mb := map[string]string{}, map[string]string{}
	var names []string
	for _, kv := range a {
		k, v, _ := strings.Cut(kv, "=")
		ma[k] = v
		names = append(names, k)
	}
	for _, kv := range b {
		k, v, _ := strings.Cut(kv, "=")
		mb[k] = v
		if _, ok := ma[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		va, inA := ma[k]
		vb, inB := mb[k]
		switch {
		case inA && inB && va == vb:
		case !inB:
			out = append(out, fmt.Sprintf("%s %s in A, none in B", k, va))
		case !inA:
			out = append(out, fmt.Sprintf("%s none in A, %s in B", k, vb))
		default:
			out = append(out, fmt.Sprintf("%s %s in A, %s in B", k, va, vb))
		}
	}
	return strings.Join(out, ", ")
}

// runCompare runs keys compare with its flags.
func runCompare(kf keysFlags, stdout io.Writer) error {
	switch {
	case kf.againstTable == "" && kf.againstBigQuery == "":
		return cli.Usagef("compare: --against_table (a second Bigtable table) or --against_bigquery (a BigQuery table) is required")
	case kf.againstBigQuery != "" && (kf.againstTable != "" || kf.againstProject != "" || kf.againstInstance != ""):
		return cli.Usagef("compare: --against_bigquery compares with BigQuery; --against_table, --against_project and --against_instance name a second Bigtable table: give one or the other")
	case kf.againstBigQuery == "" && kf.bqProject != "":
		return cli.Usagef("compare: --bigquery_project applies to --against_bigquery only")
	}
	if kf.maxDiffs < 0 || kf.workers < 1 {
		return cli.Usagef("compare: --max_diffs must not be negative, --parallel at least 1")
	}
	project, instance, err := cli.Bigtable(kf.btProject, kf.btInstance)
	if err != nil {
		return cli.Usage(err)
	}
	o := compareOptions{maxDiffs: kf.maxDiffs, workers: kf.workers, toMs: math.MaxInt64}
	if kf.fromTime != "" {
		t, err := time.Parse(time.RFC3339Nano, kf.fromTime)
		if err != nil {
			return cli.Usagef("compare: --from_time=%s: give an RFC 3339 time such as 2026-03-01T00:00:00Z", kf.fromTime)
		}
		o.fromMs = t.UnixMilli()
	}
	if kf.toTime != "" {
		t, err := time.Parse(time.RFC3339Nano, kf.toTime)
		if err != nil {
			return cli.Usagef("compare: --to_time=%s: give an RFC 3339 time such as 2026-03-01T00:00:00Z", kf.toTime)
		}
		o.toMs = t.UnixMilli()
	}
	if o.toMs <= o.fromMs {
		return cli.Usagef("compare: --to_time is not after --from_time")
	}
	againstSpec, againstProject, againstInstance := kf.againstSpec, kf.againstProject, kf.againstInstance
	if againstSpec == "" {
		againstSpec = kf.spec
	}
	if againstProject == "" {
		againstProject = project
	}
	if againstInstance == "" {
		againstInstance = instance
	}
	if o.a, err = openStored("A", kf.spec, kf.table, project, instance); err != nil {
		return cli.Usage(fmt.Errorf("compare: --spec: %w", err))
	}
	if kf.againstBigQuery != "" {
		bqProject := kf.bqProject
		if bqProject == "" {
			if bqProject, err = cli.BigQueryProject("", kf.btProject); err != nil {
				return cli.Usage(fmt.Errorf("compare: --against_bigquery=%s names no project: give PROJECT:DATASET.TABLE or --bigquery_project (%w)", kf.againstBigQuery, err))
			}
		}
		if o.b, err = openBigQuery("B", againstSpec, kf.againstBigQuery, bqProject); err != nil {
			return cli.Usage(fmt.Errorf("compare: %w", err))
		}
	} else if o.b, err = openStored("B", againstSpec, kf.againstTable, againstProject, againstInstance); err != nil {
		return cli.Usage(fmt.Errorf("compare: --against_spec: %w", err))
	}
	equal, err := compareTables(context.Background(), stdout, o)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	if !equal {
		return exitError(1)
	}
	return nil
}
