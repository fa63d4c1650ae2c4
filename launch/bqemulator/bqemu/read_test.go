package bqemu_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	storage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"cloud.google.com/go/civil"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// storageReadClient is a BigQuery client with its Storage Read client
// enabled (EnableStorageReadClient), both pointed at the emulator.
func (e *env) storageReadClient(t *testing.T) *bigquery.Client {
	t.Helper()
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, project, e.ts.BigQueryOptions()...)
	if err != nil {
		t.Fatalf("bigquery.NewClient: %v", err)
	}
	if err := c.EnableStorageReadClient(ctx, e.ts.WriterOptions()...); err != nil {
		t.Fatalf("EnableStorageReadClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readRowsByName reads every row of table (through whichever path its
// client takes), each as its columns by name, sorted by render.
func readRowsByName(t *testing.T, table *bigquery.Table) ([]string, bool) {
	t.Helper()
	it := table.Read(context.Background())
	var rows []string
	for {
		r := map[string]bigquery.Value{}
		err := it.Next(&r)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("reading rows: %v", err)
		}
		rows = append(rows, renderRow(r))
	}
	sort.Strings(rows)
	return rows, it.IsAccelerated()
}

// renderRow renders a row's values by column name, the big.Rat and time
// values by their meaning.
func renderRow(r map[string]bigquery.Value) string {
	names := make([]string, 0, len(r))
	for k := range r {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		v := r[k]
		switch x := v.(type) {
		case *big.Rat:
			v = x.FloatString(9)
		case time.Time:
			v = x.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(&b, "%s=%v ", k, v)
	}
	return b.String()
}

func TestStorageReadWithTheGoClient(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	table := e.createReadingsTable(t, "read", "readings")
	now := time.Now().UTC().Truncate(time.Microsecond)
	schema := readingSchema()
	var rows []*bigquery.ValuesSaver
	for i := 0; i < 2500; i++ {
		row := []bigquery.Value{
			fmt.Sprintf("s%d", i%7), now.Add(-time.Duration(i) * time.Minute), 21.5 + float64(i), int64(i), i%2 == 0, civil.DateOf(now),
			[]byte{0, 1, byte(i)}, big.NewRat(int64(i)*12345, 100), `{"a":1}`,
			civil.DateTime{Date: civil.Date{Year: 2024, Month: 5, Day: 6}, Time: civil.Time{Hour: 7, Minute: 8, Second: 9, Nanosecond: 123000}},
			civil.Time{Hour: 10, Minute: 11, Second: 12, Nanosecond: 5000}, []string{"x", fmt.Sprint(i)}, []bigquery.Value{1.5, -2.5}, nil,
		}
		if i%3 == 0 { // NULLs and empty arrays
			row = []bigquery.Value{fmt.Sprintf("s%d", i%7), now.Add(-time.Duration(i) * time.Minute), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, "n"}
		}
		rows = append(rows, &bigquery.ValuesSaver{Schema: schema, InsertID: fmt.Sprint(i), Row: row})
	}
	if err := table.Inserter().Put(ctx, rows); err != nil {
		t.Fatalf("Put: %v", err)
	}

	rest, accelerated := readRowsByName(t, table)
	if accelerated {
		t.Fatal("the plain client's read took the Storage Read API")
	}
	sr := e.storageReadClient(t)
	got, accelerated := readRowsByName(t, sr.Dataset("read").Table("readings"))
	if !accelerated {
		t.Fatal("the read did not take the Storage Read API (RowIterator.IsAccelerated is false)")
	}
	if len(got) != 2500 || len(rest) != 2500 {
		t.Fatalf("storage read %d rows, tabledata.list %d, want 2500 each", len(got), len(rest))
	}
	for i := range got {
		if got[i] != rest[i] {
			t.Fatalf("row %d: the Storage Read API gives\n  %s\ntabledata.list gives\n  %s", i, got[i], rest[i])
		}
	}

	t.Run("a query's results through the storage read client", func(t *testing.T) {
		// The client reads a query's destination table through the Storage
		// Read API when it is enabled; the emulator's query results keep
		// no destination table, so it takes jobs.getQueryResults.
		it, err := sr.Query("SELECT COUNT(*) AS n FROM read.readings").Read(ctx)
		if err != nil {
			t.Skipf("no query engine in this build: %v", err)
		}
		var r []bigquery.Value
		if err := it.Next(&r); err != nil || fmt.Sprint(r) != "[2500]" {
			t.Errorf("count = %v, %v; want [2500]", r, err)
		}
	})
}

func TestStorageReadSeesChangeDataCapture(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tbl := e.createKeyedTable(t, "cdc", "keyed", true)
	dp, md := protoFor(t, cdcWriterSchema())
	ms, err := e.mw.NewManagedStream(ctx,
		managedwriter.WithDestinationTable(managedwriter.TableParentFromParts(project, tbl.DatasetID, tbl.TableID)),
		managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(dp))
	if err != nil {
		t.Fatalf("NewManagedStream: %v", err)
	}
	defer ms.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, batch := range [][]change{
		{{"UPSERT", "a", now, 1, "10"}, {"UPSERT", "b", now, 2, "10"}, {"UPSERT", "c", now, 3, "10"}},
		{{"UPSERT", "a", now, 10, "20"}, {"UPSERT", "b", now, 20, "5"}, {"DELETE", "c", now, 0, "20"}},
	} {
		res, err := ms.AppendRows(ctx, encodeChanges(t, md, batch...))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.FullResponse(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sr := e.storageReadClient(t)
	got, accelerated := readRowsByName(t, sr.Dataset("cdc").Table("keyed"))
	want := []string{
		fmt.Sprintf("id=a note=n ts=%s value=10 ", now.Format(time.RFC3339Nano)),
		fmt.Sprintf("id=b note=n ts=%s value=2 ", now.Format(time.RFC3339Nano)),
	}
	if !accelerated || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("storage read (accelerated %v) = %q, want the applied rows %q", accelerated, got, want)
	}
}

func TestStorageReadSessions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	table := e.createReadingsTable(t, "read", "sessions")
	schema := readingSchema()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if time.Since(base) > 3000*24*time.Hour {
		t.Fatal("base is outside the streaming window: move it")
	}
	var rows []*bigquery.ValuesSaver
	for i := 0; i < 100; i++ { // one reading an hour
		rows = append(rows, &bigquery.ValuesSaver{Schema: schema, InsertID: fmt.Sprint(i), Row: []bigquery.Value{
			fmt.Sprintf("s%d", i%2), base.Add(time.Duration(i) * time.Hour), float64(i), int64(i), i%2 == 0,
			nil, nil, nil, nil, nil, nil, nil, nil, nil}})
	}
	if err := table.Inserter().Put(ctx, rows); err != nil {
		t.Fatalf("Put: %v", err)
	}
	rc, err := storage.NewBigQueryReadClient(ctx, e.ts.WriterOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tableID := "projects/" + project + "/datasets/read/tables/sessions"
	session := func(opts *storagepb.ReadSession_TableReadOptions, streams int32) (*storagepb.ReadSession, error) {
		return rc.CreateReadSession(ctx, &storagepb.CreateReadSessionRequest{
			Parent:         "projects/" + project,
			ReadSession:    &storagepb.ReadSession{Table: tableID, DataFormat: storagepb.DataFormat_ARROW, ReadOptions: opts},
			MaxStreamCount: streams,
		})
	}
	// readStream returns the seq values a stream holds from offset, and
	// the responses' row counts.
	readStream := func(t *testing.T, s *storagepb.ReadSession, name string, offset int64) []int64 {
		t.Helper()
		rs, err := rc.ReadRows(ctx, &storagepb.ReadRowsRequest{ReadStream: name, Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for {
			resp, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return out
			}
			if err != nil {
				t.Fatalf("ReadRows: %v", err)
			}
			if resp.GetRowCount() != resp.GetArrowRecordBatch().GetRowCount() {
				t.Errorf("response row_count %d, batch row_count %d", resp.GetRowCount(), resp.GetArrowRecordBatch().GetRowCount())
			}
			out = append(out, decodeSeqs(t, s.GetArrowSchema().GetSerializedSchema(), resp)...)
		}
	}

	t.Run("several streams with selected fields cover the rows once", func(t *testing.T) {
		s, err := session(&storagepb.ReadSession_TableReadOptions{SelectedFields: []string{"seq"}}, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.GetStreams()) != 3 || s.GetEstimatedRowCount() != 100 {
			t.Fatalf("streams %d, estimated rows %d; want 3 and 100", len(s.GetStreams()), s.GetEstimatedRowCount())
		}
		if got := arrowFieldNames(t, s); fmt.Sprint(got) != "[seq]" {
			t.Errorf("session schema fields = %v, want [seq]", got)
		}
		seen := map[int64]int{}
		for _, st := range s.GetStreams() {
			for _, v := range readStream(t, s, st.GetName(), 0) {
				seen[v]++
			}
		}
		if len(seen) != 100 {
			t.Errorf("distinct rows read = %d, want 100", len(seen))
		}
		for v, n := range seen {
			if n != 1 {
				t.Errorf("row %d read %d times", v, n)
			}
		}
	})

	t.Run("a read resumes at an offset", func(t *testing.T) {
		s, err := session(&storagepb.ReadSession_TableReadOptions{SelectedFields: []string{"seq"}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		all := readStream(t, s, s.GetStreams()[0].GetName(), 0)
		rest := readStream(t, s, s.GetStreams()[0].GetName(), 40)
		if len(all) != 100 || fmt.Sprint(rest) != fmt.Sprint(all[40:]) {
			t.Errorf("from offset 40: %v, want %v", rest, all[40:])
		}
	})

	t.Run("row restrictions", func(t *testing.T) {
		for _, tc := range []struct {
			restriction string
			want        int
		}{
			{"", 100},
			{"event_timestamp >= TIMESTAMP '2026-03-02 00:00:00+00' AND event_timestamp < TIMESTAMP('2026-03-03T00:00:00Z')", 24},
			{"(event_timestamp >= TIMESTAMP \"2026-03-02T00:00:00.000Z\") AND `seq` <= 30 AND sensor_id = 's0'", 4},
			{"seq > 95", 4},
			{"95 < seq", 4},
			{"ok = TRUE AND value >= 50.5", 24},
			{"sensor_id != 's1'", 50},
			{"note IS NULL AND seq IS NOT NULL", 100},
		} {
			t.Run(tc.restriction, func(t *testing.T) {
				s, err := session(&storagepb.ReadSession_TableReadOptions{SelectedFields: []string{"seq"}, RowRestriction: tc.restriction}, 2)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, st := range s.GetStreams() {
					n += len(readStream(t, s, st.GetName(), 0))
				}
				if n != tc.want || s.GetEstimatedRowCount() != int64(tc.want) {
					t.Errorf("rows = %d (estimated %d), want %d", n, s.GetEstimatedRowCount(), tc.want)
				}
			})
		}
	})

	t.Run("unsupported requests are InvalidArgument naming what", func(t *testing.T) {
		for _, tc := range []struct {
			name, restriction string
			fields            []string
			want              string
		}{
			{"OR", "seq = 1 OR seq = 2", nil, `unsupported "OR seq = 2"`},
			{"function", "TIMESTAMP_TRUNC(event_timestamp, DAY) = TIMESTAMP '2026-03-01'", nil, "unsupported function TIMESTAMP_TRUNC"},
			{"unknown column", "nope = 1", nil, "unrecognized name: nope"},
			{"bad literal", "event_timestamp > 'yesterday'", nil, "is not a TIMESTAMP value for column event_timestamp"},
			{"two columns", "seq = value", nil, "unsupported comparison of two columns"},
			{"NOT", "NOT seq = 1", nil, "unsupported NOT"},
			{"unknown selected field", "", []string{"nope"}, "nope"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := session(&storagepb.ReadSession_TableReadOptions{SelectedFields: tc.fields, RowRestriction: tc.restriction}, 1)
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want InvalidArgument containing %q", err, tc.want)
				}
			})
		}
		_, err := rc.CreateReadSession(ctx, &storagepb.CreateReadSessionRequest{Parent: "projects/" + project,
			ReadSession: &storagepb.ReadSession{Table: tableID, DataFormat: storagepb.DataFormat_AVRO}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "use ARROW") {
			t.Errorf("AVRO: err = %v, want InvalidArgument naming ARROW", err)
		}
		_, err = session(nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rc.CreateReadSession(ctx, &storagepb.CreateReadSessionRequest{Parent: "projects/" + project,
			ReadSession: &storagepb.ReadSession{Table: "projects/" + project + "/datasets/read/tables/nope", DataFormat: storagepb.DataFormat_ARROW}})
		if status.Code(err) != codes.NotFound {
			t.Errorf("missing table: err = %v, want NotFound", err)
		}
	})

	t.Run("split read stream answers with no split", func(t *testing.T) {
		s, err := session(nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rc.SplitReadStream(ctx, &storagepb.SplitReadStreamRequest{Name: s.GetStreams()[0].GetName(), Fraction: 0.5})
		if err != nil || resp.GetPrimaryStream() != nil || resp.GetRemainderStream() != nil {
			t.Errorf("SplitReadStream = %v, %v; want an empty answer", resp, err)
		}
		if _, err := rc.SplitReadStream(ctx, &storagepb.SplitReadStreamRequest{Name: s.GetName() + "/streams/99"}); status.Code(err) != codes.NotFound {
			t.Errorf("unknown stream: err = %v, want NotFound", err)
		}
	})
}

// arrowFieldNames decodes a session's Arrow schema and names its fields.
func arrowFieldNames(t *testing.T, s *storagepb.ReadSession) []string {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(s.GetArrowSchema().GetSerializedSchema()))
	if err != nil {
		t.Fatalf("decoding the session's arrow schema: %v", err)
	}
	defer r.Release()
	var out []string
	for _, f := range r.Schema().Fields() {
		out = append(out, f.Name)
	}
	return out
}

// decodeSeqs decodes a response's record batch, whose one column is the
// INT64 seq, with Apache Arrow's IPC reader, as the client does: the
// session's schema message, then the batch's message.
func decodeSeqs(t *testing.T, schema []byte, resp *storagepb.ReadRowsResponse) []int64 {
	t.Helper()
	msgs := append(append([]byte(nil), schema...), resp.GetArrowRecordBatch().GetSerializedRecordBatch()...)
	r, err := ipc.NewReader(bytes.NewReader(msgs))
	if err != nil {
		t.Fatalf("decoding a record batch: %v", err)
	}
	defer r.Release()
	var out []int64
	for r.Next() {
		col, ok := r.RecordBatch().Column(0).(*array.Int64)
		if !ok {
			t.Fatalf("column 0 is %T, want int64", r.RecordBatch().Column(0))
		}
		out = append(out, col.Int64Values()...)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("reading a record batch: %v", err)
	}
	return out
}
