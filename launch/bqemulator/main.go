// Command bqemulator runs the sensorpipe BigQuery emulator: BigQuery's REST
// API v2 (datasets, tables, table data, query jobs on an embedded SQL
// engine, and the discovery document the bq CLI builds itself from), the
// Storage Write gRPC API with change data capture, and the Storage Read
// gRPC API (Arrow), backed by memory.
//
// Usage:
//
//	go run ./launch/bqemulator [--rest_addr=127.0.0.1:9050] [--grpc_addr=127.0.0.1:9060] [--quiet]
//
// Point clients at it with option.WithEndpoint("http://127.0.0.1:9050") (REST)
// or option.WithEndpoint("127.0.0.1:9060") plus insecure transport
// credentials (Storage Write, and Storage Read with the bigquery client's
// EnableStorageReadClient), and option.WithoutAuthentication(); the bq
// CLI with CLOUDSDK_AUTH_ACCESS_TOKEN=x bq --api=http://127.0.0.1:9050.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"

	// Query jobs run on the embedded SQL engine.
	_ "github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu/sqlengine"
)

// main exits 0 after a clean stop (SIGINT, SIGTERM), 2 on bad flags or
// arguments, 1 when it cannot listen or serve (internal/cli).
func main() {
	os.Exit(cli.Report(os.Stderr, "bqemulator", run(os.Args[1:])))
}

func run(args []string) error {
	fs := flag.NewFlagSet("bqemulator", flag.ContinueOnError)
	restAddr := fs.String("rest_addr", "127.0.0.1:9050", "host:port to serve the BigQuery REST API v2 on")
	grpcAddr := fs.String("grpc_addr", "127.0.0.1:9060", "host:port to serve the BigQuery Storage Write and Storage Read gRPC APIs on")
	quiet := fs.Bool("quiet", false, "do not log each request")
	fs.SetOutput(io.Discard) // a bad flag is one line; --help prints the flags
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.PrintDefaults()
			return err
		}
		return cli.Usagef("%w (bqemulator --help lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected arguments %q: every option is a --flag", fs.Args())
	}

	restLis, err := net.Listen("tcp", *restAddr)
	if err != nil {
		return fmt.Errorf("cannot listen on --rest_addr: %w", err)
	}
	grpcLis, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		restLis.Close()
		return fmt.Errorf("cannot listen on --grpc_addr: %w", err)
	}

	logger := log.New(os.Stderr, "bqemulator: ", log.LstdFlags|log.Lmicroseconds)
	srv := bqemu.New(bqemu.Options{Logger: logger, Quiet: *quiet})

	errc := make(chan error, 2)
	go func() { errc <- srv.ServeREST(restLis) }()
	go func() { errc <- srv.ServeGRPC(grpcLis) }()
	logger.Printf("serving BigQuery REST API on http://%s and Storage Write and Read gRPC APIs on %s", restLis.Addr(), grpcLis.Addr())

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)

	var serveErr error
	select {
	case sig := <-sigc:
		logger.Printf("received %s, shutting down", sig)
	case serveErr = <-errc:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutting down: %w", err)
	}
	if serveErr != nil {
		return serveErr
	}
	logger.Printf("stopped")
	return nil
}
