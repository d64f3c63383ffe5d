package chain

import (
	"context"
	"crypto/sha256"
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

// PreverifyTx reads the saved version without checkMu (sigcache.go), so
// its reads run beside a block's writes into the IAVL tree unless treeMu
// orders them. Under the race detector (make race): 400 senders funded at
// genesis, none read before, and then 1,000 unfunded ones over and over,
// preverified while blocks that write a new account each are finalized
// and committed on an on-disk tree that keeps one version: the
// preverifications descend each saved version for keys not read in it
// before. Without treeMu the race detector reports IAVL's writes beside
// these reads. (Loading the version's pointer before taking the read lock
// would let Commit prune that version first; this test did not catch that
// order, even with a yield between the two: IAVL v1.3.5 still answered
// from the pruned version's nodes. The order is right by construction.)
func TestPreverifyBesideBlockWrites(t *testing.T) {
	const senders, blocks = 400, 20
	doc := testGenesis()
	for i := range senders {
		if err := doc.AddAccount(addrOf(fmt.Sprint("funded ", i)), types.OGPU(10)); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := store.OpenTree(t.TempDir(), "state")
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	// Only the last saved version is kept: each Commit prunes the one
	// before, which a preverification may have been about to read.
	h := newHarness(t, tree, doc, WithPruning(1))
	h.block(h.tx("alice", send("bob", uint256.NewInt(1)))) // a saved version to read
	txs := make([][]byte, senders)
	for i := range txs {
		txs[i] = signTx(t, testKey(fmt.Sprint("funded ", i)), 0, send("bob", uint256.NewInt(1)))
	}
	unfunded := make([][]byte, 1000)
	for i := range unfunded {
		unfunded[i] = signTx(t, testKey(fmt.Sprint("unfunded ", i)), 0, send("bob", uint256.NewInt(1)))
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	wg.Go(func() {
		for _, tx := range txs {
			h.app.PreverifyTx(tx)
		}
		// Then transfers of senders who hold nothing, again and again:
		// the cheap checks refuse them (no recovery, nothing cached), and
		// each is a key the saved version's IAVL tree is descended for.
		for !stop.Load() {
			for _, tx := range unfunded {
				h.app.PreverifyTx(tx)
			}
		}
	})
	for b := 0; b < blocks; b++ {
		var bz [][]byte
		for i := range 30 {
			bz = append(bz, h.tx("alice", send(fmt.Sprint("new ", b, i), uint256.NewInt(1))))
		}
		h.block(bz...)
	}
	stop.Store(true)
	wg.Wait()
	for i, tx := range txs {
		if !h.app.sigs.has(sha256.Sum256(tx)) {
			t.Fatalf("funded sender %d's transfer was not preverified", i)
		}
	}
}
