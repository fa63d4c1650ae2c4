// Command query answers a dataset's questions from Bigtable the way its row
// keys allow. A named query (the spec's queries: section) runs with its
// parameters; the tool picks the table whose key serves it from the spec's
// fan-out, plans the row ranges (a prefix, a time range, reversed bounds
// under a reverse timestamp, one range per salt bucket or enum value, one
// range for a range of padded values), reads them, and prints the cells, or
// the aggregate the query declares, then a summary with the rows read and
// the ranges used.
//
//	go run ./launch/query --spec user_events time_in_vr --param user_id=3f2b… --now 2026-03-01T12:00:00Z
//	go run ./launch/query --spec traffic --where highway=I-35 --where milemarker=340..350 --since 1h --latest
//
// A query no table serves with a key prefix or range is refused, naming the
// key that would serve it, unless --allow_scan. With BIGTABLE_EMULATOR_HOST
// set it reads the emulator, and the project and instance default to the
// ones make run writes (internal/cli).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/launch/readside/readpath"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

// pairs collects repeated k=v flags in order.
type pairs struct {
	keys []string
	vals map[string]string
}

func (p *pairs) String() string {
	var out []string
	for _, k := range p.keys {
		out = append(out, k+"="+p.vals[k])
	}
	return strings.Join(out, ",")
}

func (p *pairs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want field=value or field=lo..hi, got %q", s)
	}
	if p.vals == nil {
		p.vals = map[string]string{}
	}
	if _, dup := p.vals[k]; !dup {
		p.keys = append(p.keys, k)
	}
	p.vals[k] = v
	return nil
}

// list collects repeated or comma-separated values.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }

func (l *list) Set(s string) error {
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*l = append(*l, x)
		}
	}
	return nil
}

func main() {
	ctx := context.Background()
	os.Exit(cli.Report(os.Stderr, "query", run(ctx, os.Args[1:], os.Stdout, os.Stderr)))
}

// summary is the last line printed: what the read did.
type summary struct {
	Query    string            `json:"query,omitempty"`
	Table    string            `json:"table"`
	Scan     string            `json:"scan"`
	Ranges   []rowkey.RowRange `json:"ranges"`
	Reversed bool              `json:"newest_first,omitempty"`
	Latest   bool              `json:"latest_per_prefix,omitempty"`
	Reads    int               `json:"reads,omitempty"`
	RowsRead int               `json:"rows_read"`
	Rows     int               `json:"rows_matched"`
	Cells    int               `json:"cells"`
	Checked  []string          `json:"checked_on_rows,omitempty"`
	Stop     string            `json:"prefix_ends,omitempty"`
	From     string            `json:"from,omitempty"`
	To       string            `json:"to,omitempty"`
	Empty    *emptyNote        `json:"empty,omitempty"`
}

// emptyNote says what the table holds when nothing matched.
type emptyNote struct {
	Oldest   string `json:"oldest,omitempty"`
	Newest   string `json:"newest,omitempty"`
	RowsRead int    `json:"rows_read"`
	Hint     string `json:"hint"`
}

const usageText = `query: answer a dataset's questions from Bigtable through its row keys.

Usage:
  query [--spec NAME|FILE] --list
  query [--spec NAME|FILE] QUERY [--param field=value|lo..hi ...]
        [--since 1h | --from T [--to T]] [--now T] [--limit N] [--allow_scan] [--plan]
  query [--spec NAME|FILE] silent_sensors [--silent_for 1h] [--lookback 7d] [--now T]
  query [--spec NAME|FILE] coverage --param IDENTITY_FIELD=VALUE [--since 24h] [--now T]
  query [--spec NAME|FILE] --where field=value|lo..hi [--where ...]
        [--since 1h | --from T [--to T]] [--now T] [--latest]
        [--aggregate count|duration:5s|sum|min|max|avg:FIELD] [--group_by FIELD]
        [--limit N] [--allow_scan] [--bigtable_table T] [--plan]

silent_sensors and coverage answer every spec with a cadence (unless it
declares queries of those names): silent_sensors scans the inventory table
once and prints one JSON line per sensor seen within --lookback of --now
but not within --silent_for; coverage prints one sensor's rollups, one JSON
line per hour that overlaps --since, with count, expected, coverage, gaps
and longest_gap_s. Their summary line goes to stderr.

A named QUERY comes from the spec's queries: section (--list shows them);
the ad-hoc form takes --where. Either way the tool picks the table whose key
serves the query from the spec's tables, plans the row ranges, reads them,
checks on the rows the fields the key could not narrow, and prints one JSON
line per cell (or per group of an aggregate), then a summary line with the
table, the ranges, the reads and the rows read. A query that no table serves
with a key prefix or range is refused with the key that would serve it,
unless --allow_scan. When nothing matches, the summary says what the table
holds under the query's prefix (one bounded read) and suggests --now.

Times (--from, --to, --now) are RFC 3339, epoch milliseconds, a day
(2026-03-01) or a month (2026-03), UTC; --from is inclusive, --to exclusive.
--spec is a built-in spec (%s; without --spec, %s) or a YAML file.

%s

Exit codes: 0 answered (even when nothing matched), 1 Bigtable failed or
could not be reached, 2 bad flags or a query no key serves.

Flags:
`

