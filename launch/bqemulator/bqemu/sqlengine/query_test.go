package sqlengine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	_ "github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu/sqlengine"
)

const project = "test-project"

// readingsSchema is the vitals spec's BigQuery table.
func readingsSchema() bigquery.Schema {
	return bigquery.Schema{
		{Name: "sensor_id", Type: bigquery.StringFieldType, Required: true},
		{Name: "event_timestamp", Type: bigquery.TimestampFieldType, Required: true},
		{Name: "heart_rate", Type: bigquery.FloatFieldType},
		{Name: "body_temperature", Type: bigquery.FloatFieldType},
		{Name: "spO2", Type: bigquery.FloatFieldType},
		{Name: "battery_level", Type: bigquery.FloatFieldType},
		{Name: "heart_rate_imputed", Type: bigquery.BooleanFieldType},
		{Name: "reading_id", Type: bigquery.StringFieldType, Required: true},
		{Name: "ingested_at", Type: bigquery.TimestampFieldType},
	}
}

// hourlySchema is (the start of) the rollup table.
func hourlySchema() bigquery.Schema {
	return bigquery.Schema{
		{Name: "sensor_id", Type: bigquery.StringFieldType, Required: true},
		{Name: "window_start", Type: bigquery.TimestampFieldType, Required: true},
		{Name: "window_end", Type: bigquery.TimestampFieldType, Required: true},
		{Name: "count", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "heart_rate_mean", Type: bigquery.FloatFieldType},
		{Name: "heart_rate_imputed_count", Type: bigquery.IntegerFieldType},
		{Name: "pane_timing", Type: bigquery.StringFieldType, Required: true},
		{Name: "pane_index", Type: bigquery.IntegerFieldType, Required: true},
	}
}

type env struct {
	ts  *bqemu.TestServer
	bq  *bigquery.Client
	now time.Time
}

// newEnv starts an emulator with vitals.readings (each of 3 readings of 2
// sensors written twice, the second copy ingested later with a changed
// heart rate, plus one reading 3 days old) and vitals.readings_hourly.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	ts := bqemu.StartServerForTest(t)
	c, err := bigquery.NewClient(ctx, project, ts.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &env{ts: ts, bq: c, now: time.Now().UTC().Truncate(time.Hour)}
	ds := c.Dataset("vitals")
	if err := ds.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	readings := ds.Table("readings")
	if err := readings.Create(ctx, &bigquery.TableMetadata{
		Schema:           readingsSchema(),
		TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType, Field: "event_timestamp"},
		Clustering:       &bigquery.Clustering{Fields: []string{"sensor_id"}},
	}); err != nil {
		t.Fatal(err)
	}
	var rows []*bigquery.ValuesSaver
	add := func(sensor string, at time.Time, hr float64, ingested time.Time) {
		id := fmt.Sprintf("%s|%d", sensor, at.UnixMilli())
		rows = append(rows, &bigquery.ValuesSaver{Schema: readingsSchema(), Row: []bigquery.Value{
			sensor, at, hr, 36.6, 98.0, 80.0, false, id, ingested}})
	}
	for _, s := range []string{"patient-001", "patient-002"} {
		for i := 0; i < 3; i++ {
			at := e.now.Add(-time.Duration(i) * time.Minute)
			add(s, at, 70+float64(i), e.now)
			add(s, at, 80+float64(i), e.now.Add(time.Minute)) // the final value
		}
	}
	add("patient-001", e.now.Add(-72*time.Hour), 60, e.now)
	if err := readings.Inserter().Put(ctx, rows); err != nil {
		t.Fatal(err)
	}
	hourly := ds.Table("readings_hourly")
	if err := hourly.Create(ctx, &bigquery.TableMetadata{Schema: hourlySchema()}); err != nil {
		t.Fatal(err)
	}
	var hrows []*bigquery.ValuesSaver
	for i, s := range []string{"patient-001", "patient-002"} {
		hrows = append(hrows, &bigquery.ValuesSaver{Schema: hourlySchema(), Row: []bigquery.Value{
			s, e.now.Add(-time.Hour), e.now, int64(3 + i), 81.0 + float64(i), int64(1), "ON_TIME", int64(0)}})
	}
	if err := hourly.Inserter().Put(ctx, hrows); err != nil {
		t.Fatal(err)
	}
	addFleet(t, e)
	return e
}

