package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// sessionClient loads the model for the client (its tokenizer) and
// returns a session client config on the client's account and host.
func (n *testNet) sessionConfig() SessionClientConfig {
	n.t.Helper()
	m, err := llm.Load(n.modelPath, n.lo)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(m.Close)
	h, _ := n.host("client", n.keys["client"])
	return SessionClientConfig{Chain: n.c, Key: n.keys["client"], Host: h, Model: m, LedgerDir: filepath.Join(n.home, "client", "ledger")}
}

// sessionOrder is a session of two lanes of budget each.
func (n *testNet) sessionOrder(budget *uint256.Int) SessionOrder {
	st, err := os.Stat(n.modelPath)
	if err != nil {
		n.t.Fatal(err)
	}
	return SessionOrder{Model: n.model, ModelSize: uint64(st.Size()), Lanes: 2, MaxPrice: milli(10), InputPriceBps: 2500,
		Budget: budget, Blocks: 150, Grace: 5, Req: market.Requirements{MinStake: types.OGPU(100)}, Windows: market.Windows{Bid: 4, Reveal: 3}}
}

func milli(x uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(x), uint256.NewInt(1000)) }

// blockTxs returns the number of transactions in block h and the events of
// the block's transactions and of FinalizeBlock.
func (n *testNet) blockTxs(h int64) (int, []abci.Event) {
	n.t.Helper()
	b, err := n.c.RPC.Block(n.ctx, &h)
	if err != nil {
		n.t.Fatal(err)
	}
	r, err := n.c.RPC.BlockResults(n.ctx, &h)
	if err != nil {
		n.t.Fatal(err)
	}
	evs := append([]abci.Event(nil), r.FinalizeBlockEvents...)
	for _, tr := range r.TxResults {
		evs = append(evs, tr.Events...)
	}
	return len(b.Block.Txs), evs
}

// balanceAt is addr's balance after block h.
func (n *testNet) balanceAt(a types.Address, h int64) *uint256.Int {
	n.t.Helper()
	var v chain.AccountView
	res, err := n.c.Query(n.ctx, chain.QueryAccount+a.Hex(), nil, h, false)
	if err == nil {
		err = json.Unmarshal(res.Value, &v)
	}
	if err != nil {
		n.t.Fatalf("balance of %s at %d: %v", a, h, err)
	}
	return v.Balance
}

