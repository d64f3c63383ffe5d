package store

import (
	"bytes"

	"github.com/google/btree"
)

// Cache buffers writes over a parent until Write copies them into it in
// sorted key order. Reads and iteration see the buffered writes. Discarding a
// Cache (not calling Write) discards its writes: that is how a failed
// transaction leaves no trace. Not safe for concurrent use.
//
// The buffered keys are also kept in a B-tree, so that Iterate seeks to its
// range and visits only the buffered keys inside it (O(log D + hits) for D
// buffered keys) instead of walking the whole buffer: a block's cache holds
// every write of the block, and EndBlock iterates it once per job and stage
// it closes (finding C2).
type Cache struct {
	parent KV
	dirty  map[string]entry
	order  *btree.BTreeG[string]
	// visited counts the buffered entries Iterate has looked at (tests).
	visited int
}

type entry struct {
	value   []byte
	deleted bool
}

// cacheDegree is the B-tree's degree: nodes of up to 63 keys.
const cacheDegree = 32

// NewCache returns an empty write buffer over parent.
func NewCache(parent KV) *Cache {
	return &Cache{parent: parent, dirty: make(map[string]entry), order: btree.NewOrderedG[string](cacheDegree)}
}

func (c *Cache) Get(key []byte) []byte {
	if e, ok := c.dirty[string(key)]; ok {
		if e.deleted {
			return nil
		}
		return e.value
	}
	return c.parent.Get(key)
}

func (c *Cache) Set(key, value []byte) {
	if len(value) == 0 {
		panic("store: empty value; delete the key instead")
	}
	c.put(string(key), entry{value: bytes.Clone(value)})
}

func (c *Cache) Delete(key []byte) {
	c.put(string(key), entry{deleted: true})
}

func (c *Cache) put(k string, e entry) {
	if _, ok := c.dirty[k]; !ok {
		c.order.ReplaceOrInsert(k)
	}
	c.dirty[k] = e
}

// seek returns the first buffered key at or after from (strictly after it
// when after is set) and below end (nil: no bound).
func (c *Cache) seek(from string, after bool, end []byte) (string, bool) {
	var key string
	found := false
	c.order.AscendGreaterOrEqual(from, func(k string) bool {
		if after && k == from {
			return true
		}
		key, found = k, true
		return false
	})
	if !found || (end != nil && key >= string(end)) {
		return "", false
	}
	return key, true
}

// Iterate merges the parent's keys with the buffered ones, in order. It
// seeks the next buffered key afresh after each one, so it visits only the
// buffered keys in [start, end) that it reaches before fn stops it.
func (c *Cache) Iterate(start, end []byte, fn func(key, value []byte) bool) {
	cur, ok := c.seek(string(start), false, end)
	next := func() { cur, ok = c.seek(cur, true, end) }
	stopped := false
	// emitDirty emits buffered keys below limit (all of them if limit is nil).
	emitDirty := func(limit []byte) bool {
		for ok && (limit == nil || cur < string(limit)) {
			c.visited++
			k, e := cur, c.dirty[cur]
			next()
			if e.deleted {
				continue
			}
			if fn([]byte(k), e.value) {
				return true
			}
		}
		return false
	}
	c.parent.Iterate(start, end, func(k, v []byte) bool {
		if emitDirty(k) {
			stopped = true
			return true
		}
		if ok && cur == string(k) {
			// Overridden by the buffer.
			c.visited++
			e := c.dirty[cur]
			next()
			if e.deleted {
				return false
			}
			stopped = fn(k, e.value)
			return stopped
		}
		stopped = fn(k, v)
		return stopped
	})
	if !stopped {
		emitDirty(nil)
	}
}

// Write copies the buffered writes into the parent in ascending key order and
// empties the buffer. Sorted order matters: an IAVL tree's shape, and so its
// root hash, depends on the order of insertion.
func (c *Cache) Write() {
	c.order.Ascend(func(k string) bool {
		e := c.dirty[k]
		if e.deleted {
			c.parent.Delete([]byte(k))
		} else {
			c.parent.Set([]byte(k), e.value)
		}
		return true
	})
	clear(c.dirty)
	c.order.Clear(false)
}

// Len is the number of buffered writes.
func (c *Cache) Len() int { return len(c.dirty) }
