package emulators

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// Proxy is a transparent gRPC proxy for tests that need to see what a
// client sends: it forwards every call to an emulator as raw bytes, and
// shows each call's method and first request message to hooks (the app
// profile a request carries, the mutations in flight), which may also hold
// or fail the call. internal/testrig/faultproxy fails shares of calls but does not
// show their requests; an inspection hook there would make this one
// unnecessary.
type Proxy struct {
	// Addr is the proxy's host:port; point BIGTABLE_EMULATOR_HOST at it.
	Addr string
}

// ProxyHooks see the calls a Proxy forwards. Both are optional and called
// concurrently.
type ProxyHooks struct {
	// Before sees a call's full method name and first request message (the
	// only one for unary and server-streaming calls). A non-nil error (a
	// status error) fails the call without forwarding it.
	Before func(method string, req []byte) error
	// After is called when a forwarded call has finished.
	After func(method string, req []byte)
}

// rawCodec passes messages through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proxy-raw" }

// StartProxy starts a proxy to target for the test; it stops at cleanup.
func StartProxy(tb testing.TB, target string, hooks ProxyHooks) *Proxy {
	tb.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		tb.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		return forward(conn, ss, hooks)
	}))
	go srv.Serve(l)
	tb.Cleanup(func() {
		srv.Stop()
		conn.Close()
	})
	return &Proxy{Addr: l.Addr().String()}
}

// forward relays one call: the client's messages to target, and target's
// header, messages, trailer and status back.
func forward(conn *grpc.ClientConn, ss grpc.ServerStream, hooks ProxyHooks) error {
	method, _ := grpc.MethodFromServerStream(ss)
	var first []byte
	if err := ss.RecvMsg(&first); err != nil {
		return err
	}
	if hooks.Before != nil {
		if err := hooks.Before(method, first); err != nil {
			return err
		}
	}
	if hooks.After != nil {
		defer hooks.After(method, first)
	}
	md, _ := metadata.FromIncomingContext(ss.Context())
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), md.Copy()))
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&first); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	go func() { // the client's further messages, then its half-close
		for {
			var m []byte
			if err := ss.RecvMsg(&m); err != nil {
				cs.CloseSend()
				return
			}
			if err := cs.SendMsg(&m); err != nil {
				return
			}
		}
	}()
	if h, err := cs.Header(); err == nil {
		ss.SendHeader(h)
	}
	for {
		var m []byte
		if err := cs.RecvMsg(&m); err != nil {
			ss.SetTrailer(cs.Trailer())
			cancel() // unblock the client pump
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&m); err != nil {
			return err
		}
	}
}
