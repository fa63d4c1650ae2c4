package main

import (
	_ "expvar" // /debug/vars: the runtime's MemStats as JSON, read without forcing a collection
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the /debug/pprof handlers on http.DefaultServeMux, for --debug_addr
	"os"
)

// debugAddr serves Go's profiles (heap, CPU, goroutines) while the job
// runs: prism and the SDK harness run in the launcher's process locally, so
// a heap profile shows the runner's buffers and the DoFns' state together.
// /debug/vars (expvar) gives the runtime's memory figures as JSON.
var debugAddr = flag.String("debug_addr", "", "Debug: serve net/http/pprof (/debug/pprof/) and the Go runtime's memory figures (/debug/vars) on this address (e.g. 127.0.0.1:6060) while the job runs; empty: off.")

// serveDebug starts the pprof server when --debug_addr is set. A failure to
// listen is a usage error: the address is the flag's.
func serveDebug() error {
	if *debugAddr == "" {
		return nil
	}
	lis, err := net.Listen("tcp", *debugAddr)
	if err != nil {
		return usagef("--debug_addr=%q: %v (give a free host:port, or leave it empty)", *debugAddr, err)
	}
	fmt.Fprintf(os.Stderr, "sensorpipe: pprof on http://%s/debug/pprof/\n", lis.Addr())
	go http.Serve(lis, nil) //nolint:errcheck // debug only; ends with the process
	return nil
}
