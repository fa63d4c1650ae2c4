// Package faultproxy is a transparent gRPC proxy for tests that fails a
// chosen share of chosen methods, before forwarding a call or after the
// server has applied it, answers slowly, or plays a dead server.
//
// It forwards every method of any service without generated stubs: the
// server takes unknown services and a pass-through codec hands each
// message on as raw bytes. Put it between a client and an emulator:
//
//	p, _ := faultproxy.Start("127.0.0.1:8086")          // the Bigtable emulator
//	defer p.Close()
//	p.SetRules(faultproxy.Rule{Method: "/google.bigtable.v2.Bigtable/MutateRows", Share: 0.3, When: faultproxy.After})
//	// BIGTABLE_EMULATOR_HOST=p.Addr() ...
//
// A call is one decision: for a unary or server-streaming method (one
// request), "before" fails it without forwarding and "after" forwards it,
// waits until the server has answered in full, and then fails it; "lost"
// forwards it and never answers (nor fails) it, until the client gives up. For a
// bidi stream whose requests are each answered by one response (BigQuery's
// AppendRows), set PerMessage: each request is one decision, and "after"
// forwards it, waits for its response, and ends the stream with the error
// instead of passing the response on.
//
// Decisions come from a seeded random source (Options.Seed), so a test can
// be repeated, and Stats counts calls and faults by method.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// When is where a fault falls.
type When int

const (
	// Before fails the call without forwarding it: the server never sees
	// it.
	Before When = iota
	// After forwards the call, lets the server apply and answer it, and
	// fails it anyway: the client sees an error for a write that landed.
	After
	// Lost forwards the call, lets the server apply and answer it, and
	// never passes the answer on: the call stays open, without an answer
	// or an error, until the client gives up on it (a wedged connection).
	Lost
)

func (w When) String() string {
	switch w {
	case After:
		return "after"
	case Lost:
		return "lost"
	}
	return "before"
}

// Rule fails a share of one method's calls.
type Rule struct {
	// Method is the full method name, "/package.Service/Method"; a suffix
	// ("/MutateRows") matches too.
	Method string
	// Share is the probability that a call (or, with PerMessage, a
	// request) fails.
	Share float64
	// When is Before or After.
	When When
	// Code is the status the client gets (default UNAVAILABLE).
	Code codes.Code
	// PerMessage makes each request of a bidi stream its own decision
	// (for methods that answer each request with one response).
	PerMessage bool
	// Limit caps the faults this rule injects (0: no cap), e.g. Share 1
	// and Limit 1 fails exactly the first call.
	Limit int
}

// Options configure a Proxy.
type Options struct {
	// Seed seeds the random source of the decisions (0: 1).
	Seed int64
}

// Stats are the calls a proxy saw and the faults it injected, by method.
type Stats struct {
	Calls  map[string]int
	Faults map[string]int
}

// Total sums a by-method count over the methods ending in suffix.
func Total(counts map[string]int, suffix string) int {
	n := 0
	for m, c := range counts {
		if strings.HasSuffix(m, suffix) {
			n += c
		}
	}
	return n
}

// Proxy is a running fault proxy.
type Proxy struct {
	lis  net.Listener
	srv  *grpc.Server
	conn *grpc.ClientConn

	mu       sync.Mutex
	rng      *rand.Rand
	rules    []Rule
	injected []int // per rule
	delay    time.Duration
	down     bool
	calls    map[string]int
	faults   map[string]int
}

// Start listens on a free loopback port and forwards to backend
// ("host:port", plaintext).
func Start(backend string, opts ...Options) (*Proxy, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	conn, err := grpc.NewClient(backend, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(1<<30), grpc.MaxCallSendMsgSize(1<<30)))
	if err != nil {
		return nil, fmt.Errorf("faultproxy: dial %s: %w", backend, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{lis: lis, conn: conn, rng: rand.New(rand.NewSource(o.Seed)), calls: map[string]int{}, faults: map[string]int{}}
	p.srv = grpc.NewServer(grpc.UnknownServiceHandler(p.handle), grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(1<<30), grpc.MaxSendMsgSize(1<<30))
	go func() { _ = p.srv.Serve(lis) }()
	return p, nil
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Close stops the proxy.
func (p *Proxy) Close() {
	p.srv.Stop()
	p.conn.Close()
}

// SetRules replaces the fault rules (none: a transparent proxy).
func (p *Proxy) SetRules(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = rules
	p.injected = make([]int, len(rules))
}

// SetDelay makes the proxy wait d before forwarding each request: a slow
// server.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// SetDown makes the proxy answer every call with UNAVAILABLE (and end the
// streams in flight), as a dead server would; SetDown(false) revives it.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Calls: map[string]int{}, Faults: map[string]int{}}
	for k, v := range p.calls {
		s.Calls[k] = v
	}
	for k, v := range p.faults {
		s.Faults[k] = v
	}
	return s
}

// decision is what happens to one call or request.
type decision struct {
	fail       bool
	when       When
	code       codes.Code
	perMessage bool
	delay      time.Duration
}

// decide counts a call (or request) of method and draws its fate.
func (p *Proxy) decide(method string) decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[method]++
	d := decision{delay: p.delay}
	if p.down {
		p.faults[method]++
		return decision{fail: true, when: Before, code: codes.Unavailable}
	}
	for i, r := range p.rules {
		if r.Method != method && !strings.HasSuffix(method, r.Method) {
			continue
		}
		d.perMessage = r.PerMessage
		if r.Limit > 0 && p.injected[i] >= r.Limit || p.rng.Float64() >= r.Share {
			return d
		}
		p.injected[i]++
		p.faults[method]++
		d.fail, d.when, d.code = true, r.When, r.Code
		if d.code == codes.OK {
			d.code = codes.Unavailable
		}
		return d
	}
	return d
}