// addFleet adds fleet.fleet_readings and fleet.fleet_readings_hourly with
// the coverage columns (testdata/fleet/fleet.yaml): dev-a reported until
// now, dev-c stopped two hours ago.
func addFleet(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	ds := e.bq.Dataset("fleet")
	if err := ds.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	readingsSchema := bigquery.Schema{
		{Name: "device", Type: bigquery.StringFieldType, Required: true},
		{Name: "ts", Type: bigquery.TimestampFieldType, Required: true},
		{Name: "reading_id", Type: bigquery.StringFieldType, Required: true},
	}
	readings := ds.Table("fleet_readings")
	if err := readings.Create(ctx, &bigquery.TableMetadata{Schema: readingsSchema}); err != nil {
		t.Fatal(err)
	}
	var rows []*bigquery.ValuesSaver
	for _, r := range []struct {
		device string
		ago    time.Duration
	}{{"dev-a", time.Minute}, {"dev-a", 2 * time.Minute}, {"dev-c", 2 * time.Hour}, {"dev-c", 3 * time.Hour}} {
		at := e.now.Add(-r.ago)
		rows = append(rows, &bigquery.ValuesSaver{Schema: readingsSchema, Row: []bigquery.Value{r.device, at, fmt.Sprintf("%s|%d", r.device, at.UnixMilli())}})
	}
	if err := readings.Inserter().Put(ctx, rows); err != nil {
		t.Fatal(err)
	}
	hourlySchema := bigquery.Schema{
		{Name: "device", Type: bigquery.StringFieldType, Required: true},
		{Name: "window_start", Type: bigquery.TimestampFieldType, Required: true},
		{Name: "window_end", Type: bigquery.TimestampFieldType, Required: true},
		{Name: "count", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "expected", Type: bigquery.FloatFieldType},
		{Name: "coverage", Type: bigquery.FloatFieldType},
		{Name: "gaps", Type: bigquery.IntegerFieldType},
		{Name: "longest_gap_s", Type: bigquery.FloatFieldType},
	}
	hourly := ds.Table("fleet_readings_hourly")
	if err := hourly.Create(ctx, &bigquery.TableMetadata{Schema: hourlySchema}); err != nil {
		t.Fatal(err)
	}
	start := e.now.Add(-3 * time.Hour)
	hrows := []*bigquery.ValuesSaver{
		{Schema: hourlySchema, Row: []bigquery.Value{"dev-a", start, start.Add(time.Hour), int64(60), 60.0, 1.0, int64(0), 0.0}},
		{Schema: hourlySchema, Row: []bigquery.Value{"dev-c", start, start.Add(time.Hour), int64(30), 60.0, 0.5, int64(1), 1845.0}},
	}
	if err := hourly.Inserter().Put(ctx, hrows); err != nil {
		t.Fatal(err)
	}
}

// query runs sql and returns its schema's names and its rows.
func (e *env) query(t *testing.T, sql string) ([]string, [][]bigquery.Value) {
	t.Helper()
	it, err := e.bq.Query(sql).Read(context.Background())
	if err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	var rows [][]bigquery.Value
	for {
		var r []bigquery.Value
		err := it.Next(&r)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("reading %q: %v", sql, err)
		}
		rows = append(rows, r)
	}
	var names []string
	for _, f := range it.Schema {
		names = append(names, f.Name+":"+string(f.Type))
	}
	return names, rows
}

