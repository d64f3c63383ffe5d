package store

import "sync"

// valueCache remembers the working tree's value at recently read or
// written keys, so that a point read of a key seen before is a map lookup
// instead of an IAVL descent (about 17 node lookups at 10^5 keys, each a
// node-cache miss when the key's path was not used lately). The auction
// close reads each bidder's provider record, stake, reputation and balance:
// keys the chain read or wrote when the bid was placed a few blocks before.
//
// It holds exactly what the working tree holds at each key it has (nil:
// the key is absent), and nothing else:
//
//   - Set and Delete update the entry of the key they write;
//   - Rollback puts back, at every key written since the last saved
//     version, what the cache held there before the first such write (the
//     saved version's value: the tree goes back to that version there, and
//     only there), or forgets the key if the cache did not hold it then
//     (or started over since);
//   - a SaveVersion that fails, a restored snapshot (Import) and Wipe
//     forget everything.
//
// So a read never sees a value the tree would not return, and what the
// chain computes does not depend on the cache: it changes how fast a read
// is, never what it returns. Bounded: past maxValueEntries entries or
// maxValueBytes of keys and values it starts over empty; the record of the
// keys written since the last save holds one entry per key the block
// wrote. Nothing that reaches state ranges over its maps.
//
// Like the IAVL tree under it, it assumes one writer and no reads beside a
// write (consensus calls are serialized); the mutex only keeps concurrent
// reads from corrupting the maps.
type valueCache struct {
	mu sync.Mutex
	// vals maps a key to its value; a nil value means the key is absent.
	vals map[string][]byte
	// size is the bytes of keys and values in vals.
	size int
	// written holds every key written since the last saved version; undo,
	// for those written since the cache last started over, what vals held
	// there before the first such write. A reset empties undo, not
	// written: a key written, then read again after a reset, caches an
	// unsaved value that a rollback must still forget.
	written map[string]struct{}
	undo    map[string]undoEntry
	// max bounds vals (entries); 0 disables the cache.
	max, maxBytes int
}

// The value cache's bounds: about 60 MiB at most with Go's map overhead.
const (
	maxValueEntries = 1 << 18
	maxValueBytes   = 32 << 20
)

// undoEntry is a cached key's state before the block's first write to it.
type undoEntry struct {
	value  []byte
	cached bool
}

func newValueCache(maxEntries, maxBytes int) *valueCache {
	return &valueCache{vals: make(map[string][]byte), written: make(map[string]struct{}), undo: make(map[string]undoEntry), max: maxEntries, maxBytes: maxBytes}
}

// get returns the cached value at key and whether there was one.
func (c *valueCache) get(key []byte) ([]byte, bool) {
	if c.max == 0 {
		return nil, false
	}
	c.mu.Lock()
	v, ok := c.vals[string(key)]
	c.mu.Unlock()
	return v, ok
}

// put records that the working tree holds value at key (nil: absent),
// after a read (written false) or a write (written true).
func (c *valueCache) put(key, value []byte, written bool) {
	if c.max == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := string(key)
	old, ok := c.vals[k]
	if !ok && len(c.vals) >= c.max {
		c.reset() // before the undo record below, which must survive
	}
	if written {
		if _, seen := c.written[k]; !seen {
			c.written[k] = struct{}{}
			c.undo[k] = undoEntry{old, ok}
		}
	}
	if ok {
		c.size -= len(k) + len(old)
	}
	c.vals[k] = value
	c.size += len(k) + len(value)
	if c.size > c.maxBytes {
		c.reset() // k goes too, with its undo record
	}
}

// reset empties the cache. The undo records go with it (what they would
// put back is no longer held either); the written keys stay.
func (c *valueCache) reset() {
	clear(c.vals)
	clear(c.undo)
	c.size = 0
}

// rollback puts the cache back to the last saved version: each key written
// since then gets its value from before the first write back, or is
// forgotten.
func (c *valueCache) rollback() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.written { // order is irrelevant: each key is set on its own
		if v, ok := c.vals[k]; ok {
			c.size -= len(k) + len(v)
			delete(c.vals, k)
		}
		if u := c.undo[k]; u.cached {
			c.vals[k] = u.value
			c.size += len(k) + len(u.value)
		}
	}
	clear(c.written)
	clear(c.undo)
}

// saved marks the working tree saved: its writes are no longer undone by
// a rollback. A failed save forgets everything.
func (c *valueCache) saved(ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.written)
	clear(c.undo)
	if !ok {
		c.reset()
	}
}

// drop forgets everything: the tree's content changed other than by Set,
// Delete and Rollback (a restored snapshot, a wiped database).
func (c *valueCache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reset()
	clear(c.written)
}

// len is the number of cached keys (tests).
func (c *valueCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.vals)
}
