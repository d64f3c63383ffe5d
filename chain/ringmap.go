package chain

import "sync"

// ringMap is a bounded map by transaction hash, safe for concurrent use:
// past size entries, the oldest key goes first. Node-local caches only
// (sigcache.go, execrecord.go): nothing that reaches state ranges over it.
type ringMap[V any] struct {
	mu   sync.Mutex
	m    map[[32]byte]V
	ring [][32]byte
	next int
	size int
}

func newRingMap[V any](size int) *ringMap[V] {
	return &ringMap[V]{m: make(map[[32]byte]V, size), ring: make([][32]byte, 0, size), size: size}
}

func (r *ringMap[V]) get(k [32]byte) (V, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[k]
	return v, ok
}

// put sets k to v; replace false keeps a value already there.
func (r *ringMap[V]) put(k [32]byte, v V, replace bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[k]; ok {
		if replace {
			r.m[k] = v
		}
		return
	}
	if len(r.ring) < r.size {
		r.ring = append(r.ring, k)
	} else {
		delete(r.m, r.ring[r.next])
		r.ring[r.next] = k
		r.next = (r.next + 1) % r.size
	}
	r.m[k] = v
}

func (r *ringMap[V]) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