func TestQueries(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, sql string
		schema    string
		rows      string
	}{
		{"count and count distinct",
			"SELECT COUNT(*), COUNT(DISTINCT reading_id) FROM vitals.readings",
			"[f0_:INTEGER f1_:INTEGER]", "[[13 7]]"},
		{"the README's dedup query keeps the newest copy",
			"SELECT * EXCEPT (n) FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY reading_id ORDER BY ingested_at DESC) AS n " +
				"FROM `test-project.vitals.readings` WHERE event_timestamp >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY)) WHERE n = 1 ORDER BY sensor_id, event_timestamp",
			"[sensor_id:STRING event_timestamp:TIMESTAMP heart_rate:FLOAT body_temperature:FLOAT spO2:FLOAT battery_level:FLOAT heart_rate_imputed:BOOLEAN reading_id:STRING ingested_at:TIMESTAMP]", ""},
		{"group by, order by, limit",
			"SELECT sensor_id, COUNT(DISTINCT reading_id) AS readings, MAX(heart_rate) AS hr FROM vitals.readings GROUP BY sensor_id ORDER BY sensor_id DESC LIMIT 1",
			"[sensor_id:STRING readings:INTEGER hr:FLOAT]", "[[patient-002 3 82]]"},
		{"where with an interval",
			"SELECT COUNT(*) AS n FROM vitals.readings WHERE event_timestamp < TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 2 DAY)",
			"[n:INTEGER]", "[[1]]"},
		{"the rollup table",
			"SELECT sensor_id, count, heart_rate_mean FROM `test-project.vitals.readings_hourly` WHERE window_start >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY) ORDER BY sensor_id",
			"[sensor_id:STRING count:INTEGER heart_rate_mean:FLOAT]", "[[patient-001 3 81] [patient-002 4 82]]"},
		{"window function with qualify-free filter over a CTE",
			"WITH latest AS (SELECT reading_id, heart_rate, ROW_NUMBER() OVER (PARTITION BY reading_id ORDER BY ingested_at DESC) AS n FROM vitals.readings) " +
				"SELECT COUNT(*) AS readings, SUM(heart_rate) AS total FROM latest WHERE n = 1",
			"[readings:INTEGER total:FLOAT]", "[[7 546]]"},
		{"literals and casts",
			"SELECT 1.5 AS f, CAST('7' AS INT64) AS i, \"s\" AS s, TRUE AS b, DATE '2026-01-02' AS d, SAFE_CAST('x' AS INT64) AS bad",
			"[f:FLOAT i:INTEGER s:STRING b:BOOLEAN d:DATE bad:INTEGER]", "[[1.5 7 s true 2026-01-02 <nil>]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, rows := e.query(t, tc.sql)
			if got := fmt.Sprint(names); got != tc.schema {
				t.Errorf("schema = %s, want %s", got, tc.schema)
			}
			if tc.rows != "" {
				if got := fmt.Sprint(rows); got != tc.rows {
					t.Errorf("rows = %s, want %s", got, tc.rows)
				}
			}
		})
	}
	t.Run("the dedup query returns each reading once with its final value", func(t *testing.T) {
		schema, rows := e.query(t, "SELECT * EXCEPT (n) FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY reading_id ORDER BY ingested_at DESC) AS n "+
			"FROM `test-project.vitals.readings` WHERE event_timestamp >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY)) WHERE n = 1")
		if len(rows) != 6 {
			t.Fatalf("rows = %d, want 6", len(rows))
		}
		// Columns by name, from the result's schema ("name:TYPE").
		col := func(name string) int {
			i := slices.IndexFunc(schema, func(c string) bool { return strings.HasPrefix(c, name+":") })
			if i < 0 {
				t.Fatalf("the result has no column %s: %v", name, schema)
			}
			return i
		}
		idCol, hrCol, tsCol := col("reading_id"), col("heart_rate"), col("event_timestamp")
		seen := map[string]bool{}
		for _, r := range rows {
			id, _ := r[idCol].(string)
			if seen[id] {
				t.Errorf("reading %s twice", id)
			}
			seen[id] = true
			if hr, _ := r[hrCol].(float64); hr < 80 {
				t.Errorf("reading %s: heart_rate %v, want the final value (>= 80)", id, r[hrCol])
			}
			if ts, ok := r[tsCol].(time.Time); !ok || ts.After(e.now) || ts.Before(e.now.Add(-time.Hour)) {
				t.Errorf("reading %s: event_timestamp %v", id, r[tsCol])
			}
		}
	})
	t.Run("errors have BigQuery's shape", func(t *testing.T) {
		for _, tc := range []struct {
			sql    string
			code   int
			reason string
			msg    string
		}{
			{"SELECT * FROM vitals.nope", 404, "notFound", "Not found: Table test-project:vitals.nope was not found in location US"},
			{"SELECT nope FROM vitals.readings", 400, "invalidQuery", "Unrecognized name: nope"},
			{"UPDATE vitals.readings SET heart_rate = 1 WHERE TRUE", 400, "invalidQuery", "statement UPDATE"},
			{"SELECT ST_GEOGPOINT(1, 2)", 400, "invalidQuery", "Unsupported by the BigQuery emulator: function ST_GEOGPOINT"},
		} {
			t.Run(tc.sql, func(t *testing.T) {
				_, err := e.bq.Query(tc.sql).Read(context.Background())
				var ge *googleapi.Error
				if !errors.As(err, &ge) {
					t.Fatalf("err = %v, want a googleapi.Error", err)
				}
				if ge.Code != tc.code || len(ge.Errors) == 0 || ge.Errors[0].Reason != tc.reason || !strings.Contains(ge.Message, tc.msg) {
					t.Errorf("err = %d %+v %q, want %d %s %q", ge.Code, ge.Errors, ge.Message, tc.code, tc.reason, tc.msg)
				}
			})
		}
	})
}

