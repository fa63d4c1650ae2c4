package main

import (
	"errors"
	"flag"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/cli"
)

// TestExitCodes: bad flags and arguments exit 2 with one line, an address
// it cannot listen on exits 1, --help 0. None of them starts serving.
func TestExitCodes(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"--help"}, cli.ExitOK, ""},
		{"unknown flag", []string{"--nope"}, cli.ExitUsage, "flag provided but not defined: -nope"},
		{"unexpected argument", []string{"serve"}, cli.ExitUsage, `unexpected arguments ["serve"]`},
		{"REST address in use", []string{"--rest_addr", busy.Addr().String(), "--grpc_addr", "127.0.0.1:0"}, cli.ExitRuntime, "--rest_addr"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args)
			if got := cli.ExitCode(err); got != tc.code {
				t.Fatalf("run(%q) = %v: exit %d, want %d", tc.args, err, got, tc.code)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")) {
				t.Errorf("run(%q) = %v; want one line containing %q", tc.args, err, tc.want)
			}
		})
	}
	t.Run("errors keep their chain", func(t *testing.T) {
		if err := run([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("--help: %v; want flag.ErrHelp", err)
		}
		if err := run([]string{"--rest_addr", busy.Addr().String(), "--grpc_addr", "127.0.0.1:0"}); !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("address in use: %v; want it to wrap EADDRINUSE", err)
		}
	})
}
