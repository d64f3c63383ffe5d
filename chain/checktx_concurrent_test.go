package chain

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// CheckTx may run beside every other ABCI call (node.NewClientCreator
// gives the mempool connection a mutex of its own). Run under the race
// detector (make race): blocks of transfers are finalized and committed on
// an on-disk tree while another goroutine checks transactions without
// pause, and PreverifyTx runs beside both. The chain reaches the same app
// hashes as with nothing beside it, and every CheckTx answers from the
// mempool's view: carol never sends in a block, so her transfers are
// accepted in nonce order until a Commit resets the view, and then her
// next nonce is "ahead" and she starts again from 0.
func TestCheckTxBesideBlocks(t *testing.T) {
	const blocks = 30
	run := func(beside bool) []string {
		tree, err := store.OpenTree(t.TempDir(), "state")
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		h := newHarness(t, tree, testGenesis())
		var stop atomic.Bool
		var wg sync.WaitGroup
		var accepted, checked atomic.Int64
		errc := make(chan string, 4)
		if beside {
			wg.Go(func() {
				// carol sends to a new account each time, so that every
				// check descends the tree for a key never read before.
				nonce := uint64(0)
				for i := 0; !stop.Load(); i++ {
					tx := signTx(t, testKey("carol"), nonce, send(fmt.Sprint("new ", i), uint256.NewInt(1)))
					res, err := h.app.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: tx, Type: abci.CHECK_TX_TYPE_CHECK})
					switch {
					case err != nil:
						errc <- err.Error()
						return
					case res.Code == 0:
						accepted.Add(1)
						nonce++
					case res.Code == types.CodeOf(types.ErrNonceAhead) && nonce > 0:
						nonce = 0 // a Commit reset the mempool's view
					default:
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
			for i := range 20 {
				txs = append(txs, h.tx("alice", send(fmt.Sprint("paid ", h.height, i), uint256.NewInt(1))))
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
		if beside && (accepted.Load() < 2 || accepted.Load() == checked.Load()) { // resets seen
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
