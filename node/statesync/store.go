// Package statesync keeps a node's state snapshots for CometBFT state
// sync. Every Interval blocks it exports the version just saved, in the
// background, into chunk files under its directory; it keeps the newest
// Keep snapshots and serves them to peers through the app
// (chain.SnapshotStore). The snapshot format and the rules a restoring
// node applies are chain/snapshot.go's.
package statesync

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cometbft/cometbft/libs/log"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/internal/atomicfile"
	"github.com/ogpu-network/ogpu/store"
)

// Options say when snapshots are taken and how many are kept.
type Options struct {
	// Interval: a snapshot at every height that is a multiple of it (0:
	// none are taken; the ones on disk are still served).
	Interval uint64
	// Keep is how many snapshots are kept (at least 1; 0: DefaultKeep).
	Keep int
	// ChunkSize is the bytes of nodes a chunk holds before the next one
	// starts (0: DefaultChunkSize). CometBFT takes chunks up to 16 MB.
	ChunkSize int
}

// Defaults.
const (
	DefaultKeep      = 2
	DefaultChunkSize = 4 << 20
)

// Store holds the snapshots of one node.
type Store struct {
	dir  string
	tree *store.Tree
	o    Options
	log  log.Logger

	mu     sync.Mutex
	snaps  []*abci.Snapshot // newest first
	busy   bool             // an export runs
	closed bool
	wg     sync.WaitGroup
}

// meta is a snapshot's description on disk (meta.json beside its chunks).
type meta struct {
	Height   uint64 `json:"height"`
	Format   uint32 `json:"format"`
	Chunks   uint32 `json:"chunks"`
	Hash     string `json:"hash"`
	Metadata string `json:"metadata"`
}

// Open opens (or creates) the snapshot directory dir over tree's state.
// Snapshots left half-written by a crash are removed; complete ones are
// served again.
func Open(dir string, tree *store.Tree, o Options, logger log.Logger) (*Store, error) {
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if logger == nil {
		logger = log.NewNopLogger()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the snapshot directory: %w", err)
	}
	s := &Store{dir: dir, tree: tree, o: o, log: logger}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		h, err := strconv.ParseUint(e.Name(), 10, 64)
		if err != nil || !e.IsDir() {
			_ = os.RemoveAll(path) // a half-written export (tmp-*) or a stranger
			continue
		}
		snap, err := load(path, h)
		if err != nil {
			logger.Error("dropping a damaged snapshot", "height", h, "err", err)
			_ = os.RemoveAll(path)
			continue
		}
		s.snaps = append(s.snaps, snap)
	}
	slices.SortFunc(s.snaps, func(a, b *abci.Snapshot) int { return cmpDesc(a.Height, b.Height) })
	return s, nil
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func load(path string, h uint64) (*abci.Snapshot, error) {
	bz, err := os.ReadFile(filepath.Join(path, "meta.json"))
	if err != nil {
		return nil, err
	}
	var m meta
	if err := json.Unmarshal(bz, &m); err != nil {
		return nil, err
	}
	hash, err1 := hex.DecodeString(m.Hash)
	md, err2 := hex.DecodeString(m.Metadata)
	switch {
	case err1 != nil || err2 != nil:
		return nil, errors.New("bad hex in meta.json")
	case m.Height != h || m.Format != chain.SnapshotFormat || m.Chunks == 0 || len(md) != 32*int(m.Chunks):
		return nil, fmt.Errorf("meta.json does not describe snapshot %d of format %d", h, chain.SnapshotFormat)
	case string(hash) != string(chain.SnapshotHash(md)):
		return nil, errors.New("meta.json's hash is not its metadata's")
	}
	for i := uint32(0); i < m.Chunks; i++ {
		if _, err := os.Stat(chunkPath(path, i)); err != nil {
			return nil, err
		}
	}
	return &abci.Snapshot{Height: h, Format: m.Format, Chunks: m.Chunks, Hash: hash, Metadata: md}, nil
}

