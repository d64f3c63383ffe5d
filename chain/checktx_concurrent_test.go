package chain

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// CheckTx may run beside every other ABCI call (node.NewClientCreator
// gives the mempool connection a mutex of its own). Run under the race
// detector (make race): blocks of transfers are finalized and committed on
// an on-disk tree while another goroutine checks transactions without
// pause, and PreverifyTx runs beside both. The chain reaches the same app
// hashes as with nothing beside it, and every CheckTx answers from the
// mempool's view: carol never sends in a block, so her transfer of nonce
// 0 is accepted once after each Commit (which resets the view) and
// refused as a used nonce until the next.
func TestCheckTxBesideBlocks(t *testing.T) {
	const blocks = 30
	run := func(beside bool) []string {
		tree, err := store.OpenTree(t.TempDir(), "state")
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		h := newHarness(t, tree, testGenesis())
		carol := signTx(t, testKey("carol"), 0, send("alice", types.OGPU(1)))
		var stop atomic.Bool
		var wg sync.WaitGroup
		var accepted, checked atomic.Int64
		errc := make(chan string, 4)
		if beside {
			wg.Go(func() {
				for !stop.Load() {
					res, err := h.app.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: carol, Type: abci.CHECK_TX_TYPE_CHECK})
					switch {
					case err != nil:
						errc <- err.Error()
						return
					case res.Code == 0:
						accepted.Add(1)
					case res.Code != types.CodeOf(types.ErrNonceUsed):
						errc <- "carol's transfer refused: " + res.Log
						return
					}
					checked.Add(1)
				}
			})
			wg.Go(func() {
				for i := uint64(0); !stop.Load(); i++ {
					h.app.PreverifyTx(signTx(t, testKey("carol"), i%50, send("bob", types.OGPU(1))))
				}
			})
		}
		for range blocks {
			var txs [][]byte
			for range 5 {
				txs = append(txs, h.tx("alice", send("bob", types.OGPU(1))))
			}
			for i, r := range h.block(txs...) {
				if r.Code != 0 {
					t.Fatalf("block %d tx %d: %s", h.height, i, r.Log)
				}
			}
		}
		stop.Store(true)
		wg.Wait()
		close(errc)
		for e := range errc {
			t.Fatal(e)
		}
		if beside && (accepted.Load() < 2 || accepted.Load() == checked.Load()) {
			t.Fatalf("%d checks beside the blocks, %d accepted: CheckTx did not see both the resets and its own view", checked.Load(), accepted.Load())
		}
		return h.hashes
	}
	alone, beside := run(false), run(true)
	for i := range alone {
		if alone[i] != beside[i] {
			t.Fatalf("height %d: app hash %s with CheckTx beside the blocks, %s without", i, beside[i], alone[i])
		}
	}
}
