package store

import (
	"bytes"
	"slices"
)

// Cache buffers writes over a parent until Write copies them into it in
// sorted key order. Reads and iteration see the buffered writes. Discarding a
// Cache (not calling Write) discards its writes: that is how a failed
// transaction leaves no trace. Not safe for concurrent use.
type Cache struct {
	parent KV
	dirty  map[string]entry
}

type entry struct {
	value   []byte
	deleted bool
}

// NewCache returns an empty write buffer over parent.
func NewCache(parent KV) *Cache {
	return &Cache{parent: parent, dirty: make(map[string]entry)}
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
	c.dirty[string(key)] = entry{value: bytes.Clone(value)}
}

func (c *Cache) Delete(key []byte) {
	c.dirty[string(key)] = entry{deleted: true}
}

// sortedDirty returns the buffered keys in [start, end), sorted.
func (c *Cache) sortedDirty(start, end []byte) []string {
	keys := make([]string, 0, len(c.dirty))
	for k := range c.dirty {
		if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Iterate merges the parent's keys with the buffered ones, in order.
func (c *Cache) Iterate(start, end []byte, fn func(key, value []byte) bool) {
	keys := c.sortedDirty(start, end)
	i := 0
	stopped := false
	// emitDirty emits buffered keys below limit (all of them if limit is nil).
	emitDirty := func(limit []byte) bool {
		for ; i < len(keys) && (limit == nil || keys[i] < string(limit)); i++ {
			e := c.dirty[keys[i]]
			if e.deleted {
				continue
			}
			if fn([]byte(keys[i]), e.value) {
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
		if i < len(keys) && keys[i] == string(k) {
			// Overridden by the buffer.
			e := c.dirty[keys[i]]
			i++
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
	for _, k := range c.sortedDirty(nil, nil) {
		e := c.dirty[k]
		if e.deleted {
			c.parent.Delete([]byte(k))
		} else {
			c.parent.Set([]byte(k), e.value)
		}
	}
	clear(c.dirty)
}

// Len is the number of buffered writes.
func (c *Cache) Len() int { return len(c.dirty) }
