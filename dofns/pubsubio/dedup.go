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

type seenEntry struct {
	id   string
	when time.Time
}

type seenIDs struct {
	mu    sync.Mutex
	ids   map[string]time.Time
	order []seenEntry // FIFO of insertions, for eviction
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
		return &seenIDs{ids: map[string]time.Time{}}
	})
}

// contains reports whether id was recorded within the TTL.
func (s *seenIDs) contains(id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.ids[id]
	return ok && now.Sub(t) < dedupTTL
}

// record remembers ids as delivered.
func (s *seenIDs) record(ids []string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.ids[id] = now
		s.order = append(s.order, seenEntry{id: id, when: now})
	}
	// Evict by age and size. An id re-recorded later keeps its newer time.
	drop := 0
	for drop < len(s.order) && (len(s.order)-drop > dedupMaxIDs || now.Sub(s.order[drop].when) >= dedupTTL) {
		e := s.order[drop]
		if t, ok := s.ids[e.id]; ok && !t.After(e.when) {
			delete(s.ids, e.id)
		}
		drop++
	}
	if drop > 0 {
		// Drop the prefix in place (its strings released); append moves
		// the rest to a new array once this one is full, so the array is
		// never more than about twice the ids kept, and a record call does
		// not copy every id kept, as it did.
		clear(s.order[:drop])
		s.order = s.order[drop:]
	}
}
