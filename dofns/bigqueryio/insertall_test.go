package bigqueryio

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// TestInsertIDColumn: the insertAll insertId comes from the spec's key,
// never from a column's name: the column bound to $reading_id, else a
// one-column primary key, else none.
func TestInsertIDColumn(t *testing.T) {
	cols := []schemas.BQColumnSpec{
		{Name: "reading_id", Type: "STRING", Value: "sensor"}, // named like the id, bound to a field
		{Name: "rid", Type: "STRING", Value: schemas.ValueReadingID},
		{Name: "k", Type: "STRING", Value: "k"},
	}
	for _, tt := range []struct {
		name string
		bq   schemas.BigQuerySpec
		want int
	}{
		{"the $reading_id column", schemas.BigQuerySpec{Columns: cols}, 1},
		{"$reading_id before the primary key", schemas.BigQuerySpec{Columns: cols, PrimaryKey: []string{"k"}}, 1},
		{"a one-column primary key", schemas.BigQuerySpec{Columns: []schemas.BQColumnSpec{cols[0], cols[2]}, PrimaryKey: []string{"k"}}, 1},
		{"a two-column primary key gives none", schemas.BigQuerySpec{Columns: []schemas.BQColumnSpec{cols[0], cols[2]}, PrimaryKey: []string{"reading_id", "k"}}, -1},
		{"no key: none, whatever the column names", schemas.BigQuerySpec{Columns: []schemas.BQColumnSpec{cols[0], cols[2]}}, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := insertIDColumn(&tt.bq); got != tt.want {
				t.Errorf("insertIDColumn = %d; want %d", got, tt.want)
			}
		})
	}
}

// TestInsertAllWriterHoldsAtMostItsBuffer gives the insertAll writer a
// 4 KB buffer for rows that would all fit one batch of MaxInsertRows:
// after every row, the batch must hold no more than the buffer
// (insertRowMemory: values, the JSON they become, origins and their
// payloads), as the Storage Write writer's requests do, and every row must
// land.
func TestInsertAllWriterHoldsAtMostItsBuffer(t *testing.T) {
	ts := bqemu.StartServerForTest(t)
	t.Setenv(EmulatorHostEnv, strings.TrimPrefix(ts.RESTEndpoint, "http://"))
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := EnsureTable(ctx, bqProject, bqDataset, "insertall_buffered", spec.BigQuery, true); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	f := newWriteFn(bqProject, bqDataset, "insertall_buffered", WriteInsertAll, spec.BigQuery)
	f.Retry = retry.Settings{AttemptTimeout: 5 * time.Second, Deadline: time.Minute}
	f.MaxBufferedBytes = 4 << 10
	if err := f.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Teardown() })
	w := f.w.(*insertAllWriter)
	rows := vitalsRows(t, spec, 40, time.Now().UTC().Truncate(time.Hour))
	// held recomputes what the batch holds from its rows, not from the
	// writer's own tally.
	held := func() int {
		n := 0
		for _, r := range w.rows {
			enc, err := f.enc.Append(nil, r.Values)
			if err != nil {
				t.Fatal(err)
			}
			n += insertRowMemory(r, enc)
		}
		return n
	}
	var dead []deadletter.DeadLetter
	keep := func(d deadletter.DeadLetter) { dead = append(dead, d) }
	all, peak, sends := 0, 0, 0
	for _, row := range rows {
		enc, err := f.enc.Append(nil, row.Values)
		if err != nil {
			t.Fatal(err)
		}
		all += insertRowMemory(row, enc)
		before := len(w.rows)
		if err := w.add(ctx, row, enc, keep); err != nil {
			t.Fatal(err)
		}
		if len(w.rows) <= before {
			sends++
		}
		peak = max(peak, held())
	}
	if all <= 2*f.MaxBufferedBytes || len(rows) >= f.MaxInsertRows {
		t.Fatalf("the rows hold %d bytes in %d rows; the test wants more than twice the %d-byte buffer in fewer than %d rows",
			all, len(rows), f.MaxBufferedBytes, f.MaxInsertRows)
	}
	if peak > f.MaxBufferedBytes {
		t.Errorf("the writer held %d bytes of rows at once; its buffer is %d (all the rows: %d)", peak, f.MaxBufferedBytes, all)
	}
	if sends < 2 {
		t.Errorf("%d batches sent before the flush; want the buffer to cut several", sends)
	}
	if err := w.flush(ctx, keep); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if len(dead) != 0 {
		t.Fatalf("%d dead letters, first %+v; want every row landed", len(dead), dead[0])
	}
	c, err := bigquery.NewClient(ctx, bqProject, ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := emulators.ReadBigQuery(ctx, c.Dataset(bqDataset).Table("insertall_buffered"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Errorf("the table holds %d rows; want %d", len(got), len(rows))
	}
}
