package statesync_test

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtcfg "github.com/cometbft/cometbft/config"
	cmtcrypto "github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	"github.com/cometbft/cometbft/rpc/client/local"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/statesync"
	"github.com/ogpu-network/ogpu/types"
)

// TestStateSyncJoins: a validator takes snapshots every 5 blocks while
// transfers change its state; a new node configured for state sync (two
// RPC servers, a trusted height and hash) restores the latest snapshot from
// it, block-syncs from there and reaches the same state: its earliest block
// is the snapshot's next, so it replayed no history, and its app hash and
// balances at a later height are the validator's.
func TestStateSyncJoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	homeA := t.TempDir()
	confA, err := node.LocalConfig(homeA, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	doc := genesis.Default()
	key, _ := crypto.GenerateKey()
	from := crypto.PubkeyToAddress(key.PublicKey)
	if err := doc.AddAccount(from, types.OGPU(1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := node.InitHome(node.InitOptions{Home: homeA, ChainID: "ogpu-statesync-test", Genesis: doc, Config: confA}); err != nil {
		t.Fatal(err)
	}
	a, err := node.StartChainNodeWith(ctx, confA, log.NewNopLogger(),
		node.StartOptions{Snapshots: statesync.Options{Interval: 5, Keep: 100, ChunkSize: 256}}, chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ca := &node.Client{RPC: local.New(a.Node)}
	if err := ca.WaitHeight(ctx, 2); err != nil {
		t.Fatal(err)
	}
	sender := node.NewSender(ca, key)
	to := types.Address{0x51}
	for i := 1; i <= 12; i++ {
		if _, err := sender.Send(ctx, (&escrow.MsgSend{To: types.Address{byte(i)}, Amount: uint256.NewInt(uint64(i))}).Raw(),
			(&escrow.MsgSend{To: to, Amount: uint256.NewInt(1)}).Raw()); err != nil {
			t.Fatal(err)
		}
	}
	for {
		l, _ := a.App.ListSnapshots(ctx, &abci.ListSnapshotsRequest{})
		if len(l.Snapshots) >= 2 {
			if l.Snapshots[0].Chunks < 3 {
				t.Fatalf("snapshot of %d chunks: want several (chunks of 256 bytes)", l.Snapshots[0].Chunks)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no snapshots taken")
		}
		time.Sleep(50 * time.Millisecond)
	}
	trust := int64(2)
	blk, err := ca.RPC.Block(ctx, &trust)
	if err != nil {
		t.Fatal(err)
	}

	// The new node: A's genesis, keys of its own, state sync from A.
	homeB := t.TempDir()
	confB, err := node.LocalConfig(homeB, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	confB.SetRoot(homeB)
	cmtcfg.EnsureRoot(homeB)
	gen, err := os.ReadFile(confA.GenesisFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(confB.GenesisFile(), gen, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p2p.LoadOrGenNodeKey(confB.NodeKeyFile()); err != nil {
		t.Fatal(err)
	}
	if _, err := privval.LoadOrGenFilePV(confB.PrivValidatorKeyFile(), confB.PrivValidatorStateFile(), func() (cmtcrypto.PrivKey, error) { return ed25519.GenPrivKey(), nil }); err != nil {
		t.Fatal(err)
	}
	rpcA := strings.Replace(confA.RPC.ListenAddress, "tcp://", "http://", 1)
	confB.P2P.PersistentPeers = string(a.NodeInfo().ID()) + "@" + strings.TrimPrefix(confA.P2P.ListenAddress, "tcp://")
	confB.StateSync.Enable = true
	confB.StateSync.RPCServers = []string{rpcA, rpcA}
	confB.StateSync.TrustHeight = trust
	confB.StateSync.TrustHash = hex.EncodeToString(blk.BlockID.Hash)
	confB.StateSync.TrustPeriod = time.Hour
	confB.StateSync.DiscoveryTime = 5 * time.Second
	confB.StateSync.TempDir = filepath.Join(homeB, "statesync-tmp")
	b, err := node.StartChainNodeWith(ctx, confB, log.NewNopLogger(), node.StartOptions{}, chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cb := &node.Client{RPC: local.New(b.Node)}

	// B catches up, then both go on together.
	target, err := ca.CommittedHeight(ctx)
	if err != nil {
		t.Fatal(err)
	}
	target += 3
	if err := cb.WaitHeight(ctx, target+1); err != nil {
		t.Fatalf("the state-synced node did not reach height %d: %v", target+1, err)
	}
	// A restored snapshot may be newer than target (on a loaded machine
	// discovery outlasts several of A's snapshots): B's app is then past
	// target+1 while its block store holds no block yet (earliest 0).
	// Wait for its first stored block, and compare at a height it holds.
	var st *ctypes.ResultStatus
	for {
		if st, err = cb.RPC.Status(ctx); err != nil {
			t.Fatal(err)
		}
		if st.SyncInfo.EarliestBlockHeight > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the state-synced node stored no block")
		}
		time.Sleep(50 * time.Millisecond)
	}
	target = max(target, st.SyncInfo.EarliestBlockHeight)
	if st.SyncInfo.EarliestBlockHeight <= 5 {
		t.Fatalf("the new node's earliest block is %d: it replayed history instead of restoring a snapshot", st.SyncInfo.EarliestBlockHeight)
	}
	for _, c := range []*node.Client{ca, cb} {
		if err := c.WaitHeight(ctx, target+1); err != nil {
			t.Fatal(err)
		}
	}
	ha, err := ca.RPC.Block(ctx, &target)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := cb.RPC.Block(ctx, &target)
	if err != nil {
		t.Fatal(err)
	}
	if ha.Block.AppHash.String() != hb.Block.AppHash.String() {
		t.Fatalf("app hash at %d: %s on the validator, %s on the new node", target, ha.Block.AppHash, hb.Block.AppHash)
	}
	acc, err := cb.Account(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	if !acc.Balance.Eq(uint256.NewInt(12)) {
		t.Fatalf("the new node says %s holds %s, want 12 base units", to, acc.Balance)
	}
	t.Logf("restored a snapshot at height %d (earliest block %d); app hashes equal at %d", st.SyncInfo.EarliestBlockHeight-1, st.SyncInfo.EarliestBlockHeight, target)
}
