package bqemu_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"cloud.google.com/go/bigquery/storage/managedwriter/adapt"
	"cloud.google.com/go/civil"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

const project = "test-project"

// env is one emulator plus official clients pointed at it.
type env struct {
	ts *bqemu.TestServer
	bq *bigquery.Client
	mw *managedwriter.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	ts := bqemu.StartServerForTest(t)
	bqc, err := bigquery.NewClient(ctx, project, ts.BigQueryOptions()...)
	if err != nil {
		t.Fatalf("bigquery.NewClient: %v", err)
	}
	mwc, err := managedwriter.NewClient(ctx, project, ts.WriterOptions()...)
	if err != nil {
		t.Fatalf("managedwriter.NewClient: %v", err)
	}
	// Registered after StartServerForTest, so these run before the server
	// is shut down.
	t.Cleanup(func() {
		mwc.Close()
		bqc.Close()
	})
	return &env{ts: ts, bq: bqc, mw: mwc}
}

// readingSchema is a sensor-reading table schema covering all supported
// column types.
func readingSchema() bigquery.Schema {
	return bigquery.Schema{
		{Name: "sensor_id", Type: bigquery.StringFieldType, Required: true},
		{Name: "event_timestamp", Type: bigquery.TimestampFieldType, Required: true},
		{Name: "value", Type: bigquery.FloatFieldType},
		{Name: "seq", Type: bigquery.IntegerFieldType},
		{Name: "ok", Type: bigquery.BooleanFieldType},
		{Name: "day", Type: bigquery.DateFieldType},
		{Name: "payload", Type: bigquery.BytesFieldType},
		{Name: "amount", Type: bigquery.NumericFieldType},
		{Name: "attrs", Type: bigquery.JSONFieldType},
		{Name: "dt", Type: bigquery.DateTimeFieldType},
		{Name: "tm", Type: bigquery.TimeFieldType},
		{Name: "tags", Type: bigquery.StringFieldType, Repeated: true},
		{Name: "loc", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{
			{Name: "lat", Type: bigquery.FloatFieldType},
			{Name: "lon", Type: bigquery.FloatFieldType},
		}},
		{Name: "note", Type: bigquery.StringFieldType},
	}
}

// createReadingsTable creates dataset ds (if needed) and a DAY-partitioned,
// clustered table.
func (e *env) createReadingsTable(t *testing.T, ds, tbl string) *bigquery.Table {
	t.Helper()
	ctx := context.Background()
	d := e.bq.Dataset(ds)
	if err := d.Create(ctx, nil); err != nil {
		var gerr *googleapi.Error
		if !errors.As(err, &gerr) || gerr.Code != http.StatusConflict {
			t.Fatalf("creating dataset: %v", err)
		}
	}
	table := d.Table(tbl)
	err := table.Create(ctx, &bigquery.TableMetadata{
		Schema:           readingSchema(),
		TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType, Field: "event_timestamp"},
		Clustering:       &bigquery.Clustering{Fields: []string{"sensor_id"}},
	})
	if err != nil {
		t.Fatalf("creating table: %v", err)
	}
	return table
}

// apiErr asserts err is a googleapi.Error with the given code and reason.
func apiErr(t *testing.T, err error, code int, reason string) *googleapi.Error {
	t.Helper()
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) {
		t.Fatalf("error = %v (%T), want *googleapi.Error", err, err)
	}
	if gerr.Code != code {
		t.Fatalf("error code = %d, want %d (%v)", gerr.Code, code, err)
	}
	if len(gerr.Errors) == 0 || gerr.Errors[0].Reason != reason {
		t.Fatalf("error reasons = %+v, want %q", gerr.Errors, reason)
	}
	return gerr
}

