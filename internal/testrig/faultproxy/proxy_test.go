package faultproxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"cloud.google.com/go/bigquery/storage/managedwriter/adapt"
	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// bigtableTable makes table t with family f in the emulator at host.
func bigtableTable(t *testing.T, host string) {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx := context.Background()
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if err := ac.CreateTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := ac.CreateColumnFamily(ctx, "t", "f"); err != nil {
		t.Fatal(err)
	}
}

// rowExists reads row key from the emulator at host, bypassing the proxy.
func rowExists(t *testing.T, host, key string) bool {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	c, err := bigtable.NewClient(context.Background(), "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Open("t").ReadRow(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return len(r) > 0
}

// mutateRow makes one MutateRow call through the proxy with the raw
// generated client, which does not retry.
func mutateRow(t *testing.T, addr, key string) error {
	t.Helper()
	return mutateRowCtx(t, context.Background(), addr, key)
}

func mutateRowCtx(t *testing.T, ctx context.Context, addr, key string) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = bigtablepb.NewBigtableClient(conn).MutateRow(ctx, &bigtablepb.MutateRowRequest{
		TableName: "projects/p/instances/i/tables/t",
		RowKey:    []byte(key),
		Mutations: []*bigtablepb.Mutation{{Mutation: &bigtablepb.Mutation_SetCell_{SetCell: &bigtablepb.Mutation_SetCell{
			FamilyName: "f", ColumnQualifier: []byte("q"), TimestampMicros: 1000, Value: []byte("v")}}}},
	})
	return err
}

func TestBeforeAndAfterAgainstTheBigtableEmulator(t *testing.T) {
	host := emulators.StartBigtable(t)
	bigtableTable(t, host)
	p, err := Start(host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	if err := mutateRow(t, p.Addr(), "through"); err != nil || !rowExists(t, host, "through") {
		t.Fatalf("no rule: MutateRow = %v; want the row written through the proxy", err)
	}
	for _, tc := range []struct {
		when    When
		applied bool
	}{{Before, false}, {After, true}} {
		t.Run(tc.when.String(), func(t *testing.T) {
			p.SetRules(Rule{Method: "/MutateRow", Share: 1, When: tc.when})
			key := "row-" + tc.when.String()
			err := mutateRow(t, p.Addr(), key)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("MutateRow = %v; want UNAVAILABLE", err)
			}
			if got := rowExists(t, host, key); got != tc.applied {
				t.Errorf("row written = %v; want %v (%s)", got, tc.applied, tc.when)
			}
		})
	}
	t.Run("lost", func(t *testing.T) {
		// The call is applied and never answered: only the client's own
		// deadline ends it.
		p.SetRules(Rule{Method: "/MutateRow", Share: 1, When: Lost})
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		err := mutateRowCtx(t, ctx, p.Addr(), "row-lost")
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("MutateRow = %v; want DEADLINE_EXCEEDED (no answer, no error)", err)
		}
		if !rowExists(t, host, "row-lost") {
			t.Error("row not written; a lost answer's call is applied")
		}
	})
	p.SetRules(Rule{Method: "/MutateRow", Share: 1, When: Before, Code: codes.ResourceExhausted, Limit: 1})
	if err := mutateRow(t, p.Addr(), "limited-1"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("first call = %v; want RESOURCE_EXHAUSTED", err)
	}
	if err := mutateRow(t, p.Addr(), "limited-2"); err != nil {
		t.Fatalf("second call = %v; want it through (Limit 1)", err)
	}
	p.SetDown(true)
	if err := mutateRow(t, p.Addr(), "down"); status.Code(err) != codes.Unavailable || rowExists(t, host, "down") {
		t.Fatalf("down: MutateRow = %v; want UNAVAILABLE and nothing written", err)
	}
	p.SetDown(false)
	s := p.Stats()
	if Total(s.Calls, "/MutateRow") != 7 || Total(s.Faults, "/MutateRow") != 5 {
		t.Errorf("stats %+v; want 7 calls and 5 faults", s)
	}
}