func chunkPath(dir string, i uint32) string { return filepath.Join(dir, fmt.Sprintf("%06d", i)) }

// Saved takes a snapshot of version h in the background when one is due
// and none is being taken.
func (s *Store) Saved(h int64) {
	if s.o.Interval == 0 || h <= 0 || uint64(h)%s.o.Interval != 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.busy {
		s.log.Info("snapshot skipped: the previous one is still being taken", "height", h)
		return
	}
	s.busy = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := s.take(h)
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
		if err != nil {
			s.log.Error("cannot take a snapshot", "height", h, "err", err)
		}
	}()
}

// take exports version h into a new snapshot and drops the oldest beyond
// Keep.
func (s *Store) take(h int64) error {
	tmp := filepath.Join(s.dir, fmt.Sprintf("tmp-%d", h))
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	var md, cur []byte // the metadata so far, the chunk being filled
	chunks := uint32(0)
	flush := func() error {
		if err := atomicfile.Write(chunkPath(tmp, chunks), cur, 0o644); err != nil {
			return err
		}
		md = append(md, chain.SnapshotMetadata([][]byte{cur})...)
		chunks++
		cur = nil
		return nil
	}
	err := s.tree.Export(h, func(n *store.Node) error {
		cur = store.AppendNode(cur, n)
		if len(cur) >= s.o.ChunkSize {
			return flush()
		}
		return nil
	})
	if err == nil && (len(cur) > 0 || chunks == 0) {
		err = flush() // an empty state is one empty chunk
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	snap := &abci.Snapshot{Height: uint64(h), Format: chain.SnapshotFormat, Chunks: chunks, Hash: chain.SnapshotHash(md), Metadata: md}
	bz, _ := json.Marshal(meta{Height: snap.Height, Format: snap.Format, Chunks: snap.Chunks, Hash: hex.EncodeToString(snap.Hash), Metadata: hex.EncodeToString(md)})
	if err := atomicfile.Write(filepath.Join(tmp, "meta.json"), bz, 0o644); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	final := filepath.Join(s.dir, strconv.FormatInt(h, 10))
	_ = os.RemoveAll(final)
	if err := os.Rename(tmp, final); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	s.mu.Lock()
	s.snaps = append([]*abci.Snapshot{snap}, slices.DeleteFunc(s.snaps, func(o *abci.Snapshot) bool { return o.Height == snap.Height })...)
	var drop []*abci.Snapshot
	if len(s.snaps) > s.o.Keep {
		drop = s.snaps[s.o.Keep:]
		s.snaps = s.snaps[:s.o.Keep]
	}
	s.mu.Unlock()
	for _, d := range drop {
		_ = os.RemoveAll(filepath.Join(s.dir, strconv.FormatUint(d.Height, 10)))
	}
	s.log.Info("snapshot taken", "height", h, "chunks", snap.Chunks, "hash", strings.ToUpper(hex.EncodeToString(snap.Hash)))
	return nil
}

// List is the snapshots held, newest first.
func (s *Store) List() []*abci.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.snaps)
}

// Chunk is chunk index of the snapshot of height and format, or nil.
func (s *Store) Chunk(height uint64, format, index uint32) []byte {
	s.mu.Lock()
	held := slices.ContainsFunc(s.snaps, func(o *abci.Snapshot) bool {
		return o.Height == height && o.Format == format && index < o.Chunks
	})
	s.mu.Unlock()
	if !held {
		return nil
	}
	bz, err := os.ReadFile(chunkPath(filepath.Join(s.dir, strconv.FormatUint(height, 10)), index))
	if err != nil {
		s.log.Error("cannot read a snapshot chunk", "height", height, "chunk", index, "err", err)
		return nil
	}
	return bz
}

// Close waits for a snapshot being taken; no more are taken after it.
func (s *Store) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
}
