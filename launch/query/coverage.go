package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// The questions every spec with a cadence answers without declaring them:
// which sensors went quiet (the inventory), and how complete each hour of
// one sensor was (its rollups' coverage). A spec's own query of the same
// name wins.
const (
	querySilentSensors = "silent_sensors"
	queryCoverage      = "coverage"
)

// builtinQuery reports whether name is one of the questions above and the
// spec declares no query of that name.
func builtinQuery(spec *schemas.Spec, name string) bool {
	return (name == querySilentSensors || name == queryCoverage) && spec.Query(name) == nil
}

// openBigtable opens the client the flags name.
func openBigtable(ctx context.Context, qf *queryFlags) (*bigtable.Client, error) {
	p, i, err := cli.Bigtable(qf.project, qf.instance)
	if err != nil {
		return nil, err
	}
	client, err := bigtable.NewClientWithConfig(ctx, p, i, bigtable.ClientConfig{AppProfile: qf.appProfile, MetricsProvider: bigtable.NoopMetricsProvider{}})
	if err != nil {
		return nil, fmt.Errorf("bigtable client for %s/%s: %w", p, i, err)
	}
	return client, nil
}

// identityFields renders an identity key as its fields, in spec order.
func identityFields(spec *schemas.Spec, key string, line *orderedLine) {
	texts := hours.IdentityTexts(spec, key)
	for i, name := range spec.Identity {
		if texts == nil {
			line.add(name, key)
			continue
		}
		line.add(name, texts[i])
	}
}

// silentSensors prints one JSON line per sensor of the inventory last seen
// within lookback of now but not within silentFor: its identity fields,
// last_seen and first_seen. It reads the inventory in one scan. The summary
// goes to stderr, so stdout holds the sensors alone.
func silentSensors(ctx context.Context, qf *queryFlags, spec *schemas.Spec, now time.Time, stdout, stderr io.Writer) error {
	if spec.Bigtable.Inventory == "" {
		return cli.Usagef("spec %s names no inventory table: add bigtable.inventory: TABLE, and run a batch or stream to fill it", spec.Name)
	}
	silentFor, err := schemas.ParseSince(qf.silentFor)
	if err != nil || silentFor <= 0 {
		return cli.Usagef("--silent_for %q: give how long without a reading makes a sensor silent, e.g. 1h", qf.silentFor)
	}
	lookback, err := schemas.ParseSince(qf.lookback)
	if err != nil || lookback <= 0 {
		return cli.Usagef("--lookback %q: give how far back a sensor must have been seen, e.g. 7d", qf.lookback)
	}
	if lookback < silentFor {
		return cli.Usagef("--lookback %s is shorter than --silent_for %s: no sensor could be both", qf.lookback, qf.silentFor)
	}
	if qf.timeout <= 0 {
		return cli.Usagef("--timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, qf.timeout)
	defer cancel()
	client, err := openBigtable(ctx, qf)
	if err != nil {
		return err
	}
	defer client.Close()
	seenFrom, quietFrom := now.Add(-lookback).UnixMilli(), now.Add(-silentFor).UnixMilli()
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	var rows, silent int
	var decodeErr error
	err = client.Open(spec.Bigtable.Inventory).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		rows++
		var cells []hours.Cell
		for fam, items := range r {
			for _, it := range items {
				cells = append(cells, hours.Cell{Family: fam, Qualifier: it.Column[len(fam)+1:], TsMicros: int64(it.Timestamp), Value: it.Value})
			}
		}
		e, ok, err := hours.DecodeInventory(r.Key(), cells)
		if err != nil {
			decodeErr = err
			return false
		}
		if !ok || e.LastSeenMs < seenFrom || e.LastSeenMs >= quietFrom {
			return true
		}
		silent++
		var line orderedLine
		identityFields(spec, e.Identity, &line)
		line.add("last_seen", fmtMs(e.LastSeenMs))
		line.add("first_seen", fmtMs(e.FirstSeenMs))
		return enc.Encode(line) == nil
	}, bigtable.RowFilter(bigtable.ChainFilters(bigtable.ColumnRangeFilter(coverage.InventoryFamily, "", ""), bigtable.LatestNFilter(1))))
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return fmt.Errorf("read inventory %s: %w (is Bigtable reachable at %s? make emulators starts the local one)", spec.Bigtable.Inventory, err, bigtableTarget())
	}
	return json.NewEncoder(stderr).Encode(map[string]any{"query": querySilentSensors, "table": spec.Bigtable.Inventory, "scan": "full",
		"rows_read": rows, "silent": silent, "seen_since": fmtMs(seenFrom), "quiet_since": fmtMs(quietFrom)})
}

