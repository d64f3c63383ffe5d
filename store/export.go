package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cosmos/iavl"
)

// Snapshots of the state for CometBFT state sync: a saved version is
// exported as the IAVL tree's nodes in depth-first post-order, and an empty
// tree rebuilt from them has the same root hash. The encoding of one node
// (AppendNode, DecodeNodes) is what a snapshot chunk holds.

// Node is one exported tree node: a leaf (Height 0) with its key and value,
// or an inner node with its key (the least key of its right subtree).
type Node = iavl.ExportNode

// Bounds on a decoded node: a peer's chunk is untrusted input.
const (
	maxNodeKey   = 64 << 10
	maxNodeValue = 16 << 20
	maxHeight    = 127
)

// Export calls fn with every node of saved version v, in the order Import
// takes them. It reads through a tree of its own over the same database
// (its own node cache): IAVL's working tree rewrites node objects it
// shares with the saved versions it loaded, so an export through the
// working tree's cache would race with the next block's writes. The
// version must not be deleted while the export runs.
func (t *Tree) Export(v int64, fn func(*Node) error) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	if !t.tree.VersionExists(v) {
		t.mu.Unlock()
		return fmt.Errorf("%w: %d", ErrVersionNotFound, v)
	}
	t.pinned[v]++ // PruneTo keeps v until the export ends
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.pinned[v]--; t.pinned[v] == 0 {
			delete(t.pinned, v)
		}
		t.mu.Unlock()
	}()
	own := iavl.NewMutableTree(t.db, 1_000, true, iavl.NewNopLogger())
	defer own.Close()
	it, err := own.GetImmutable(v)
	if err != nil {
		return fmt.Errorf("cannot load version %d: %w", v, err)
	}
	ex, err := it.Export()
	if err != nil {
		return fmt.Errorf("cannot export version %d: %w", v, err)
	}
	defer ex.Close()
	for {
		n, err := ex.Next()
		if errors.Is(err, iavl.ErrorExportDone) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(n); err != nil {
			return err
		}
	}
}

// PruneTo deletes the saved versions up to v, keeping the latest and any
// version an export is reading (and those above it). Queries at a deleted
// height get ErrVersionNotFound. Pruning is the node's choice, not the
// chain's: no hash changes.
func (t *Tree) PruneTo(v int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	for p := range t.pinned { // the least pinned version bounds the deletion
		v = min(v, p-1)
	}
	v = min(v, t.tree.Version()-1)
	if v < 1 {
		return nil
	}
	return t.tree.DeleteVersionsTo(v)
}

// Importer rebuilds an empty tree from exported nodes.
type Importer struct {
	t  *Tree
	im *iavl.Importer
	v  int64
}

// Import starts rebuilding version v into the tree, which must be empty
// (version 0). Nodes are added in the order Export gave them; Commit makes
// v the tree's latest version.
func (t *Tree) Import(v int64) (*Importer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	if t.tree.Version() != 0 {
		return nil, fmt.Errorf("cannot restore a snapshot over state at version %d: start from an empty data directory", t.tree.Version())
	}
	if v <= 0 {
		return nil, fmt.Errorf("cannot restore version %d", v)
	}
	im, err := t.tree.Import(v)
	if err != nil {
		return nil, err
	}
	t.vals.drop() // it may hold the empty tree's "absent"
	return &Importer{t: t, im: im, v: v}, nil
}

// Add adds the next node.
func (i *Importer) Add(n *Node) error { return i.im.Add(n) }

// Commit finishes the import: the tree's latest version is v.
func (i *Importer) Commit() error {
	i.t.mu.Lock()
	defer i.t.mu.Unlock()
	defer i.t.vals.drop() // the restored state replaces whatever was read
	defer i.t.latest.drop()
	if err := i.im.Commit(); err != nil {
		return err
	}
	if got := i.t.tree.Version(); got != i.v {
		return fmt.Errorf("restored version %d, want %d", got, i.v)
	}
	return nil
}

// Close abandons an import that was not committed.
func (i *Importer) Close() { i.im.Close() }

// Wipe deletes everything in the tree's database and leaves an empty tree
// at version 0: what a node does with a restored snapshot that turned out
// not to be the trusted state. Only for a node that had no state before.
func (t *Tree) Wipe() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	it, err := t.db.Iterator(nil, nil)
	if err != nil {
		return err
	}
	var keys [][]byte
	for ; it.Valid(); it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	b := t.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	if err := b.WriteSync(); err != nil {
		return err
	}
	tree := iavl.NewMutableTree(t.db, iavlNodeCache, true, iavl.NewNopLogger(), iavl.SyncOption(true))
	if _, err := tree.Load(); err != nil {
		return fmt.Errorf("cannot load the wiped tree: %w", err)
	}
	if tree.Version() != 0 {
		return fmt.Errorf("the wiped tree is at version %d", tree.Version())
	}
	_ = t.tree.Close() // the old tree's node cache (the database stays open)
	t.tree = tree
	t.vals.drop()
	t.latest.drop()
	return nil
}

// AppendNode appends n's encoding to buf: uvarint key length, key, varint
// version, height byte, and for a leaf uvarint value length and value.
func AppendNode(buf []byte, n *Node) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(n.Key)))
	buf = append(buf, n.Key...)
	buf = binary.AppendVarint(buf, n.Version)
	buf = append(buf, byte(n.Height))
	if n.Height == 0 {
		buf = binary.AppendUvarint(buf, uint64(len(n.Value)))
		buf = append(buf, n.Value...)
	}
	return buf
}

// DecodeNodes decodes a chunk of whole nodes (AppendNode's encoding). Every
// length is checked against the chunk and the bounds; a node needs a key, a
// version of at least 1, and a leaf a value.
func DecodeNodes(bz []byte) ([]*Node, error) {
	var out []*Node
	for off := 0; off < len(bz); {
		n, used, err := decodeNode(bz[off:])
		if err != nil {
			return nil, fmt.Errorf("node %d (byte %d): %w", len(out), off, err)
		}
		out = append(out, n)
		off += used
	}
	return out, nil
}

func decodeNode(bz []byte) (*Node, int, error) {
	off := 0
	bytesOf := func(limit uint64, what string) ([]byte, error) {
		l, k := binary.Uvarint(bz[off:])
		if k <= 0 {
			return nil, fmt.Errorf("bad %s length", what)
		}
		off += k
		if l == 0 || l > limit || l > uint64(len(bz)-off) {
			return nil, fmt.Errorf("%s length %d: want 1..%d within the chunk", what, l, limit)
		}
		b := bz[off : off+int(l)]
		off += int(l)
		return b, nil
	}
	key, err := bytesOf(maxNodeKey, "key")
	if err != nil {
		return nil, 0, err
	}
	version, k := binary.Varint(bz[off:])
	if k <= 0 || version < 1 {
		return nil, 0, fmt.Errorf("bad version")
	}
	off += k
	if off >= len(bz) {
		return nil, 0, errors.New("no height")
	}
	height := bz[off]
	off++
	if height > maxHeight {
		return nil, 0, fmt.Errorf("height %d", height)
	}
	n := &Node{Key: key, Version: version, Height: int8(height)}
	if height == 0 {
		if n.Value, err = bytesOf(maxNodeValue, "value"); err != nil {
			return nil, 0, err
		}
	}
	return n, off, nil
}