func TestDatasetAndTableCRUD(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ds := e.bq.Dataset("sensors")

	t.Run("dataset insert and get", func(t *testing.T) {
		if err := ds.Create(ctx, &bigquery.DatasetMetadata{Description: "readings"}); err != nil {
			t.Fatalf("Create: %v", err)
		}
		md, err := ds.Metadata(ctx)
		if err != nil {
			t.Fatalf("Metadata: %v", err)
		}
		if md.Description != "readings" || md.FullID != project+":sensors" || md.Location != "US" {
			t.Errorf("metadata = %+v", md)
		}
	})
	t.Run("dataset errors", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			call   func() error
			code   int
			reason string
			msg    string
		}{
			{"duplicate insert", func() error { return ds.Create(ctx, nil) }, 409, "duplicate", "Already Exists: Dataset test-project:sensors"},
			{"get missing", func() error { _, err := e.bq.Dataset("nope").Metadata(ctx); return err }, 404, "notFound", "Not found: Dataset test-project:nope"},
			{"invalid id", func() error { return e.bq.Dataset("bad-id").Create(ctx, nil) }, 400, "invalid", "Invalid dataset ID"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				gerr := apiErr(t, tc.call(), tc.code, tc.reason)
				if !strings.Contains(gerr.Message, tc.msg) {
					t.Errorf("message = %q, want it to contain %q", gerr.Message, tc.msg)
				}
			})
		}
	})

	table := ds.Table("readings")
	t.Run("table insert and metadata round trip", func(t *testing.T) {
		err := table.Create(ctx, &bigquery.TableMetadata{
			Schema:           readingSchema(),
			TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType, Field: "event_timestamp", Expiration: 48 * time.Hour},
			Clustering:       &bigquery.Clustering{Fields: []string{"sensor_id"}},
			Description:      "raw readings",
		})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		md, err := table.Metadata(ctx)
		if err != nil {
			t.Fatalf("Metadata: %v", err)
		}
		tp := md.TimePartitioning
		if tp == nil || tp.Type != bigquery.DayPartitioningType || tp.Field != "event_timestamp" || tp.Expiration != 48*time.Hour {
			t.Errorf("TimePartitioning = %+v", tp)
		}
		if md.Clustering == nil || len(md.Clustering.Fields) != 1 || md.Clustering.Fields[0] != "sensor_id" {
			t.Errorf("Clustering = %+v", md.Clustering)
		}
		if got, want := fmt.Sprint(schemaNames(md.Schema)), fmt.Sprint(schemaNames(readingSchema())); got != want {
			t.Errorf("schema = %s, want %s", got, want)
		}
		if !md.Schema[0].Required || !md.Schema[11].Repeated || md.Schema[12].Type != bigquery.RecordFieldType {
			t.Errorf("schema modes/types not preserved: %+v", md.Schema)
		}
		if md.Description != "raw readings" || md.Type != bigquery.RegularTable || md.FullID != project+":sensors.readings" {
			t.Errorf("metadata = %+v", md)
		}
	})
	t.Run("table insert validation", func(t *testing.T) {
		base := bigquery.Schema{
			{Name: "ts", Type: bigquery.TimestampFieldType},
			{Name: "s", Type: bigquery.StringFieldType},
			{Name: "f", Type: bigquery.FloatFieldType},
		}
		for _, tc := range []struct {
			name string
			md   *bigquery.TableMetadata
			msg  string
		}{
			{"duplicate table", &bigquery.TableMetadata{Schema: readingSchema()}, "Already Exists"},
			{"partition field missing", &bigquery.TableMetadata{Schema: base, TimePartitioning: &bigquery.TimePartitioning{Field: "nope"}}, "cannot be found"},
			{"partition field wrong type", &bigquery.TableMetadata{Schema: base, TimePartitioning: &bigquery.TimePartitioning{Field: "s"}}, "TIMESTAMP, DATE or DATETIME"},
			{"clustering field missing", &bigquery.TableMetadata{Schema: base, Clustering: &bigquery.Clustering{Fields: []string{"x"}}}, "clustering cannot be found"},
			{"too many clustering fields", &bigquery.TableMetadata{Schema: base, Clustering: &bigquery.Clustering{Fields: []string{"ts", "s", "ts", "s", "ts"}}}, "only up to 4"},
			{"bad column name", &bigquery.TableMetadata{Schema: bigquery.Schema{{Name: "a-b", Type: bigquery.StringFieldType}}}, "invalid field name"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				name := "readings"
				if tc.name != "duplicate table" {
					name = "t_" + strings.ReplaceAll(tc.name, " ", "_")
				}
				err := ds.Table(name).Create(ctx, tc.md)
				code, reason := 400, "invalid"
				if tc.name == "duplicate table" {
					code, reason = 409, "duplicate"
				}
				gerr := apiErr(t, err, code, reason)
				if !strings.Contains(gerr.Message, tc.msg) {
					t.Errorf("message = %q, want %q", gerr.Message, tc.msg)
				}
			})
		}
	})
	t.Run("schema update", func(t *testing.T) {
		md, err := table.Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		added := append(md.Schema, &bigquery.FieldSchema{Name: "battery", Type: bigquery.FloatFieldType})
		got, err := table.Update(ctx, bigquery.TableMetadataToUpdate{Schema: added}, md.ETag)
		if err != nil {
			t.Fatalf("adding NULLABLE column: %v", err)
		}
		if n := len(got.Schema); n != len(readingSchema())+1 || got.Schema[n-1].Name != "battery" {
			t.Fatalf("schema after update = %v", schemaNames(got.Schema))
		}
		if got.TimePartitioning == nil || got.TimePartitioning.Field != "event_timestamp" {
			t.Errorf("partitioning lost by update: %+v", got.TimePartitioning)
		}
		for _, tc := range []struct {
			name   string
			schema func(bigquery.Schema) bigquery.Schema
		}{
			{"add REQUIRED column", func(s bigquery.Schema) bigquery.Schema {
				return append(s, &bigquery.FieldSchema{Name: "x", Type: bigquery.StringFieldType, Required: true})
			}},
			{"change type", func(s bigquery.Schema) bigquery.Schema {
				c := *s[2]
				c.Type = bigquery.StringFieldType
				s[2] = &c
				return s
			}},
			{"drop column", func(s bigquery.Schema) bigquery.Schema { return s[:len(s)-1] }},
			{"insert column in the middle", func(s bigquery.Schema) bigquery.Schema {
				out := append(bigquery.Schema{}, s[:3]...)
				out = append(out, &bigquery.FieldSchema{Name: "mid", Type: bigquery.StringFieldType})
				return append(out, s[3:]...)
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cur, err := table.Metadata(ctx)
				if err != nil {
					t.Fatal(err)
				}
				s := append(bigquery.Schema{}, cur.Schema...)
				_, err = table.Update(ctx, bigquery.TableMetadataToUpdate{Schema: tc.schema(s)}, "")
				apiErr(t, err, 400, "invalid")
			})
		}
	})
	t.Run("tables iterator", func(t *testing.T) {
		for _, name := range []string{"b_table", "a_table"} {
			if err := ds.Table(name).Create(ctx, &bigquery.TableMetadata{Schema: bigquery.Schema{{Name: "x", Type: bigquery.StringFieldType}}}); err != nil {
				t.Fatal(err)
			}
		}
		it := ds.Tables(ctx)
		it.PageInfo().MaxSize = 2 // force paging
		var names []string
		for {
			tb, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatalf("Tables.Next: %v", err)
			}
			names = append(names, tb.TableID)
		}
		if got, want := strings.Join(names, ","), "a_table,b_table,readings"; got != want {
			t.Errorf("tables = %s, want %s", got, want)
		}
	})
	t.Run("table delete", func(t *testing.T) {
		if err := ds.Table("a_table").Delete(ctx); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		_, err := ds.Table("a_table").Metadata(ctx)
		gerr := apiErr(t, err, 404, "notFound")
		if gerr.Message != "Not found: Table test-project:sensors.a_table" {
			t.Errorf("message = %q", gerr.Message)
		}
		apiErr(t, ds.Table("a_table").Delete(ctx), 404, "notFound")
	})
}