// hourCoverage is one rollup's columns, by qualifier.
type hourCoverage struct {
	endMs int64
	cols  map[string][]byte
}

// coverageByHour prints, for one sensor (its identity fields in params),
// one JSON line per hour of its rollups that overlaps the window [now −
// since, now), oldest first: the identity, window_start, window_end, count
// and the coverage columns. The summary goes to stderr.
func coverageByHour(ctx context.Context, qf *queryFlags, spec *schemas.Spec, now time.Time, stdout, stderr io.Writer) error {
	if spec.Rollup == nil || !spec.HasCadence() {
		return cli.Usagef("spec %s has no rollup with a cadence: declare rollup: and cadence: to have coverage per hour", spec.Name)
	}
	where := map[string]string{}
	for _, name := range spec.Identity {
		v, ok := qf.params.vals[name]
		if !ok {
			return cli.Usagef("coverage needs the sensor: --param %s=VALUE for each identity field (%v)", name, spec.Identity)
		}
		where[name] = v
	}
	for k := range qf.params.vals {
		if where[k] == "" {
			return cli.Usagef("--param %s: coverage takes the identity fields %v only", k, spec.Identity)
		}
	}
	sinceText := qf.since
	if sinceText == "" {
		sinceText = "24h"
	}
	since, err := schemas.ParseSince(sinceText)
	if err != nil || since <= 0 {
		return cli.Usagef("--since %q: give a look-back such as 24h", qf.since)
	}
	fromMs, toMs := now.Add(-since).UnixMilli(), now.UnixMilli()
	table := spec.Bigtable.Tables[0].Name
	// The hour that holds --now - since overlaps the window: plan from its
	// start.
	plan, err := rowkey.PlanScan(spec, rowkey.KeyQuery{Table: table, Where: where, FromMs: hours.WindowStart(fromMs, time.Hour), ToMs: toMs})
	if err != nil {
		return cli.Usage(err)
	}
	if qf.timeout <= 0 {
		return cli.Usagef("--timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, qf.timeout)
	defer cancel()
	client, err := openBigtable(ctx, qf)
	if err != nil {
		return err
	}
	defer client.Close()
	var rl bigtable.RowRangeList
	for _, r := range plan.Ranges {
		rl = append(rl, bigtable.NewRange(r.Start, r.End))
	}
	byEnd := map[int64]*hourCoverage{}
	var rowsRead int
	fam := spec.Rollup.Family
	err = client.Open(table).ReadRows(ctx, rl, func(r bigtable.Row) bool {
		rowsRead++
		for _, it := range r[fam] {
			endMs := int64(it.Timestamp) / 1000
			if endMs <= fromMs || endMs-int64(time.Hour/time.Millisecond) >= toMs {
				continue
			}
			h := byEnd[endMs]
			if h == nil {
				h = &hourCoverage{endMs: endMs, cols: map[string][]byte{}}
				byEnd[endMs] = h
			}
			h.cols[it.Column[len(fam)+1:]] = it.Value
		}
		return true
	}, bigtable.RowFilter(bigtable.ChainFilters(bigtable.ColumnRangeFilter(fam, "", ""), bigtable.LatestNFilter(1))))
	if err != nil {
		return fmt.Errorf("read rollups from %s: %w (is Bigtable reachable at %s? make emulators starts the local one)", table, err, bigtableTarget())
	}
	ends := make([]int64, 0, len(byEnd))
	for end := range byEnd {
		ends = append(ends, end)
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, end := range ends {
		h := byEnd[end]
		var line orderedLine
		for _, name := range spec.Identity {
			line.add(name, where[name])
		}
		line.add(hours.RollupWindowStart, fmtMs(end-int64(time.Hour/time.Millisecond)))
		line.add(hours.RollupWindowEnd, fmtMs(end))
		for _, col := range []string{hours.RollupCount, coverage.RollupExpected, coverage.RollupCoverage, coverage.RollupGaps, coverage.RollupLongestGapS} {
			v, ok := h.cols[col]
			if !ok {
				line.add(col, nil)
				continue
			}
			n, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				line.add(col, string(v))
				continue
			}
			line.add(col, n)
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return json.NewEncoder(stderr).Encode(map[string]any{"query": queryCoverage, "table": table, "scan": plan.Kind,
		"ranges": plan.Ranges, "rows_read": rowsRead, "hours": len(ends), "from": fmtMs(fromMs), "to": fmtMs(toMs)})
}
