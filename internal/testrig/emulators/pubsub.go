package emulators

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// PubSub is the gcloud SDK's Pub/Sub emulator (a JVM behind a shell
// launcher). $SENSORPIPE_PUBSUB_EMULATOR may point at the launcher directly.
var PubSub = Kind{
	Name:      "pubsub",
	Env:       "SENSORPIPE_PUBSUB_EMULATOR",
	SDKPath:   "platform/pubsub-emulator/bin/cloud-pubsub-emulator",
	NeedsJava: true,
	Args:      func(host, port string) []string { return []string{"--host=" + host, "--port=" + port} },
	// It serves REST and gRPC on one port; GET / answers "Ok" once ready.
	Ready: func(hostPort string) error {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + hostPort + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET / answered %s", resp.Status)
		}
		return nil
	},
	StartTimeout: 90 * time.Second,
}

// StartPubSub starts a Pub/Sub emulator for a test and returns its
// "host:port"; callers normally set PUBSUB_EMULATOR_HOST to it.
func StartPubSub(tb testing.TB) (hostPort string) {
	tb.Helper()
	return PubSub.StartForTest(tb)
}
