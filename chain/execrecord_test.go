package chain

import (
	"context"
	"crypto/sha256"
	"math/rand"
	"reflect"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Execution records change no answer. Two apps get the same ABCI calls:
// random transfers among five accounts (so that transactions read what
// earlier ones wrote, and some fail for want of funds or send a nonce
// twice), each checked (with rechecks after every block, as CometBFT
// does), proposed in an order other than the mempool's and finalized.
// One app keeps execution records, the other has none. Every CheckTx
// answer, every proposal, every transaction result and every app hash
// must be equal, and the records must have answered most of the runs.
func TestExecRecordsMatchRunning(t *testing.T) {
	names := []string{"ann", "ben", "cid", "dot", "eve"}
	doc := genesis.Default()
	doc.Validators = []genesis.Validator{{Name: "val", Operator: addrOf("val"), PubKey: testValKey(1), Stake: types.OGPU(10_000)}}
	for _, n := range names {
		doc.Accounts = append(doc.Accounts, genesis.Account{Address: addrOf(n), Balance: types.OGPU(30)})
	}
	doc.Sort()
	with := newHarness(t, store.NewMemTree(), doc)
	without := newHarness(t, store.NewMemTree(), doc)
	without.app.execs = nil
	ctx := context.Background()
	rng := rand.New(rand.NewSource(7))
	nonces := map[string]uint64{}
	var mempool [][]byte
	check := func(tx []byte, typ abci.CheckTxType) bool {
		a, _ := with.app.CheckTx(ctx, &abci.CheckTxRequest{Tx: tx, Type: typ})
		b, _ := without.app.CheckTx(ctx, &abci.CheckTxRequest{Tx: tx, Type: typ})
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("CheckTx differs: with records %+v, without %+v", a, b)
		}
		return a.Code == 0
	}
	hits := 0
	for height := int64(1); height <= 40; height++ {
		for range 12 {
			from, to := names[rng.Intn(len(names))], names[rng.Intn(len(names))]
			n := nonces[from]
			if rng.Intn(8) == 0 && n > 0 {
				n-- // a used or pending nonce
			}
			tx := signTx(t, testKey(from), n, send(to, types.OGPU(uint64(rng.Intn(12)))))
			with.app.PreverifyTx(tx)
			if check(tx, abci.CHECK_TX_TYPE_CHECK) {
				nonces[from] = n + 1
				mempool = append(mempool, tx)
			}
		}
		// The proposer gets the mempool reversed (each sender's later
		// nonces then come first and are refused) plus a stale tx.
		reaped := make([][]byte, 0, len(mempool))
		for i := len(mempool) - 1; i >= 0; i-- {
			reaped = append(reaped, mempool[i])
		}
		if height > 2 {
			reaped = append(reaped, signTx(t, testKey("ann"), 0, send("ben", types.OGPU(1))))
		}
		if height%3 == 0 {
			reaped = mempool // in order, this time
		}
		req := &abci.PrepareProposalRequest{Txs: reaped, MaxTxBytes: 1 << 20, Height: height}
		pa, _ := with.app.PrepareProposal(ctx, req)
		pb, _ := without.app.PrepareProposal(ctx, req)
		if !reflect.DeepEqual(pa.Txs, pb.Txs) {
			t.Fatalf("height %d: the proposals differ", height)
		}
		before := with.app.execs.len()
		ra := with.block(pa.Txs...)
		rb := without.block(pb.Txs...)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("height %d: the results differ:\n%v\n%v", height, ra, rb)
		}
		if with.hashes[len(with.hashes)-1] != without.hashes[len(without.hashes)-1] {
			t.Fatalf("height %d: app hash %s with records, %s without", height, with.hashes[len(with.hashes)-1], without.hashes[len(without.hashes)-1])
		}
		hits += len(pa.Txs) - (with.app.execs.len() - before)
		// Recheck what is left, as CometBFT does after a block.
		included := map[string]bool{}
		for _, tx := range pa.Txs {
			included[string(tx)] = true
		}
		left := mempool[:0]
		for _, tx := range mempool {
			if !included[string(tx)] && check(tx, abci.CHECK_TX_TYPE_RECHECK) {
				left = append(left, tx)
			}
		}
		mempool = left
		for _, n := range names { // what the chain holds now
			nonces[n] = getNonce(with.tree, addrOf(n))
		}
	}
	if hits == 0 {
		t.Fatal("no run was answered from a record")
	}
}

// A record answers only for the values it read: carol's transfer to bob
// is checked, and recorded, over the committed state; the block that
// includes it first pays carol 5 oGPU, so her balance is not the one the
// record read, and the transfer runs again: carol ends with
// 1000 + 5 - 500 - the fee, as on an app that keeps no records. (Applying
// the recorded writes would have put back 1000 - 500 - the fee, and lost
// alice's 5 oGPU: the supply invariant, checked every block here, fails.)
func TestExecRecordNotUsedOnOtherValues(t *testing.T) {
	var balances []string
	for _, records := range []bool{true, false} {
		h := newHarness(t, store.NewMemTree(), testGenesis())
		if !records {
			h.app.execs = nil
		}
		toBob := signTx(t, testKey("carol"), 0, send("bob", types.OGPU(500)))
		h.app.PreverifyTx(toBob)
		if r := h.checkTx(toBob); r.Code != 0 {
			t.Fatal(r.Log)
		}
		if records && !recorded(h.app, toBob) {
			t.Fatal("the check made no record")
		}
		toCarol := signTx(t, testKey("alice"), 0, send("carol", types.OGPU(5)))
		for i, r := range h.block(toCarol, toBob) {
			if r.Code != 0 {
				t.Fatalf("tx %d: %s", i, r.Log)
			}
		}
		balances = append(balances, h.balance("carol").Dec())
	}
	if want := types.OGPU(504).Dec(); balances[0] != want || balances[1] != want {
		t.Fatalf("carol holds %s with records, %s without; want %s", balances[0], balances[1], want)
	}
}

