// Package readpath is sensorpipe's Bigtable read path: it turns a query
// (values and ranges for some fields, a time window, and optionally
// "latest per prefix" or an aggregate) into the row ranges of the table
// whose key serves it (rowkey.ChooseTable, rowkey.PlanScan: a prefix, a
// time range, reversed bounds under a reverse timestamp, one range per salt
// bucket or enum value), reads them, checks on the rows the fields the key
// could not narrow, and reports the cells or the aggregate, the rows read
// and the ranges used. When nothing matches it reads what the table holds
// for the query's prefix, so the caller can say how old the data is.
package readpath

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio/filters"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// Query is one read of a spec's tables.
type Query struct {
	// Table pins a table of the spec; empty picks the table whose key
	// serves the query (rowkey.ChooseTable).
	Table  string
	Where  map[string]string        // field = value
	Ranges map[string]schemas.Range // field = lo..hi, both inclusive
	// The window: [Now-Since, Now] with Since, or [From, To) with From
	// (To defaults to Now). None of them: no window.
	Since    time.Duration
	Now      time.Time
	From, To time.Time
	Limit    int // rows; 0: no cap
	// Latest reads the newest row of each key prefix (the key up to its
	// reverse timestamp) instead of every row.
	Latest      bool
	NewestFirst bool
	Aggregate   *schemas.AggregateSpec
	// AllowScan accepts a table only a full scan can serve.
	AllowScan bool
}

// FromMainQuery fills a Query from the spec's declared main query: its
// parameters (given in where, or their defaults), since, limit and latest.
func FromMainQuery(spec *schemas.Spec, where map[string]string, now time.Time) (Query, error) {
	mq := spec.MainQuery()
	if mq == nil {
		return Query{}, fmt.Errorf("spec %s declares no main query", spec.Name)
	}
	params := map[string]string{}
	for k, v := range where {
		params[k] = v
	}
	return FromNamed(spec, mq, params, now)
}

// FromNamed builds the Query of a named query with the caller's parameter
// values (field = value or lo..hi); parameters left out take their
// defaults, and one without a default is an error.
func FromNamed(spec *schemas.Spec, q *schemas.QuerySpec, params map[string]string, now time.Time) (Query, error) {
	out := Query{Table: q.Table, Where: map[string]string{}, Ranges: map[string]schemas.Range{}, Now: now,
		Limit: q.Limit, Latest: q.Latest, NewestFirst: q.NewestFirst, Aggregate: q.Aggregate}
	declared := map[string]bool{}
	for _, p := range q.Params() {
		declared[p.Field] = true
		text, ok := params[p.Field]
		if !ok {
			if !p.HasDefault {
				return out, fmt.Errorf("query %s needs --param %s=VALUE (or a range LO..HI)", q.Name, p.Field)
			}
			text = p.Default
		}
		out.set(p.Field, text)
	}
	for k := range params {
		if !declared[k] {
			var names []string
			for _, p := range q.Params() {
				names = append(names, p.Field)
			}
			return out, fmt.Errorf("query %s has no parameter %s; its parameters are %s", q.Name, k, strings.Join(names, ", "))
		}
	}
	if q.Since != "" {
		d, err := schemas.ParseSince(q.Since)
		if err != nil {
			return out, err
		}
		out.Since = d
	}
	return out, nil
}

// set fixes field to text: a value, or a range lo..hi.
func (q *Query) set(field, text string) {
	if r, ok := schemas.ParseRange(text); ok {
		q.Ranges[field] = r
		return
	}
	q.Where[field] = text
}

// Window is the query's event-time window [from, to] in epoch ms, both
// ends inclusive; both 0 when it has none.
func (q Query) Window() (fromMs, toMs int64) {
	switch {
	case !q.From.IsZero():
		to := q.Now
		if !q.To.IsZero() {
			return q.From.UnixMilli(), q.To.UnixMilli() - 1
		}
		return q.From.UnixMilli(), to.UnixMilli()
	case !q.To.IsZero():
		return 0, q.To.UnixMilli() - 1
	case q.Since > 0:
		to := q.Now.UnixMilli()
		return to - q.Since.Milliseconds(), to
	}
	return 0, 0
}

