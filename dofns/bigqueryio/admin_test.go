package bigqueryio

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	_ "github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu/sqlengine"
	"github.com/sensorpipe/sensorpipe/schemas"
)

const project = "test-project"

func vitals(t *testing.T) *schemas.Spec {
	t.Helper()
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// useEmulator starts an in-process emulator and points both environment
// variables at it, so EnsureTable finds it the way a launch would.
func useEmulator(t *testing.T) *bigquery.Client {
	t.Helper()
	ts := bqemu.StartServerForTest(t)
	t.Setenv(EmulatorHostEnv, strings.TrimPrefix(ts.RESTEndpoint, "http://"))
	t.Setenv(StorageEmulatorHostEnv, ts.GRPCAddr)
	c, err := bigquery.NewClient(context.Background(), project, ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// without returns spec's schema minus the named columns.
func without(spec *schemas.Spec, drop ...string) bigquery.Schema {
	var out bigquery.Schema
	for _, f := range schema(spec.BigQuery) {
		keep := true
		for _, d := range drop {
			keep = keep && f.Name != d
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}

func TestEnsureTableCreatesDatasetAndPartitionedClusteredTable(t *testing.T) {
	ctx := context.Background()
	c := useEmulator(t)
	spec := vitals(t)
	if err := EnsureTable(ctx, project, "sensors", "readings", spec.BigQuery, true); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	md, err := c.Dataset("sensors").Table("readings").Metadata(ctx)
	if err != nil {
		t.Fatalf("tables.get: %v", err)
	}
	if tp := md.TimePartitioning; tp == nil || tp.Type != bigquery.DayPartitioningType || tp.Field != "event_timestamp" {
		t.Errorf("timePartitioning = %+v, want DAY on event_timestamp", tp)
	}
	if cl := md.Clustering; cl == nil || strings.Join(cl.Fields, ",") != "sensor_id" {
		t.Errorf("clustering = %+v, want [sensor_id]", cl)
	}
	if tc := md.TableConstraints; tc == nil || tc.PrimaryKey == nil || strings.Join(tc.PrimaryKey.Columns, ",") != "reading_id" {
		t.Errorf("tableConstraints = %+v, want PRIMARY KEY (reading_id)", tc)
	}
	if ms := md.MaxStaleness; ms == nil || ms.ToDuration() != 15*time.Minute {
		t.Errorf("maxStaleness = %v, want 15m", ms)
	}
	if err := EnsurePrimaryKey(ctx, project, "sensors", "readings", spec.BigQuery); err != nil {
		t.Errorf("EnsurePrimaryKey on the new table: %v", err)
	}
	want := []struct {
		name     string
		typ      bigquery.FieldType
		required bool
	}{
		{"sensor_id", bigquery.StringFieldType, true},
		{"event_timestamp", bigquery.TimestampFieldType, true},
		{"heart_rate", bigquery.FloatFieldType, false},
		{"body_temperature", bigquery.FloatFieldType, false},
		{"spO2", bigquery.FloatFieldType, false},
		{"battery_level", bigquery.FloatFieldType, false},
		{"heart_rate_imputed", bigquery.BooleanFieldType, false},
		{"reading_id", bigquery.StringFieldType, true},
		{"ingested_at", bigquery.TimestampFieldType, false},
	}
	if len(md.Schema) != len(want) {
		t.Fatalf("schema has %d columns, want %d", len(md.Schema), len(want))
	}
	for i, w := range want {
		f := md.Schema[i]
		if f.Name != w.name || f.Type != w.typ || f.Required != w.required {
			t.Errorf("column %d = %s %s required=%v, want %s %s required=%v", i, f.Name, f.Type, f.Required, w.name, w.typ, w.required)
		}
	}
	// A second launch finds everything in place and changes nothing.
	if err := EnsureTable(ctx, project, "sensors", "readings", spec.BigQuery, false); err != nil {
		t.Errorf("EnsureTable on the existing table: %v", err)
	}
}

func TestEnsureTableExistingTables(t *testing.T) {
	tests := []struct {
		name   string
		schema func(*schemas.Spec) bigquery.Schema
		create bool
		// wantErr lists what the error must name; empty means success.
		wantErr []string
		// wantCols is the table's column count afterwards.
		wantCols int
	}{
		{
			name:     "missing NULLABLE columns are patched in",
			schema:   func(s *schemas.Spec) bigquery.Schema { return without(s, "heart_rate_imputed", "ingested_at") },
			create:   true,
			wantCols: 9,
		},
		{
			name:     "missing NULLABLE column without create is an error",
			schema:   func(s *schemas.Spec) bigquery.Schema { return without(s, "ingested_at") },
			create:   false,
			wantErr:  []string{project + ":sensors.readings", "ingested_at", "--create_tables=true"},
			wantCols: 8,
		},
		{
			name:     "missing REQUIRED column is an error",
			schema:   func(s *schemas.Spec) bigquery.Schema { return without(s, "reading_id") },
			create:   true,
			wantErr:  []string{project + ":sensors.readings", "reading_id", "REQUIRED", "make it NULLABLE in the spec"},
			wantCols: 8,
		},
		{
			name: "type mismatch is an error",
			schema: func(s *schemas.Spec) bigquery.Schema {
				sc := schema(s.BigQuery)
				sc[2] = &bigquery.FieldSchema{Name: "heart_rate", Type: bigquery.StringFieldType}
				return sc
			},
			create:   true,
			wantErr:  []string{project + ":sensors.readings", "heart_rate", "STRING", "FLOAT64"},
			wantCols: 9,
		},
		{
			name: "REQUIRED table column the spec does not write is an error",
			schema: func(s *schemas.Spec) bigquery.Schema {
				return append(schema(s.BigQuery), &bigquery.FieldSchema{Name: "site", Type: bigquery.StringFieldType, Required: true})
			},
			create:   true,
			wantErr:  []string{project + ":sensors.readings", "site", "DROP NOT NULL"},
			wantCols: 10,
		},
		{
			name: "extra NULLABLE table column is fine",
			schema: func(s *schemas.Spec) bigquery.Schema {
				return append(schema(s.BigQuery), &bigquery.FieldSchema{Name: "site", Type: bigquery.StringFieldType})
			},
			create:   false,
			wantCols: 10,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := useEmulator(t)
			spec := vitals(t)
			if err := c.Dataset("sensors").Create(ctx, nil); err != nil {
				t.Fatal(err)
			}
			tbl := c.Dataset("sensors").Table("readings")
			md := tableMetadata(spec.BigQuery)
			md.Schema = tc.schema(spec)
			if !hasColumn(md.Schema, "reading_id") {
				md.TableConstraints = nil // the key cannot name a missing column
			}
			if err := tbl.Create(ctx, md); err != nil {
				t.Fatal(err)
			}
			err := EnsureTable(ctx, project, "sensors", "readings", spec.BigQuery, tc.create)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("EnsureTable: %v", err)
			}
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("EnsureTable succeeded, want an error")
				}
				t.Logf("error: %v", err)
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
			}
			got, err := tbl.Metadata(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Schema) != tc.wantCols {
				t.Errorf("table has %d columns afterwards, want %d", len(got.Schema), tc.wantCols)
			}
			if len(tc.wantErr) == 0 {
				if _, err := checkSchema("t", got.Schema, spec.BigQuery, false); err != nil {
					t.Errorf("table still cannot take the spec's rows: %v", err)
				}
			}
		})
	}
}

func TestEnsureTableWithoutCreateReportsWhatIsMissing(t *testing.T) {
	tests := []struct {
		name        string
		makeDataset bool
		want        []string
	}{
		{"missing dataset", false, []string{"dataset " + project + ":sensors does not exist", "--create_tables=true"}},
		{"missing table", true, []string{"table " + project + ":sensors.readings does not exist", "--create_tables=true"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := useEmulator(t)
			if tc.makeDataset {
				if err := c.Dataset("sensors").Create(ctx, nil); err != nil {
					t.Fatal(err)
				}
			}
			err := EnsureTable(ctx, project, "sensors", "readings", vitals(t).BigQuery, false)
			if err == nil {
				t.Fatal("EnsureTable succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, err := c.Dataset("sensors").Table("readings").Metadata(ctx); err == nil {
				t.Error("the table exists afterwards; create=false must not create it")
			}
		})
	}
}

func TestEnsureTableUnreachableFailsInBoundedTime(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 2 s deadline against a dead port: skipped under -short")
	}
	// A port nothing listens on.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	t.Setenv(EmulatorHostEnv, addr)

	// The context's deadline is what bounds the call: it returns (a call
	// that ignored it would hang until the test binary's -timeout) with an
	// error naming the endpoint. No wall-clock measurement: how long the
	// retries take on a loaded machine is not what is being shown.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = EnsureTable(ctx, project, "sensors", "readings", vitals(t).BigQuery, true)
	if !errors.Is(err, errUnreachable) {
		t.Fatalf("err = %v, want errUnreachable", err)
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name the endpoint %s", err, addr)
	}
}

func TestCheckSchema(t *testing.T) {
	spec := vitals(t)
	tests := []struct {
		name    string
		have    bigquery.Schema
		add     bool
		wantAdd []string
		wantErr string
	}{
		{"same schema", schema(spec.BigQuery), false, nil, ""},
		{"standard SQL type names compare equal", func() bigquery.Schema {
			s := schema(spec.BigQuery)
			s[2] = &bigquery.FieldSchema{Name: "heart_rate", Type: "FLOAT64"}
			return s
		}(), false, nil, ""},
		{"column names compare case-insensitively", func() bigquery.Schema {
			s := schema(spec.BigQuery)
			s[4] = &bigquery.FieldSchema{Name: "SPO2", Type: bigquery.FloatFieldType}
			return s
		}(), false, nil, ""},
		{"REQUIRED in spec, NULLABLE in table is fine", func() bigquery.Schema {
			s := schema(spec.BigQuery)
			s[0] = &bigquery.FieldSchema{Name: "sensor_id", Type: bigquery.StringFieldType}
			return s
		}(), false, nil, ""},
		{"missing NULLABLE with add", without(spec, "spO2", "ingested_at"), true, []string{"spO2", "ingested_at"}, ""},
		{"missing NULLABLE without add", without(spec, "spO2"), false, nil, "ALTER TABLE `p.d.t` ADD COLUMN spO2 FLOAT64"},
		{"missing REQUIRED", without(spec, "sensor_id"), true, nil, "column sensor_id (STRING REQUIRED) is missing"},
		{"REPEATED column", func() bigquery.Schema {
			s := schema(spec.BigQuery)
			s[3] = &bigquery.FieldSchema{Name: "body_temperature", Type: bigquery.FloatFieldType, Repeated: true}
			return s
		}(), true, nil, "body_temperature is FLOAT REPEATED in the table"},
		{"NULLABLE in spec, REQUIRED in table", func() bigquery.Schema {
			s := schema(spec.BigQuery)
			s[5] = &bigquery.FieldSchema{Name: "battery_level", Type: bigquery.FloatFieldType, Required: true}
			return s
		}(), true, nil, "battery_level is REQUIRED in the table but NULLABLE in the spec"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			add, err := checkSchema("p:d.t", tc.have, spec.BigQuery, tc.add)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "p:d.t") {
					t.Fatalf("err = %v, want one naming p:d.t and containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckSchema: %v", err)
			}
			var got []string
			for _, f := range add {
				if f.Required {
					t.Errorf("column %s would be added as REQUIRED", f.Name)
				}
				got = append(got, f.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.wantAdd, ",") {
				t.Errorf("add = %v, want %v", got, tc.wantAdd)
			}
		})
	}
}

