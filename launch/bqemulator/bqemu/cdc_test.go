package bqemu_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// cdcSchema is a keyed table's schema; cdcWriterSchema adds the CDC
// pseudo-columns a writer sends.
func cdcSchema() bigquery.Schema {
	return bigquery.Schema{
		{Name: "id", Type: bigquery.StringFieldType, Required: true},
		{Name: "ts", Type: bigquery.TimestampFieldType, Required: true},
		{Name: "value", Type: bigquery.FloatFieldType},
		{Name: "note", Type: bigquery.StringFieldType, Required: true},
	}
}

func cdcWriterSchema() bigquery.Schema {
	return append(cdcSchema(),
		&bigquery.FieldSchema{Name: "_CHANGE_TYPE", Type: bigquery.StringFieldType},
		&bigquery.FieldSchema{Name: "_CHANGE_SEQUENCE_NUMBER", Type: bigquery.StringFieldType})
}

// createKeyedTable creates a DAY-partitioned table, keyed on id when key is
// set.
func (e *env) createKeyedTable(t *testing.T, ds, name string, key bool) *bigquery.Table {
	t.Helper()
	ctx := context.Background()
	d := e.bq.Dataset(ds)
	if _, err := d.Metadata(ctx); err != nil {
		if err := d.Create(ctx, nil); err != nil {
			t.Fatalf("creating dataset: %v", err)
		}
	}
	md := &bigquery.TableMetadata{
		Schema:           cdcSchema(),
		TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType, Field: "ts"},
		Clustering:       &bigquery.Clustering{Fields: []string{"id"}},
	}
	if key {
		md.TableConstraints = &bigquery.TableConstraints{PrimaryKey: &bigquery.PrimaryKey{Columns: []string{"id"}}}
		md.MaxStaleness = &bigquery.IntervalValue{Minutes: 15}
	}
	tbl := d.Table(name)
	if err := tbl.Create(ctx, md); err != nil {
		t.Fatalf("creating table: %v", err)
	}
	return tbl
}

// change is one CDC row: typ "" leaves _CHANGE_TYPE unset, seq ""
// leaves the sequence number unset.
type change struct {
	typ, id string
	ts      time.Time
	value   float64
	seq     string
}

func encodeChanges(t *testing.T, md protoreflect.MessageDescriptor, cs ...change) [][]byte {
	t.Helper()
	var out [][]byte
	for _, c := range cs {
		vals := map[string]any{"id": c.id}
		if c.typ != "DELETE" {
			vals["ts"] = c.ts.UnixMicro()
			vals["value"] = c.value
			vals["note"] = "n"
		}
		if c.typ != "" {
			vals["_CHANGE_TYPE"] = c.typ
		}
		if c.seq != "" {
			vals["_CHANGE_SEQUENCE_NUMBER"] = c.seq
		}
		out = append(out, encode(t, md, vals))
	}
	return out
}

// tableValues reads tbl as id -> value, failing on a repeated id.
func tableValues(t *testing.T, tbl *bigquery.Table) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, r := range readByName(t, tbl) {
		id, _ := r["id"].(string)
		if _, dup := got[id]; dup {
			t.Errorf("id %s has more than one row", id)
		}
		got[id], _ = r["value"].(float64)
	}
	return got
}

