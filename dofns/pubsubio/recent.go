package pubsubio

import (
	"hash/maphash"
	"time"
)

// recentIDs remembers ids for ttl (and at most max of them, when max > 0),
// evicting the oldest first. It holds no pointers: each id is kept as a
// 128-bit hash of it (two 64-bit hashes with independent seeds), so the
// collector never scans the hundreds of thousands of ids a backlog leaves
// here, and forgetting the expired ones costs what expired, not a walk of
// all. Two distinct ids collide with a probability of about 2^-128 a
// pair. Not safe for concurrent use: its owner locks.
type recentIDs struct {
	ttl   time.Duration
	max   int
	ids   map[idHash]int64 // when last recorded (see since)
	order []recentID       // recordings in time order
}

type idHash [2]uint64

type recentID struct {
	h    idHash
	when int64
}

// Process-wide seeds: the hashes are never stored outside the process.
var idSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// clockBase is the process's start: since measures from it on the
// monotonic clock, as time.Time's Sub does, so a step of the wall clock
// neither keeps ids longer nor forgets them sooner.
var clockBase = time.Now()

func since(t time.Time) int64 { return int64(t.Sub(clockBase)) }

func hashID(id string) idHash {
	return idHash{maphash.String(idSeeds[0], id), maphash.String(idSeeds[1], id)}
}

func newRecentIDs(ttl time.Duration, max int) *recentIDs {
	return &recentIDs{ttl: ttl, max: max, ids: map[idHash]int64{}}
}

// contains reports whether id was recorded within the ttl before now.
func (r *recentIDs) contains(id string, now time.Time) bool {
	t, ok := r.ids[hashID(id)]
	return ok && since(now)-t < int64(r.ttl)
}

// record remembers ids at now, then forgets those recorded ttl or more
// before now, and the oldest beyond max. An id recorded again keeps its
// newer time.
func (r *recentIDs) record(ids []string, now time.Time) {
	at := since(now)
	for _, id := range ids {
		r.add(hashID(id), at)
	}
	r.expire(now)
}

// recordNew returns those of ids not recorded within the ttl before now,
// and records them as record does; the others keep their time. Each id is
// hashed once.
func (r *recentIDs) recordNew(ids []string, now time.Time) []string {
	at := since(now)
	fresh := make([]string, 0, len(ids))
	for _, id := range ids {
		h := hashID(id)
		if t, ok := r.ids[h]; ok && at-t < int64(r.ttl) {
			continue
		}
		r.add(h, at)
		fresh = append(fresh, id)
	}
	r.expire(now)
	return fresh
}

func (r *recentIDs) add(h idHash, at int64) {
	r.ids[h] = at
	r.order = append(r.order, recentID{h, at})
}

// expire forgets what was recorded ttl or more before now, and the oldest
// beyond max.
func (r *recentIDs) expire(now time.Time) {
	at := since(now)
	drop := 0
	for drop < len(r.order) && (r.max > 0 && len(r.order)-drop > r.max || at-r.order[drop].when >= int64(r.ttl)) {
		e := r.order[drop]
		if t, ok := r.ids[e.h]; ok && t <= e.when {
			delete(r.ids, e.h)
		}
		drop++
	}
	if drop > 0 {
		// append moves the rest to a new array once this one is full, so
		// the array is never more than about twice what is kept.
		r.order = r.order[drop:]
	}
}

// len is how many ids it remembers.
func (r *recentIDs) len() int { return len(r.ids) }
