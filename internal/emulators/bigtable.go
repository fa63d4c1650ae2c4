package emulators

import (
	"net"
	"testing"
	"time"
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