func schemaNames(s bigquery.Schema) []string {
	var out []string
	for _, f := range s {
		out = append(out, f.Name+":"+string(f.Type))
	}
	return out
}

// mapSaver is a ValueSaver for arbitrary maps, used to send rows that do not
// match the schema.
type mapSaver struct {
	id  string
	row map[string]bigquery.Value
}

func (m mapSaver) Save() (map[string]bigquery.Value, string, error) { return m.row, m.id, nil }

// readingRow is the struct form of a row of readingSchema used by table.Read.
type readingRow struct {
	SensorID       string                      `bigquery:"sensor_id"`
	EventTimestamp time.Time                   `bigquery:"event_timestamp"`
	Value          bigquery.NullFloat64        `bigquery:"value"`
	Seq            bigquery.NullInt64          `bigquery:"seq"`
	OK             bigquery.NullBool           `bigquery:"ok"`
	Day            bigquery.NullDate           `bigquery:"day"`
	Payload        []byte                      `bigquery:"payload"`
	Amount         *big.Rat                    `bigquery:"amount"`
	Attrs          bigquery.NullJSON           `bigquery:"attrs"`
	DT             bigquery.NullDateTime       `bigquery:"dt"`
	TM             bigquery.NullTime           `bigquery:"tm"`
	Tags           []string                    `bigquery:"tags"`
	Loc            *struct{ Lat, Lon float64 } `bigquery:"loc"`
	Note           bigquery.NullString         `bigquery:"note"`
}

func readAll(t *testing.T, table *bigquery.Table) [][]bigquery.Value {
	t.Helper()
	it := table.Read(context.Background())
	var rows [][]bigquery.Value
	for {
		var r []bigquery.Value
		err := it.Next(&r)
		if errors.Is(err, iterator.Done) {
			return rows
		}
		if err != nil {
			t.Fatalf("reading rows: %v", err)
		}
		rows = append(rows, r)
	}
}

// readByName reads every row of table, each as its columns by name: tests
// read BigQuery rows by column name, never by position. A RECORD column is
// a map of its fields, a REPEATED one a slice.
func readByName(t *testing.T, table *bigquery.Table) []map[string]bigquery.Value {
	t.Helper()
	it := table.Read(context.Background())
	var rows []map[string]bigquery.Value
	for {
		r := map[string]bigquery.Value{}
		err := it.Next(&r)
		if errors.Is(err, iterator.Done) {
			return rows
		}
		if err != nil {
			t.Fatalf("reading rows: %v", err)
		}
		rows = append(rows, r)
	}
}

func TestInsertAllAndRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	table := e.createReadingsTable(t, "stream", "readings")
	ins := table.Inserter()
	now := time.Now().UTC().Truncate(time.Microsecond)
	schema := readingSchema()

	full := &bigquery.ValuesSaver{Schema: schema, InsertID: "row-1", Row: []bigquery.Value{
		"s1", now, 21.5, int64(7), true, civil.DateOf(now), []byte{0, 1, 2}, big.NewRat(12345, 100),
		`{"a":1}`, civil.DateTime{Date: civil.Date{Year: 2024, Month: 5, Day: 6}, Time: civil.Time{Hour: 7, Minute: 8, Second: 9, Nanosecond: 123000}},
		civil.Time{Hour: 10, Minute: 11, Second: 12}, []string{"x", "y"}, []bigquery.Value{1.5, -2.5}, nil,
	}}

	t.Run("insert with insertId dedup", func(t *testing.T) {
		if err := ins.Put(ctx, full); err != nil {
			t.Fatalf("Put: %v", err)
		}
		// Same insertId again: a retry of the same row must be deduplicated.
		if err := ins.Put(ctx, full); err != nil {
			t.Fatalf("Put again: %v", err)
		}
		minimal := mapSaver{id: "row-2", row: map[string]bigquery.Value{"sensor_id": "s2", "event_timestamp": now.Add(-time.Hour)}}
		if err := ins.Put(ctx, []mapSaver{minimal, minimal}); err != nil {
			t.Fatalf("Put batch with duplicate ids: %v", err)
		}
		if rows := readAll(t, table); len(rows) != 2 {
			t.Fatalf("got %d rows, want 2 (dedup by insertId): %v", len(rows), rows)
		}
	})

	t.Run("read as values", func(t *testing.T) {
		rows := readByName(t, table)
		if len(rows) != 2 {
			t.Fatalf("rows = %v", rows)
		}
		sort.Slice(rows, func(i, j int) bool { return fmt.Sprint(rows[i]["sensor_id"]) < fmt.Sprint(rows[j]["sensor_id"]) })
		r := rows[0]
		if ts, ok := r["event_timestamp"].(time.Time); r["sensor_id"] != "s1" || !ok || !ts.Equal(now) || r["value"] != 21.5 || r["seq"] != int64(7) || r["ok"] != true {
			t.Errorf("row = %v", r)
		}
		if amount, ok := r["amount"].(*big.Rat); r["day"] != civil.DateOf(now) || fmt.Sprint(r["payload"]) != fmt.Sprint([]byte("\x00\x01\x02")) || !ok || amount.Cmp(big.NewRat(12345, 100)) != 0 {
			t.Errorf("row = %v", r)
		}
		if r["attrs"] != `{"a":1}` || r["dt"] != (civil.DateTime{Date: civil.Date{Year: 2024, Month: 5, Day: 6}, Time: civil.Time{Hour: 7, Minute: 8, Second: 9, Nanosecond: 123000}}) || fmt.Sprint(r["tm"]) != "10:11:12" {
			t.Errorf("row = %v", r)
		}
		if fmt.Sprint(r["tags"]) != "[x y]" || fmt.Sprint(r["loc"]) != "map[lat:1.5 lon:-2.5]" || r["note"] != nil {
			t.Errorf("row = %v", r)
		}
		if m := rows[1]; m["sensor_id"] != "s2" || m["value"] != nil || fmt.Sprint(m["tags"]) != "[]" || m["loc"] != nil {
			t.Errorf("minimal row = %v", m)
		}
	})

	t.Run("read as struct", func(t *testing.T) {
		it := table.Read(ctx)
		var got []readingRow
		for {
			var r readingRow
			err := it.Next(&r)
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			got = append(got, r)
		}
		sort.Slice(got, func(i, j int) bool { return got[i].SensorID < got[j].SensorID })
		if len(got) != 2 || got[0].SensorID != "s1" || !got[0].EventTimestamp.Equal(now) || got[0].Value.Float64 != 21.5 ||
			got[0].Loc == nil || got[0].Loc.Lon != -2.5 || len(got[0].Tags) != 2 || got[1].Value.Valid {
			t.Errorf("rows = %+v", got)
		}
	})

	t.Run("paging with maxResults and pageToken", func(t *testing.T) {
		var batch []mapSaver
		for i := range 5 {
			batch = append(batch, mapSaver{id: fmt.Sprintf("p%d", i), row: map[string]bigquery.Value{"sensor_id": fmt.Sprintf("p%d", i), "event_timestamp": now}})
		}
		if err := ins.Put(ctx, batch); err != nil {
			t.Fatal(err)
		}
		it := table.Read(ctx)
		it.PageInfo().MaxSize = 2
		n := 0
		for {
			var r []bigquery.Value
			err := it.Next(&r)
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 7 {
			t.Errorf("read %d rows, want 7", n)
		}
		// Raw REST: page shape and float-seconds TIMESTAMP rendering.
		var page struct {
			TotalRows string `json:"totalRows"`
			PageToken string `json:"pageToken"`
			Rows      []struct {
				F []struct {
					V any `json:"v"`
				} `json:"f"`
			} `json:"rows"`
		}
		getJSON(t, e.ts.RESTEndpoint+"/bigquery/v2/projects/test-project/datasets/stream/tables/readings/data?maxResults=3", 200, &page)
		if page.TotalRows != "7" || page.PageToken == "" || len(page.Rows) != 3 {
			t.Fatalf("page = %+v", page)
		}
		ts, ok := page.Rows[0].F[1].V.(string)
		if !ok || !strings.Contains(ts, "E9") {
			t.Errorf("TIMESTAMP cell = %#v, want float seconds like 1.7E9", page.Rows[0].F[1].V)
		}
		getJSON(t, e.ts.RESTEndpoint+"/bigquery/v2/projects/test-project/datasets/stream/tables/readings/data?maxResults=3&pageToken="+page.PageToken, 200, &page)
		if len(page.Rows) != 3 || page.PageToken == "" {
			t.Errorf("second page = %+v", page)
		}
	})

	t.Run("row errors", func(t *testing.T) {
		good := func(id string) mapSaver {
			return mapSaver{id: id, row: map[string]bigquery.Value{"sensor_id": id, "event_timestamp": now}}
		}
		for _, tc := range []struct {
			name     string
			row      map[string]bigquery.Value
			location string
			msg      string
		}{
			{"unknown column", map[string]bigquery.Value{"sensor_id": "e", "event_timestamp": now, "bogus": 1}, "bogus", "no such field"},
			{"missing REQUIRED", map[string]bigquery.Value{"event_timestamp": now}, "sensor_id", "Missing required field: sensor_id"},
			{"NULL in REQUIRED", map[string]bigquery.Value{"sensor_id": nil, "event_timestamp": now}, "sensor_id", "Missing required field"},
			{"type mismatch", map[string]bigquery.Value{"sensor_id": "e", "event_timestamp": now, "seq": "seven"}, "seq", "Cannot convert value to integer"},
			{"nested type mismatch", map[string]bigquery.Value{"sensor_id": "e", "event_timestamp": now, "loc": map[string]any{"lat": "north"}}, "loc.lat", "loc.lat"},
			{"partition too old", map[string]bigquery.Value{"sensor_id": "e", "event_timestamp": now.AddDate(-11, 0, 0)}, "event_timestamp", "outside the allowed bounds"},
			{"partition too new", map[string]bigquery.Value{"sensor_id": "e", "event_timestamp": now.AddDate(1, 1, 0)}, "event_timestamp", "365 days in the future"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := len(readAll(t, table))
				err := ins.Put(ctx, []mapSaver{good("g-" + tc.name), {id: "bad-" + tc.name, row: tc.row}})
				var pme bigquery.PutMultiError
				if !errors.As(err, &pme) || len(pme) != 2 {
					t.Fatalf("error = %v, want PutMultiError for 2 rows", err)
				}
				bad := pme[1]
				if bad.RowIndex != 1 || len(bad.Errors) != 1 {
					t.Fatalf("bad row error = %+v", bad)
				}
				be := bad.Errors[0].(*bigquery.Error)
				if be.Reason != "invalid" || be.Location != tc.location || !strings.Contains(be.Message, tc.msg) {
					t.Errorf("bad row error = %+v, want reason invalid, location %q, message containing %q", be, tc.location, tc.msg)
				}
				if se := pme[0].Errors[0].(*bigquery.Error); pme[0].RowIndex != 0 || se.Reason != "stopped" {
					t.Errorf("good row error = %+v, want reason stopped", se)
				}
				if after := len(readAll(t, table)); after != before {
					t.Errorf("rows went from %d to %d; a request with an invalid row must insert nothing", before, after)
				}
			})
		}
	})

	t.Run("skipInvalidRows and ignoreUnknownValues", func(t *testing.T) {
		before := len(readAll(t, table))
		skip := table.Inserter()
		skip.SkipInvalidRows = true
		err := skip.Put(ctx, []mapSaver{
			{id: "skip-good", row: map[string]bigquery.Value{"sensor_id": "k", "event_timestamp": now}},
			{id: "skip-bad", row: map[string]bigquery.Value{"event_timestamp": now}},
		})
		var pme bigquery.PutMultiError
		if !errors.As(err, &pme) || len(pme) != 1 || pme[0].RowIndex != 1 {
			t.Fatalf("error = %v, want only row 1 rejected", err)
		}
		ignore := table.Inserter()
		ignore.IgnoreUnknownValues = true
		if err := ignore.Put(ctx, mapSaver{id: "ign", row: map[string]bigquery.Value{"sensor_id": "i", "event_timestamp": now, "bogus": 1}}); err != nil {
			t.Fatalf("Put with IgnoreUnknownValues: %v", err)
		}
		if after := len(readAll(t, table)); after != before+2 {
			t.Errorf("rows went from %d to %d, want +2", before, after)
		}
	})

	t.Run("request over 10 MB", func(t *testing.T) {
		big := strings.Repeat("x", 1<<20)
		var rows []mapSaver
		for i := range 11 {
			rows = append(rows, mapSaver{id: fmt.Sprint("big", i), row: map[string]bigquery.Value{"sensor_id": "b", "event_timestamp": now, "note": big}})
		}
		gerr := apiErr(t, ins.Put(ctx, rows), 400, "invalid")
		if !strings.Contains(gerr.Message, "size") || !strings.Contains(gerr.Message, "limit") {
			t.Errorf("message = %q, want it to mention the request size limit", gerr.Message)
		}
	})

	t.Run("missing table", func(t *testing.T) {
		err := e.bq.Dataset("stream").Table("nope").Inserter().Put(ctx, mapSaver{row: map[string]bigquery.Value{"x": 1}})
		apiErr(t, err, 404, "notFound")
	})
}

