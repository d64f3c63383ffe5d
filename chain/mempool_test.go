package chain

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// feeTx signs msgs from key with nonce, paying mult times the required fee
// (computed on the largest encoding, as node.RequiredFee does).
func feeTx(t testing.TB, params genesis.Params, key *ecdsa.PrivateKey, nonce, mult uint64, msgs ...types.RawMsg) []byte {
	t.Helper()
	tx := &types.Tx{Body: types.TxBody{ChainID: testChainID, Nonce: nonce, Msgs: msgs}}
	probe := *tx
	probe.Body.Fee = new(uint256.Int).SetAllOne()
	probe.Sig = make([]byte, 65)
	bz, err := probe.Encode()
	if err != nil {
		t.Fatal(err)
	}
	tx.Body.Fee = new(uint256.Int).Mul(params.RequiredFee(len(bz), MsgWorks(msgs)), uint256.NewInt(mult))
	if err := tx.Sign(key); err != nil {
		t.Fatal(err)
	}
	if bz, err = tx.Encode(); err != nil {
		t.Fatal(err)
	}
	return bz
}

// s1Chain is a harness with a pool job awarded to bob and carol, and the
// block-space policies on.
func s1Chain(t *testing.T, limits MempoolLimits, blockGas uint64) (*harness, uint64) {
	t.Helper()
	doc := testGenesis()
	for _, n := range []string{"dave", "spam"} {
		if err := doc.AddAccount(addrOf(n), types.OGPU(1000)); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, store.NewMemTree(), doc)
	h.app.pool, h.app.maxBlockGas = limits, blockGas
	for _, p := range []string{"bob", "carol"} {
		info := market.ProviderInfo{PeerID: "peer-" + p}
		h.block(h.tx(p, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(200)}).Raw()))
	}
	post := &market.MsgPostJob{Kind: market.KindInference, Mode: market.ModePool, Model: sha256.Sum256([]byte("model")), ModelSize: 1,
		Stages: 1, Redundancy: 2, MaxPrice: types.OGPU(1), Req: market.Requirements{MinStake: new(uint256.Int)},
		Input: sha256.Sum256([]byte("input")), Windows: market.Windows{Bid: 2, Execute: 10, Verify: 10}, Seal: sha256.Sum256([]byte("seal"))}
	if res := h.block(h.tx("alice", post.Raw())); res[0].Code != 0 {
		t.Fatal(res[0].Log)
	}
	job := uint64(1)
	h.block(h.tx("bob", (&market.MsgClaimTask{Job: job}).Raw()), h.tx("carol", (&market.MsgClaimTask{Job: job}).Raw()))
	for range 3 {
		h.block()
	}
	j, ok := market.GetJob(h.tree, job)
	if !ok || j.State != market.JobRunning {
		t.Fatalf("job %d not awarded: %+v", job, j)
	}
	return h, job
}

func commitTx(t testing.TB, h *harness, job uint64) []byte {
	c := verifier.ResultCommitment(sha256.Sum256([]byte("result")), sha256.Sum256([]byte("salt")), addrOf("bob"))
	return feeTx(t, getParams(h.tree), testKey("bob"), h.nonces["bob"], 1, (&verifier.MsgCommitResult{Job: job, Commitment: c}).Raw())
}

// TestS1AdmissionReservesRoomForDeadlines: minimum-fee spam fills only its
// share of the mempool (3/8 of 40 txs: 15); then a transfer paying twice
// the minimum still gets in (up to 1/2), and a result commitment at the
// minimum fee always does. After a block, the recheck rebuilds the counts.
func TestS1AdmissionReservesRoomForDeadlines(t *testing.T) {
	h, job := s1Chain(t, MempoolLimits{Txs: 40, Bytes: 1 << 20}, 0)
	params := getParams(h.tree)
	var spam [][]byte
	for n := uint64(0); ; n++ {
		bz := feeTx(t, params, testKey("spam"), n, 1, send("alice", uint256.NewInt(1)))
		res := h.checkTx(bz)
		if res.Code != 0 {
			if res.Code != types.ErrFeeTooLow.Code || !strings.Contains(res.Log, "pay at least 2x") {
				t.Fatalf("spam tx %d refused with code %d: %s", n, res.Code, res.Log)
			}
			t.Logf("spam tx %d refused: %s", n, res.Log)
			break
		}
		spam = append(spam, bz)
	}
	if len(spam) != 15 {
		t.Fatalf("the mempool took %d min-fee txs, want 15 (3/8 of 40)", len(spam))
	}
	if res := h.checkTx(feeTx(t, params, testKey("dave"), 0, 2, send("alice", uint256.NewInt(1)))); res.Code != 0 {
		t.Fatalf("a transfer paying 2x was refused: %s", res.Log)
	}
	commit := commitTx(t, h, job)
	if res := h.checkTx(commit); res.Code != 0 {
		t.Fatalf("the result commitment was refused: %s", res.Log)
	}

	// A block takes 5 spam txs; the recheck re-admits the other 10.
	h.block(spam[:5]...)
	for _, bz := range spam[5:] {
		res, err := h.app.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: bz, Type: abci.CHECK_TX_TYPE_RECHECK})
		if err != nil || res.Code != 0 {
			t.Fatalf("recheck: %v %v", err, res)
		}
	}
	for n := uint64(len(spam)); ; n++ {
		if res := h.checkTx(feeTx(t, params, testKey("spam"), n, 1, send("alice", uint256.NewInt(1)))); res.Code != 0 {
			if got := int(n) - 5; got != 15 {
				t.Fatalf("after the block the mempool holds %d min-fee spam txs, want 15", got)
			}
			break
		}
	}
}