func TestOptionsFollowTheEnvironment(t *testing.T) {
	tests := []struct {
		name, rest, grpc string
		wantRest         int
		wantGRPC         int
		wantEndpoint     string
	}{
		{"unset: Cloud BigQuery", "", "", 0, 0, "bigquery.googleapis.com"},
		{"emulators", "127.0.0.1:9050", "127.0.0.1:9060", 2, 3, "127.0.0.1:9050"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EmulatorHostEnv, tc.rest)
			t.Setenv(StorageEmulatorHostEnv, tc.grpc)
			if n := len(ClientOptions()); n != tc.wantRest {
				t.Errorf("ClientOptions has %d options, want %d", n, tc.wantRest)
			}
			if n := len(writerOptions()); n != tc.wantGRPC {
				t.Errorf("WriterOptions has %d options, want %d", n, tc.wantGRPC)
			}
			if e := endpoint(); !strings.Contains(e, tc.wantEndpoint) {
				t.Errorf("endpoint() = %q, want it to name %s", e, tc.wantEndpoint)
			}
		})
	}
}

func TestEnsurePrimaryKey(t *testing.T) {
	ctx := context.Background()
	c := useEmulator(t)
	spec := vitals(t)
	ds := c.Dataset("sensors")
	if err := ds.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// A table made before the key: every column, no constraint.
	if err := ds.Table("old").Create(ctx, &bigquery.TableMetadata{Schema: schema(spec.BigQuery)}); err != nil {
		t.Fatal(err)
	}
	other := tableMetadata(spec.BigQuery)
	other.TableConstraints.PrimaryKey.Columns = []string{"sensor_id"}
	if err := ds.Table("other").Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		table, want string
	}{
		{"old", "bigquery table test-project:sensors.old has no primary key, which --bigquery_write_method=upsert needs: run ALTER TABLE `test-project.sensors.old` ADD PRIMARY KEY (reading_id) NOT ENFORCED, or write with --bigquery_write_method=storage_write"},
		{"other", "bigquery table test-project:sensors.other has primary key (sensor_id) but the spec's is (reading_id)"},
	} {
		t.Run(tc.table, func(t *testing.T) {
			// EnsureTable itself accepts the table: the key matters to upsert only.
			if err := EnsureTable(ctx, project, "sensors", tc.table, spec.BigQuery, true); err != nil {
				t.Fatalf("EnsureTable: %v", err)
			}
			err := EnsurePrimaryKey(ctx, project, "sensors", tc.table, spec.BigQuery)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("EnsurePrimaryKey = %v, want one line containing %q", err, tc.want)
			}
		})
	}
	t.Run("the ALTER TABLE it names fixes it", func(t *testing.T) {
		if _, err := c.Query("ALTER TABLE `test-project.sensors.old` ADD PRIMARY KEY (reading_id) NOT ENFORCED").Read(ctx); err != nil {
			t.Fatal(err)
		}
		if err := EnsurePrimaryKey(ctx, project, "sensors", "old", spec.BigQuery); err != nil {
			t.Fatalf("after ALTER TABLE: %v", err)
		}
	})
}

