// Command query reads a dataset's cells from Bigtable the way its row key
// allows: it derives the row ranges from the spec's key template (a prefix,
// a time range, reversed bounds under a reverse timestamp, one range per
// salt bucket), reads them, prints the cells as JSON lines, and reports the
// rows read and the ranges used.
//
//	go run ./launch/query --schema vitals --where sensor_id=s-4f1a --since 1h
//
// With BIGTABLE_EMULATOR_HOST set, it reads the emulator.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/internal/readpath"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// whereFlags collects repeated --where k=v flags.
type whereFlags map[string]string

func (w whereFlags) String() string {
	var parts []string
	for k, v := range w {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (w whereFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want field=value, got %q", s)
	}
	w[k] = v
	return nil
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "query:", err)
			os.Exit(2)
		}
	}
}

// summary is the last line printed: what the read did.
type summary struct {
	Table    string             `json:"table"`
	Scan     string             `json:"scan"`
	Ranges   []schemas.RowRange `json:"ranges"`
	Reversed bool               `json:"newest_first,omitempty"`
	RowsRead int                `json:"rows_read"`
	Cells    int                `json:"cells"`
	Unused   []string           `json:"unused_where,omitempty"`
	Stop     string             `json:"prefix_ends,omitempty"`
	From     string             `json:"from,omitempty"`
	To       string             `json:"to,omitempty"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `query: read a dataset's cells from Bigtable through its row key.

Usage:
  query --schema NAME|FILE --where field=value [--where ...] [--since 1h]
        [--limit N] [--now RFC3339] [--bigtable_project P]
        [--bigtable_instance I] [--bigtable_table T] [--plan]

Prints one JSON line per cell, then a summary line with the rows read and
the row ranges used. Set BIGTABLE_EMULATOR_HOST to read the emulator.
Built-in specs: %s.

Flags:
`, strings.Join(schemas.BuiltinSpecNames(), ", "))
		fs.PrintDefaults()
	}
	where := whereFlags{}
	schema := fs.String("schema", "", "dataset spec: a built-in name or a YAML file (required)")
	fs.Var(where, "where", "field=value fixed by equality (repeatable), e.g. --where sensor_id=s-4f1a")
	since := fs.String("since", "", "look-back window ending at --now, e.g. 1h, 90m, 7d (default: the main query's since)")
	limit := fs.Int("limit", -1, "read at most this many rows (default: the main query's limit; 0: no limit)")
	nowFlag := fs.String("now", "", "end of the window, RFC 3339 (default: the current time)")
	project := fs.String("bigtable_project", "sensorpipe-local", "Bigtable project")
	instance := fs.String("bigtable_instance", "sensorpipe", "Bigtable instance")
	table := fs.String("bigtable_table", "", "Bigtable table: one of the spec's tables, or the physical name of the main query's table (default: the main query's table, else the spec's first)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up reading after this long")
	planOnly := fs.Bool("plan", false, "print the row ranges and exit without reading")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *schema == "" {
		return errors.New("--schema is required (a built-in name or a YAML file)")
	}
	spec, err := schemas.LoadSpec(*schema)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if *nowFlag != "" {
		ms, err := schemas.ParseTimestamp(*nowFlag)
		if err != nil {
			return fmt.Errorf("--now: %w", err)
		}
		now = time.UnixMilli(ms).UTC()
	}
	q := readpath.Query{Where: where, Now: now}
	if mq := spec.MainQuery(); mq != nil {
		q.Table = spec.QueryTable(mq).Name
		q.Limit = mq.Limit
		if *since == "" {
			*since = mq.Since
		}
	}
	// --bigtable_table names a spec table (its key template is used), or
	// the physical name of the main query's table when it was written under
	// another name.
	physical := ""
	if *table != "" {
		if spec.Table(*table) != nil {
			q.Table = *table
		} else {
			physical = *table
		}
	}
	if *limit < -1 {
		return errors.New("--limit must be >= 0")
	}
	if *limit >= 0 {
		q.Limit = *limit
	}
	if *since != "" {
		if q.Since, err = schemas.ParseSince(*since); err != nil {
			return fmt.Errorf("--since: %w", err)
		}
	}
	plan, err := readpath.Plan(spec, q)
	if err != nil {
		return err
	}
	sum := summary{Table: plan.Table, Scan: plan.Kind, Ranges: plan.Ranges, Reversed: plan.Reversed, Unused: plan.Unused, Stop: plan.Stop}
	if from, to := q.Window(); to != 0 {
		sum.From = time.UnixMilli(from).UTC().Format(time.RFC3339Nano)
		sum.To = time.UnixMilli(to).UTC().Format(time.RFC3339Nano)
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if *planOnly {
		return enc.Encode(sum)
	}
	if len(plan.Unused) > 0 {
		fmt.Fprintf(stderr, "query: warning: where %s cannot narrow the scan (%s); rows are not filtered on it\n", strings.Join(plan.Unused, ", "), plan.Stop)
	}
	if *timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client, err := bigtable.NewClient(ctx, *project, *instance)
	if err != nil {
		return fmt.Errorf("bigtable client: %w", err)
	}
	defer client.Close()
	name := plan.Table
	if physical != "" {
		name = physical
		sum.Table = physical
	}
	res, err := readpath.Read(ctx, client.Open(name), spec, q)
	if err != nil {
		return fmt.Errorf("%w (is Bigtable reachable? set BIGTABLE_EMULATOR_HOST for the emulator)", err)
	}
	for _, c := range res.Cells {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	sum.RowsRead, sum.Cells = res.RowsRead, len(res.Cells)
	return enc.Encode(sum)
}