// TestSessionServesAndSettles: a session bought by auction (three
// providers bid per output token; the two cheapest win at the third's
// price) serves 20 requests to both lanes with no transaction between the
// open and the first redemption; both lanes agree on every output; each
// request costs exactly what the client counted; then a provider redeems,
// two more requests run, the client closes, the providers redeem the rest
// in the grace on their own, and the end-block refunds the client. Every
// balance is checked to the base unit: each provider was paid exactly what
// the client's ledger signed, the fee pool got the fee share of each
// redemption, the client got back the rest, and the supply is whole.
func TestSessionServesAndSettles(t *testing.T) {
	n := newTestNet(t)
	p1 := n.provider("prov1", 1, false)
	p2 := n.provider("prov2", 2, false)
	n.provider("prov3", 3, false)
	cfg := n.sessionConfig()
	client := ethcrypto.PubkeyToAddress(n.keys["client"].PublicKey)
	sc, err := OpenSession(n.ctx, cfg, n.sessionOrder(types.OGPU(10)), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	v := sc.Session()
	hOpen := int64(v.Expiry - 150)
	if len(v.Lanes) != 2 || !v.PriceOut.Eq(milli(3)) || !v.PriceIn.Eq(new(uint256.Int).Div(milli(3), uint256.NewInt(4))) {
		t.Fatalf("session %+v: want prov1 and prov2 at prov3's 0.003ogpu, input a quarter of it", v.Session)
	}
	provs := map[types.Address]*testProvider{p1.agent.Address(): p1, p2.agent.Address(): p2}
	for _, l := range v.Lanes {
		if provs[l.Provider] == nil {
			t.Fatalf("lane of %s: want prov1 and prov2", l.Provider)
		}
	}
	words := []string{"dog", "cat", "bird", "tree", "boy"}
	complete := func(i int) *Completion {
		t.Helper()
		var streamed strings.Builder
		res, err := sc.Complete(n.ctx, fmt.Sprintf("Once upon a time there was a %s", words[i%len(words)]), 24, func(s string) { streamed.WriteString(s) })
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		want := new(uint256.Int)
		for _, l := range res.Lanes {
			if l.Err != nil || l.Receipt == nil {
				t.Fatalf("request %d lane %s: %v", i, l.Provider, l.Err)
			}
			c := charge(res.PromptTokens, l.Receipt.NOut, v.PriceIn, v.PriceOut)
			if !l.Charged.Eq(c) {
				t.Fatalf("request %d lane %s charged %s, want %s", i, l.Provider, l.Charged, c)
			}
			want.Add(want, c)
		}
		if !res.Verified || res.Mismatch != nil || res.Text == "" || streamed.String() != res.Text || !res.Cost.Eq(want) {
			t.Fatalf("request %d: verified %v mismatch %v text %q streamed %q cost %s want %s", i, res.Verified, res.Mismatch, res.Text, streamed.String(), res.Cost, want)
		}
		return res
	}
	for i := range 20 {
		complete(i)
	}
	// Nothing reached the chain since the open.
	now, err := n.c.RPC.Status(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for h := hOpen + 1; h <= now.SyncInfo.LatestBlockHeight; h++ {
		if c, _ := n.blockTxs(h); c != 0 {
			t.Fatalf("block %d holds %d transactions between the open (%d) and the first redemption", h, c, hOpen)
		}
	}
	if _, err := p1.agent.RedeemSession(n.ctx, sc.ID()); err != nil {
		t.Fatal(err)
	}
	hFirst := int64(0)
	for h := hOpen + 1; hFirst == 0; h++ {
		if err := n.c.WaitHeight(n.ctx, h); err != nil {
			t.Fatal(err)
		}
		c, evs := n.blockTxs(h)
		switch r := node.EventsOf[session.EventRedeemed](evs); {
		case len(r) == 1 && c == 1 && r[0].Provider == p1.agent.Address():
			hFirst = h
		case c != 0:
			t.Fatalf("block %d: %d transactions, redemptions %+v: want none before prov1's redemption", h, c, r)
		}
	}
	t.Logf("first redemption at height %d, %d blocks after the open with no transaction between", hFirst, hFirst-hOpen)
	complete(20)
	complete(21)
	ledger := sc.Ledger()
	if err := sc.Close(n.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Complete(n.ctx, "Once upon a time", 8, nil); err == nil || !strings.Contains(err.Error(), ErrSessionEnded.Error()) {
		t.Fatalf("a request after the close: %v, want %v", err, ErrSessionEnded)
	}
	// The providers redeem in the grace; the end-block refunds.
	var end *chain.SessionView
	for h := int64(v.Height); end == nil || end.Phase != "settled"; h++ {
		if err := n.c.WaitHeight(n.ctx, h); err != nil {
			t.Fatal(err)
		}
		if end, err = n.c.Session(n.ctx, sc.ID()); err != nil {
			t.Fatal(err)
		}
	}
	hEnd := int64(end.Due)
	// Walk every block since the open: fees, redemptions, fee payouts.
	fees := map[types.Address]*uint256.Int{}
	allFees, feeShare, distributed := new(uint256.Int), new(uint256.Int), new(uint256.Int)
	var refunded *uint256.Int
	for h := hOpen + 1; h <= hEnd; h++ {
		_, evs := n.blockTxs(h)
		for _, ev := range evs {
			switch ev.Type {
			case chain.EventTypeTx:
				e, err := chain.ParseEventTx(ev)
				if err != nil {
					t.Fatal(err)
				}
				if fees[e.From] == nil {
					fees[e.From] = new(uint256.Int)
				}
				fees[e.From].Add(fees[e.From], e.Fee)
				allFees.Add(allFees, e.Fee)
			}
		}
		for _, e := range node.EventsOf[session.EventRedeemed](evs) {
			share := new(uint256.Int).Mul(e.Paid, uint256.NewInt(end.FeeBps))
			feeShare.Add(feeShare, share.Div(share, uint256.NewInt(10_000)))
		}
		for _, e := range node.EventsOf[escrow.EventFeesDistributed](evs) {
			distributed.Add(distributed, e.Amount)
		}
		for _, e := range node.EventsOf[session.EventSettled](evs) {
			refunded = e.Refunded
		}
	}
	zero := new(uint256.Int)
	or0 := func(x *uint256.Int) *uint256.Int {
		if x == nil {
			return zero
		}
		return x
	}
	paid := new(uint256.Int)
	for _, l := range end.Lanes {
		if !l.Paid.Eq(ledger[l.Provider]) {
			t.Errorf("lane %s paid %s, the client's ledger signed %s", l.Provider, l.Paid, ledger[l.Provider])
		}
		paid.Add(paid, l.Paid)
		got := new(uint256.Int).Sub(n.balanceAt(l.Provider, hEnd), n.balanceAt(l.Provider, hOpen))
		want := new(uint256.Int).Sub(l.Paid, or0(fees[l.Provider]))
		if !got.Eq(want) {
			t.Errorf("provider %s gained %s, want %s paid − %s fees", l.Provider, got, l.Paid, or0(fees[l.Provider]))
		}
	}
	if !end.FeePaid.Eq(feeShare) {
		t.Errorf("the session paid %s to the fee pool, the redemptions' shares are %s", end.FeePaid, feeShare)
	}
	// The client locked 2 × budget and the fee reserve at the open.
	var open chain.SessionView
	res, err := n.c.Query(n.ctx, chain.QuerySession+fmt.Sprint(sc.ID()), nil, hOpen, false)
	if err == nil {
		err = json.Unmarshal(res.Value, &open)
	}
	if err != nil {
		t.Fatal(err)
	}
	wantRefund := new(uint256.Int).Add(new(uint256.Int).Mul(types.OGPU(10), uint256.NewInt(2)), open.Fee)
	wantRefund.Sub(wantRefund, paid)
	wantRefund.Sub(wantRefund, feeShare)
	if refunded == nil || !refunded.Eq(wantRefund) {
		t.Errorf("refunded %v, want 2 × 10ogpu + %s reserve − %s paid − %s fees = %s", refunded, open.Fee, paid, feeShare, wantRefund)
	}
	gotClient := new(uint256.Int).Add(n.balanceAt(client, hEnd), or0(fees[client]))
	gotClient.Sub(gotClient, n.balanceAt(client, hOpen))
	if !gotClient.Eq(wantRefund) {
		t.Errorf("the client got back %s (after its fees), want the refund %s", gotClient, wantRefund)
	}
	// The fee pool: what came in (tx fees, fee shares) went out to the
	// validators or is still there.
	poolIn := new(uint256.Int).Add(allFees, feeShare)
	poolDelta := new(uint256.Int).Add(distributed, n.feePoolAt(hEnd))
	poolDelta.Sub(poolDelta, n.feePoolAt(hOpen))
	if !poolDelta.Eq(poolIn) {
		t.Errorf("the fee pool took in %s (fees %s + shares %s), paid out and kept %s", poolIn, allFees, feeShare, poolDelta)
	}
	t.Logf("paid %s to the providers, %s fee share, %s refunded; client fees %s", paid, feeShare, wantRefund, or0(fees[client]))
	n.supplyIsCap()
}

func (n *testNet) feePoolAt(h int64) *uint256.Int {
	n.t.Helper()
	var v chain.SupplyView
	res, err := n.c.Query(n.ctx, chain.QuerySupply, nil, h, false)
	if err == nil {
		err = json.Unmarshal(res.Value, &v)
	}
	if err != nil {
		n.t.Fatal(err)
	}
	return v.FeePool
}
