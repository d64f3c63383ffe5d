package chain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/store"
)

// State sync: a new node restores the state at a recent height from peers'
// snapshots instead of replaying every block since genesis.
//
// A snapshot (format SnapshotFormat) of height h is the IAVL tree's version h
// exported in post-order (store.Export), cut into chunks of whole nodes
// (store.AppendNode). Its metadata is the sha256 of each chunk, in order;
// its hash is the sha256 of the metadata. Nothing in a snapshot is trusted:
//
//   - an offer is refused unless its hash is that of its metadata and the
//     metadata names exactly its chunks (at most MaxSnapshotChunks);
//   - each chunk must hash to its entry in the metadata, else it is fetched
//     again from another peer and its sender is rejected;
//   - the restored tree's app hash must be the one CometBFT's light client
//     verified for height h (OfferSnapshot's AppHash), else the tree is wiped
//     and the snapshot rejected.
//
// Taking snapshots and keeping their files is the node's (node/statesync,
// behind SnapshotStore): this package stays free of files and goroutines.

// SnapshotFormat is the only snapshot format this app takes and makes.
const SnapshotFormat uint32 = 1

// MaxSnapshotChunks bounds the chunks of an offered snapshot (with
// CometBFT's 16 MB chunks, far above any state this app holds).
const MaxSnapshotChunks = 1 << 16

// SnapshotStore is the node's store of snapshots: the app tells it when a
// version is saved (it takes a snapshot when one is due, off the block's
// path) and asks it for what peers want.
type SnapshotStore interface {
	// Saved is called after every Commit with the saved version.
	Saved(height int64)
	// List is the snapshots held, newest first.
	List() []*abci.Snapshot
	// Chunk is chunk index of a snapshot held, or nil.
	Chunk(height uint64, format, index uint32) []byte
}

// WithSnapshots makes the app take and serve snapshots through s.
func WithSnapshots(s SnapshotStore) Option { return func(a *App) { a.snapshots = s } }

// SnapshotMetadata is the metadata of chunks: their sha256s, in order.
func SnapshotMetadata(chunks [][]byte) []byte {
	md := make([]byte, 0, 32*len(chunks))
	for _, c := range chunks {
		h := sha256.Sum256(c)
		md = append(md, h[:]...)
	}
	return md
}

// SnapshotHash is the hash of a snapshot with metadata md.
func SnapshotHash(md []byte) []byte {
	h := sha256.Sum256(md)
	return h[:]
}

// restoring is a snapshot being applied.
type restoring struct {
	snap    *abci.Snapshot
	appHash []byte // the light client's, for snapshot.Height
	next    uint32 // the chunk expected next
	im      *store.Importer
}

// ListSnapshots answers a peer's request for the snapshots held.
func (a *App) ListSnapshots(context.Context, *abci.ListSnapshotsRequest) (*abci.ListSnapshotsResponse, error) {
	if a.snapshots == nil {
		return &abci.ListSnapshotsResponse{}, nil
	}
	return &abci.ListSnapshotsResponse{Snapshots: a.snapshots.List()}, nil
}

// LoadSnapshotChunk answers a peer's request for one chunk (empty when not
// held: the peer asks another).
func (a *App) LoadSnapshotChunk(_ context.Context, req *abci.LoadSnapshotChunkRequest) (*abci.LoadSnapshotChunkResponse, error) {
	if a.snapshots == nil {
		return &abci.LoadSnapshotChunkResponse{}, nil
	}
	return &abci.LoadSnapshotChunkResponse{Chunk: a.snapshots.Chunk(req.Height, req.Format, req.Chunk)}, nil
}

