package bigqueryio

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	register.Function1x1(deadSummary)
}

const (
	bqProject = "test-project"
	bqDataset = "sensors"
)

// deadSummary renders a dead letter as "payload source reason: what", where
// what names the server's message when it is one the tests expect, and is
// the whole error otherwise.
func deadSummary(d deadletter.DeadLetter) string {
	what := d.Error
	switch {
	case !strings.HasPrefix(d.Error, "write_failed: bigquery table "):
		what = "unexpected error text: " + d.Error
	case strings.Contains(d.Error, "outside the allowed bounds"):
		what = "outside the streaming partition window"
	case strings.Contains(d.Error, "Missing required field: sensor_id"):
		what = "missing required sensor_id"
	case strings.Contains(d.Error, "column heart_rate (FLOAT64) cannot hold"):
		what = "heart_rate cannot hold a string"
	}
	if _, err := time.Parse(time.RFC3339Nano, d.Time); err != nil {
		what += " (bad time " + d.Time + ")"
	}
	return fmt.Sprintf("%s %s %s: %s", d.Payload, d.Source, d.Reason, what)
}

// startBigQuery starts an in-process emulator, points the environment at it
// (the DoFn runs in this process on prism) and creates the vitals table
// with EnsureTable, as a launch would.
func startBigQuery(t *testing.T, table string) (*bigquery.Client, *schemas.Spec) {
	t.Helper()
	ts := bqemu.StartServerForTest(t)
	t.Setenv(EmulatorHostEnv, strings.TrimPrefix(ts.RESTEndpoint, "http://"))
	t.Setenv(StorageEmulatorHostEnv, ts.GRPCAddr)
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := EnsureTable(ctx, bqProject, bqDataset, table, spec.BigQuery, true); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	c, err := bigquery.NewClient(ctx, bqProject, ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, spec
}

// vitalsRows parses n vitals readings, one second apart from base, into
// BigQuery rows; every fifth has no heart rate.
func vitalsRows(t *testing.T, spec *schemas.Spec, n int, base time.Time) []hours.BQRow {
	t.Helper()
	p := codec.NewParser(spec)
	b, err := hours.NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	flag := spec.FieldIndex("heart_rate_imputed")
	ingested := base.Add(time.Hour).UnixMilli()
	var rows []hours.BQRow
	for i := 0; i < n; i++ {
		hr := fmt.Sprintf(`,"heart_rate":%d.5`, 60+i%40)
		if i%5 == 0 {
			hr = ""
		}
		line := fmt.Sprintf(`{"sensor_id":"s-%d","timestamp":%d%s,"body_temperature":36.%d,"spO2":%d,"battery_level":%d}`,
			i%3, base.Add(time.Duration(i)*time.Second).UnixMilli(), hr, i%10, 90+i%10, 100-i%100)
		recs, err := p.Parse(nil, []byte(line), "vitals.jsonl")
		if err != nil {
			t.Fatalf("parse %s: %v", line, err)
		}
		r := recs[0]
		r.Values[flag] = schemas.Value{Kind: schemas.KindBool, Bool: i%7 == 0}
		rows = append(rows, b.BQRow(&r, ingested))
	}
	return rows
}

// wantRows is what reading rows back should give, keyed by reading_id.
func wantRows(spec *schemas.Spec, rows []hours.BQRow) map[string]map[string]bigquery.Value {
	out := map[string]map[string]bigquery.Value{}
	for _, r := range rows {
		m := map[string]bigquery.Value{}
		for i, c := range spec.BigQuery.Columns {
			v := r.Values[i]
			switch v.Kind {
			case schemas.KindNull:
				m[c.Name] = nil
			case schemas.KindString:
				m[c.Name] = v.Str
			case schemas.KindFloat:
				m[c.Name] = v.Num
			case schemas.KindBool:
				m[c.Name] = v.Bool
			case schemas.KindTime:
				m[c.Name] = time.UnixMilli(v.Int).UTC()
			}
		}
		out[m["reading_id"].(string)] = m
	}
	return out
}

// readTable reads every row of the table with table.Read, keyed by
// reading_id.
func readTable(t *testing.T, c *bigquery.Client, dataset, table string) map[string]map[string]bigquery.Value {
	t.Helper()
	rows, err := emulators.ReadBigQuery(context.Background(), c.Dataset(dataset).Table(table))
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	got := map[string]map[string]bigquery.Value{}
	for _, row := range rows {
		for k, v := range row {
			if ts, ok := v.(time.Time); ok {
				row[k] = ts.UTC()
			}
		}
		id, _ := row["reading_id"].(string)
		if _, dup := got[id]; dup {
			t.Errorf("reading %s landed twice", id)
		}
		got[id] = row
	}
	return got
}

func compareRows(t *testing.T, got, want map[string]map[string]bigquery.Value) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("table has %d rows, want %d", len(got), len(want))
	}
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		g, ok := got[id]
		if !ok {
			t.Errorf("reading %s (%v) did not land", id, want[id]["sensor_id"])
			continue
		}
		for col, w := range want[id] {
			gv := g[col]
			if wt, ok := w.(time.Time); ok {
				if gt, ok := gv.(time.Time); !ok || !gt.Equal(wt) {
					t.Errorf("reading %s %s = %v, want %v", id, col, gv, wt)
				}
				continue
			}
			if gv != w {
				t.Errorf("reading %s %s = %#v, want %#v", id, col, gv, w)
			}
		}
	}
}