// TestS1ProposalPutsDeadlinesFirst: the proposer takes the result
// commitment first, then the transfer paying 2x, then minimum-fee spam in
// nonce order, up to the block gas limit; ProcessProposal accepts that and
// refuses a proposal over the limit.
func TestS1ProposalPutsDeadlinesFirst(t *testing.T) {
	h, job := s1Chain(t, MempoolLimits{}, 0)
	params := getParams(h.tree)
	var reaped [][]byte
	for n := range uint64(10) {
		reaped = append(reaped, feeTx(t, params, testKey("spam"), n, 1, send("alice", uint256.NewInt(1))))
	}
	paid := feeTx(t, params, testKey("dave"), 0, 2, send("alice", uint256.NewInt(1)))
	commit := commitTx(t, h, job)
	reaped = append(reaped, paid, commit)
	var sendGas, total uint64
	for _, bz := range reaped {
		c, ok := classify(params, bz)
		if !ok {
			t.Fatal("classify")
		}
		total += c.gas
		sendGas = c.gas
	}
	h.app.maxBlockGas = 6 * sendGas // commit + paid + about 4 spam
	res, err := h.app.PrepareProposal(context.Background(), &abci.PrepareProposalRequest{Txs: reaped, MaxTxBytes: 1 << 20, Height: h.height + 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Txs) < 4 || string(res.Txs[0]) != string(commit) || string(res.Txs[1]) != string(paid) {
		t.Fatalf("proposal of %d txs does not start with the commitment and the 2x transfer", len(res.Txs))
	}
	for i, bz := range res.Txs[2:] {
		if string(bz) != string(reaped[i]) {
			t.Fatalf("proposal tx %d is not spam nonce %d", i+2, i)
		}
	}
	if len(res.Txs) == len(reaped) {
		t.Fatalf("the gas limit %d took all %d txs (%d gas)", h.app.maxBlockGas, len(reaped), total)
	}
	pp := func(txs [][]byte) abci.ProcessProposalStatus {
		r, err := h.app.ProcessProposal(context.Background(), &abci.ProcessProposalRequest{Txs: txs, Height: h.height + 1})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	if s := pp(res.Txs); s != abci.PROCESS_PROPOSAL_STATUS_ACCEPT {
		t.Fatalf("ProcessProposal refused the prepared proposal: %v", s)
	}
	if s := pp(reaped); s != abci.PROCESS_PROPOSAL_STATUS_REJECT {
		t.Fatalf("ProcessProposal accepted %d gas over a %d limit: %v", total, h.app.maxBlockGas, s)
	}
	results := h.block(res.Txs...)
	for i, r := range results {
		if r.Code != 0 {
			t.Fatalf("tx %d of the proposal failed: %s", i, r.Log)
		}
	}
}

// TestProposalTakesASendersNoncesInOrder (soak finding 14): the mempool
// held one sender's transactions out of nonce order (CometBFT adds checked
// transactions in the order their callers return). The proposal runs them
// in nonce order, so all of them land in one block; in mempool order the
// first was refused as ahead and the rest of the queue waited.
func TestProposalTakesASendersNoncesInOrder(t *testing.T) {
	h, _ := s1Chain(t, MempoolLimits{}, 0)
	params := getParams(h.tree)
	var reaped [][]byte
	for _, n := range []uint64{1, 0, 3, 2, 4} {
		reaped = append(reaped, feeTx(t, params, testKey("spam"), n, 1, send("alice", uint256.NewInt(1))))
	}
	res, err := h.app.PrepareProposal(context.Background(), &abci.PrepareProposalRequest{Txs: reaped, MaxTxBytes: 1 << 20, Height: h.height + 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Txs) != len(reaped) {
		t.Fatalf("the proposal took %d of the sender's %d transactions", len(res.Txs), len(reaped))
	}
	for i, r := range h.block(res.Txs...) {
		if r.Code != 0 {
			t.Fatalf("tx %d of the proposal failed: %s", i, r.Log)
		}
	}
}

// TestProposalBudget: past its time budget the proposer stops taking
// transactions. The result commitment (a deadline transaction, first in
// the order) is in; the spam after the budget is left for the next block,
// and the proposal it makes runs as a block. The clock is the test's: one
// millisecond per reading.
func TestProposalBudget(t *testing.T) {
	h, job := s1Chain(t, MempoolLimits{}, 0)
	params := getParams(h.tree)
	commit := commitTx(t, h, job)
	reaped := [][]byte{commit}
	for n := range uint64(200) {
		reaped = append(reaped, feeTx(t, params, testKey("spam"), n, 1, send("alice", uint256.NewInt(1))))
	}
	prepare := func() [][]byte {
		res, err := h.app.PrepareProposal(context.Background(), &abci.PrepareProposalRequest{Txs: reaped, MaxTxBytes: 1 << 22, Height: h.height + 1})
		if err != nil {
			t.Fatal(err)
		}
		return res.Txs
	}
	if got := len(prepare()); got != len(reaped) {
		t.Fatalf("without a budget the proposal holds %d of %d txs", got, len(reaped))
	}
	var clock time.Time
	WithProposalBudget(5*time.Millisecond, func() time.Time { clock = clock.Add(time.Millisecond); return clock })(h.app)
	txs := prepare()
	// Readings at the start and every 16 txs: past 5 ms at the 6th, tx 80.
	if len(txs) != 80 || string(txs[0]) != string(commit) {
		t.Fatalf("with the budget the proposal holds %d txs (want 80, the commitment first)", len(txs))
	}
	for i, r := range h.block(txs...) {
		if r.Code != 0 {
			t.Fatalf("tx %d of the proposal failed: %s", i, r.Log)
		}
	}
}