func getJSON(t *testing.T, url string, wantCode int, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantCode {
		t.Fatalf("GET %s: status %d, want %d: %s", url, resp.StatusCode, wantCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: decoding %s: %v", url, b, err)
	}
}

func TestRawRESTErrorShape(t *testing.T) {
	ts := bqemu.StartServerForTest(t)
	var body struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
			Errors  []struct {
				Reason, Domain, Message string
			} `json:"errors"`
		} `json:"error"`
	}
	getJSON(t, ts.RESTEndpoint+"/bigquery/v2/projects/p/datasets/missing", 404, &body)
	if body.Error.Code != 404 || body.Error.Status != "NOT_FOUND" || len(body.Error.Errors) != 1 ||
		body.Error.Errors[0].Reason != "notFound" || body.Error.Errors[0].Domain != "global" || body.Error.Message != "Not found: Dataset p:missing" {
		t.Errorf("error body = %+v", body)
	}
	// Paths without the /bigquery/v2 prefix are served too.
	getJSON(t, ts.RESTEndpoint+"/projects/p/datasets/missing", 404, &body)
}

// protoFor returns the normalized descriptor managedwriter sends and the
// message descriptor rows are built with.
func protoFor(t *testing.T, schema bigquery.Schema) (*descriptorpb.DescriptorProto, protoreflect.MessageDescriptor) {
	t.Helper()
	ts, err := adapt.BQSchemaToStorageTableSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	d, err := adapt.StorageSchemaToProto2Descriptor(ts, "root")
	if err != nil {
		t.Fatal(err)
	}
	md := d.(protoreflect.MessageDescriptor)
	dp, err := adapt.NormalizeDescriptor(md)
	if err != nil {
		t.Fatal(err)
	}
	return dp, md
}

