// Package registry holds sensorpipe's per-process shared objects.
//
// A runner runs many DoFn instances in one worker process, side by side
// and one after another. Some things must be one per process, not one per
// instance: a bound on the cells in flight to a Bigtable instance, a flow
// controller that paces every write to it, the latencies that set the
// attempts' timeouts, the on-disk state of a local stream. On Dataflow,
// one per worker process is right. But a process can also run several
// pipelines at once (a test binary, an embedding program), and those must
// not share an object built for other settings.
//
// So a Registry's key is every setting that shapes its value: callers
// with the same settings share one value, callers with different ones
// each get their own, and no caller's settings silently win over
// another's. Its lifecycle is one of two:
//
//   - Acquire and Release: the value is made at the first Acquire of its
//     key, shared while any caller holds it, and dropped (closed, if the
//     caller says how) at the last Release. For what holds resources: a
//     budget, a controller, a client.
//   - Get: the value is made at the first Get of its key and kept for the
//     life of the process. For what is worth keeping across pipelines and
//     costs little: measured latencies, a folder's index.
package registry

import (
	"fmt"
	"sync"
)

// Registry maps keys to shared values of one kind.
type Registry[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*slot[V]
}

type slot[V any] struct {
	v    V
	refs int // 0: kept for the process's life (Get)
}

// Acquire returns key's value, made with make if no caller holds one, and
// counts a reference: pair it with Release. An error from make is
// returned and nothing is kept.
func (r *Registry[K, V]) Acquire(key K, make func() (V, error)) (V, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.m[key]; ok {
		if s.refs > 0 {
			s.refs++
		}
		return s.v, nil
	}
	v, err := make()
	if err != nil {
		var zero V
		return zero, err
	}
	r.put(key, &slot[V]{v: v, refs: 1})
	return v, nil
}

// Release drops a reference to key's value; the last one removes it and
// passes it to close (nil: nothing to close). Releasing a key that no
// caller holds is an error.
func (r *Registry[K, V]) Release(key K, close func(V) error) error {
	r.mu.Lock()
	s, ok := r.m[key]
	switch {
	case !ok || s.refs == 0:
		r.mu.Unlock()
		return fmt.Errorf("registry: release of %v, which no caller holds", key)
	case s.refs > 1:
		s.refs--
		r.mu.Unlock()
		return nil
	}
	delete(r.m, key)
	r.mu.Unlock()
	if close == nil {
		return nil
	}
	return close(s.v)
}

// Get returns key's value, made with make on first use and kept for the
// life of the process.
func (r *Registry[K, V]) Get(key K, make func() V) V {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.m[key]; ok {
		return s.v
	}
	v := make()
	r.put(key, &slot[V]{v: v})
	return v
}

// Each calls fn with each key and value the registry holds, under its
// lock: fn must not call the registry.
func (r *Registry[K, V]) Each(fn func(K, V)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, s := range r.m {
		fn(k, s.v)
	}
}

// Len reports how many values the registry holds.
func (r *Registry[K, V]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

func (r *Registry[K, V]) put(key K, s *slot[V]) {
	if r.m == nil {
		r.m = map[K]*slot[V]{}
	}
	r.m[key] = s
}
