package pubsubio

import (
	"sync"
	"testing"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
)

// SetAfterAck installs a hook called after every successful acknowledgement
// of messages whose bundle was committed (finalization callback or checkpoint). Call it before running pipelines.
func SetAfterAck(f func(sub string, n int)) { afterAck = f }

// PendingBundles is how many bundles' acks the readers of subscription sub
// hold for acknowledgement (see pending).
func PendingBundles(sub string) int {
	n := 0
	subscribers.Each(func(k subscriberKey, s *subscriber) {
		if k.sub == sub {
			n += s.pending.len()
		}
	})
	return n
}

// pubsubEmulator is the one Pub/Sub emulator (a JVM, seconds to start) of
// the package's tests: each test uses topics and subscriptions of its own.
var pubsubEmulator struct {
	once sync.Once
	p    *emulators.Process
	err  error
}

// PubSubEmulator returns the "host:port" of the package's Pub/Sub
// emulator, started by the first test that asks and stopped by
// StopPubSubEmulator. It skips under -short or when the emulator is not
// installed.
func PubSubEmulator(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("skipping the pubsub emulator test under -short")
	}
	if _, err := emulators.PubSub.Find(); err != nil {
		tb.Skipf("pubsub emulator not available: %v", err)
	}
	pubsubEmulator.once.Do(func() {
		pubsubEmulator.p, pubsubEmulator.err = emulators.PubSub.Launch()
	})
	if pubsubEmulator.err != nil {
		tb.Fatal(pubsubEmulator.err)
	}
	tb.Logf("emulators: pubsub emulator pid %d on %s", pubsubEmulator.p.PID, pubsubEmulator.p.HostPort)
	return pubsubEmulator.p.HostPort
}

// StopPubSubEmulator stops the package's Pub/Sub emulator, if a test
// started it; TestMain calls it after the tests.
func StopPubSubEmulator() {
	if p := pubsubEmulator.p; p != nil {
		p.Stop()
	}
}