func TestBulkWritesThroughTheProxyWithTheRealClient(t *testing.T) {
	host := emulators.StartBigtable(t)
	bigtableTable(t, host)
	p, err := Start(host, Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetRules(Rule{Method: "/google.bigtable.v2.Bigtable/MutateRows", Share: 0.5, When: After})
	t.Setenv("BIGTABLE_EMULATOR_HOST", p.Addr())
	c, err := bigtable.NewClient(context.Background(), "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := make([]string, 50)
	muts := make([]*bigtable.Mutation, 50)
	for i := range keys {
		keys[i] = string(rune('a'+i%26)) + string(rune('a'+i/26))
		muts[i] = bigtable.NewMutation()
		muts[i].Set("f", "q", 1000, []byte("v"))
	}
	// The client retries UNAVAILABLE itself: every entry lands.
	for i := 0; i < 10; i++ {
		errs, err := c.Open("t").ApplyBulk(context.Background(), keys, muts)
		if err != nil || errs != nil {
			t.Fatalf("ApplyBulk %d: %v %v", i, err, errs)
		}
	}
	if f := Total(p.Stats().Faults, "/MutateRows"); f == 0 {
		t.Fatal("no fault injected at share 0.5")
	}
	for _, k := range keys {
		if !rowExists(t, host, k) {
			t.Fatalf("row %s missing", k)
		}
	}
}

func TestAppendRowsPerMessageAgainstTheBigQueryEmulator(t *testing.T) {
	ts := bqemu.StartServerForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bq, err := bigquery.NewClient(ctx, "p", ts.BigQueryOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer bq.Close()
	schema := bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType, Required: true}}
	if err := bq.Dataset("d").Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	tbl := bq.Dataset("d").Table("t")
	if err := tbl.Create(ctx, &bigquery.TableMetadata{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	p, err := Start(ts.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	mw, err := managedwriter.NewClient(ctx, "p", option.WithEndpoint(p.Addr()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	ss, err := adapt.BQSchemaToStorageTableSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	d, err := adapt.StorageSchemaToProto2Descriptor(ss, "root")
	if err != nil {
		t.Fatal(err)
	}
	md := d.(protoreflect.MessageDescriptor)
	dp, err := adapt.NormalizeDescriptor(md)
	if err != nil {
		t.Fatal(err)
	}
	row := func(id string) []byte {
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().ByName("id"), protoreflect.ValueOfString(id))
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	count := func(id string) int {
		it := tbl.Read(ctx)
		n := 0
		for {
			vals := map[string]bigquery.Value{}
			err := it.Next(&vals)
			if err != nil {
				break
			}
			if vals["id"] == id {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		when    When
		applied int
	}{{Before, 0}, {After, 1}} {
		t.Run(tc.when.String(), func(t *testing.T) {
			ms, err := mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(managedwriter.TableParentFromParts("p", "d", "t")),
				managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(dp))
			if err != nil {
				t.Fatal(err)
			}
			defer ms.Close()
			// The first request goes through, the second fails.
			p.SetRules(Rule{Method: "/AppendRows", PerMessage: true}) // no fault for the first
			if _, err := mustAppend(ctx, ms, row("ok-"+tc.when.String())); err != nil {
				t.Fatalf("first append: %v", err)
			}
			p.SetRules(Rule{Method: "/AppendRows", PerMessage: true, Share: 1, When: tc.when, Limit: 1})
			_, err = mustAppend(ctx, ms, row("faulted-"+tc.when.String()))
			if status.Code(err) != codes.Unavailable && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("faulted append = %v; want UNAVAILABLE", err)
			}
			if got := count("faulted-" + tc.when.String()); got != tc.applied {
				t.Errorf("faulted row in the table %d times; want %d (%s)", got, tc.applied, tc.when)
			}
			if got := count("ok-" + tc.when.String()); got != 1 {
				t.Errorf("first row in the table %d times; want 1", got)
			}
		})
	}
}

func mustAppend(ctx context.Context, ms *managedwriter.ManagedStream, row []byte) (int64, error) {
	res, err := ms.AppendRows(ctx, [][]byte{row})
	if err != nil {
		return 0, err
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return res.GetResult(actx)
}
