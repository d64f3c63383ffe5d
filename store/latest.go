package store

import "sync"

// latestValues remembers values at recently read or written keys as of
// the tree's last saved version, for the reads of ReadSnapshot at that
// version (the mempool's CheckTx). The reader's IAVL instance has nodes of
// its own, so every node a block saved is a database read and a decode
// for it the first time; this makes a point read of an account the
// chain just wrote, or CheckTx just read, a map lookup.
//
// It holds exactly what the saved version holds at each key it has (nil:
// absent), and only answers for that version:
//
//   - Set and Delete record the working tree's writes (pending); a
//     successful SaveVersion moves them in and makes the new version the
//     one it answers for; Rollback drops them; a failed save, Import and
//     Wipe forget everything;
//   - a read of the saved version through ReadSnapshot adds what it read.
//
// Bounded like valueCache: past maxValueEntries entries or maxValueBytes it
// starts over. Nothing that reaches state ranges over its maps.
type latestValues struct {
	mu      sync.Mutex
	version int64
	vals    map[string][]byte
	size    int
	pending map[string][]byte
}

func newLatestValues() *latestValues {
	return &latestValues{vals: make(map[string][]byte), pending: make(map[string][]byte)}
}

// get returns the value at key in version v, if known.
func (l *latestValues) get(v int64, key []byte) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v != l.version {
		return nil, false
	}
	val, ok := l.vals[string(key)]
	return val, ok
}

// unwritten returns the value at key in version v if known and the
// working tree has not written key since v was saved: then the working
// tree holds it too.
func (l *latestValues) unwritten(v int64, key []byte) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v != l.version {
		return nil, false
	}
	k := string(key)
	if _, w := l.pending[k]; w {
		return nil, false
	}
	val, ok := l.vals[k]
	return val, ok
}

// read records that version v holds val at key.
func (l *latestValues) read(v int64, key, val []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v == l.version {
		l.put(string(key), val)
	}
}

func (l *latestValues) put(k string, val []byte) {
	old, ok := l.vals[k]
	if ok {
		l.size -= len(k) + len(old)
	} else if len(l.vals) >= maxValueEntries {
		l.reset()
	}
	l.vals[k] = val
	l.size += len(k) + len(val)
	if l.size > maxValueBytes {
		l.reset()
	}
}

func (l *latestValues) reset() {
	clear(l.vals)
	l.size = 0
}

// write records a write to the working tree (val nil: a delete); val is
// not modified later.
func (l *latestValues) write(key, val []byte) {
	l.mu.Lock()
	l.pending[string(key)] = val
	l.mu.Unlock()
}

// saved moves the pending writes in as version v's (ok), or forgets
// everything (a failed save).
func (l *latestValues) saved(v int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		l.reset()
		clear(l.pending)
		l.version = 0
		return
	}
	if l.version != v-1 {
		l.reset() // versions skipped (or a first save): nothing carries over
	}
	for k, val := range l.pending { // each key on its own: order is irrelevant
		l.put(k, val)
	}
	clear(l.pending)
	l.version = v
}

// rollback drops the writes since the last save.
func (l *latestValues) rollback() {
	l.mu.Lock()
	clear(l.pending)
	l.mu.Unlock()
}

// drop forgets everything (the database was rewritten).
func (l *latestValues) drop() {
	l.mu.Lock()
	l.reset()
	clear(l.pending)
	l.version = 0
	l.mu.Unlock()
}
