// Package bqemu is an in-memory emulator of Google BigQuery for local
// development and tests.
//
// It serves the subset of the BigQuery REST API v2 that sensorpipe and the
// usual clients use (datasets, tables, tabledata.insertAll and
// tabledata.list, query jobs, and the discovery document the bq CLI builds
// itself from) over HTTP, and over gRPC the BigQuery Storage Write API
// (google.cloud.bigquery.storage.v1.BigQueryWrite), with change data
// capture, and the Storage Read API (BigQueryRead, in Arrow: read.go).
// Queries run in the engine that package sqlengine registers (it embeds
// DuckDB); without it, query jobs fail with notImplemented. The official
// Go clients, cloud.google.com/go/bigquery (with its Storage Read client)
// and its storage/managedwriter package, work against it unmodified when
// pointed at it with option.WithEndpoint and option.WithoutAuthentication.
//
// The emulator enforces the constraints real BigQuery enforces on streamed
// data (schema conformance, REQUIRED columns, request size limits, stream
// offsets and the partition time window for streamed rows) and reports
// violations in BigQuery's error shapes, so code that handles those errors
// can be tested locally.
//
// All data lives in memory and is lost when the server stops.
package bqemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"google.golang.org/grpc"
)

// MaxRequestBytes is the request size limit BigQuery applies both to a single
// tabledata.insertAll HTTP request and to a single AppendRows request.
const MaxRequestBytes = 10 << 20

// Options configures a Server. The zero value is usable.
type Options struct {
	// Logger receives one line per request. When nil, requests are logged to
	// standard error unless Quiet is set.
	Logger *log.Logger
	// Quiet disables request logging.
	Quiet bool
	// Location is reported as the location of datasets and write streams
	// that do not specify one. Defaults to "US".
	Location string
	// Now returns the current time. It is used for the streaming partition
	// window and for timestamps in metadata. Defaults to time.Now.
	Now func() time.Time
}

// Server is an in-memory BigQuery emulator. Create one with New, then serve
// it with ServeREST and ServeGRPC. All methods are safe for concurrent use.
type Server struct {
	opts Options
	log  *log.Logger

	mu       sync.Mutex
	datasets map[string]*dataset     // key: project/dataset
	streams  map[string]*writeStream // key: full stream name
	nextID   int64

	// readSessions are the Storage Read sessions (read.go), under mu.
	readSessions map[string]*readSession // key: session name

	descCache sync.Map // string(descriptor bytes) -> protoreflect.MessageDescriptor

	// Query jobs (query.go), under mu; the engine is built on first use.
	jobs        map[string]map[string]*job // project -> job ID -> job
	jobSeq      int64
	withResults []*job // jobs whose results are kept, oldest first
	engineOnce  sync.Once
	engine      QueryEngine
	engineErr   error

	srvMu   sync.Mutex
	httpSrv []*http.Server
	grpcSrv []*grpc.Server
	closed  bool
}

// New returns a Server with no datasets.
func New(opts Options) *Server {
	if opts.Location == "" {
		opts.Location = "US"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		opts:     opts,
		datasets: make(map[string]*dataset),
		streams:  make(map[string]*writeStream),
	}
	switch {
	case opts.Quiet:
		s.log = log.New(io.Discard, "", 0)
	case opts.Logger != nil:
		s.log = opts.Logger
	default:
		s.log = log.New(os.Stderr, "bqemu: ", log.LstdFlags|log.Lmicroseconds)
	}
	return s
}

// ServeREST serves the BigQuery REST API v2 on lis until Shutdown is called.
// It returns nil after Shutdown, or the error that stopped serving. Called
// after Shutdown (a goroutine that had not yet started when the server was
// stopped), it closes lis and returns nil, as http.Server does.
func (s *Server) ServeREST(lis net.Listener) error {
	hs := &http.Server{Handler: s.RESTHandler(), ReadHeaderTimeout: 30 * time.Second}
	s.srvMu.Lock()
	if s.closed {
		s.srvMu.Unlock()
		return lis.Close()
	}
	s.httpSrv = append(s.httpSrv, hs)
	s.srvMu.Unlock()
	if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("bqemu: serving REST: %w", err)
	}
	return nil
}

// NewGRPCServer returns a gRPC server with the BigQuery Storage Write and
// Storage Read services registered, configured to accept requests larger
// than MaxRequestBytes so that oversized AppendRows requests are answered
// with BigQuery's error instead of a transport error.
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(8 * MaxRequestBytes),
		grpc.MaxSendMsgSize(8 * MaxRequestBytes),
		grpc.UnaryInterceptor(s.logUnary),
	}, opts...)
	gs := grpc.NewServer(opts...)
	storagepb.RegisterBigQueryWriteServer(gs, &writeServer{s: s})
	storagepb.RegisterBigQueryReadServer(gs, &readServer{s: s})
	return gs
}

// ServeGRPC serves the BigQuery Storage Write and Storage Read gRPC APIs
// on lis until Shutdown is called. It returns nil after Shutdown, or the
// error that stopped serving; called after Shutdown, it closes lis and
// returns nil.
func (s *Server) ServeGRPC(lis net.Listener) error {
	gs := s.NewGRPCServer()
	s.srvMu.Lock()
	if s.closed {
		s.srvMu.Unlock()
		return lis.Close()
	}
	s.grpcSrv = append(s.grpcSrv, gs)
	s.srvMu.Unlock()
	if err := gs.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("bqemu: serving gRPC: %w", err)
	}
	return nil
}

// Shutdown stops all servers started by ServeREST and ServeGRPC, letting
// in-flight requests finish until ctx is done, at which point remaining
// connections are closed forcibly.
func (s *Server) Shutdown(ctx context.Context) error {
	s.srvMu.Lock()
	s.closed = true
	hs, gs := s.httpSrv, s.grpcSrv
	s.httpSrv, s.grpcSrv = nil, nil
	s.srvMu.Unlock()

	var firstErr error
	for _, h := range hs {
		if err := h.Shutdown(ctx); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("bqemu: shutting down REST server: %w", err)
			_ = h.Close()
		}
	}
	for _, g := range gs {
		done := make(chan struct{})
		go func() { g.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			g.Stop()
			<-done
		}
	}
	s.mu.Lock()
	eng := s.engine
	s.mu.Unlock()
	if eng != nil {
		if err := eng.Close(); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("bqemu: closing the query engine: %w", err)
		}
	}
	return firstErr
}

// Close stops all servers immediately.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Shutdown(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (s *Server) now() time.Time { return s.opts.Now() }

// newID returns a process-unique identifier.
func (s *Server) newIDLocked() string {
	s.nextID++
	return fmt.Sprintf("%d%06d", s.now().UnixNano()%1_000_000_000, s.nextID)
}