// sinkCounter is the ledger counter of readings with outcome in the
// bigquery sink's table, from a pipeline result.
func sinkCounter(res beam.PipelineResult, table, outcome string) int64 {
	m := res.Metrics()
	return ledger.FromMetrics(&m)[ledger.SinkKey(deadletter.SinkBigQuery, table, hours.OriginReading, outcome)]
}

// writeCase is one configuration of the sink.
type writeCase struct {
	name string
	fn   writeFn
}

var writeCases = []writeCase{
	{"storage_write", writeFn{WriteMethod: WriteStorageWrite}},
	{"storage_write in many small requests", writeFn{WriteMethod: WriteStorageWrite, MaxRequestBytes: 1500, MaxInflight: 2}},
	{"insert_all", writeFn{WriteMethod: WriteInsertAll}},
	{"insert_all in many small requests", writeFn{WriteMethod: WriteInsertAll, MaxInsertRows: 7}},
	{"upsert", writeFn{WriteMethod: WriteUpsert}},
	{"upsert in many small requests", writeFn{WriteMethod: WriteUpsert, MaxRequestBytes: 1500, MaxInflight: 2}},
}

// runWrite writes rows through the sink on prism, asserts the dead letters
// and returns the pipeline result.
func runWrite(t *testing.T, fn writeFn, spec *schemas.Spec, table string, rows []hours.BQRow, wantDead []string) beam.PipelineResult {
	t.Helper()
	fn.Project, fn.Dataset, fn.Table, fn.Schema = bqProject, bqDataset, table, spec.BigQuery
	fn.Retry.Initial = 10 * time.Millisecond
	p, s := beam.NewPipelineWithRoot()
	col := beam.CreateList(s, rows)
	dead := beam.ParDo(s.Scope("bigquery.Write"), &fn, col)
	summaries := beam.ParDo(s, deadSummary, dead)
	if len(wantDead) == 0 {
		passert.Empty(s, summaries)
	} else {
		passert.EqualsList(s, summaries, wantDead)
	}
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	return res
}

func TestBigQueryWriteFnLandsEveryRow(t *testing.T) {
	for i, tc := range writeCases {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("readings_%d", i)
			c, spec := startBigQuery(t, table)
			rows := vitalsRows(t, spec, 200, time.Now().UTC().Add(-48*time.Hour).Truncate(time.Hour))
			res := runWrite(t, tc.fn, spec, table, rows, nil)

			for outcome, want := range map[string]int{ledger.Routed: len(rows), ledger.Written: len(rows), ledger.Failed: 0} {
				if got := sinkCounter(res, table, outcome); got != int64(want) {
					t.Errorf("readings %s = %d, want %d", outcome, got, want)
				}
			}
			compareRows(t, readTable(t, c, bqDataset, table), wantRows(spec, rows))
		})
	}
}

