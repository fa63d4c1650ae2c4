package dofns

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/bqadmin"
	"github.com/sensorpipe/sensorpipe/internal/bqemu"
	"github.com/sensorpipe/sensorpipe/internal/faultproxy"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// storageFixture creates the vitals table on an in-process emulator and
// returns a storage writer that reaches it at storageAddr(emulator's gRPC
// address), with retry settings rs.
func storageFixture(t *testing.T, table string, rs RetrySettings, storageAddr func(string) string) (*BigQueryWriteFn, *storageWriter, []schemas.BQRow) {
	t.Helper()
	ts := bqemu.StartServerForTest(t)
	t.Setenv(bqadmin.EmulatorHostEnv, strings.TrimPrefix(ts.RESTEndpoint, "http://"))
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	if err := bqadmin.EnsureTable(context.Background(), bqProject, bqDataset, table, spec.BigQuery, true); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	t.Setenv(bqadmin.StorageEmulatorHostEnv, storageAddr(ts.GRPCAddr))
	f := NewBigQueryWriteFn(bqProject, bqDataset, table, WriteStorageWrite, spec.BigQuery)
	f.Retry = rs
	if err := f.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Teardown() })
	return f, f.w.(*storageWriter), vitalsRows(t, spec, 40, time.Now().UTC().Truncate(time.Hour))
}

// addAll hands rows to the writer in requests of at most 600 bytes (six
// vitals rows), so that several are in flight.
func addAll(t *testing.T, f *BigQueryWriteFn, w *storageWriter, rows []schemas.BQRow, dead func(schemas.DeadLetter)) {
	t.Helper()
	f.MaxRequestBytes = 600
	for _, row := range rows {
		enc, err := f.enc.Append(nil, row.Values)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.add(context.Background(), row, enc, dead); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStorageWriterRetriesAStalledStream stalls the connection (a server
// that answers nothing for 3 s) with requests in flight: each wait must
// end at the attempt timeout, and the retries, on a new connection, must
// land every row. (With managedwriter and its write retries, a request
// caught by the stream's close never got an answer at all.)
func TestStorageWriterRetriesAStalledStream(t *testing.T) {
	var p *faultproxy.Proxy
	f, w, rows := storageFixture(t, "stalled", RetrySettings{AttemptTimeout: time.Second, Deadline: time.Minute}, func(addr string) string {
		var err error
		if p, err = faultproxy.Start(addr); err != nil {
			t.Fatal(err)
		}
		return p.Addr()
	})
	defer p.Close()
	p.SetRules(faultproxy.Rule{Method: "/AppendRows", PerMessage: true})
	p.SetDelay(3 * time.Second)
	time.AfterFunc(3*time.Second, func() { p.SetDelay(0) })

	var dead []schemas.DeadLetter
	keep := func(d schemas.DeadLetter) { dead = append(dead, d) }
	start := time.Now()
	addAll(t, f, w, rows, keep)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := w.flush(ctx, keep); err != nil {
		t.Fatalf("flush: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("every request settled %v after the first was sent", time.Since(start).Round(time.Millisecond))
	if len(dead) != 0 {
		t.Fatalf("%d dead letters, first %+v; want every row landed", len(dead), dead[0])
	}
	if got := len(w.inflight); got != 0 {
		t.Errorf("%d requests still in flight after flush", got)
	}
}

// TestStorageWriterDeadLettersWhenBigQueryIsUnreachable points the writer
// at a port nobody listens on. Setup must not fail (the launch checked
// the table; BigQuery may come back), and flush must end within the
// retry deadline with every row dead-lettered as unavailable.
func TestStorageWriterDeadLettersWhenBigQueryIsUnreachable(t *testing.T) {
	f, w, rows := storageFixture(t, "unreachable", RetrySettings{AttemptTimeout: time.Second, Deadline: 3 * time.Second}, func(string) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	})
	var dead []schemas.DeadLetter
	keep := func(d schemas.DeadLetter) { dead = append(dead, d) }
	addAll(t, f, w, rows, keep)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := w.flush(ctx, keep); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if len(dead) != len(rows) {
		t.Fatalf("%d dead letters; want all %d rows", len(dead), len(rows))
	}
	for _, d := range dead {
		if d.Reason != "write_failed" || !strings.Contains(d.Error, retry.ErrExhausted.Error()) {
			t.Fatalf("dead letter %+v; want write_failed after the retry deadline", d)
		}
	}
	if !f.down.Open() {
		t.Error("the breaker is not open after BigQuery stayed unavailable")
	}
}
