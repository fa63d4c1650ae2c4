package bigqueryio

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"cloud.google.com/go/bigquery"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/internal/testrig/faultproxy"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// storageFixture creates the vitals table on an in-process emulator and
// returns a storage writer that reaches it at storageAddr(emulator's gRPC
// address), with retry settings rs.
func storageFixture(t *testing.T, table string, rs retry.Settings, storageAddr func(string) string) (*writeFn, *storageWriter, []hours.BQRow) {
	t.Helper()
	ts := bqemu.StartServerForTest(t)
	t.Setenv(EmulatorHostEnv, strings.TrimPrefix(ts.RESTEndpoint, "http://"))
	spec, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureTable(context.Background(), bqProject, bqDataset, table, spec.BigQuery, true); err != nil {
		t.Fatalf("EnsureTable: %v", err)
	}
	t.Setenv(StorageEmulatorHostEnv, storageAddr(ts.GRPCAddr))
	f := newWriteFn(bqProject, bqDataset, table, WriteStorageWrite, spec.BigQuery)
	f.Retry = rs
	if err := f.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Teardown() })
	return f, f.w.(*storageWriter), vitalsRows(t, spec, 40, time.Now().UTC().Truncate(time.Hour))
}

// addAll hands rows to the writer in requests of at most 600 bytes (six
// vitals rows), so that several are in flight.
func addAll(t *testing.T, f *writeFn, w *storageWriter, rows []hours.BQRow, dead func(deadletter.DeadLetter)) {
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
	if testing.Short() {
		t.Skip("waits out a 3 s stall: skipped under -short")
	}
	var p *faultproxy.Proxy
	f, w, rows := storageFixture(t, "stalled", retry.Settings{AttemptTimeout: time.Second, Deadline: time.Minute}, func(addr string) string {
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

	var dead []deadletter.DeadLetter
	keep := func(d deadletter.DeadLetter) { dead = append(dead, d) }
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
	if testing.Short() {
		t.Skip("waits out a 3 s retry deadline: skipped under -short")
	}
	f, w, rows := storageFixture(t, "unreachable", retry.Settings{AttemptTimeout: time.Second, Deadline: 3 * time.Second}, func(string) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	})
	var dead []deadletter.DeadLetter
	keep := func(d deadletter.DeadLetter) { dead = append(dead, d) }
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

// TestStorageWriterHoldsAtMostItsBuffer gives the writer a 4 KB buffer for
// rows that would all fit one request: after every row, the requests in
// flight and the one being filled must hold no more than the buffer
// (rowMemory: encodings, origins and their payloads), and every row must
// land.
func TestStorageWriterHoldsAtMostItsBuffer(t *testing.T) {
	f, w, rows := storageFixture(t, "buffered", retry.Settings{AttemptTimeout: 5 * time.Second, Deadline: time.Minute}, func(addr string) string { return addr })
	f.MaxBufferedBytes = 4 << 10
	held := func() int {
		n := w.batch.mem
		for _, req := range w.inflight {
			for i := range req.data {
				n += rowMemory(req.data[i], req.origins[i])
			}
		}
		return n
	}
	var dead []deadletter.DeadLetter
	keep := func(d deadletter.DeadLetter) { dead = append(dead, d) }
	all, peak := 0, 0
	for _, row := range rows {
		enc, err := f.enc.Append(nil, row.Values)
		if err != nil {
			t.Fatal(err)
		}
		all += rowMemory(enc, row.Origin)
		if err := w.add(context.Background(), row, enc, keep); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, held())
	}
	if all <= 2*f.MaxBufferedBytes {
		t.Fatalf("the rows hold %d bytes; the test wants more than twice the %d-byte buffer", all, f.MaxBufferedBytes)
	}
	if peak > f.MaxBufferedBytes {
		t.Errorf("the writer held %d bytes of rows at once; its buffer is %d (all the rows: %d)", peak, f.MaxBufferedBytes, all)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
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
	got, err := emulators.ReadBigQuery(ctx, c.Dataset(bqDataset).Table("buffered"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Errorf("the table holds %d rows; want %d", len(got), len(rows))
	}
}

// TestStorageWriterBatchKeepsOneCopyOfItsRows fills one request with 4 MB
// of encoded rows. Its memory after a collection must be about the rows':
// an arena grown by reallocation, whose every earlier size the rows in it
// keep alive, held about five times that (append grows large slices by a
// quarter).
func TestStorageWriterBatchKeepsOneCopyOfItsRows(t *testing.T) {
	w := &storageWriter{f: &writeFn{MaxRequestBytes: DefaultBQRequestBytes, MaxBufferedBytes: 1 << 30, MaxInflight: defaultBQInflight}}
	enc := make([]byte, 100)
	const n = 40_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		if err := w.add(context.Background(), hours.BQRow{}, enc, nil); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(w.inflight) != 0 || len(w.batch.data) != n {
		t.Fatalf("%d requests sent, %d rows in the batch; want none sent, all %d in it", len(w.inflight), len(w.batch.data), n)
	}
	kept := int(after.HeapAlloc) - int(before.HeapAlloc)
	slices := cap(w.batch.data)*int(unsafe.Sizeof(enc)) + cap(w.batch.origins)*int(unsafe.Sizeof(hours.Origin{}))
	if limit := n*len(enc)*9/8 + slices + arenaBlock; kept > limit {
		t.Errorf("a request of %d bytes of rows keeps %d bytes (%d in its row and origin slices); want at most %d", n*len(enc), kept, slices, limit)
	}
	runtime.KeepAlive(w)
}