// Normalize moves an event-time value or range given as a where field
// into the window (From, To), so the planner and the window filter see one
// window. It is an error to give both.
func Normalize(spec *schemas.Spec, q Query) (Query, error) {
	lo, hi := "", ""
	if v, ok := q.Where[spec.EventTime]; ok {
		lo, hi = v, v
	}
	if r, ok := q.Ranges[spec.EventTime]; ok {
		lo, hi = r.Lo, r.Hi
	}
	if lo == "" {
		return q, nil
	}
	if _, to := q.Window(); to != 0 {
		return q, fmt.Errorf("give the window once: where %s=... or --since/--from/--to", spec.EventTime)
	}
	ev := spec.Field(spec.EventTime)
	a, err := schemas.ParseValue(ev, lo)
	if err != nil {
		return q, fmt.Errorf("where %s: %w", spec.EventTime, err)
	}
	b, err := schemas.ParseValue(ev, hi)
	if err != nil {
		return q, fmt.Errorf("where %s: %w", spec.EventTime, err)
	}
	if a.Int > b.Int {
		return q, fmt.Errorf("where %s=%s..%s: the range is empty", spec.EventTime, lo, hi)
	}
	out := q
	out.Where, out.Ranges = map[string]string{}, map[string]schemas.Range{}
	for k, v := range q.Where {
		if k != spec.EventTime {
			out.Where[k] = v
		}
	}
	for k, v := range q.Ranges {
		if k != spec.EventTime {
			out.Ranges[k] = v
		}
	}
	out.Since = 0
	out.From, out.To = time.UnixMilli(a.Int).UTC(), time.UnixMilli(b.Int+1).UTC() // To is exclusive
	return out, nil
}

// keyQuery is q for the planner.
func (q Query) keyQuery() (rowkey.KeyQuery, error) {
	kq := rowkey.KeyQuery{Table: q.Table, Where: map[string]string{}, Ranges: map[string]schemas.Range{}}
	kq.FromMs, kq.ToMs = q.Window()
	for k, v := range q.Where {
		kq.Where[k] = v
	}
	for k, v := range q.Ranges {
		kq.Ranges[k] = v
	}
	if kq.ToMs != 0 && kq.FromMs > kq.ToMs {
		return kq, fmt.Errorf("the window is empty: from %s is after to %s", fmtMs(kq.FromMs), fmtMs(kq.ToMs))
	}
	return kq, nil
}

func (q Query) need() rowkey.Need {
	n := rowkey.Need{Latest: q.Latest, NewestFirst: q.NewestFirst, AllowScan: q.AllowScan}
	if a := q.Aggregate; a != nil {
		n.Fields = append(n.Fields, a.GroupBy...)
		if a.Column != "" {
			n.Values = append(n.Values, a.Column)
		}
	}
	return n
}

// Plan picks the table that serves q and derives its row ranges. With a
// pinned table, that table is planned (and refused the same way when only
// a full scan serves the query and AllowScan is off).
func Plan(spec *schemas.Spec, q Query) (*rowkey.ScanPlan, error) {
	q, err := Normalize(spec, q)
	if err != nil {
		return nil, err
	}
	kq, err := q.keyQuery()
	if err != nil {
		return nil, err
	}
	return rowkey.ChooseTable(spec, kq, q.need())
}

// Cell is one cell read.
type Cell struct {
	RowKey          string `json:"row_key"`
	Family          string `json:"family"`
	Qualifier       string `json:"qualifier"`
	TimestampMicros int64  `json:"timestamp_micros"`
	Value           string `json:"value"`
}

// Result is what a read did: the plan, the rows read and kept, their cells
// (or the aggregate), and, when nothing matched, what the prefix holds.
type Result struct {
	Plan *rowkey.ScanPlan
	// RowsRead counts the rows the reads returned; Reads the ReadRows
	// calls made (one for a plain read; one per prefix for latest).
	RowsRead int
	Reads    int
	// RowKeys lists the rows kept after checking the fields the key could
	// not narrow; Cells their cells in the window.
	RowKeys []string
	Cells   []Cell
	// Answer is the aggregate, when the query has one.
	Answer *Answer
	// Bounds is set when nothing matched: the oldest and newest data the
	// table holds under the query's prefix.
	Bounds *Bounds
}

// Reader reads rows of a Bigtable table.
type Reader interface {
	ReadRows(ctx context.Context, arg bigtable.RowSet, f func(bigtable.Row) bool, opts ...bigtable.ReadOption) error
}

// Tables opens a table by name.
type Tables func(name string) Reader

