package store

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/cosmos/iavl"
	iavldb "github.com/cosmos/iavl/db"
	ics23 "github.com/cosmos/ics23/go"
)

// Tree is the persistent state: an IAVL+ Merkle tree on LevelDB. Version n of
// the tree is the state after block n.
//
// mu orders version changes against reads of the saved versions. It does
// not make queries safe beside consensus: IAVL's Set clones nodes that a
// saved version's iterator may be reading (seen by the race detector), so
// Query stays on CometBFT's shared ABCI mutex and bounds its own work.
type Tree struct {
	db   iavldb.DB
	tree *iavl.MutableTree
	mu   sync.RWMutex // guards the saved versions
	// closed: Close ran; readers of saved versions get nothing.
	closed bool
	// vals caches the working tree's values at recently read or written
	// keys (valueCache).
	vals *valueCache
	// pinned counts the exports reading each version (export.go): PruneTo
	// keeps them.
	pinned map[int64]int
	// latest caches values at the last saved version for ReadSnapshot.
	latest *latestValues
}

// OpenTree opens (or creates) the tree stored in dir/name.db and loads its
// latest version. An empty dir is an empty tree at version 0.
func OpenTree(dir, name string) (*Tree, error) {
	db, err := iavldb.NewGoLevelDB(name, dir)
	if err != nil {
		return nil, fmt.Errorf("cannot open state database in %s: %w", dir, err)
	}
	t, err := newTree(db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return t, nil
}

// NewMemTree returns an empty tree in memory, for tests and tools.
func NewMemTree() *Tree {
	t, err := newTree(iavldb.NewMemDB())
	if err != nil {
		panic(err) // an empty in-memory tree always loads
	}
	return t
}

// iavlNodeCache is how many IAVL nodes the tree keeps decoded in memory
// (a few hundred bytes each). Iterations and writes that miss it read and
// decode the node from the database: at 10,000 nodes, closing 100 auctions
// of 100 bids spent about 40 % of its CPU time there (docs/benchmarks.md,
// "Auction close").
const iavlNodeCache = 100_000

func newTree(db iavldb.DB) (*Tree, error) {
	tree := iavl.NewMutableTree(db, iavlNodeCache, true, iavl.NewNopLogger(), iavl.SyncOption(true))
	if _, err := tree.Load(); err != nil {
		return nil, fmt.Errorf("cannot load state tree: %w", err)
	}
	return &Tree{db: db, tree: tree, vals: newValueCache(maxValueEntries, maxValueBytes), pinned: map[int64]int{}, latest: newLatestValues()}, nil
}

// newMemTreeValues is NewMemTree with other value-cache bounds (tests):
// maxEntries 0 turns the cache off.
func newMemTreeValues(maxEntries, maxBytes int) *Tree {
	t := NewMemTree()
	t.vals = newValueCache(maxEntries, maxBytes)
	return t
}

// Version is the last saved version (block height); 0 before the first.
func (t *Tree) Version() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.tree.Version()
}

// Hash is the root hash of the last saved version.
func (t *Tree) Hash() []byte {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.tree.Hash()
}

// Latest is the last saved version and its root hash, read together.
func (t *Tree) Latest() (int64, []byte) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return 0, nil
	}
	return t.tree.Version(), t.tree.Hash()
}

// WorkingHash is the root hash including unsaved writes.
func (t *Tree) WorkingHash() []byte { return t.tree.WorkingHash() }

// SetInitialVersion makes the first saved version v instead of 1, for chains
// whose genesis starts above height 1.
func (t *Tree) SetInitialVersion(v uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tree.SetInitialVersion(v)
}

// SaveVersion persists the working tree as the next version.
func (t *Tree) SaveVersion() ([]byte, int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	hash, v, err := t.tree.SaveVersion()
	t.vals.saved(err == nil)
	t.latest.saved(v, err == nil)
	return hash, v, err
}

// Rollback discards unsaved writes.
func (t *Tree) Rollback() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tree.Rollback()
	t.vals.rollback()
	t.latest.rollback()
}

// Get reads the working tree. The value returned must not be modified.
func (t *Tree) Get(key []byte) []byte {
	if v, ok := t.vals.get(key); ok {
		return v
	}
	// A key not written since the last save holds the saved value, which
	// the mempool's reads may know (latestValues).
	if v, ok := t.latest.unwritten(t.tree.Version(), key); ok {
		t.vals.put(key, v, false)
		return v
	}
	v, err := t.tree.Get(key)
	if err != nil {
		panic(fmt.Errorf("store: get: %w", err))
	}
	t.vals.put(key, v, false)
	return v
}

// Set writes to the working tree.
func (t *Tree) Set(key, value []byte) {
	if len(value) == 0 {
		panic("store: empty value; delete the key instead")
	}
	if _, err := t.tree.Set(key, value); err != nil {
		panic(fmt.Errorf("store: set: %w", err))
	}
	value = bytes.Clone(value)
	t.vals.put(key, value, true)
	t.latest.write(key, value)
}