// encode builds a row from field values; nil values are left unset.
func encode(t *testing.T, md protoreflect.MessageDescriptor, vals map[string]any) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	for k, v := range vals {
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			t.Fatalf("no field %s", k)
		}
		switch x := v.(type) {
		case []string:
			l := m.Mutable(fd).List()
			for _, s := range x {
				l.Append(protoreflect.ValueOfString(s))
			}
		case map[string]any:
			sub := dynamicpb.NewMessage(fd.Message())
			for sk, sv := range x {
				sub.Set(fd.Message().Fields().ByName(protoreflect.Name(sk)), protoreflect.ValueOf(sv))
			}
			m.Set(fd, protoreflect.ValueOfMessage(sub))
		default:
			m.Set(fd, protoreflect.ValueOf(v))
		}
	}
	b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStorageWrite(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	table := e.createReadingsTable(t, "write", "readings")
	parent := managedwriter.TableParentFromParts(project, "write", "readings")
	dp, md := protoFor(t, readingSchema())
	now := time.Now().UTC().Truncate(time.Microsecond)
	row := func(id string) []byte {
		return encode(t, md, map[string]any{
			"sensor_id": id, "event_timestamp": now.UnixMicro(), "value": 1.25, "seq": int64(3), "ok": true,
			"day": int32(now.Unix() / 86400), "payload": []byte("p"), "attrs": `{"k":"v"}`, "tags": []string{"a", "b"},
			"loc": map[string]any{"lat": 1.0, "lon": 2.0},
		})
	}
	newStream := func(t *testing.T, typ managedwriter.StreamType) *managedwriter.ManagedStream {
		t.Helper()
		ms, err := e.mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(parent), managedwriter.WithType(typ), managedwriter.WithSchemaDescriptor(dp))
		if err != nil {
			t.Fatalf("NewManagedStream(%s): %v", typ, err)
		}
		t.Cleanup(func() { ms.Close() })
		return ms
	}
	count := func(t *testing.T) int { return len(readAll(t, table)) }

	t.Run("default stream", func(t *testing.T) {
		ms := newStream(t, managedwriter.DefaultStream)
		res, err := ms.AppendRows(ctx, [][]byte{row("d1"), row("d2")})
		if err != nil {
			t.Fatal(err)
		}
		if off, err := res.GetResult(ctx); err != nil || off != managedwriter.NoStreamOffset {
			t.Fatalf("GetResult = %d, %v; want no offset, nil", off, err)
		}
		rows := readByName(t, table)
		if len(rows) != 2 {
			t.Fatalf("rows = %v", rows)
		}
		r := rows[0]
		if ts, ok := r["event_timestamp"].(time.Time); r["sensor_id"] != "d1" || !ok || !ts.Equal(now) || r["value"] != 1.25 || r["seq"] != int64(3) || r["day"] != civil.DateOf(now) ||
			fmt.Sprint(r["tags"]) != "[a b]" || fmt.Sprint(r["loc"]) != "map[lat:1 lon:2]" || r["attrs"] != `{"k":"v"}` || r["note"] != nil {
			t.Errorf("row = %v", r)
		}
	})

	t.Run("pending stream finalize and commit", func(t *testing.T) {
		before := count(t)
		ms := newStream(t, managedwriter.PendingStream)
		r1, err := ms.AppendRows(ctx, [][]byte{row("p1"), row("p2")})
		if err != nil {
			t.Fatal(err)
		}
		r2, err := ms.AppendRows(ctx, [][]byte{row("p3")})
		if err != nil {
			t.Fatal(err)
		}
		if off, err := r2.GetResult(ctx); err != nil || off != 2 {
			t.Fatalf("second append offset = %d, %v; want 2", off, err)
		}
		if off, _ := r1.GetResult(ctx); off != 0 {
			t.Fatalf("first append offset = %d, want 0", off)
		}
		if got := count(t); got != before {
			t.Fatalf("pending rows visible before commit: %d -> %d", before, got)
		}
		// Committing an unfinalized stream is refused with a stream error.
		resp, err := e.mw.BatchCommitWriteStreams(ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: parent, WriteStreams: []string{ms.StreamName()}})
		if err != nil || resp.GetCommitTime() != nil || len(resp.GetStreamErrors()) != 1 {
			t.Fatalf("commit before finalize = %v, %v; want stream error", resp, err)
		}
		n, err := ms.Finalize(ctx)
		if err != nil || n != 3 {
			t.Fatalf("Finalize = %d, %v; want 3", n, err)
		}
		late, err := ms.AppendRows(ctx, [][]byte{row("late")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := late.GetResult(ctx); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "finalized") {
			t.Fatalf("append after finalize: %v, want InvalidArgument stream finalized", err)
		}
		resp, err = e.mw.BatchCommitWriteStreams(ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: parent, WriteStreams: []string{ms.StreamName()}})
		if err != nil || resp.GetCommitTime() == nil || len(resp.GetStreamErrors()) != 0 {
			t.Fatalf("BatchCommit = %v, %v", resp, err)
		}
		if got := count(t); got != before+3 {
			t.Fatalf("rows after commit = %d, want %d", got, before+3)
		}
		ws, err := e.mw.GetWriteStream(ctx, &storagepb.GetWriteStreamRequest{Name: ms.StreamName()})
		if err != nil || ws.GetType() != storagepb.WriteStream_PENDING || ws.GetCommitTime() == nil {
			t.Errorf("GetWriteStream = %v, %v", ws, err)
		}
	})

	t.Run("committed stream offsets", func(t *testing.T) {
		ms := newStream(t, managedwriter.CommittedStream)
		for _, tc := range []struct {
			name   string
			offset int64
			code   codes.Code
		}{
			{"first append at 0", 0, codes.OK},
			{"next append at 2", 2, codes.OK},
			{"offset already written", 1, codes.AlreadyExists},
			{"offset beyond end", 10, codes.OutOfRange},
			{"correct offset after errors", 4, codes.OK},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res, err := ms.AppendRows(ctx, [][]byte{row("c1"), row("c2")}, managedwriter.WithOffset(tc.offset))
				if err != nil {
					t.Fatal(err)
				}
				off, err := res.GetResult(ctx)
				if status.Code(err) != tc.code {
					t.Fatalf("GetResult error = %v, want code %s", err, tc.code)
				}
				if tc.code == codes.OK && off != tc.offset {
					t.Errorf("offset = %d, want %d", off, tc.offset)
				}
			})
		}
	})

	t.Run("buffered stream flush", func(t *testing.T) {
		before := count(t)
		ms := newStream(t, managedwriter.BufferedStream)
		res, err := ms.AppendRows(ctx, [][]byte{row("b1"), row("b2"), row("b3")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.GetResult(ctx); err != nil {
			t.Fatal(err)
		}
		if got := count(t); got != before {
			t.Fatalf("buffered rows visible before flush: %d -> %d", before, got)
		}
		if off, err := ms.FlushRows(ctx, 1); err != nil || off != 1 {
			t.Fatalf("FlushRows = %d, %v", off, err)
		}
		if got := count(t); got != before+2 {
			t.Fatalf("rows after flush to offset 1 = %d, want %d", got, before+2)
		}
		if _, err := ms.FlushRows(ctx, 5); status.Code(err) != codes.OutOfRange {
			t.Fatalf("FlushRows beyond end: %v, want OutOfRange", err)
		}
	})

	t.Run("multiplexed default streams", func(t *testing.T) {
		other := e.createReadingsTable(t, "write", "other")
		mux, err := managedwriter.NewClient(ctx, project, append(e.ts.WriterOptions(), managedwriter.WithMultiplexing())...)
		if err != nil {
			t.Fatal(err)
		}
		defer mux.Close()
		beforeA, beforeB := count(t), len(readAll(t, other))
		var results []*managedwriter.AppendResult
		for _, tbl := range []string{"readings", "other", "readings"} {
			ms, err := mux.NewManagedStream(ctx, managedwriter.WithDestinationTable(managedwriter.TableParentFromParts(project, "write", tbl)),
				managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(dp))
			if err != nil {
				t.Fatal(err)
			}
			defer ms.Close()
			for i := range 3 {
				res, err := ms.AppendRows(ctx, [][]byte{row(fmt.Sprintf("%s-%d", tbl, i))})
				if err != nil {
					t.Fatal(err)
				}
				results = append(results, res)
			}
		}
		for _, res := range results {
			if _, err := res.GetResult(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if a, b := count(t), len(readAll(t, other)); a != beforeA+6 || b != beforeB+3 {
			t.Errorf("rows readings %d->%d (want +6), other %d->%d (want +3)", beforeA, a, beforeB, b)
		}
	})

	t.Run("default stream rejects offsets", func(t *testing.T) {
		ms := newStream(t, managedwriter.DefaultStream)
		res, err := ms.AppendRows(ctx, [][]byte{row("o")}, managedwriter.WithOffset(0))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.GetResult(ctx); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("error = %v, want InvalidArgument", err)
		}
	})

	t.Run("row errors", func(t *testing.T) {
		extraDP, extraMD := protoFor(t, append(readingSchema(), &bigquery.FieldSchema{Name: "bogus", Type: bigquery.StringFieldType}))
		mis := readingSchema()
		mis[3] = &bigquery.FieldSchema{Name: "seq", Type: bigquery.StringFieldType}
		misDP, misMD := protoFor(t, mis)
		for _, tc := range []struct {
			name    string
			dp      *descriptorpb.DescriptorProto
			rows    func() [][]byte
			badRows []int64
			msg     string
		}{
			{"unknown column", extraDP, func() [][]byte {
				return [][]byte{encode(t, extraMD, map[string]any{"sensor_id": "u", "event_timestamp": now.UnixMicro(), "bogus": "b"})}
			}, []int64{0}, "bogus"},
			{"missing REQUIRED", dp, func() [][]byte {
				return [][]byte{row("ok1"), encode(t, md, map[string]any{"event_timestamp": now.UnixMicro()}), row("ok2")}
			}, []int64{1}, "sensor_id"},
			{"type mismatch", misDP, func() [][]byte {
				return [][]byte{encode(t, misMD, map[string]any{"sensor_id": "m", "event_timestamp": now.UnixMicro(), "seq": "seven"})}
			}, []int64{0}, "seq"},
			{"bad JSON value", dp, func() [][]byte {
				return [][]byte{row("j1"), encode(t, md, map[string]any{"sensor_id": "j", "event_timestamp": now.UnixMicro(), "attrs": "{nope"})}
			}, []int64{1}, "attrs"},
			{"partition window past", dp, func() [][]byte {
				return [][]byte{encode(t, md, map[string]any{"sensor_id": "old", "event_timestamp": now.AddDate(-11, 0, 0).UnixMicro()}), row("w1")}
			}, []int64{0}, "outside the allowed bounds"},
			{"partition window future", dp, func() [][]byte {
				return [][]byte{row("w2"), encode(t, md, map[string]any{"sensor_id": "new", "event_timestamp": now.AddDate(1, 1, 0).UnixMicro()})}
			}, []int64{1}, "event_timestamp"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := count(t)
				ms, err := e.mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(parent), managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(tc.dp))
				if err != nil {
					t.Fatal(err)
				}
				defer ms.Close()
				rows := tc.rows()
				res, err := ms.AppendRows(ctx, rows)
				if err != nil {
					t.Fatal(err)
				}
				_, err = res.GetResult(ctx)
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("GetResult error = %v, want InvalidArgument", err)
				}
				full, _ := res.FullResponse(ctx)
				var bad []int64
				for _, re := range full.GetRowErrors() {
					bad = append(bad, re.GetIndex())
					if re.GetCode() != storagepb.RowError_FIELDS_ERROR || !strings.Contains(re.GetMessage(), tc.msg) {
						t.Errorf("row error = %v, want FIELDS_ERROR mentioning %q", re, tc.msg)
					}
				}
				if fmt.Sprint(bad) != fmt.Sprint(tc.badRows) {
					t.Errorf("row_errors indexes = %v, want %v", bad, tc.badRows)
				}
				if got := count(t); got != before {
					t.Fatalf("rows went from %d to %d; a request with a bad row must commit nothing", before, got)
				}
				// Retrying just the good rows succeeds.
				var good [][]byte
				for i, r := range rows {
					if !contains(tc.badRows, int64(i)) {
						good = append(good, r)
					}
				}
				if len(good) > 0 {
					res, err := ms.AppendRows(ctx, good)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := res.GetResult(ctx); err != nil {
						t.Fatalf("retrying good rows: %v", err)
					}
					if got := count(t); got != before+len(good) {
						t.Errorf("rows after retry = %d, want %d", got, before+len(good))
					}
				}
			})
		}
	})

	t.Run("request over 10 MB", func(t *testing.T) {
		ms := newStream(t, managedwriter.DefaultStream)
		big := strings.Repeat("x", 1<<20)
		var rows [][]byte
		for range 11 {
			rows = append(rows, encode(t, md, map[string]any{"sensor_id": "big", "event_timestamp": now.UnixMicro(), "note": big}))
		}
		before := count(t)
		res, err := ms.AppendRows(ctx, rows)
		if err != nil {
			t.Fatal(err)
		}
		_, err = res.GetResult(ctx)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "too large") {
			t.Fatalf("error = %v, want InvalidArgument request too large", err)
		}
		if got := count(t); got != before {
			t.Errorf("rows went from %d to %d", before, got)
		}
	})

	t.Run("unknown table", func(t *testing.T) {
		_, err := e.mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(managedwriter.TableParentFromParts(project, "write", "nope")),
			managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(dp))
		if status.Code(err) != codes.NotFound {
			t.Fatalf("error = %v, want NotFound", err)
		}
	})

	t.Run("concurrent appends", func(t *testing.T) {
		before := count(t)
		const writers, batches, perBatch = 6, 5, 20
		// The rows are encoded here, on the test goroutine: encode may
		// t.Fatal, which must not run on the writers' goroutines.
		encoded := make([][][][]byte, writers)
		for w := range writers {
			encoded[w] = make([][][]byte, batches)
			for b := range batches {
				for i := range perBatch {
					encoded[w][b] = append(encoded[w][b], row(fmt.Sprintf("w%d-%d-%d", w, b, i)))
				}
			}
		}
		var wg sync.WaitGroup
		errc := make(chan error, writers*batches)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				typ := managedwriter.DefaultStream
				if w%2 == 1 {
					typ = managedwriter.CommittedStream
				}
				ms, err := e.mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(parent), managedwriter.WithType(typ), managedwriter.WithSchemaDescriptor(dp))
				if err != nil {
					errc <- err
					return
				}
				defer ms.Close()
				var results []*managedwriter.AppendResult
				for _, rows := range encoded[w] {
					res, err := ms.AppendRows(ctx, rows)
					if err != nil {
						errc <- err
						return
					}
					results = append(results, res)
				}
				for _, res := range results {
					if _, err := res.GetResult(ctx); err != nil {
						errc <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Errorf("append: %v", err)
		}
		if got, want := count(t), before+writers*batches*perBatch; got != want {
			t.Errorf("rows = %d, want %d", got, want)
		}
	})
}

func contains(xs []int64, x int64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestServeAfterShutdown covers a serving goroutine that had not started
// when the server was shut down (a short test on a loaded machine): it must
// return nil, as after a graceful stop, and release its listener.
func TestServeAfterShutdown(t *testing.T) {
	s := bqemu.New(bqemu.Options{Quiet: true})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for name, serve := range map[string]func(net.Listener) error{"REST": s.ServeREST, "gRPC": s.ServeGRPC} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := serve(lis); err != nil {
			t.Errorf("Serve%s after Shutdown = %v, want nil", name, err)
		}
		if c, err := net.Dial("tcp", lis.Addr().String()); err == nil {
			c.Close()
			t.Errorf("Serve%s after Shutdown left its listener open", name)
		}
	}
}
