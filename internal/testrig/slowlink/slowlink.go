// Package slowlink is a TCP proxy for tests that carries the server's bytes
// to the client at a set rate, as a slow network link does. The client's
// bytes pass at once, and the server's first bytes (a gRPC answer's
// headers) arrive as soon as the rate allows, so an answer starts promptly
// and ends late.
//
//	l, _ := slowlink.Start(emulatorAddr, 2<<20) // 2 MiB/s towards the client
//	defer l.Close()
//	// PUBSUB_EMULATOR_HOST=l.Addr() ...
package slowlink

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/time/rate"
)

// chunk is the most bytes passed on at once.
const chunk = 16 << 10

// Link is a running proxy.
type Link struct {
	lis     net.Listener
	backend string
	limiter *rate.Limiter // shared by all connections, as one link is
	ctx     context.Context
	cancel  context.CancelFunc

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// Start listens on a free loopback port and forwards each connection to
// backend ("host:port"), carrying the server's bytes at bytesPerSecond.
func Start(backend string, bytesPerSecond int) (*Link, error) {
	if bytesPerSecond < chunk {
		return nil, fmt.Errorf("slowlink: a rate of %d bytes/s is below one chunk (%d bytes)", bytesPerSecond, chunk)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("slowlink: listen: %w", err)
	}
	l := &Link{lis: lis, backend: backend, limiter: rate.NewLimiter(rate.Limit(bytesPerSecond), chunk)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr is the proxy's "host:port".
func (l *Link) Addr() string { return l.lis.Addr().String() }

// Close stops the proxy and closes its connections.
func (l *Link) Close() {
	l.cancel()
	l.lis.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		client, err := l.lis.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", l.backend)
		if err != nil {
			client.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, client, server)
		l.mu.Unlock()
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			_, _ = io.Copy(server, client)
			closeWrite(server)
		}()
		go func() {
			defer l.wg.Done()
			l.throttled(client, server)
			closeWrite(client)
		}()
	}
}

// throttled copies src to dst at the link's rate.
func (l *Link) throttled(dst io.Writer, src io.Reader) {
	buf := make([]byte, chunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if l.limiter.WaitN(l.ctx, n) != nil {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// closeWrite passes an end of stream on.
func closeWrite(c net.Conn) {
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.CloseWrite()
	}
}