// Delete removes key from the working tree.
func (t *Tree) Delete(key []byte) {
	if _, _, err := t.tree.Remove(key); err != nil {
		panic(fmt.Errorf("store: delete: %w", err))
	}
	t.vals.put(key, nil, true)
	t.latest.write(key, nil)
}

// Iterate walks the working tree.
func (t *Tree) Iterate(start, end []byte, fn func(key, value []byte) bool) {
	it, err := t.tree.Iterator(start, end, true)
	if err != nil {
		panic(fmt.Errorf("store: iterate: %w", err))
	}
	defer it.Close()
	for ; it.Valid(); it.Next() {
		if fn(it.Key(), it.Value()) {
			return
		}
	}
	if err := it.Error(); err != nil {
		panic(fmt.Errorf("store: iterate: %w", err))
	}
}

// Snapshot is a read-only saved version: what queries and the mempool read.
type Snapshot struct {
	t *iavl.ImmutableTree
	// latest (ReadSnapshot's) answers point reads of the last saved
	// version from memory.
	latest *latestValues
}

// ErrVersionNotFound is returned for a version the tree does not hold.
var ErrVersionNotFound = errors.New("version not found")

// Snapshot returns the saved version v (v <= 0: the latest).
func (t *Tree) Snapshot(v int64) (*Snapshot, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return nil, ErrClosed
	}
	if v <= 0 {
		v = t.tree.Version()
	}
	if v == 0 {
		// Nothing saved yet: an empty snapshot.
		return &Snapshot{t: iavl.NewImmutableTree(iavldb.NewMemDB(), 0, true, iavl.NewNopLogger())}, nil
	}
	if !t.tree.VersionExists(v) {
		return nil, fmt.Errorf("%w: %d (latest is %d)", ErrVersionNotFound, v, t.tree.Version())
	}
	it, err := t.tree.GetImmutable(v)
	if err != nil {
		return nil, fmt.Errorf("cannot load version %d: %w", v, err)
	}
	return &Snapshot{t: it}, nil
}

// ReadSnapshot is Snapshot(v) whose point reads of the last saved version
// are answered from memory where the tree knows the value (latestValues:
// keys written or read through ReadSnapshot since), for the mempool's
// CheckTx, which reads the same accounts again and again.
//
// Like Snapshot's, its reads must not run beside a write to the working
// tree (Set, Delete, Rollback, WorkingHash, SaveVersion): IAVL's Set
// clones nodes that saved versions share, and the clone writes to them.
// Reads beside the working tree's reads are safe. chain.App orders its
// CheckTx against the writes of a block with a mutex of its own.
func (t *Tree) ReadSnapshot(v int64) (*Snapshot, error) {
	s, err := t.Snapshot(v)
	if err != nil {
		return nil, err
	}
	s.latest = t.latest
	return s, nil
}

// Version is the snapshot's version.
func (s *Snapshot) Version() int64 { return s.t.Version() }

// Hash is the snapshot's root hash.
func (s *Snapshot) Hash() []byte { return s.t.Hash() }

func (s *Snapshot) Get(key []byte) []byte {
	if s.latest != nil {
		if v, ok := s.latest.get(s.t.Version(), key); ok {
			return v
		}
	}
	v, err := s.t.Get(key)
	if err != nil {
		panic(fmt.Errorf("store: get: %w", err))
	}
	if s.latest != nil {
		s.latest.read(s.t.Version(), key, v)
	}
	return v
}

func (s *Snapshot) Iterate(start, end []byte, fn func(key, value []byte) bool) {
	it, err := s.t.Iterator(start, end, true)
	if err != nil {
		panic(fmt.Errorf("store: iterate: %w", err))
	}
	defer it.Close()
	for ; it.Valid(); it.Next() {
		if fn(it.Key(), it.Value()) {
			return
		}
	}
}

// Set and Delete make a snapshot usable as the parent of a Cache; writing to
// a snapshot itself is a programming error.
func (s *Snapshot) Set(key, value []byte) { panic("store: write to read-only snapshot") }
func (s *Snapshot) Delete(key []byte)     { panic("store: write to read-only snapshot") }

// Prove returns an ICS-23 proof that key holds its value in this snapshot, or
// that it is absent.
func (s *Snapshot) Prove(key []byte) (*ics23.CommitmentProof, error) {
	return s.t.GetProof(key)
}

// VerifyProof checks an ICS-23 proof for key against root: value nil means a
// proof of absence.
func VerifyProof(proof *ics23.CommitmentProof, root, key, value []byte) bool {
	if value == nil {
		return ics23.VerifyNonMembership(ics23.IavlSpec, root, proof, key)
	}
	return ics23.VerifyMembership(ics23.IavlSpec, root, proof, key, value)
}

// Close closes the database. It waits for reads of saved versions in
// progress (a late Info or Query while a node shuts down), and later ones
// see version 0 or ErrClosed.
func (t *Tree) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	return errors.Join(t.tree.Close(), t.db.Close())
}

// ErrClosed is returned for a snapshot of a closed tree.
var ErrClosed = errors.New("the state database is closed")