// Read plans q, reads its ranges from the chosen table, keeps the rows that
// match the fields the key could not narrow, and aggregates them when q
// has an aggregate. Only cells of the table's declared families and inside
// the window are returned (cell timestamps are event times). When no row matches, it reads the first and
// last rows under the query's prefix (a bounded read) into Result.Bounds.
func Read(ctx context.Context, open Tables, spec *schemas.Spec, q Query) (*Result, error) {
	q, err := Normalize(spec, q)
	if err != nil {
		return nil, err
	}
	plan, err := Plan(spec, q)
	if err != nil {
		return nil, err
	}
	tbl := open(plan.Table)
	check, err := newChecker(spec, plan, q)
	if err != nil {
		return nil, err
	}
	res := &Result{Plan: plan}
	if q.Latest {
		err = readLatest(ctx, tbl, spec, q, plan, check, res)
	} else {
		err = readRanges(ctx, tbl, spec, q, plan, check, res)
	}
	if err != nil {
		return res, fmt.Errorf("read %s: %w", plan.Table, err)
	}
	if q.Aggregate != nil {
		if res.Answer, err = aggregate(spec, plan.Table, q.Aggregate, res.Cells); err != nil {
			return res, err
		}
	}
	if len(res.RowKeys) == 0 {
		b, err := readBounds(ctx, tbl, spec, q)
		if err != nil {
			return res, fmt.Errorf("read %s: %w", plan.Table, err)
		}
		res.Bounds = b
	}
	return res, nil
}

// windowFilter keeps the cells of q's window; nil without one.
func windowFilter(q Query) bigtable.Filter {
	from, to := q.Window()
	if to == 0 {
		return nil
	}
	// Bigtable's end is exclusive and millisecond-grained: +1 ms keeps "to".
	return bigtable.TimestampRangeFilterMicros(bigtable.Timestamp(from*1000), bigtable.Timestamp((to+1)*1000))
}

// familyFilter keeps the table's declared families: the query answers from
// the spec's columns, not, say, the hourly rollups the launcher adds to
// the rows in a family of their own.
func familyFilter(spec *schemas.Spec, table string) bigtable.Filter {
	ts := spec.Table(table)
	if ts == nil || len(ts.Families) == 0 {
		return nil
	}
	names := make([]string, len(ts.Families))
	for i, f := range ts.Families {
		names[i] = f.Name
	}
	return filters.Families(names)
}

func chain(filters ...bigtable.Filter) []bigtable.ReadOption {
	var fs []bigtable.Filter
	for _, f := range filters {
		if f != nil {
			fs = append(fs, f)
		}
	}
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return []bigtable.ReadOption{bigtable.RowFilter(fs[0])}
	}
	return []bigtable.ReadOption{bigtable.RowFilter(bigtable.ChainFilters(fs...))}
}

// readRanges reads every row of the plan's ranges (up to q.Limit kept rows).
func readRanges(ctx context.Context, tbl Reader, spec *schemas.Spec, q Query, plan *rowkey.ScanPlan, check *checker, res *Result) error {
	var ranges bigtable.RowRangeList
	for _, r := range plan.Ranges {
		ranges = append(ranges, bigtable.NewRange(r.Start, r.End))
	}
	opts := chain(windowFilter(q), familyFilter(spec, plan.Table))
	if q.Limit > 0 && !check.any() {
		opts = append(opts, bigtable.LimitRows(int64(q.Limit)))
	}
	res.Reads++
	return tbl.ReadRows(ctx, ranges, func(row bigtable.Row) bool {
		res.RowsRead++
		res.keep(row, check, 0, 0)
		return q.Limit <= 0 || len(res.RowKeys) < q.Limit
	}, opts...)
}

// keep adds row's cells that pass check (and fall in [from, to] when to is
// set) to res, and the row to RowKeys when any did.
func (res *Result) keep(row bigtable.Row, check *checker, from, to int64) {
	cells := rowCells(row)
	if to != 0 {
		kept := cells[:0]
		for _, c := range cells {
			if ms := c.TimestampMicros / 1000; ms >= from && ms <= to {
				kept = append(kept, c)
			}
		}
		cells = kept
	}
	cells = check.cells(row.Key(), cells)
	if len(cells) == 0 {
		return
	}
	res.RowKeys = append(res.RowKeys, row.Key())
	res.Cells = append(res.Cells, cells...)
}

// rowCells flattens a row, families sorted.
func rowCells(row bigtable.Row) []Cell {
	fams := make([]string, 0, len(row))
	for f := range row {
		fams = append(fams, f)
	}
	sort.Strings(fams)
	var out []Cell
	for _, f := range fams {
		for _, it := range row[f] {
			out = append(out, Cell{
				RowKey:          row.Key(),
				Family:          f,
				Qualifier:       strings.TrimPrefix(it.Column, f+":"),
				TimestampMicros: int64(it.Timestamp),
				Value:           string(it.Value),
			})
		}
	}
	return out
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