// OfferSnapshot decides whether to restore an offered snapshot.
func (a *App) OfferSnapshot(_ context.Context, req *abci.OfferSnapshotRequest) (*abci.OfferSnapshotResponse, error) {
	reject := func(r abci.OfferSnapshotResult, why string, args ...any) (*abci.OfferSnapshotResponse, error) {
		a.logger.Info("snapshot refused", "why", fmt.Sprintf(why, args...))
		return &abci.OfferSnapshotResponse{Result: r}, nil
	}
	s := req.Snapshot
	switch {
	case s == nil:
		return reject(abci.OFFER_SNAPSHOT_RESULT_REJECT, "no snapshot")
	case s.Format != SnapshotFormat:
		return reject(abci.OFFER_SNAPSHOT_RESULT_REJECT_FORMAT, "format %d, this app restores format %d", s.Format, SnapshotFormat)
	case s.Height == 0 || s.Height > 1<<62:
		return reject(abci.OFFER_SNAPSHOT_RESULT_REJECT, "height %d", s.Height)
	case s.Chunks == 0 || s.Chunks > MaxSnapshotChunks:
		return reject(abci.OFFER_SNAPSHOT_RESULT_REJECT, "%d chunks: want 1..%d", s.Chunks, MaxSnapshotChunks)
	case len(s.Metadata) != 32*int(s.Chunks):
		return reject(abci.OFFER_SNAPSHOT_RESULT_REJECT, "metadata of %d bytes for %d chunks", len(s.Metadata), s.Chunks)
	case !bytes.Equal(s.Hash, SnapshotHash(s.Metadata)):
		return reject(abci.OFFER_SNAPSHOT_RESULT_REJECT, "its hash is not its metadata's")
	case len(req.AppHash) == 0:
		return reject(abci.OFFER_SNAPSHOT_RESULT_REJECT, "no trusted app hash")
	}
	if err := a.abandonRestore(); err != nil {
		return &abci.OfferSnapshotResponse{Result: abci.OFFER_SNAPSHOT_RESULT_ABORT}, err
	}
	im, err := a.tree.Import(int64(s.Height))
	if err != nil {
		// Only a node without state restores: nothing to retry.
		a.logger.Error("cannot restore a snapshot", "err", err)
		return &abci.OfferSnapshotResponse{Result: abci.OFFER_SNAPSHOT_RESULT_ABORT}, nil
	}
	a.restore = &restoring{snap: s, appHash: bytes.Clone(req.AppHash), im: im}
	a.logger.Info("restoring snapshot", "height", s.Height, "chunks", s.Chunks)
	return &abci.OfferSnapshotResponse{Result: abci.OFFER_SNAPSHOT_RESULT_ACCEPT}, nil
}

// abandonRestore drops a restore in progress and wipes what it wrote.
func (a *App) abandonRestore() error {
	r := a.restore
	if r == nil {
		return nil
	}
	a.restore = nil
	r.im.Close()
	if err := a.tree.Wipe(); err != nil {
		return fmt.Errorf("cannot wipe an abandoned restore: %w", err)
	}
	return nil
}

// ApplySnapshotChunk applies the next chunk of the accepted snapshot.
func (a *App) ApplySnapshotChunk(_ context.Context, req *abci.ApplySnapshotChunkRequest) (*abci.ApplySnapshotChunkResponse, error) {
	r := a.restore
	if r == nil {
		return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_ABORT}, nil
	}
	if req.Index != r.next {
		// CometBFT applies chunks in order: ask for the one expected.
		return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_RETRY, RefetchChunks: []uint32{r.next}}, nil
	}
	want := r.snap.Metadata[32*req.Index : 32*req.Index+32]
	if got := sha256.Sum256(req.Chunk); !bytes.Equal(got[:], want) {
		a.logger.Info("snapshot chunk refused: not the chunk the metadata names", "index", req.Index, "sender", req.Sender)
		return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_RETRY,
			RefetchChunks: []uint32{req.Index}, RejectSenders: senders(req.Sender)}, nil
	}
	// The chunk is the snapshot's own: if it does not decode or build the
	// tree, the snapshot itself is bad (its hash was agreed by its peers).
	rejectSnapshot := func(why string, args ...any) (*abci.ApplySnapshotChunkResponse, error) {
		a.logger.Info("snapshot rejected", "height", r.snap.Height, "why", fmt.Sprintf(why, args...))
		if err := a.abandonRestore(); err != nil {
			return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_ABORT}, err
		}
		return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_REJECT_SNAPSHOT, RejectSenders: senders(req.Sender)}, nil
	}
	nodes, err := store.DecodeNodes(req.Chunk)
	if err != nil {
		return rejectSnapshot("chunk %d: %v", req.Index, err)
	}
	for _, n := range nodes {
		if err := r.im.Add(n); err != nil {
			return rejectSnapshot("chunk %d: %v", req.Index, err)
		}
	}
	r.next++
	if r.next < r.snap.Chunks {
		return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT}, nil
	}
	if err := r.im.Commit(); err != nil {
		return rejectSnapshot("%v", err)
	}
	h := int64(r.snap.Height)
	if got := AppHash(h, a.tree.Hash()); !bytes.Equal(got, r.appHash) {
		return rejectSnapshot("the restored state's app hash %X is not the trusted %X", got, r.appHash)
	}
	a.restore = nil
	a.checkMu.Lock()
	a.resetCheckState()
	a.checkHeight = uint64(h) + 1
	a.checkMu.Unlock()
	a.logger.Info("snapshot restored", "height", h)
	return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT}, nil
}

func senders(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