// queryFlags are query's flags.
type queryFlags struct {
	params, where pairs
	groupBy       list
	spec          string
	since         string
	from          string
	to            string
	nowFlag       string
	limit         int
	latest        bool
	aggregate     string
	allowScan     bool
	listOnly      bool
	planOnly      bool
	project       string
	instance      string
	appProfile    string
	table         string
	timeout       time.Duration
	silentFor     string
	lookback      string
}

// registerFlags defines query's flags on fs, each bound to a field of q.
func registerFlags(fs *flag.FlagSet, q *queryFlags) {
	fs.StringVar(&q.spec, "spec", schemas.DefaultSpecName(), cli.SpecUsage)
	fs.Var(&q.params, "param", "a named query's parameter, field=value or field=lo..hi (repeatable)")
	fs.Var(&q.where, "where", "ad hoc: a field fixed by a value or an inclusive range, field=value or field=lo..hi (repeatable)")
	fs.StringVar(&q.since, "since", "", "look-back window ending at --now, e.g. 1h, 90m, 7d (default: the named query's)")
	fs.StringVar(&q.from, "from", "", "window start (inclusive), instead of --since")
	fs.StringVar(&q.to, "to", "", "window end (exclusive; default --now), with --from")
	fs.StringVar(&q.nowFlag, "now", "", "the current time for --since and --from (default: the wall clock)")
	fs.IntVar(&q.limit, "limit", -1, "return at most this many rows (default: the named query's; 0: no limit)")
	fs.BoolVar(&q.latest, "latest", false, "ad hoc: the newest row of each key prefix (the key up to its reverse timestamp)")
	fs.StringVar(&q.aggregate, "aggregate", "", "ad hoc: count, duration:INTERVAL (readings × interval), or sum|min|max|avg:FIELD")
	fs.Var(&q.groupBy, "group_by", "ad hoc, with --aggregate: answer per value of these fields (repeatable or comma-separated)")
	fs.BoolVar(&q.allowScan, "allow_scan", false, "run a query that no key prefix or range serves, reading every row it needs")
	fs.BoolVar(&q.listOnly, "list", false, "list the spec's named queries and the table each reads")
	fs.BoolVar(&q.planOnly, "plan", false, "print the table and row ranges and exit without reading")
	fs.StringVar(&q.project, "bigtable_project", "", "Bigtable project (default with "+cli.BigtableEmulatorEnv+" set: "+cli.LocalProject+")")
	fs.StringVar(&q.instance, "bigtable_instance", "", "Bigtable instance (default with "+cli.BigtableEmulatorEnv+" set: "+cli.LocalInstance+")")
	fs.StringVar(&q.appProfile, "bigtable_app_profile", "", "Bigtable app profile the reads use (default: the instance's default profile); e.g. a profile routed to a serving cluster")
	fs.StringVar(&q.table, "bigtable_table", "", "a spec table to read (default: the one whose key serves the query), or the name the launcher's --bigtable_table gave the spec's first table")
	fs.DurationVar(&q.timeout, "timeout", 30*time.Second, "give up reading after this long")
	fs.StringVar(&q.silentFor, "silent_for", "1h", "silent_sensors: how long without a reading makes a sensor silent, e.g. 1h")
	fs.StringVar(&q.lookback, "lookback", "7d", "silent_sensors: how far back a sensor must have been seen to count, e.g. 7d")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	// A bad flag is one line (the error), not the whole usage: the flag
	// package calls Usage on every error, so --help prints it here.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	usage := func() {
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, usageText, strings.Join(schemas.BuiltinSpecNames(), ", "), schemas.DefaultSpecName(), cli.DefaultsHelp)
		fs.PrintDefaults()
	}
	var qf queryFlags
	registerFlags(fs, &qf)
	// The flags' values, by the names the rest of run reads.
	params, where, groupBy := &qf.params, &qf.where, &qf.groupBy
	since, from, to, nowFlag, limit := &qf.since, &qf.from, &qf.to, &qf.nowFlag, &qf.limit
	latest, aggregate, allowScan, listOnly, planOnly := &qf.latest, &qf.aggregate, &qf.allowScan, &qf.listOnly, &qf.planOnly
	project, instance, appProfile, table, timeout := &qf.project, &qf.instance, &qf.appProfile, &qf.table, &qf.timeout
	if err := parse(fs, args, usage); err != nil {
		return err
	}
	name := ""
	if fs.NArg() > 0 {
		name = fs.Arg(0)
		if err := parse(fs, fs.Args()[1:], usage); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return cli.Usagef("unexpected arguments %q: give one query name, then flags", fs.Args())
		}
	}
	spec, err := cli.LoadSpec(qf.spec)
	if err != nil {
		return cli.Usage(fmt.Errorf("--spec: %w", err))
	}
	pin := *table != "" && spec.Table(*table) != nil
	if *table != "" && !pin {
		// The launcher wrote the spec's first table under this name.
		if err := spec.RenameTable(spec.Bigtable.Tables[0].Name, *table); err != nil {
			return cli.Usage(err)
		}
	}
	if *listOnly {
		return listQueries(stdout, spec)
	}
	now := time.Now().UTC()
	if *nowFlag != "" {
		if now, err = parseTime(*nowFlag); err != nil {
			return cli.Usage(fmt.Errorf("--now: %w", err))
		}
	}
	if builtinQuery(spec, name) {
		if name == querySilentSensors {
			return silentSensors(ctx, &qf, spec, now, stdout, stderr)
		}
		return coverageByHour(ctx, &qf, spec, now, stdout, stderr)
	}
	var q readpath.Query
	if name != "" {
		nq := spec.Query(name)
		if nq == nil {
			return cli.Usagef("spec %s has no query %q; its queries are %s (--list describes them)", spec.Name, name, strings.Join(spec.QueryNames(), ", "))
		}
		switch {
		case len(where.keys) > 0:
			return cli.Usagef("--where is for ad-hoc queries: give query %s its parameters with --param", name)
		case *latest || *aggregate != "" || len(*groupBy) > 0:
			return cli.Usagef("--latest, --aggregate and --group_by are for ad-hoc queries: query %s declares its own", name)
		}
		if q, err = readpath.FromNamed(spec, nq, params.vals, now); err != nil {
			return cli.Usage(err)
		}
	} else {
		if len(params.keys) > 0 {
			return cli.Usagef("--param needs a query name (query --spec %s --list); ad-hoc queries take --where", spec.Name)
		}
		if len(where.keys) == 0 && !*allowScan {
			return cli.Usagef("give a query name (--list shows them) or --where field=value")
		}
		q = readpath.Query{Where: map[string]string{}, Ranges: map[string]schemas.Range{}, Now: now, Latest: *latest}
		for _, k := range where.keys {
			if r, ok := schemas.ParseRange(where.vals[k]); ok {
				q.Ranges[k] = r
			} else {
				q.Where[k] = where.vals[k]
			}
		}
		if *aggregate != "" {
			if q.Aggregate, err = schemas.ParseAggregate(*aggregate); err != nil {
				return cli.Usage(err)
			}
			q.Aggregate.GroupBy = *groupBy
		} else if len(*groupBy) > 0 {
			return cli.Usagef("--group_by needs --aggregate")
		}
	}
	if pin {
		q.Table = *table
	}
	q.AllowScan = *allowScan
	if err := window(&q, *since, *from, *to, now); err != nil {
		return cli.Usage(err)
	}
	if *limit < -1 {
		return cli.Usagef("--limit must be >= 0")
	}
	if *limit >= 0 {
		q.Limit = *limit
	}
	if q, err = readpath.Normalize(spec, q); err != nil {
		return cli.Usage(err)
	}
	plan, err := readpath.Plan(spec, q)
	if err != nil {
		var nt *rowkey.NoTableError
		if errors.As(err, &nt) {
			return cli.Usagef("%w, or pass --allow_scan to read the rows anyway", err)
		}
		return cli.Usage(err)
	}
	sum := summary{Query: name, Table: plan.Table, Scan: plan.Kind, Ranges: plan.Ranges, Reversed: plan.Reversed && !q.Latest, Latest: q.Latest, Stop: plan.Stop}
	if f, t := q.Window(); t != 0 {
		sum.From, sum.To = fmtMs(f), fmtMs(t)
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if *planOnly {
		sum.Checked = plan.Unused
		return enc.Encode(sum)
	}
	if *timeout <= 0 {
		return cli.Usagef("--timeout must be positive")
	}
	p, i, err := cli.Bigtable(*project, *instance)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client, err := bigtable.NewClientWithConfig(ctx, p, i, bigtable.ClientConfig{AppProfile: *appProfile, MetricsProvider: bigtable.NoopMetricsProvider{}})
	if err != nil {
		return fmt.Errorf("bigtable client for %s/%s: %w", p, i, err)
	}
	defer client.Close()
	res, err := readpath.Read(ctx, func(name string) readpath.Reader { return client.Open(name) }, spec, q)
	if err != nil {
		return fmt.Errorf("%w (is Bigtable reachable at %s? make emulators starts the local one)", err, bigtableTarget())
	}
	if res.Answer != nil {
		if err := printAnswer(enc, res.Answer); err != nil {
			return err
		}
	} else {
		for _, c := range res.Cells {
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
	}
	sum.Reads, sum.RowsRead, sum.Rows, sum.Cells = res.Reads, res.RowsRead, len(res.RowKeys), len(res.Cells)
	for _, f := range plan.Unused {
		src, _ := rowkey.SourceOf(spec, plan.Table, f)
		how := "key"
		if src.Column() {
			how = "column " + src.Family + ":" + src.Qualifier
		}
		sum.Checked = append(sum.Checked, f+" ("+how+")")
	}
	if res.Bounds != nil {
		sum.Empty = explainEmpty(stderr, spec, q, res.Bounds)
	}
	return enc.Encode(sum)
}

// parse parses args, turning flag errors into one-line usage errors.
func parse(fs *flag.FlagSet, args []string, usage func()) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		usage()
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return cli.Usagef("%w (query --help lists the flags)", err)
}

