package bqemu

import (
	"context"
	"log"
	"net"
	"testing"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestServer is an emulator running on loopback ports for the duration of a
// test. Create one with StartServerForTest.
type TestServer struct {
	// Server is the running emulator.
	Server *Server
	// RESTEndpoint is the base URL of the REST API, e.g.
	// "http://127.0.0.1:41234". Pass it to option.WithEndpoint.
	RESTEndpoint string
	// GRPCAddr is the host:port of the Storage Write and Storage Read gRPC
	// APIs. Pass it to option.WithEndpoint for managedwriter or the
	// storage read client.
	GRPCAddr string
}

// BigQueryOptions returns the client options that point
// cloud.google.com/go/bigquery.NewClient at the emulator.
func (ts *TestServer) BigQueryOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(ts.RESTEndpoint),
		option.WithoutAuthentication(),
	}
}

// WriterOptions returns the client options that point
// cloud.google.com/go/bigquery/storage/managedwriter.NewClient, and
// bigquery.Client.EnableStorageReadClient, at the emulator.
func (ts *TestServer) WriterOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(ts.GRPCAddr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// testShutdownGrace bounds how long a test server's shutdown waits for
// open calls before it closes them.
const testShutdownGrace = 200 * time.Millisecond

// StartServerForTest starts an emulator on two free loopback ports and stops
// it when the test finishes. Requests are logged through tb.Logf when the
// test runs verbosely (go test -v), and discarded otherwise.
func StartServerForTest(tb testing.TB) *TestServer {
	tb.Helper()
	restLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("bqemu: listening for REST: %v", err)
	}
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		restLis.Close()
		tb.Fatalf("bqemu: listening for gRPC: %v", err)
	}
	opts := Options{Quiet: !testing.Verbose()}
	if testing.Verbose() {
		opts.Logger = log.New(tbWriter{tb}, "bqemu: ", 0)
	}
	s := New(opts)
	restDone := make(chan error, 1)
	grpcDone := make(chan error, 1)
	go func() { restDone <- s.ServeREST(restLis) }()
	go func() { grpcDone <- s.ServeGRPC(grpcLis) }()
	tb.Cleanup(func() {
		// A test's clients can leave Storage Write streams open (prism
		// need not call a DoFn's Teardown), and a graceful stop waits for
		// every stream: after a short grace the server closes them.
		ctx, cancel := context.WithTimeout(context.Background(), testShutdownGrace)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Logf("bqemu: shutdown: %v", err)
		}
		for _, ch := range []chan error{restDone, grpcDone} {
			if err := <-ch; err != nil {
				tb.Errorf("bqemu: %v", err)
			}
		}
	})
	return &TestServer{
		Server:       s,
		RESTEndpoint: "http://" + restLis.Addr().String(),
		GRPCAddr:     grpcLis.Addr().String(),
	}
}

// StartForTest starts an emulator for the duration of the test and returns
// the REST endpoint URL (e.g. "http://127.0.0.1:41234", ready for
// option.WithEndpoint) and the gRPC address (e.g. "127.0.0.1:41235").
func StartForTest(tb testing.TB) (restEndpoint, grpcAddr string) {
	tb.Helper()
	ts := StartServerForTest(tb)
	return ts.RESTEndpoint, ts.GRPCAddr
}

// tbWriter forwards log output to a test log.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Logf("%s", trimNewline(p))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		return p[:n-1]
	}
	return p
}
