package bigqueryio_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

func init() {
	register.Function1x1(bqDeadText)
}

func bqDeadText(d deadletter.DeadLetter) string { return d.Reason + ": " + d.Error + " " + d.Payload }

// TestWriteBigQueryAppliesTheConfiguredSink checks the composite's wiring:
// the configured table and write method receive every row, and nothing is
// dead-lettered.
func TestWriteBigQueryAppliesTheConfiguredSink(t *testing.T) {
	for _, method := range []string{"upsert", "storage_write", "insert_all"} {
		t.Run(method, func(t *testing.T) {
			ts := bqemu.StartServerForTest(t)
			t.Setenv(bigqueryio.EmulatorHostEnv, strings.TrimPrefix(ts.RESTEndpoint, "http://"))
			t.Setenv(bigqueryio.StorageEmulatorHostEnv, ts.GRPCAddr)
			loaded, err := schemas.BuiltinSpec("vitals")
			if err != nil {
				t.Fatal(err)
			}
			spec := hours.MustCompile(loaded, hours.CompileOptions{})
			cfg := bigqueryio.Config{Project: "p", Dataset: "d", Table: "vitals_" + method, WriteMethod: method}
			ctx := context.Background()
			if err := bigqueryio.EnsureTable(ctx, cfg.Project, cfg.Dataset, cfg.Table, spec.BigQuery, true); err != nil {
				t.Fatal(err)
			}
			b, err := hours.NewBuilder(spec.Spec)
			if err != nil {
				t.Fatal(err)
			}
			base := time.Now().UTC().Add(-time.Hour).Truncate(time.Minute)
			var rows []hours.BQRow
			for i := 0; i < 30; i++ {
				line := fmt.Sprintf(`{"sensor_id":"s%d","timestamp":%d,"heart_rate":70,"body_temperature":36.8,"spO2":98,"battery_level":87}`,
					i%4, base.Add(time.Duration(i)*time.Second).UnixMilli())
				recs, err := codec.NewParser(spec.Spec).Parse(nil, []byte(line), "in.jsonl")
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, b.BQRow(&recs[0], base.UnixMilli()))
			}

			p, s := beam.NewPipelineWithRoot()
			cfg.Sink, cfg.Columns = deadletter.SinkBigQuery, spec.BigQuery
			dead := bigqueryio.Write(s, cfg, beam.CreateList(s, rows))
			passert.Empty(s, beam.ParDo(s, bqDeadText, dead))
			if err := ptest.Run(p); err != nil {
				t.Fatalf("pipeline: %v", err)
			}

			c, err := bigquery.NewClient(ctx, cfg.Project, bigqueryio.ClientOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := emulators.ReadBigQuery(ctx, c.Dataset(cfg.Dataset).Table(cfg.Table))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(rows) {
				t.Errorf("table has %d rows, want %d", len(got), len(rows))
			}
		})
	}
}