func TestBigQueryWriteFnDeadLettersRejectedRowsAndLandsTheRest(t *testing.T) {
	for i, tc := range writeCases {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("readings_%d", i)
			c, spec := startBigQuery(t, table)
			now := time.Now().UTC()
			good := vitalsRows(t, spec, 60, now.Add(-2*time.Hour).Truncate(time.Minute))

			// 20 years back is outside BigQuery's streaming partition window.
			old := vitalsRows(t, spec, 1, now.AddDate(-20, 0, 0))[0]
			old.Origin.Raw = "old-reading"
			// A null REQUIRED column.
			noSensor := vitalsRows(t, spec, 1, now.Add(-time.Hour))[0]
			noSensor.Values[bqCol(spec.BigQuery, "sensor_id")] = schemas.Value{}
			noSensor.Origin.Raw = "no-sensor"

			// A value the column cannot hold, caught before sending.
			badValue := vitalsRows(t, spec, 1, now.Add(-time.Hour))[0]
			badValue.Values[bqCol(spec.BigQuery, "heart_rate")] = schemas.Value{Kind: schemas.KindString, Str: "fast"}
			badValue.Origin.Raw = "bad-value"

			rows := append([]hours.BQRow{badValue}, good[:20]...)
			rows = append(rows, old)
			rows = append(rows, good[20:45]...)
			rows = append(rows, noSensor)
			rows = append(rows, good[45:]...)

			res := runWrite(t, tc.fn, spec, table, rows, []string{
				"old-reading vitals.jsonl write_failed: outside the streaming partition window",
				"no-sensor vitals.jsonl write_failed: missing required sensor_id",
				"bad-value vitals.jsonl write_failed: heart_rate cannot hold a string",
			})

			for outcome, want := range map[string]int{ledger.Routed: len(rows), ledger.Written: len(good), ledger.Failed: 3} {
				if got := sinkCounter(res, table, outcome); got != int64(want) {
					t.Errorf("readings %s = %d, want %d", outcome, got, want)
				}
			}
			compareRows(t, readTable(t, c, bqDataset, table), wantRows(spec, good))
		})
	}
}

// TestBigQueryWriteFnUpsertKeepsTheNewestRow writes two versions of every
// reading, in one run and then again in two runs in the wrong order: the
// table keeps one row per reading, the version with the higher sequence
// number.
func TestBigQueryWriteFnUpsertKeepsTheNewestRow(t *testing.T) {
	c, spec := startBigQuery(t, "readings")
	base := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Hour)
	old := vitalsRows(t, spec, 50, base)
	newer := vitalsRows(t, spec, 50, base)
	for i := range newer {
		newer[i].Values[bqCol(spec.BigQuery, "heart_rate")] = schemas.Value{Kind: schemas.KindFloat, Num: 200 + float64(i)}
		newer[i].Seq = hours.ChangeSeq{Micros: old[i].Seq.Micros, Pane: 1} // a later firing, same microsecond
	}
	fn := writeFn{WriteMethod: WriteUpsert, MaxRequestBytes: 2000}
	// Both versions in one run, interleaved, the newer first half the time.
	var mixed []hours.BQRow
	for i := range old {
		if i%2 == 0 {
			mixed = append(mixed, newer[i], old[i])
		} else {
			mixed = append(mixed, old[i], newer[i])
		}
	}
	res := runWrite(t, fn, spec, "readings", mixed, nil)
	if got := sinkCounter(res, "readings", ledger.Written); got != int64(len(mixed)) {
		t.Errorf("readings written = %d, want %d (each append lands)", got, len(mixed))
	}
	compareRows(t, readTable(t, c, bqDataset, "readings"), wantRows(spec, newer))
	// A rerun of the older version changes nothing.
	runWrite(t, fn, spec, "readings", old, nil)
	compareRows(t, readTable(t, c, bqDataset, "readings"), wantRows(spec, newer))
	md, err := c.Dataset(bqDataset).Table("readings").Metadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if md.NumRows != uint64(len(newer)) {
		t.Errorf("tables.get numRows = %d, want %d", md.NumRows, len(newer))
	}
}

