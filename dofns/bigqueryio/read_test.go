package bigqueryio_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	register.Function2x1(sourcedLine)
}

func sourcedLine(source, line string) string { return source + " " + line }

// TestReadGivesEachRowsReadingPayload: Read reads a spec's table through
// the Storage Read API, in several streams, and gives each row its
// reading's JSON payload (imputed values left out), within the event-time
// bounds; a row whose value its field cannot take is a parse dead letter
// with the row.
func TestReadGivesEachRowsReadingPayload(t *testing.T) {
	ts := bqemu.StartServerForTest(t)
	t.Setenv(bigqueryio.EmulatorHostEnv, strings.TrimPrefix(ts.RESTEndpoint, "http://"))
	t.Setenv(bigqueryio.StorageEmulatorHostEnv, ts.GRPCAddr)
	loaded, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	// battery_level as text, which a row can hold unreadable.
	cols := append([]schemas.BQColumnSpec(nil), loaded.BigQuery.Columns...)
	for i := range cols {
		if cols[i].Name == "battery_level" {
			cols[i].Type = "STRING"
		}
	}
	bq := *loaded.BigQuery
	bq.Columns = cols
	loaded.BigQuery = &bq
	spec := hours.MustCompile(loaded, hours.CompileOptions{})
	ctx := context.Background()
	cfg := bigqueryio.Config{Project: "p", Dataset: "d", Table: "readings", Spec: spec, Streams: 3}
	if err := bigqueryio.EnsureTable(ctx, cfg.Project, cfg.Dataset, cfg.Table, spec.BigQuery, true); err != nil {
		t.Fatal(err)
	}
	if err := bigqueryio.CheckSource(ctx, cfg, spec.Spec); err != nil {
		t.Fatalf("CheckSource: %v", err)
	}
	c, err := bigquery.NewClient(ctx, cfg.Project, bigqueryio.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	at := func(min int) time.Time { return time.Date(2026, 3, 1, 10, min, 0, 0, time.UTC) }
	row := func(id, sensor string, ts time.Time, hr any, battery string, imputed bool) *bigquery.ValuesSaver {
		return &bigquery.ValuesSaver{Schema: bigquery.Schema{
			{Name: "sensor_id", Type: bigquery.StringFieldType}, {Name: "event_timestamp", Type: bigquery.TimestampFieldType},
			{Name: "heart_rate", Type: bigquery.FloatFieldType}, {Name: "body_temperature", Type: bigquery.FloatFieldType},
			{Name: "spO2", Type: bigquery.FloatFieldType}, {Name: "battery_level", Type: bigquery.StringFieldType},
			{Name: "heart_rate_imputed", Type: bigquery.BooleanFieldType}, {Name: "reading_id", Type: bigquery.StringFieldType},
			{Name: "ingested_at", Type: bigquery.TimestampFieldType},
		}, InsertID: id, Row: []bigquery.Value{sensor, ts, hr, 36.8, 98.0, battery, imputed, id, time.Now()}}
	}
	rows := []*bigquery.ValuesSaver{
		row("a", "p-1", at(0), 70.0, "87", false),
		row("b", "p-1", at(30), 70.0, "86", true),  // imputed: its heart rate is not the reading's
		row("c", "p-2", at(59), nil, "low", false), // unreadable
		row("d", "p-2", at(60), 71.0, "80", false), // 11h: past --to_time
	}
	if err := c.Dataset(cfg.Dataset).Table(cfg.Table).Inserter().Put(ctx, rows); err != nil {
		t.Fatal(err)
	}

	cfg.FromMs, cfg.ToMs = at(0).UnixMilli(), at(60).UnixMilli()
	p, s := beam.NewPipelineWithRoot()
	lines, dead := bigqueryio.Read(s, cfg)
	src := "bigquery:p:d.readings"
	passert.Equals(s, beam.ParDo(s, sourcedLine, lines),
		src+` {"sensor_id":"p-1","timestamp":"2026-03-01T10:00:00.000Z","heart_rate":70,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
		src+` {"sensor_id":"p-1","timestamp":"2026-03-01T10:30:00.000Z","body_temperature":36.8,"spO2":98,"battery_level":86}`)
	passert.Equals(s, beam.ParDo(s, bqDeadText, dead),
		`invalid_field: invalid_field: bigquery row cannot be read back: column battery_level: string low cannot be read as a float {"battery_level":"low","body_temperature":36.8,"event_timestamp":"2026-03-01T10:59:00Z","heart_rate":null,"heart_rate_imputed":false,"sensor_id":"p-2","spO2":98}`)
	if err := ptest.Run(p); err != nil {
		t.Fatalf("pipeline: %v", err)
	}

	t.Run("CheckSource refuses a table without the spec's columns", func(t *testing.T) {
		other := cfg
		other.Table = "other"
		if err := bigqueryio.EnsureTable(ctx, other.Project, other.Dataset, other.Table, &schemas.BigQuerySpec{Table: "other",
			Columns: []schemas.BQColumnSpec{{Name: "sensor_id", Type: "STRING", Value: "sensor_id"}}}, true); err != nil {
			t.Fatal(err)
		}
		err := bigqueryio.CheckSource(ctx, other, spec.Spec)
		if err == nil || !strings.Contains(err.Error(), "has no column event_timestamp") {
			t.Errorf("CheckSource = %v; want the missing column named", err)
		}
		loaded.BigQuery.Columns[0].Type = "BYTES"
		err = bigqueryio.CheckSource(ctx, cfg, loaded)
		if err == nil || !strings.Contains(err.Error(), "column sensor_id is STRING, but spec vitals declares it BYTES") {
			t.Errorf("CheckSource = %v; want the type named", err)
		}
	})
}