// Only successes are recorded: in a block a transfer carol cannot pay
// fails but spends her fee and nonce, while CheckTx refuses it whole. A
// proposal that runs it first must leave no record for CheckTx to replay:
// the check refuses it and carol's nonce 0 is still free in the mempool.
func TestExecRecordKeepsNoFailure(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	tooMuch := signTx(t, testKey("carol"), 0, send("bob", types.OGPU(5000)))
	h.app.PreverifyTx(tooMuch)
	if _, err := h.app.PrepareProposal(context.Background(), &abci.PrepareProposalRequest{Txs: [][]byte{tooMuch}, MaxTxBytes: 1 << 20, Height: 1}); err != nil {
		t.Fatal(err)
	}
	if recorded(h.app, tooMuch) {
		t.Fatal("a failed run was recorded")
	}
	if r := h.checkTx(tooMuch); r.Code == 0 {
		t.Fatal("CheckTx accepted a transfer carol cannot pay")
	}
	if r := h.checkTx(signTx(t, testKey("carol"), 0, send("bob", types.OGPU(1)))); r.Code != 0 {
		t.Fatalf("carol's nonce 0 after the refusal: %s", r.Log)
	}
}

func recorded(a *App, tx []byte) bool {
	_, ok := a.execs.get(sha256.Sum256(tx))
	return ok
}

// A transfer's execution record holds in a proposal that orders the
// mempool's transactions differently (each pays a different recipient).
// Every transaction credits the fee
// pool; were that credit inside the recorded run, each record would have
// read the pool's value at its place in the mempool, and a proposal in
// another order (CometBFT's mempool adds checked transactions in the order
// their callers return, not the order CheckTx ran them; proposalOrder
// sorts by fee) would run every transfer again (issue 17: the proposer
// spent 20 µs a transfer doing so). The pool is credited after the
// recorded run (escrow.Keeper.ChargeFee), and the block still pays it
// every fee.
func TestExecRecordsHoldInAnotherOrder(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	a0 := signTx(t, testKey("alice"), 0, send("carol", types.OGPU(1)))
	b0 := signTx(t, testKey("bob"), 0, send("frank", types.OGPU(2)))
	a1 := signTx(t, testKey("alice"), 1, send("dave", types.OGPU(3)))
	b1 := signTx(t, testKey("bob"), 1, send("erin", types.OGPU(4)))
	recs := map[string]*execRecord{}
	for _, tx := range [][]byte{a0, b0, a1, b1} {
		h.app.PreverifyTx(tx)
		if r := h.checkTx(tx); r.Code != 0 {
			t.Fatal(r.Log)
		}
		rec, ok := h.app.execs.get(sha256.Sum256(tx))
		if !ok {
			t.Fatal("CheckTx left no record of a transfer")
		}
		recs[string(tx)] = rec
	}
	pool := func() *uint256.Int {
		snap, err := h.tree.Snapshot(0)
		if err != nil {
			t.Fatal(err)
		}
		return escrow.NewKeeper(snap).FeePool()
	}
	before := new(uint256.Int).Add(pool(), h.balance("val"))
	reaped := [][]byte{b0, b1, a0, a1}
	pp, err := h.app.PrepareProposal(context.Background(), &abci.PrepareProposalRequest{Txs: reaped, MaxTxBytes: 1 << 20, Height: h.height + 1})
	if err != nil || len(pp.Txs) != 4 {
		t.Fatalf("proposal: %d txs, %v", len(pp.Txs), err)
	}
	for _, tx := range reaped {
		if rec, _ := h.app.execs.get(sha256.Sum256(tx)); rec != recs[string(tx)] {
			t.Fatal("the proposal ran a transfer again instead of replaying its record")
		}
	}
	fees := new(uint256.Int)
	for i, r := range h.block(pp.Txs...) {
		if r.Code != 0 {
			t.Fatalf("tx %d: %s", i, r.Log)
		}
		tx, err := types.DecodeTx(pp.Txs[i])
		if err != nil {
			t.Fatal(err)
		}
		fees.Add(fees, tx.Body.Fee)
	}
	// The block's end paid the pool out to the validator (the remainder
	// stays): the two hold what they held plus every fee.
	if got, want := new(uint256.Int).Add(pool(), h.balance("val")), new(uint256.Int).Add(before, fees); !got.Eq(want) {
		t.Fatalf("fee pool and validator hold %s after the block, want %s", got, want)
	}
	if got := h.balance("carol"); !got.Eq(types.OGPU(1001)) {
		t.Fatalf("carol has %s, want 1001 ogpu", types.FormatAmount(got))
	}
}