func TestJobs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := e.bq.Query("SELECT reading_id FROM vitals.readings ORDER BY reading_id")
	q.JobID = "my-job"
	job, err := q.Run(ctx) // jobs.insert
	if err != nil {
		t.Fatal(err)
	}
	st, err := job.Wait(ctx) // jobs.get
	if err != nil || st.Err() != nil || st.State != bigquery.Done {
		t.Fatalf("Wait = %+v, %v", st, err)
	}
	if qs, ok := st.Statistics.Details.(*bigquery.QueryStatistics); !ok || qs.StatementType != "SELECT" {
		t.Errorf("statistics = %+v", st.Statistics.Details)
	}
	it, err := job.Read(ctx) // jobs.getQueryResults, in pages of 5
	if err != nil {
		t.Fatal(err)
	}
	it.PageInfo().MaxSize = 5
	n := 0
	for {
		var r []bigquery.Value
		if err := it.Next(&r); errors.Is(err, iterator.Done) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 13 {
		t.Errorf("rows = %d, want 13", n)
	}
	again, err := e.bq.JobFromID(ctx, "my-job")
	if err != nil || again.ID() != "my-job" {
		t.Fatalf("JobFromID = %v, %v", again, err)
	}
	if _, err := e.bq.Query("SELECT nope FROM vitals.readings").Run(ctx); err != nil {
		t.Fatalf("jobs.insert of a bad query: %v (the job fails, the call does not)", err)
	}
	var ids []string
	failed := 0
	jit := e.bq.Jobs(ctx) // jobs.list
	for {
		j, err := jit.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID())
		if s := j.LastStatus(); s != nil && s.Err() != nil {
			failed++
		}
	}
	if len(ids) < 2 || !slices.Contains(ids, "my-job") || failed != 1 {
		t.Errorf("jobs.list = %v with %d failed, want my-job and one failed job", ids, failed)
	}
	if _, err := e.bq.Query("SELECT 1").Run(ctx); err != nil {
		t.Fatal(err)
	}
	q2 := e.bq.Query("SELECT 1")
	q2.JobID = "my-job"
	if _, err := q2.Run(ctx); err == nil {
		t.Error("a second job with the same ID was accepted")
	}
}

// TestDocsQueries runs every ```sql block of docs/guide/querying.md against the
// emulator: what the docs tell users to run must run here.
func TestDocsQueries(t *testing.T) {
	b, err := os.ReadFile("../../../../docs/guide/querying.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 2 {
		t.Fatalf("the querying guide has %d sql blocks, want at least the dedup query and a readings_hourly query", len(blocks))
	}
	e := newEnv(t)
	hourly := false
	for i, m := range blocks {
		sql := strings.NewReplacer("PROJECT", project, "`P.", "`"+project+".").Replace(m[1])
		hourly = hourly || strings.Contains(sql, "readings_hourly")
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			it, err := e.bq.Query(sql).Read(context.Background())
			if err != nil {
				t.Fatalf("query %d:\n%s\nfailed: %v", i, sql, err)
			}
			var row []bigquery.Value
			if err := it.Next(&row); err != nil {
				t.Errorf("query %d returned no rows on the test data (%v):\n%s", i, err, sql)
			}
		})
	}
	if !hourly {
		t.Error("no query reads readings_hourly")
	}
}