// perMessage reports whether method's calls are decided per request.
func (p *Proxy) perMessage(method string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		if r.Method == method || strings.HasSuffix(method, r.Method) {
			return r.PerMessage
		}
	}
	return false
}

func (p *Proxy) isDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

func injected(d decision, method string) error {
	return status.Errorf(d.code, "faultproxy: injected %v %s of %s", d.code, d.when, method)
}

// handle forwards one call.
func (p *Proxy) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "faultproxy: no method")
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	}
	if p.perMessage(method) {
		return p.handlePerMessage(ctx, method, ss)
	}
	d := p.decide(method)
	if d.fail && d.when == Before {
		return injected(d, method)
	}
	if d.delay > 0 {
		time.Sleep(d.delay)
	}
	cs, err := p.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	// Client to server; it ends with the call (the handler's return
	// cancels both streams).
	go func() {
		for {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				if errors.Is(err, io.EOF) {
					_ = cs.CloseSend()
				}
				return
			}
			if err := cs.SendMsg(&f); err != nil {
				return
			}
		}
	}()
	// Server to client; with an "after" or "lost" fault, the answers are
	// dropped.
	if hdr, err := cs.Header(); err == nil && !d.fail {
		_ = ss.SendHeader(hdr)
	}
	for {
		var f frame
		err := cs.RecvMsg(&f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if d.fail {
				return injected(d, method)
			}
			return err
		}
		if p.isDown() {
			return status.Error(codes.Unavailable, "faultproxy: server down")
		}
		if d.fail {
			continue // applied; its answer is lost
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
	}
	if d.fail && d.when == Lost {
		<-ss.Context().Done() // until the client gives up
		return ss.Context().Err()
	}
	if d.fail {
		return injected(d, method)
	}
	ss.SetTrailer(cs.Trailer())
	return nil
}

// handlePerMessage forwards a bidi stream whose requests are each answered
// by one response, deciding each request on its own.
func (p *Proxy) handlePerMessage(ctx context.Context, method string, ss grpc.ServerStream) error {
	cs, err := p.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	headerSent := false
	for {
		var req frame
		if err := ss.RecvMsg(&req); err != nil {
			if errors.Is(err, io.EOF) {
				_ = cs.CloseSend()
				return drain(cs, ss)
			}
			return err
		}
		d := p.decide(method)
		if d.fail && d.when == Before {
			return injected(d, method)
		}
		if d.delay > 0 {
			time.Sleep(d.delay)
		}
		if err := cs.SendMsg(&req); err != nil {
			return err
		}
		var resp frame
		if err := cs.RecvMsg(&resp); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if d.fail && d.when == Lost {
			<-ss.Context().Done() // until the client gives up
			return ss.Context().Err()
		}
		if d.fail || p.isDown() {
			return injected(decision{code: codes.Unavailable, when: After}, method)
		}
		if !headerSent {
			if hdr, err := cs.Header(); err == nil {
				_ = ss.SendHeader(hdr)
			}
			headerSent = true
		}
		if err := ss.SendMsg(&resp); err != nil {
			return err
		}
	}
}

// drain passes the server's remaining responses on.
func drain(cs grpc.ClientStream, ss grpc.ServerStream) error {
	for {
		var f frame
		err := cs.RecvMsg(&f)
		if errors.Is(err, io.EOF) {
			ss.SetTrailer(cs.Trailer())
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
	}
}

// frame is one message as raw bytes.
type frame struct{ b []byte }

// rawCodec passes messages through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("faultproxy: cannot marshal %T", v)
	}
	return f.b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("faultproxy: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

// Name is "proto": the proxy sits between proto clients and servers, and
// the name travels in the content type.
func (rawCodec) Name() string { return "proto" }
