package sqlengine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// BenchmarkDedupQuery1M is the emulator's latency for the README's dedup
// query over 1,000,000 readings (900,000 distinct, all in the last day):
// jobs.query over HTTP, from the request to the first page (1,000 rows),
// which includes translating, DuckDB's scan and window, and keeping the
// 900,000 result rows for jobs.getQueryResults. `make bench` runs it.
func BenchmarkDedupQuery1M(b *testing.B) {
	const n, distinct = 1_000_000, 900_000
	ts := bqemu.StartServerForTest(b)
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, project, ts.BigQueryOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ds := c.Dataset("vitals")
	if err := ds.Create(ctx, nil); err != nil {
		b.Fatal(err)
	}
	if err := ds.Table("readings").Create(ctx, &bigquery.TableMetadata{
		Schema:           readingsSchema(),
		TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType, Field: "event_timestamp"},
		Clustering:       &bigquery.Clustering{Fields: []string{"sensor_id"}},
	}); err != nil {
		b.Fatal(err)
	}
	loadReadings(b, ts, n, distinct)
	sql := "SELECT * EXCEPT (n) FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY reading_id ORDER BY ingested_at DESC) AS n " +
		"FROM `" + project + ".vitals.readings` WHERE event_timestamp >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY)) WHERE n = 1"
	body, _ := json.Marshal(map[string]any{"query": sql, "useLegacySql": false, "maxResults": 1000})
	url := ts.RESTEndpoint + "/bigquery/v2/projects/" + project + "/queries"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var out struct {
			TotalRows string `json:"totalRows"`
			Error     any    `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || out.Error != nil || out.TotalRows != fmt.Sprint(distinct) {
			b.Fatalf("jobs.query: %v %v, totalRows %s, want %d", err, out.Error, out.TotalRows, distinct)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows_scanned/s")
}

// loadReadings appends n readings (distinct reading IDs, the rest repeats)
// through the Storage Write API's default stream.
func loadReadings(b *testing.B, ts *bqemu.TestServer, n, distinct int) {
	b.Helper()
	ctx := context.Background()
	mw, err := managedwriter.NewClient(ctx, project, ts.WriterOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	defer mw.Close()
	dp, _ := readingsDescriptor(b)
	ms, err := mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(managedwriter.TableParentFromParts(project, "vitals", "readings")),
		managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(dp))
	if err != nil {
		b.Fatal(err)
	}
	defer ms.Close()
	now := time.Now()
	var results []*managedwriter.AppendResult
	batch := make([][]byte, 0, 20000)
	flush := func() {
		res, err := ms.AppendRows(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		results = append(results, res)
		batch = make([][]byte, 0, 20000)
	}
	for i := 0; i < n; i++ {
		id := i % distinct
		var r []byte
		r = protowire.AppendTag(r, 1, protowire.BytesType)
		r = protowire.AppendString(r, fmt.Sprintf("patient-%04d", id%1000))
		r = protowire.AppendTag(r, 2, protowire.VarintType)
		r = protowire.AppendVarint(r, uint64(now.Add(-time.Duration(id%80000)*time.Second).UnixMicro()))
		for f := 3; f <= 6; f++ {
			r = protowire.AppendTag(r, protowire.Number(f), protowire.Fixed64Type)
			r = protowire.AppendFixed64(r, 0x4052000000000000) // 72.0
		}
		r = protowire.AppendTag(r, 7, protowire.VarintType)
		r = protowire.AppendVarint(r, 0)
		r = protowire.AppendTag(r, 8, protowire.BytesType)
		r = protowire.AppendString(r, fmt.Sprintf("%032x", id))
		r = protowire.AppendTag(r, 9, protowire.VarintType)
		r = protowire.AppendVarint(r, uint64(now.UnixMicro()+int64(i)))
		batch = append(batch, r)
		if len(batch) == cap(batch) {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	for _, res := range results {
		if _, err := res.GetResult(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// readingsDescriptor is a writer schema of readingsSchema: field i+1 is
// column i (TIMESTAMP as int64 microseconds).
func readingsDescriptor(tb testing.TB) (*descriptorpb.DescriptorProto, error) {
	tb.Helper()
	types := []descriptorpb.FieldDescriptorProto_Type{
		descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_INT64,
		descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE,
		descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE,
		descriptorpb.FieldDescriptorProto_TYPE_BOOL, descriptorpb.FieldDescriptorProto_TYPE_STRING,
		descriptorpb.FieldDescriptorProto_TYPE_INT64,
	}
	dp := &descriptorpb.DescriptorProto{Name: proto.String("reading")}
	for i, f := range readingsSchema() {
		dp.Field = append(dp.Field, &descriptorpb.FieldDescriptorProto{
			Name: proto.String(f.Name), Number: proto.Int32(int32(i + 1)), Type: types[i].Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
		})
	}
	return dp, nil
}