func hasColumn(s bigquery.Schema, name string) bool {
	for _, f := range s {
		if f.Name == name {
			return true
		}
	}
	return false
}

// TestUnwrittenColumns: a NULLABLE column the spec no longer writes gets a
// one-line warning naming the table, the column and what happens to it; a
// written column gets none (a REQUIRED one is CheckSchema's error).
func TestUnwrittenColumns(t *testing.T) {
	spec := &schemas.BigQuerySpec{Table: "readings", Columns: []schemas.BQColumnSpec{
		{Name: "sensor_id", Type: "STRING", Mode: "REQUIRED", Value: "sensor_id"},
		{Name: "heart_rate", Type: "FLOAT64", Value: "heart_rate"},
	}}
	have := bigquery.Schema{
		{Name: "sensor_id", Type: bigquery.StringFieldType, Required: true},
		{Name: "Heart_Rate", Type: bigquery.FloatFieldType},
		{Name: "firmware", Type: bigquery.StringFieldType},
		{Name: "legacy_id", Type: bigquery.StringFieldType, Required: true},
	}
	got := unwrittenColumns("p:ds.readings", have, spec)
	if len(got) != 1 {
		t.Fatalf("warnings %q; want one, for firmware", got)
	}
	for _, w := range []string{"p:ds.readings", "column firmware", "no longer writes", "NULL", "DROP COLUMN firmware"} {
		if !strings.Contains(got[0], w) {
			t.Errorf("%q does not say %q", got[0], w)
		}
	}
}
