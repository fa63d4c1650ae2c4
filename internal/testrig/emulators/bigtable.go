package emulators

import (
	"context"
	"fmt"
	"net"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Bigtable is the gcloud SDK's Bigtable emulator. $SENSORPIPE_BIGTABLE_EMULATOR
// may point at the cbtemulator binary directly.
var Bigtable = Kind{
	Name:         "bigtable",
	Env:          "SENSORPIPE_BIGTABLE_EMULATOR",
	SDKPath:      "platform/bigtable-emulator/cbtemulator",
	Args:         func(host, port string) []string { return []string{"-host", host, "-port", port} },
	Ready:        tcpReady,
	StartTimeout: 30 * time.Second,
}

// StartBigtable starts a Bigtable emulator for a test and returns its
// "host:port"; callers normally set BIGTABLE_EMULATOR_HOST to it.
func StartBigtable(tb testing.TB) (hostPort string) {
	tb.Helper()
	return Bigtable.StartForTest(tb)
}

// tcpReady succeeds once hostPort accepts a TCP connection.
func tcpReady(hostPort string) error {
	c, err := net.DialTimeout("tcp", hostPort, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// DumpBigtable reads every cell of every row of a table in the Bigtable
// emulator at hostPort, as sorted "row fam:col@micros=value" lines. A table
// not created yet reads as empty.
func DumpBigtable(tb testing.TB, hostPort, project, instance, table string) []string {
	tb.Helper()
	ctx := context.Background()
	c := BigtableClient(tb, hostPort, project, instance)
	defer c.Close()
	var out []string
	err := c.Open(table).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for _, items := range r {
			for _, it := range items {
				out = append(out, fmt.Sprintf("%s %s@%d=%s", r.Key(), it.Column, it.Timestamp, it.Value))
			}
		}
		return true
	})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// BigtableClient opens a data client of instance project/instance on the
// Bigtable emulator at hostPort, with no BIGTABLE_EMULATOR_HOST needed (a
// test that sets none can run in parallel with others); the caller closes
// it.
func BigtableClient(tb testing.TB, hostPort, project, instance string) *bigtable.Client {
	tb.Helper()
	conn, err := grpc.NewClient(hostPort, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	c, err := bigtable.NewClient(context.Background(), project, instance, option.WithGRPCConn(conn))
	if err != nil {
		conn.Close()
		tb.Fatal(err)
	}
	return c
}
