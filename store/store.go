// Package store is the key-value interface the state machines read and write,
// a write buffer that makes a transaction or a block atomic, and the
// persistent IAVL Merkle tree underneath.
//
// Store errors (a failing disk) are not the sender's fault and cannot be
// recovered from in the middle of a block: the KV methods panic with them, and
// the chain turns such a panic into a halted node rather than a forked state.
package store

import "bytes"

// Reader reads a consistent view of the state.
type Reader interface {
	// Get returns the value at key, or nil if there is none.
	Get(key []byte) []byte
	// Iterate calls fn for each key in [start, end) in ascending byte order
	// until fn returns true (stop). A nil end means no upper bound.
	Iterate(start, end []byte, fn func(key, value []byte) (stop bool))
}

// KV is a readable and writable state. Empty values are not allowed: delete
// the key instead.
type KV interface {
	Reader
	Set(key, value []byte)
	Delete(key []byte)
}

// PrefixEnd returns the smallest key greater than every key starting with
// prefix, for iterating a prefix: Iterate(p, PrefixEnd(p), fn).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // all 0xff: no upper bound
}

// IteratePrefix calls fn for each key starting with prefix, in order.
func IteratePrefix(r Reader, prefix []byte, fn func(key, value []byte) (stop bool)) {
	r.Iterate(prefix, PrefixEnd(prefix), fn)
}