func TestBigQueryWriteFnUpsertNeedsAPrimaryKey(t *testing.T) {
	startBigQuery(t, "readings")
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	spec.BigQuery.PrimaryKey = nil
	fn := newWriteFn(bqProject, bqDataset, "readings", WriteUpsert, spec.BigQuery)
	err = fn.Setup(context.Background())
	defer fn.Teardown()
	if err == nil || !strings.Contains(err.Error(), "needs a primary key") {
		t.Fatalf("Setup error = %v, want one saying the upsert method needs a primary key", err)
	}
}

func TestBigQueryWriteFnSetupNamesAMissingTable(t *testing.T) {
	startBigQuery(t, "readings")
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	fn := newWriteFn(bqProject, bqDataset, "nope", WriteStorageWrite, spec.BigQuery)
	err = fn.Setup(context.Background())
	defer fn.Teardown()
	if err == nil || !strings.Contains(err.Error(), bqProject+":"+bqDataset+".nope") || !strings.Contains(err.Error(), "emulator") {
		t.Fatalf("Setup error = %v, want one naming the table and the endpoint", err)
	}
}

// TestBigQueryWriteFnRealBigQuery runs the same write against Cloud
// BigQuery. It needs GOOGLE_CLOUD_PROJECT and application default
// credentials; it creates a dataset (or uses BIGQUERY_TEST_DATASET) and
// deletes what it created.
func TestBigQueryWriteFnRealBigQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short: writes to Cloud BigQuery")
	}
	project := os.Getenv("GOOGLE_CLOUD_PROJECT")
	if project == "" {
		t.Skip("GOOGLE_CLOUD_PROJECT is not set: set it (and application default credentials) to run against Cloud BigQuery")
	}
	// Real endpoints, whatever the environment says.
	t.Setenv(EmulatorHostEnv, "")
	t.Setenv(StorageEmulatorHostEnv, "")
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, project)
	if err != nil {
		t.Skipf("no Google credentials for project %s (run gcloud auth application-default login): %v", project, err)
	}
	defer c.Close()
	dataset := os.Getenv("BIGQUERY_TEST_DATASET")
	if dataset == "" {
		dataset = fmt.Sprintf("sensorpipe_test_%d", time.Now().UnixNano())
		t.Cleanup(func() {
			if err := c.Dataset(dataset).DeleteWithContents(context.Background()); err != nil {
				t.Logf("delete dataset %s: %v", dataset, err)
			}
		})
	}
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []writeCase{writeCases[0], writeCases[2]} {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("readings_%d_%d", time.Now().Unix(), i)
			if err := EnsureTable(ctx, project, dataset, table, spec.BigQuery, true); err != nil {
				t.Fatalf("EnsureTable: %v", err)
			}
			t.Cleanup(func() { _ = c.Dataset(dataset).Table(table).Delete(context.Background()) })
			rows := vitalsRows(t, spec, 50, time.Now().UTC().Add(-time.Hour).Truncate(time.Minute))

			fn := tc.fn
			fn.Project, fn.Dataset, fn.Table, fn.Schema = project, dataset, table, spec.BigQuery
			p, s := beam.NewPipelineWithRoot()
			dead := beam.ParDo(s, &fn, beam.CreateList(s, rows))
			passert.Empty(s, beam.ParDo(s, deadSummary, dead))
			if err := ptest.Run(p); err != nil {
				t.Fatalf("pipeline: %v", err)
			}

			// Streamed rows may take a moment to be listable: poll.
			want := wantRows(spec, rows)
			deadline := time.Now().Add(2 * time.Minute)
			var got map[string]map[string]bigquery.Value
			for {
				got = readTable(t, c, dataset, table)
				if len(got) >= len(want) || time.Now().After(deadline) {
					break
				}
				time.Sleep(2 * time.Second)
			}
			compareRows(t, got, want)
		})
	}
}