func bigtableTarget() string {
	if h, ok := cli.Emulator(cli.BigtableEmulatorEnv); ok {
		return "the emulator " + h
	}
	return "Cloud Bigtable"
}

// window sets q's window from the flags: --since overrides a named
// query's since; --from (and --to) replace it.
func window(q *readpath.Query, since, from, to string, now time.Time) error {
	if since != "" && (from != "" || to != "") {
		return errors.New("give --since or --from/--to, not both")
	}
	if to != "" && from == "" {
		return errors.New("--to needs --from")
	}
	if since != "" {
		d, err := schemas.ParseSince(since)
		if err != nil {
			return fmt.Errorf("--since: %w", err)
		}
		q.Since = d
	}
	if from != "" {
		f, err := parseTime(from)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		q.Since, q.From = 0, f
		if to != "" {
			t, err := parseTime(to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			if !t.After(f) {
				return fmt.Errorf("--to %s is not after --from %s", to, from)
			}
			q.To = t
		} else if !now.After(f) {
			return fmt.Errorf("--from %s is not before --now %s", from, now.Format(time.RFC3339))
		}
	}
	return nil
}

// parseTime reads RFC 3339, epoch milliseconds, a day or a month (UTC).
func parseTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	ms, err := timestamps.ParseTimestamp(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not RFC 3339, epoch ms, a day (2026-03-01) or a month (2026-03)", s)
	}
	return time.UnixMilli(ms).UTC(), nil
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// printAnswer prints one JSON line per group: its group_by values, the
// answer under the function's name, and the readings or values behind it.
func printAnswer(enc *json.Encoder, a *readpath.Answer) error {
	for _, g := range a.Groups {
		line := orderedLine{}
		for i, f := range a.GroupBy {
			line.add(f, g.Key[i])
		}
		v, ok := g.Value(a)
		switch a.Fn {
		case schemas.AggCount:
			line.add("count", g.N)
		case schemas.AggDuration:
			line.add("duration", g.Duration(a).String())
			line.add("seconds", v)
			line.add("readings", g.N)
			line.add("interval", a.Interval.String())
		default:
			if ok {
				line.add(a.Fn, round(v))
			} else {
				line.add(a.Fn, nil)
			}
			line.add("column", a.Column)
			line.add("values", g.N)
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

// round keeps 6 decimals, so an average prints as 45.133333 not
// 45.13333333333333.
func round(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// orderedLine is a JSON object that keeps its keys in insertion order.
type orderedLine struct {
	keys []string
	vals []any
}

func (o *orderedLine) add(k string, v any) { o.keys = append(o.keys, k); o.vals = append(o.vals, v) }

func (o orderedLine) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// explainEmpty prints why nothing matched and returns the summary's note.
func explainEmpty(stderr io.Writer, spec *schemas.Spec, q readpath.Query, b *readpath.Bounds) *emptyNote {
	var fields []string
	for k, v := range q.Where {
		fields = append(fields, k+"="+v)
	}
	for k, r := range q.Ranges {
		fields = append(fields, k+"="+r.String())
	}
	sort.Strings(fields)
	what := strings.Join(fields, " ")
	if what == "" {
		what = "the query"
	}
	note := &emptyNote{RowsRead: b.RowsRead}
	from, to := q.Window()
	switch {
	case !b.Found:
		note.Hint = fmt.Sprintf("the table holds no rows for %s at all", what)
	default:
		note.Oldest, note.Newest = fmtMs(b.Oldest), fmtMs(b.Newest)
		note.Hint = fmt.Sprintf("no rows for %s in the window; the table holds %s from %s to %s", what, what, note.Oldest, note.Newest)
		if to != 0 && b.Newest < from {
			suggest := time.UnixMilli(b.Newest).UTC()
			if suggest.Truncate(time.Second) != suggest {
				suggest = suggest.Truncate(time.Second).Add(time.Second)
			}
			note.Hint += fmt.Sprintf(": the newest is %s before the window; to ask as of then, pass --now %s",
				ageText(time.Duration(from-b.Newest)*time.Millisecond), suggest.Format(time.RFC3339))
		} else if to != 0 && b.Oldest > to {
			note.Hint += ": all of it is after the window; move --now or --to later"
		} else if to != 0 {
			note.Hint += ": none of it falls in the window (or matches the other fields)"
		}
	}
	fmt.Fprintf(stderr, "query: nothing matched: %s\n", note.Hint)
	return note
}

// ageText renders a duration in days, hours or minutes.
func ageText(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	}
	return d.Round(time.Second).String()
}

// listQueries prints the spec's named queries: name, parameters, window,
// aggregate, the table chosen and the description.
func listQueries(w io.Writer, spec *schemas.Spec) error {
	for _, q := range spec.Queries {
		var ps []string
		for _, p := range q.Params() {
			if p.HasDefault {
				ps = append(ps, "--param "+p.Field+"="+p.Default)
			} else {
				ps = append(ps, "--param "+p.Field+"=…")
			}
		}
		extra := ""
		if q.Since != "" {
			extra += " since " + q.Since
		}
		if q.Latest {
			extra += ", latest per prefix"
		}
		if q.Aggregate != nil {
			extra += ", " + q.Aggregate.String()
			if len(q.Aggregate.GroupBy) > 0 {
				extra += " by " + strings.Join(q.Aggregate.GroupBy, ",")
			}
		}
		fmt.Fprintf(w, "%s %s\n    %s\n    reads %s%s\n", q.Name, strings.Join(ps, " "), q.Description, rowkey.QueryTable(spec, &q).Name, extra)
	}
	return nil
}