func TestChangeDataCapture(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	dp, md := protoFor(t, cdcWriterSchema())
	now := time.Now().UTC().Truncate(time.Microsecond)
	stream := func(t *testing.T, tbl *bigquery.Table, typ managedwriter.StreamType) *managedwriter.ManagedStream {
		t.Helper()
		ms, err := e.mw.NewManagedStream(ctx,
			managedwriter.WithDestinationTable(managedwriter.TableParentFromParts(project, tbl.DatasetID, tbl.TableID)),
			managedwriter.WithType(typ), managedwriter.WithSchemaDescriptor(dp))
		if err != nil {
			t.Fatalf("NewManagedStream: %v", err)
		}
		t.Cleanup(func() { ms.Close() })
		return ms
	}
	appendRows := func(t *testing.T, ms *managedwriter.ManagedStream, rows [][]byte) (*storagepb.AppendRowsResponse, error) {
		t.Helper()
		res, err := ms.AppendRows(ctx, rows)
		if err != nil {
			return nil, err
		}
		return res.FullResponse(ctx)
	}

	t.Run("table constraints and max staleness round trip", func(t *testing.T) {
		tbl := e.createKeyedTable(t, "cdc", "roundtrip", true)
		got, err := tbl.Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.TableConstraints == nil || got.TableConstraints.PrimaryKey == nil || fmt.Sprint(got.TableConstraints.PrimaryKey.Columns) != "[id]" {
			t.Errorf("TableConstraints = %+v", got.TableConstraints)
		}
		if got.MaxStaleness == nil || got.MaxStaleness.ToDuration() != 15*time.Minute {
			t.Errorf("MaxStaleness = %v, want 15m", got.MaxStaleness)
		}
		// Patch drops the key, then puts it back.
		if _, err := tbl.Update(ctx, bigquery.TableMetadataToUpdate{TableConstraints: &bigquery.TableConstraints{PrimaryKey: &bigquery.PrimaryKey{}}}, ""); err != nil {
			t.Fatalf("drop primary key: %v", err)
		}
		if got, _ := tbl.Metadata(ctx); got.TableConstraints != nil && got.TableConstraints.PrimaryKey != nil {
			t.Errorf("after drop: PrimaryKey = %+v", got.TableConstraints.PrimaryKey)
		}
		up := bigquery.TableMetadataToUpdate{
			TableConstraints: &bigquery.TableConstraints{PrimaryKey: &bigquery.PrimaryKey{Columns: []string{"ID"}}},
			MaxStaleness:     &bigquery.IntervalValue{Minutes: 30},
		}
		got, err = tbl.Update(ctx, up, "")
		if err != nil {
			t.Fatalf("add primary key: %v", err)
		}
		if fmt.Sprint(got.TableConstraints.PrimaryKey.Columns) != "[id]" || got.MaxStaleness.ToDuration() != 30*time.Minute {
			t.Errorf("after patch: constraints %+v, staleness %v", got.TableConstraints.PrimaryKey, got.MaxStaleness)
		}
	})

	t.Run("bad constraints are refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			md   *bigquery.TableMetadata
			msg  string
		}{
			{"unknown key column", &bigquery.TableMetadata{Schema: cdcSchema(), TableConstraints: &bigquery.TableConstraints{PrimaryKey: &bigquery.PrimaryKey{Columns: []string{"nope"}}}}, "primary key column nope is not a column"},
			{"reserved column name", &bigquery.TableMetadata{Schema: cdcWriterSchema()}, "reserved prefix _CHANGE_TYPE"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := e.bq.Dataset("cdc").Table("bad_"+strings.ReplaceAll(tc.name, " ", "_")).Create(ctx, tc.md)
				gerr := apiErr(t, err, 400, "invalid")
				if !strings.Contains(gerr.Message, tc.msg) {
					t.Errorf("message = %q, want %q", gerr.Message, tc.msg)
				}
			})
		}
	})

	t.Run("pseudo-columns need a primary key", func(t *testing.T) {
		tbl := e.createKeyedTable(t, "cdc", "nokey", false)
		_, err := appendRows(t, stream(t, tbl, managedwriter.DefaultStream), encodeChanges(t, md, change{"UPSERT", "a", now, 1, ""}))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "The primary keys and clustering keys of the table are required to create an upsert stream") {
			t.Fatalf("err = %v, want BigQuery's upsert-stream error", err)
		}
		if n := len(readAll(t, tbl)); n != 0 {
			t.Errorf("rows = %d, want 0", n)
		}
	})

	t.Run("upsert and delete keep one row per key", func(t *testing.T) {
		tbl := e.createKeyedTable(t, "cdc", "keyed", true)
		ms := stream(t, tbl, managedwriter.DefaultStream)
		for i, batch := range [][]change{
			{{"UPSERT", "a", now, 1, "10"}, {"UPSERT", "b", now, 2, "10"}, {"UPSERT", "c", now, 3, "10"}},
			// A newer a, an older b (ignored), c deleted.
			{{"UPSERT", "a", now, 11, "20"}, {"UPSERT", "b", now, 99, "0F"}, {"DELETE", "c", time.Time{}, 0, "11"}},
			// a moves to yesterday's partition; d comes in with no sequence number.
			{{"UPSERT", "a", now.Add(-24 * time.Hour), 12, "21"}, {"UPSERT", "d", now, 4, ""}},
		} {
			if _, err := appendRows(t, ms, encodeChanges(t, md, batch...)); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
		want := map[string]float64{"a": 12, "b": 2, "d": 4}
		if got := tableValues(t, tbl); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("table = %v, want %v", got, want)
		}
		got, err := tbl.Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.NumRows != uint64(len(want)) {
			t.Errorf("tables.get numRows = %d, want %d", got.NumRows, len(want))
		}
	})

	t.Run("the highest sequence number wins whatever the arrival order", func(t *testing.T) {
		versions := []change{
			{"UPSERT", "k", now, 1, "18F2EBB6480/0"},
			{"UPSERT", "k", now, 2, "18F2EBB6480/1"},
			{"UPSERT", "k", now, 3, "18F2EBB6481/0"},
		}
		for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1}} {
			t.Run(fmt.Sprint(order), func(t *testing.T) {
				tbl := e.createKeyedTable(t, "cdc", fmt.Sprintf("order_%d%d%d", order[0], order[1], order[2]), true)
				ms := stream(t, tbl, managedwriter.DefaultStream)
				for _, i := range order {
					if _, err := appendRows(t, ms, encodeChanges(t, md, versions[i])); err != nil {
						t.Fatal(err)
					}
				}
				if got := tableValues(t, tbl); got["k"] != 3 || len(got) != 1 {
					t.Errorf("table = %v, want k=3", got)
				}
			})
		}
	})

	t.Run("row errors", func(t *testing.T) {
		tbl := e.createKeyedTable(t, "cdc", "rowerrors", true)
		for _, tc := range []struct {
			name string
			typ  managedwriter.StreamType
			c    change
			msg  string
		}{
			{"missing change type", managedwriter.DefaultStream, change{"", "a", now, 1, "1"}, "The given value is not a valid CHANGE_TYPE"},
			{"INSERT on an upsert stream", managedwriter.DefaultStream, change{"INSERT", "a", now, 1, ""}, "The given value is not a valid CHANGE_TYPE"},
			{"lower-case upsert", managedwriter.DefaultStream, change{"upsert", "a", now, 1, ""}, "The given value is not a valid CHANGE_TYPE"},
			{"bad sequence number", managedwriter.DefaultStream, change{"UPSERT", "a", now, 1, "XYZ"}, "Invalid _CHANGE_SEQUENCE_NUMBER"},
			{"five sections", managedwriter.DefaultStream, change{"UPSERT", "a", now, 1, "1/2/3/4/5"}, "Invalid _CHANGE_SEQUENCE_NUMBER"},
			{"UPSERT on a committed stream", managedwriter.CommittedStream, change{"UPSERT", "a", now, 1, ""}, "The given value is not a valid CHANGE_TYPE in insert mode: UPSERT"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, err := appendRows(t, stream(t, tbl, tc.typ), encodeChanges(t, md, tc.c))
				if err == nil {
					t.Fatal("append succeeded")
				}
				if len(resp.GetRowErrors()) != 1 || !strings.Contains(resp.GetRowErrors()[0].GetMessage(), tc.msg) {
					t.Errorf("row errors = %v (err %v), want one containing %q", resp.GetRowErrors(), err, tc.msg)
				}
			})
		}
		if n := len(readAll(t, tbl)); n != 0 {
			t.Errorf("rows = %d, want 0: a request with a bad row writes nothing", n)
		}
	})

	t.Run("plain appends to a keyed table are not deduplicated", func(t *testing.T) {
		tbl := e.createKeyedTable(t, "cdc", "plain", true)
		ins := tbl.Inserter()
		for i := 0; i < 2; i++ {
			if err := ins.Put(ctx, mapSaver{row: map[string]bigquery.Value{"id": "a", "ts": now, "value": float64(i), "note": "n"}}); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		for _, r := range readByName(t, tbl) {
			ids = append(ids, fmt.Sprint(r["id"]))
		}
		sort.Strings(ids)
		if fmt.Sprint(ids) != "[a a]" {
			t.Errorf("ids = %v, want [a a]: BigQuery does not enforce primary keys", ids)
		}
	})
}
