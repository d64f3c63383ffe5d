package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// dumpState lists every key and value in r.
// The beacon's keys (0x70-0x7f) are history an export does not carry: a
// restarted chain's validators register their hash chains anew.
func dumpState(r store.Reader) string {
	var b strings.Builder
	r.Iterate(nil, nil, func(k, v []byte) bool {
		if len(k) > 0 && k[0]>>4 == 0x7 {
			return false
		}
		fmt.Fprintf(&b, "%x=%x\n", k, v)
		return false
	})
	return b.String()
}

// runBlock finalizes and commits one block on app directly.
func runBlock(t *testing.T, app *App, height int64, txs ...[]byte) []*abci.ExecTxResult {
	t.Helper()
	ctx := context.Background()
	res, err := app.FinalizeBlock(ctx, &abci.FinalizeBlockRequest{Height: height, Txs: txs, Time: time.Unix(0, 0)})
	if err != nil {
		t.Fatalf("FinalizeBlock %d: %v", height, err)
	}
	if _, err := app.Commit(ctx, &abci.CommitRequest{}); err != nil {
		t.Fatalf("Commit %d: %v", height, err)
	}
	return res.TxResults
}

func TestExportGenesisRoundTrip(t *testing.T) {
	old := newHarness(t, store.NewMemTree(), testGenesis())
	// Transfers, a new account, an account emptied to a zero balance that
	// keeps its nonce, a failing send that still pays its fee, an empty
	// block.
	old.block(old.tx("alice", send("bob", types.OGPU(10))), old.tx("bob", send("carol", types.OGPU(3))))
	old.block(old.tx("carol", send("dave", types.OGPU(2))))
	old.block(old.tx("dave", send("erin", types.OGPU(1)))) // dave: 2 - 1 - fee 1 = 0
	lastAlice := old.tx("alice", send("carol", types.OGPU(5000)))
	if res := old.block(lastAlice); res[0].Code != types.ErrInsufficientFunds.Code {
		t.Fatalf("the failing send: code %d %s", res[0].Code, res[0].Log)
	}
	old.block()
	height := old.height

	snap, err := old.tree.Snapshot(0)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version() != height {
		t.Fatalf("latest snapshot at %d, chain at %d", snap.Version(), height)
	}
	if b := escrow.NewKeeper(snap).Balance(addrOf("dave")); !b.IsZero() {
		t.Fatalf("dave has %s, the test wants him emptied", b.Dec())
	}
	chainID, doc := mustExport(t, snap)
	if chainID != testChainID {
		t.Fatalf("exported chain id %q, want %q", chainID, testChainID)
	}
	if err := doc.Validate(); err != nil {
		t.Fatalf("exported document is invalid: %v", err)
	}
	wantNonces := map[string]uint64{"alice": 2, "bob": 1, "carol": 1, "dave": 1}
	for name, n := range wantNonces {
		found := false
		for _, a := range doc.Accounts {
			if a.Address == addrOf(name) {
				found = true
				if a.Nonce != n {
					t.Errorf("exported nonce of %s = %d, want %d", name, a.Nonce, n)
				}
			}
		}
		if !found {
			t.Errorf("%s is missing from the export", name)
		}
	}
	// Through JSON, as it travels in genesis.json.
	bz, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := genesis.Parse(bz); err != nil {
		t.Fatalf("exported document does not parse: %v", err)
	}

	tree := store.NewMemTree()
	app := NewApp(tree, WithInvariants())
	init, err := app.InitChain(context.Background(), &abci.InitChainRequest{
		ChainId: chainID, AppStateBytes: bz, InitialHeight: height + 1,
	})
	if err != nil {
		t.Fatalf("InitChain from the export: %v", err)
	}

	t.Run("same state", func(t *testing.T) {
		if got, want := dumpState(tree), dumpState(snap); got != want {
			t.Fatalf("state after InitChain from the export:\n%s\nwant (the old chain at %d):\n%s", got, height, want)
		}
	})
	// The app hash cannot carry over an export: IAVL node hashes include the
	// version each node was written at, and the tree's shape depends on the
	// insertion history, so the same pairs written at once at height+1 give
	// another root than the old chain's. What round-trips is the state (above)
	// and the new chain's app hash: every node importing the export agrees on
	// it, and exporting the imported state gives the same document again.
	t.Run("app hash round-trips", func(t *testing.T) {
		again, err := NewApp(store.NewMemTree(), WithInvariants()).InitChain(context.Background(), &abci.InitChainRequest{
			ChainId: chainID, AppStateBytes: bz, InitialHeight: height + 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.AppHash, init.AppHash) {
			t.Fatalf("two imports of one export disagree: %X vs %X", again.AppHash, init.AppHash)
		}
		id2, doc2 := mustExport(t, tree)
		bz2, err := json.Marshal(doc2)
		if err != nil {
			t.Fatal(err)
		}
		if id2 != chainID || !bytes.Equal(bz2, bz) {
			t.Fatalf("export of the imported state differs:\n%s\nwant\n%s", bz2, bz)
		}
		third, err := NewApp(store.NewMemTree(), WithInvariants()).InitChain(context.Background(), &abci.InitChainRequest{
			ChainId: id2, AppStateBytes: bz2, InitialHeight: height + 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(third.AppHash, init.AppHash) {
			t.Fatalf("re-export gives app hash %X, want %X", third.AppHash, init.AppHash)
		}
	})

	// The new chain goes on at height+1 with the nonces carried over.
	next := signTx(t, testKey("alice"), wantNonces["alice"], send("bob", types.OGPU(1)))
	replays := []struct {
		name string
		tx   []byte
	}{
		{"last tx of the old chain", lastAlice},
		{"nonce 0 of bob", signTx(t, testKey("bob"), 0, send("alice", types.OGPU(1)))},
		{"dave's spent nonce", signTx(t, testKey("dave"), 0, send("alice", types.OGPU(1)))},
	}
	for _, r := range replays {
		res, err := app.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: r.tx})
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != types.ErrNonceUsed.Code {
			t.Errorf("CheckTx of %s: code %d (%s), want %d", r.name, res.Code, res.Log, types.ErrNonceUsed.Code)
		}
	}
	if res, err := app.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: next}); err != nil || res.Code != 0 {
		t.Fatalf("CheckTx of alice's next nonce on the new chain: %v %d %s", err, res.Code, res.Log)
	}
	txs := [][]byte{next, next}
	for _, r := range replays {
		txs = append(txs, r.tx)
	}
	res := runBlock(t, app, height+1, txs...)
	if res[0].Code != 0 {
		t.Fatalf("next transfer on the new chain: code %d %s", res[0].Code, res[0].Log)
	}
	for i, r := range res[1:] {
		if r.Code != types.ErrNonceUsed.Code {
			t.Errorf("replay %d in the block: code %d (%s), want %d", i, r.Code, r.Log, types.ErrNonceUsed.Code)
		}
	}
	if v := tree.Version(); v != height+1 {
		t.Fatalf("new chain saved version %d, want %d", v, height+1)
	}

	// The old chain running the same block reaches the same state.
	old.block(txs...)
	oldSnap, _ := old.tree.Snapshot(0)
	newSnap, _ := tree.Snapshot(0)
	if got, want := dumpState(newSnap), dumpState(oldSnap); got != want {
		t.Fatalf("after block %d the chains differ:\nnew:\n%s\nold:\n%s", height+1, got, want)
	}
	// And a second export from each is the same document.
	id1, d1 := mustExport(t, oldSnap)
	id2, d2 := mustExport(t, newSnap)
	b1, _ := json.Marshal(d1)
	b2, _ := json.Marshal(d2)
	if id1 != id2 || !bytes.Equal(b1, b2) {
		t.Fatalf("exports differ:\n%s %s\n%s %s", id1, b1, id2, b2)
	}
}

// The /export query answers ExportGenesis of the latest version.
func TestExportQueryMatchesExportGenesis(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	h.block(h.tx("alice", send("bob", types.OGPU(10))))
	res, err := h.app.Query(context.Background(), &abci.QueryRequest{Path: QueryExport})
	if err != nil || res.Code != 0 {
		t.Fatalf("query %s: %v %d %s", QueryExport, err, res.Code, res.Log)
	}
	var view ExportView
	if err := json.Unmarshal(res.Value, &view); err != nil {
		t.Fatal(err)
	}
	snap, _ := h.tree.Snapshot(0)
	id, doc := mustExport(t, snap)
	want, _ := json.Marshal(doc)
	got, _ := json.Marshal(view.AppState)
	if view.ChainID != id || view.Height != h.height || !bytes.Equal(got, want) {
		t.Fatalf("/export = %s at %d: %s\nwant %s at %d: %s", view.ChainID, view.Height, got, id, h.height, want)
	}
}

func mustExport(t testing.TB, r store.KV) (string, *genesis.Doc) {
	t.Helper()
	id, doc, err := ExportGenesis(r)
	if err != nil {
		t.Fatalf("ExportGenesis: %v", err)
	}
	return id, doc
}
