package main

import (
	_ "expvar" // /debug/vars: the runtime's MemStats as JSON, read without forcing a collection
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the /debug/pprof handlers on http.DefaultServeMux, for --debug_addr
	"os"
)

// serveDebug starts the pprof server on addr, --debug_addr, when it is
// set. A failure to listen is a usage error: the address is the flag's.
func serveDebug(addr string) error {
	if addr == "" {
		return nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return usagef("--debug_addr=%q: %v (give a free host:port, or leave it empty)", addr, err)
	}
	fmt.Fprintf(os.Stderr, "sensorpipe: pprof on http://%s/debug/pprof/\n", lis.Addr())
	go http.Serve(lis, nil) //nolint:errcheck // debug only; ends with the process
	return nil
}