func TestAlterTable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tbl := e.bq.Dataset("vitals").Table("readings")
	for _, sql := range []string{
		"ALTER TABLE `test-project.vitals.readings` ADD PRIMARY KEY (reading_id) NOT ENFORCED",
		"ALTER TABLE vitals.readings SET OPTIONS (max_staleness = INTERVAL 15 MINUTE)",
	} {
		if _, err := e.bq.Query(sql).Read(ctx); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	md, err := tbl.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.TableConstraints == nil || fmt.Sprint(md.TableConstraints.PrimaryKey.Columns) != "[reading_id]" {
		t.Errorf("TableConstraints = %+v", md.TableConstraints)
	}
	if md.MaxStaleness == nil || md.MaxStaleness.ToDuration() != 15*time.Minute {
		t.Errorf("MaxStaleness = %v", md.MaxStaleness)
	}
	for _, tc := range []struct{ sql, msg string }{
		{"ALTER TABLE vitals.readings ADD PRIMARY KEY (sensor_id) NOT ENFORCED", "already has a primary key"},
		{"ALTER TABLE vitals.readings ADD COLUMN x STRING", "Unsupported by the BigQuery emulator: ALTER TABLE … ADD COLUMN x"},
		{"ALTER TABLE vitals.nope DROP PRIMARY KEY", "Not found: Table test-project:vitals.nope"},
	} {
		if _, err := e.bq.Query(tc.sql).Read(ctx); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want %q", tc.sql, err, tc.msg)
		}
	}
	if _, err := e.bq.Query("ALTER TABLE vitals.readings DROP PRIMARY KEY").Read(ctx); err != nil {
		t.Fatal(err)
	}
	if md, _ := tbl.Metadata(ctx); md.TableConstraints != nil && md.TableConstraints.PrimaryKey != nil {
		t.Errorf("after DROP PRIMARY KEY: %+v", md.TableConstraints.PrimaryKey)
	}
}

// TestQueriesSeeAppliedChanges: UPSERTs through the Storage Write API's
// default stream are what queries read.
func TestQueriesSeeAppliedChanges(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tbl := e.bq.Dataset("vitals").Table("keyed")
	if err := tbl.Create(ctx, &bigquery.TableMetadata{
		Schema:           bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType, Required: true}, {Name: "v", Type: bigquery.IntegerFieldType}},
		TableConstraints: &bigquery.TableConstraints{PrimaryKey: &bigquery.PrimaryKey{Columns: []string{"id"}}},
	}); err != nil {
		t.Fatal(err)
	}
	mw, err := managedwriter.NewClient(ctx, project, e.ts.WriterOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	dp := &descriptorpb.DescriptorProto{Name: proto.String("row"), Field: []*descriptorpb.FieldDescriptorProto{
		{Name: proto.String("id"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
		{Name: proto.String("v"), Number: proto.Int32(2), Type: descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
		{Name: proto.String("_CHANGE_TYPE"), Number: proto.Int32(3), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
		{Name: proto.String("_CHANGE_SEQUENCE_NUMBER"), Number: proto.Int32(4), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
	}}
	ms, err := mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(managedwriter.TableParentFromParts(project, "vitals", "keyed")),
		managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(dp))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	row := func(id string, v int64, typ, seq string) []byte {
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, id)
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v))
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, typ)
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		return protowire.AppendString(b, seq)
	}
	for _, batch := range [][][]byte{
		{row("a", 1, "UPSERT", "1"), row("b", 1, "UPSERT", "1"), row("c", 1, "UPSERT", "1")},
		{row("a", 2, "UPSERT", "2"), row("b", 0, "UPSERT", "0"), row("c", 0, "DELETE", "2")},
	} {
		res, err := ms.AppendRows(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.GetResult(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, rows := e.query(t, "SELECT id, v FROM vitals.keyed ORDER BY id")
	if got := fmt.Sprint(rows); got != "[[a 2] [b 1]]" {
		t.Errorf("rows = %s, want [[a 2] [b 1]]", got)
	}
}
