package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/bqschema"
	"github.com/sensorpipe/sensorpipe/schemas/digest"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// bigQueryTable is keys compare's BigQuery side: a readings table that a
// spec's bigquery section wrote, and the spec's hourly rollup table in
// the same dataset. Both are read with the Storage Read API, each in
// several streams, and held in memory by sensor-hour: the readings of a
// table written at least once (--bigquery_write_method=storage_write) can
// come in several rows, of which the newest ($ingested_at) counts, as the
// querying guide's dedup view keeps it.
type bigQueryTable struct {
	label                   string
	project, dataset, table string
	spec                    *schemas.Spec
	plan                    *bqschema.ReadPlan
	ingestedCol             string // the $ingested_at column, or ""
	rollups                 *bqschema.RollupReadPlan
	rollupTable             string

	mu    sync.Mutex
	hours map[digest.SensorHour]*bqHour
}

// bqHour is one sensor-hour of the BigQuery side.
type bqHour struct {
	readings map[int64]bqReading
	rollup   []hours.Cell
	pane     int64 // the rollup row's pane index
	hasRoll  bool
}

// bqReading is one reading's observed fields, and when its row was
// ingested (epoch microseconds; 0 when the table has no such column).
type bqReading struct {
	fields   []string
	ingested int64
}

// openBigQuery prepares the BigQuery side: the readings table of spec
// named by ref ([PROJECT:]DATASET.TABLE, the project defaulting to
// project).
func openBigQuery(label, specName, ref, project string) (*bigQueryTable, error) {
	spec, err := cli.LoadSpec(specName)
	if err != nil {
		return nil, err
	}
	t, err := bqschema.ParseTableRef(ref, project)
	if err != nil {
		return nil, fmt.Errorf("--against_bigquery=%s: %w", ref, err)
	}
	plan, err := bqschema.NewReadPlan(spec)
	if err != nil {
		return nil, err
	}
	bt := &bigQueryTable{label: label, project: t.Project, dataset: t.Dataset, table: t.Table, spec: spec, plan: plan,
		hours: map[digest.SensorHour]*bqHour{}}
	for _, c := range spec.BigQuery.Columns {
		if c.Value == schemas.ValueIngestedAt {
			bt.ingestedCol = c.Name
			break
		}
	}
	if c, err := hours.Compile(spec, hours.CompileOptions{Format: "json"}); err == nil && c.Roller() != nil {
		bq := c.Roller().BigQuery()
		if bt.rollups, err = bqschema.NewRollupReadPlan(spec, bq); err != nil {
			return nil, err
		}
		bt.rollupTable = bq.Table
	}
	return bt, nil
}

func (bt *bigQueryTable) String() string {
	return fmt.Sprintf("%s bigquery:%s:%s.%s (%s)", bt.label, bt.project, bt.dataset, bt.table, bt.spec.Name)
}

func (bt *bigQueryTable) name() string     { return bt.label }
func (bt *bigQueryTable) hasRollups() bool { return bt.rollups != nil }
func (bt *bigQueryTable) dropRollups()     { bt.rollups = nil }
func (bt *bigQueryTable) close()           {}

// get is the sensor-hour h, created when new; bt.mu is held.
func (bt *bigQueryTable) get(h digest.SensorHour) *bqHour {
	hr := bt.hours[h]
	if hr == nil {
		hr = &bqHour{readings: map[int64]bqReading{}}
		bt.hours[h] = hr
	}
	return hr
}

// summarize reads the readings table (restricted to [fromMs, toMs) on
// its event-time column) and the rollup table, and sums each sensor-hour.
// A row that cannot be read back as a reading counts as skipped, as a
// Bigtable reading whose cells cannot be rebuilt does.
func (bt *bigQueryTable) summarize(ctx context.Context, fromMs, toMs int64, _ int) (*tableSummary, error) {
	to := toMs
	if to == math.MaxInt64 {
		to = 0
	}
	cols := bt.plan.Columns()
	if bt.ingestedCol != "" {
		cols = append(append([]string(nil), cols...), bt.ingestedCol)
	}
	if err := bigqueryio.CheckSource(ctx, bigqueryio.Config{Project: bt.project, Dataset: bt.dataset, Table: bt.table}, bt.spec); err != nil {
		return nil, fmt.Errorf("--against_bigquery: %w", err)
	}
	n := len(bt.plan.Columns())
	var skipped int
	err := bigqueryio.ScanTable(ctx, bt.project, bt.dataset, bt.table, cols, bt.plan.RowRestriction(fromMs, to), func(vals []any) error {
		rec, err := bt.plan.Record(vals[:n])
		bt.mu.Lock()
		defer bt.mu.Unlock()
		if err != nil {
			skipped++
			return nil
		}
		var ingested int64
		if len(vals) > n {
			if t, ok := vals[n].(time.Time); ok {
				ingested = t.UnixMicro()
			}
		}
		hr := bt.get(digest.HourOf(bt.spec, &rec))
		if old, ok := hr.readings[rec.EventMs]; !ok || ingested > old.ingested {
			hr.readings[rec.EventMs] = bqReading{fields: digest.ObservedFields(bt.spec, &rec), ingested: ingested}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bt, err)
	}
	if bt.rollups != nil {
		err := bigqueryio.ScanTable(ctx, bt.project, bt.dataset, bt.rollupTable, bt.rollups.Columns(), "", func(vals []any) error {
			row, err := bt.rollups.Row(vals)
			if err != nil {
				return fmt.Errorf("%s.%s: %w", bt.dataset, bt.rollupTable, err)
			}
			if row.StartMs < fromMs || row.StartMs >= toMs {
				return nil
			}
			bt.mu.Lock()
			defer bt.mu.Unlock()
			hr := bt.get(digest.SensorHour{Identity: group.IdentityKey(bt.spec, &row.Identity), StartMs: row.StartMs})
			if !hr.hasRoll || row.PaneIndex > hr.pane {
				hr.rollup, hr.pane, hr.hasRoll = row.Cells, row.PaneIndex, true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: rollups: %w", bt, err)
		}
	}
	sum := &tableSummary{hours: map[digest.SensorHour]digest.HourSummary{}, skipped: skipped}
	for h, hr := range bt.hours {
		var hs digest.HourSummary
		for ms, r := range hr.readings {
			hs.Readings.Add(digest.FieldsText(ms, r.fields))
			sum.readings++
		}
		for _, c := range hr.rollup {
			hs.Rollup.Add(digest.RollupText(c))
		}
		sum.hours[h] = hs
	}
	return sum, nil
}

// hour is one sensor-hour as summarize read it.
func (bt *bigQueryTable) hour(_ context.Context, h digest.SensorHour) (hourDetail, error) {
	d := hourDetail{readings: map[int64][]string{}, rollup: map[string]string{}}
	bt.mu.Lock()
	defer bt.mu.Unlock()
	hr := bt.hours[h]
	if hr == nil {
		return d, nil
	}
	for ms, r := range hr.readings {
		d.readings[ms] = r.fields
	}
	for _, c := range hr.rollup {
		d.rollup[c.Qualifier] = string(c.Value)
	}
	return d, nil
}
