package chain

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/store"
)

// snapshotOf exports version v of tr as a snapshot of chunks of about size
// bytes.
func snapshotOf(t *testing.T, tr *store.Tree, v int64, size int) (*abci.Snapshot, [][]byte) {
	t.Helper()
	var chunks [][]byte
	var cur []byte
	if err := tr.Export(v, func(n *store.Node) error {
		if cur = store.AppendNode(cur, n); len(cur) >= size {
			chunks, cur = append(chunks, cur), nil
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	md := SnapshotMetadata(chunks)
	return &abci.Snapshot{Height: uint64(v), Format: SnapshotFormat, Chunks: uint32(len(chunks)), Hash: SnapshotHash(md), Metadata: md}, chunks
}

func stateTree(t *testing.T, tag string) *store.Tree {
	t.Helper()
	tr := store.NewMemTree()
	for v := 1; v <= 3; v++ {
		for i := 0; i < 200; i++ {
			tr.Set([]byte(fmt.Sprintf("key-%04d", i)), []byte(fmt.Sprintf("%s-%d-%d", tag, v, i)))
		}
		if _, _, err := tr.SaveVersion(); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// TestSnapshotRestoreRefuses: what a peer serving snapshots can try, and
// what the restoring app does. A bad offer is refused before anything is
// written; a chunk that is not the metadata's is fetched again and its
// sender rejected; a snapshot that is self-consistent but not the trusted
// state (or does not decode) is rejected and the tree wiped, so that the
// honest snapshot offered next restores exactly the trusted app hash.
func TestSnapshotRestoreRefuses(t *testing.T) {
	ctx := context.Background()
	honest, forged := stateTree(t, "honest"), stateTree(t, "forged")
	trusted := AppHash(3, honest.Hash())
	good, goodChunks := snapshotOf(t, honest, 3, 1<<10)
	bad, badChunks := snapshotOf(t, forged, 3, 1<<10)
	if good.Chunks < 3 {
		t.Fatalf("%d chunks: want several", good.Chunks)
	}
	a := NewApp(store.NewMemTree())
	offer := func(s *abci.Snapshot, appHash []byte) abci.OfferSnapshotResult {
		t.Helper()
		res, err := a.OfferSnapshot(ctx, &abci.OfferSnapshotRequest{Snapshot: s, AppHash: appHash})
		if err != nil {
			t.Fatal(err)
		}
		return res.Result
	}
	apply := func(i uint32, chunk []byte, sender string) *abci.ApplySnapshotChunkResponse {
		t.Helper()
		res, err := a.ApplySnapshotChunk(ctx, &abci.ApplySnapshotChunkRequest{Index: i, Chunk: chunk, Sender: sender})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	mutate := func(f func(s *abci.Snapshot)) *abci.Snapshot {
		s := *good
		s.Metadata = bytes.Clone(good.Metadata)
		f(&s)
		return &s
	}
	for name, c := range map[string]struct {
		s    *abci.Snapshot
		hash []byte
		want abci.OfferSnapshotResult
	}{
		"format 2":                {mutate(func(s *abci.Snapshot) { s.Format = 2 }), trusted, abci.OFFER_SNAPSHOT_RESULT_REJECT_FORMAT},
		"hash not the metadata's": {mutate(func(s *abci.Snapshot) { s.Hash = bytes.Repeat([]byte{1}, 32) }), trusted, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		"metadata one short": {mutate(func(s *abci.Snapshot) {
			s.Metadata = s.Metadata[:len(s.Metadata)-32]
			s.Hash = SnapshotHash(s.Metadata)
		}), trusted, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		"no chunks":           {mutate(func(s *abci.Snapshot) { s.Chunks, s.Metadata = 0, nil; s.Hash = SnapshotHash(nil) }), trusted, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		"too many chunks":     {mutate(func(s *abci.Snapshot) { s.Chunks = MaxSnapshotChunks + 1 }), trusted, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		"height 0":            {mutate(func(s *abci.Snapshot) { s.Height = 0 }), trusted, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		"no trusted app hash": {good, nil, abci.OFFER_SNAPSHOT_RESULT_REJECT},
	} {
		if got := offer(c.s, c.hash); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
		if a.tree.Version() != 0 || a.restore != nil {
			t.Fatalf("%s: a refused offer changed the app", name)
		}
	}
	// Chunks before an accepted offer: abort.
	if r := apply(0, goodChunks[0], "p"); r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ABORT {
		t.Fatalf("a chunk with no snapshot accepted: %v", r.Result)
	}

	// A forged state, consistent with its own metadata: applied to the end,
	// then refused against the trusted app hash, and wiped.
	if got := offer(bad, trusted); got != abci.OFFER_SNAPSHOT_RESULT_ACCEPT {
		t.Fatalf("forged offer: %v", got)
	}
	for i, c := range badChunks {
		r := apply(uint32(i), c, "liar")
		if i < len(badChunks)-1 && r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT {
			t.Fatalf("forged chunk %d: %v", i, r.Result)
		}
		if i == len(badChunks)-1 && (r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_REJECT_SNAPSHOT || len(r.RejectSenders) != 1) {
			t.Fatalf("the forged state's last chunk: %+v, want the snapshot and its sender rejected", r)
		}
	}
	if a.tree.Version() != 0 || a.tree.Get([]byte("key-0001")) != nil {
		t.Fatalf("the forged state was not wiped: version %d", a.tree.Version())
	}

	// Chunks that are the metadata's but not nodes: rejected, wiped.
	junk := [][]byte{[]byte("not a node")}
	jmd := SnapshotMetadata(junk)
	js := &abci.Snapshot{Height: 3, Format: SnapshotFormat, Chunks: 1, Hash: SnapshotHash(jmd), Metadata: jmd}
	if got := offer(js, trusted); got != abci.OFFER_SNAPSHOT_RESULT_ACCEPT {
		t.Fatalf("junk offer: %v", got)
	}
	if r := apply(0, junk[0], "junk"); r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_REJECT_SNAPSHOT {
		t.Fatalf("junk chunk: %v", r.Result)
	}

	// The honest snapshot, with a tampered chunk and one out of order on
	// the way: refetched, sender rejected, nothing applied from them.
	if got := offer(good, trusted); got != abci.OFFER_SNAPSHOT_RESULT_ACCEPT {
		t.Fatalf("honest offer: %v", got)
	}
	tampered := bytes.Clone(goodChunks[0])
	tampered[len(tampered)-1] ^= 1
	if r := apply(0, tampered, "mitm"); r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_RETRY || len(r.RefetchChunks) != 1 || r.RefetchChunks[0] != 0 || len(r.RejectSenders) != 1 || r.RejectSenders[0] != "mitm" {
		t.Fatalf("tampered chunk: %+v", r)
	}
	if r := apply(1, goodChunks[1], "p"); r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_RETRY || r.RefetchChunks[0] != 0 {
		t.Fatalf("out of order: %+v", r)
	}
	for i, c := range goodChunks {
		if r := apply(uint32(i), c, "p"); r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT {
			t.Fatalf("honest chunk %d: %+v", i, r)
		}
	}
	info, err := a.Info(ctx, &abci.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.LastBlockHeight != 3 || !bytes.Equal(info.LastBlockAppHash, trusted) || a.checkHeight != 4 {
		t.Fatalf("after the restore: height %d app hash %X (check height %d), want 3 and %X", info.LastBlockHeight, info.LastBlockAppHash, a.checkHeight, trusted)
	}
	// A second offer on a node with state: aborted, state untouched.
	if got := offer(good, trusted); got != abci.OFFER_SNAPSHOT_RESULT_ABORT {
		t.Fatalf("an offer over state: %v", got)
	}
	if a.tree.Version() != 3 {
		t.Fatal("the offer over state changed it")
	}
}

// TestPruningKeepsHashes: a node that prunes old versions computes the
// same app hashes as one that keeps them all (pruning is the node's
// choice), and refuses queries at a pruned height with a clear error.
func TestPruningKeepsHashes(t *testing.T) {
	all := newHarness(t, store.NewMemTree(), testGenesis())
	pruned := newHarness(t, store.NewMemTree(), testGenesis(), WithPruning(3))
	for i := 0; i < 10; i++ {
		for _, h := range []*harness{all, pruned} {
			h.block(h.tx("alice", send("bob", uint256.NewInt(uint64(i+1)))))
		}
	}
	if strings.Join(all.hashes, ",") != strings.Join(pruned.hashes, ",") {
		t.Fatal("pruning changed an app hash")
	}
	path := "/account/" + addrOf("bob").Hex()
	for _, c := range []struct {
		h      *harness
		height int64
		ok     bool
	}{{all, 2, true}, {pruned, 2, false}, {pruned, 7, false}, {pruned, 8, true}, {pruned, 10, true}} {
		res, err := c.h.app.Query(context.Background(), &abci.QueryRequest{Path: path, Height: c.height})
		if err != nil {
			t.Fatal(err)
		}
		if ok := res.Code == 0; ok != c.ok {
			t.Fatalf("query at %d (pruned %v): code %d %q", c.height, c.h == pruned, res.Code, res.Log)
		}
		if !c.ok && !strings.Contains(res.Log, "version not found") {
			t.Fatalf("a pruned height's refusal says %q", res.Log)
		}
	}
}

// TestSnapshotSwitchMidRestore: a peer offers a forged snapshot, CometBFT
// applies part of it, then switches to another offer: what the first wrote
// is wiped before the second starts, so the honest snapshot restores the
// trusted state exactly, with no node of the forged one left reachable.
func TestSnapshotSwitchMidRestore(t *testing.T) {
	ctx := context.Background()
	honest, forged := stateTree(t, "honest"), stateTree(t, "forged")
	trusted := AppHash(3, honest.Hash())
	good, goodChunks := snapshotOf(t, honest, 3, 1<<10)
	bad, badChunks := snapshotOf(t, forged, 3, 1<<10)
	a := NewApp(store.NewMemTree())
	if res, _ := a.OfferSnapshot(ctx, &abci.OfferSnapshotRequest{Snapshot: bad, AppHash: trusted}); res.Result != abci.OFFER_SNAPSHOT_RESULT_ACCEPT {
		t.Fatalf("forged offer: %v", res.Result)
	}
	if res, _ := a.ApplySnapshotChunk(ctx, &abci.ApplySnapshotChunkRequest{Index: 0, Chunk: badChunks[0], Sender: "liar"}); res.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT {
		t.Fatalf("forged chunk 0: %v", res.Result)
	}
	if res, _ := a.OfferSnapshot(ctx, &abci.OfferSnapshotRequest{Snapshot: good, AppHash: trusted}); res.Result != abci.OFFER_SNAPSHOT_RESULT_ACCEPT {
		t.Fatalf("honest offer after a partial one: %v", res.Result)
	}
	for i, c := range goodChunks {
		if res, _ := a.ApplySnapshotChunk(ctx, &abci.ApplySnapshotChunkRequest{Index: uint32(i), Chunk: c, Sender: "p"}); res.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT {
			t.Fatalf("honest chunk %d: %v", i, res.Result)
		}
	}
	if got := AppHash(3, a.tree.Hash()); !bytes.Equal(got, trusted) {
		t.Fatalf("restored %X, want %X", got, trusted)
	}
	if v := a.tree.Get([]byte("key-0001")); string(v) != "honest-3-1" {
		t.Fatalf("key-0001 reads %q after the switch", v)
	}
}
