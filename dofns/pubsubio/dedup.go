package pubsubio

import (
	"sync"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/registry"
)

// Best-effort deduplication of redeliveries (Config.IDAttribute).
//
// An id is recorded only once the bundle that emitted its message has been
// finalized (the message was acked), so a message whose first delivery was
// lost with a failed bundle is never suppressed. The cache is per process,
// subscription and id attribute (the reader's DoFn instances come and go
// with bundles) on its server (an emulator restarted in the same process
// starts afresh),
// bounded in size and age; duplicates that arrive while the first copy is
// still in flight, or on another worker, are not caught.

const (
	dedupMaxIDs = 200_000
	dedupTTL    = 10 * time.Minute
)

type seenIDs struct {
	mu  sync.Mutex
	ids *recentIDs
}

// seen are the process's caches, one per server, subscription and id
// attribute, kept for the life of the process (registry.Get): a
// redelivery after a failed bundle or a new DoFn instance is still
// recognized, and a pipeline reading the same subscription with another
// id attribute keeps ids of another meaning apart.
var seen registry.Registry[seenKey, *seenIDs]

type seenKey struct{ emulatorHost, sub, idAttribute string }

// seenFor returns the cache of the ids in attribute idAttribute of the
// subscription sub on the server at emulatorHost ("" for Google's).
func seenFor(emulatorHost, sub, idAttribute string) *seenIDs {
	return seen.Get(seenKey{emulatorHost, sub, idAttribute}, func() *seenIDs {
		return &seenIDs{ids: newRecentIDs(dedupTTL, dedupMaxIDs)}
	})
}

// contains reports whether id was recorded within the TTL.
func (s *seenIDs) contains(id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids.contains(id, now)
}

// record remembers ids as delivered, forgetting those older than the TTL
// and the oldest beyond dedupMaxIDs.
func (s *seenIDs) record(ids []string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids.record(ids, now)
}
