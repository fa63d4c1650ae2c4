package pubsubio

import (
	"sync"
	"time"
)

// pending holds each bundle's ack IDs (and IDAttribute values) until one of
// the two paths acknowledges them: the bundle's finalization callback, or
// the next bundle, which resumes the bundle's checkpoint (see ProcessElement).
// It is keyed by the bundle's first ack ID, which the checkpoint carries too.
//
// Why a finalization callback holds only that key: the Go SDK (v2.77) keeps
// every callback a bundle processor's DoFn registers for the processor's
// life, and runs only its first bundle's (exec.Plan.Finalize swaps the
// plan's finalizer, but the ParDo keeps appending to the old one). A
// callback that held its bundle's ack IDs kept every message's ack ID and
// record id alive for the whole run: about 14 MB of heap a minute at 2,000
// readings/s, most of a local stream's growth in memory.
type pending struct {
	mu     sync.Mutex
	maxAge time.Duration
	byKey  map[string]heldBundle
}

type heldBundle struct {
	acks, ids []string
	at        time.Time
}

func newPending(maxAge time.Duration) *pending {
	return &pending{maxAge: maxAge, byKey: map[string]heldBundle{}}
}

// hold keeps a bundle's acks and ids, and returns their key ("" for a
// bundle without messages). It forgets bundles held longer than maxAge:
// neither path acknowledges them any more (their leases are released for
// redelivery after as long; see leases).
func (p *pending) hold(acks, ids []string, now time.Time) string {
	if len(acks) == 0 {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, b := range p.byKey {
		if now.Sub(b.at) > p.maxAge {
			delete(p.byKey, k)
		}
	}
	p.byKey[acks[0]] = heldBundle{acks: acks, ids: ids, at: now}
	return acks[0]
}

// take removes the bundle held under key and returns it; ok is false when
// it is not held (already acknowledged by the other path, or forgotten).
func (p *pending) take(key string) (acks, ids []string, ok bool) {
	if key == "" {
		return nil, nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.byKey[key]
	delete(p.byKey, key)
	return b.acks, b.ids, ok
}

// len is how many bundles are held.
func (p *pending) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byKey)
}
