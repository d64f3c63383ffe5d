package agent

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
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

// blockTxs returns the number of transactions in block h (the injected
// vote extensions aside: chain.IsInjected) and the events of the block's
// transactions and of FinalizeBlock.
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
	txs := 0
	for _, tx := range b.Block.Txs {
		if !chain.IsInjected(tx) {
			txs++
		}
	}
	return txs, evs
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
	now, err := n.c.CommittedHeight(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for h := hOpen + 1; h <= now; h++ {
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
	// The client locked 2 × budget and the fee reserve at the open; the
	// providers were paid the reservation out of the budgets then (S21):
	// the lanes' budgets are what is left.
	var open chain.SessionView
	res, err := n.c.Query(n.ctx, chain.QuerySession+fmt.Sprint(sc.ID()), nil, hOpen, false)
	if err == nil {
		err = json.Unmarshal(res.Value, &open)
	}
	if err != nil {
		t.Fatal(err)
	}
	wantRefund := new(uint256.Int).Add(new(uint256.Int).Add(open.Lanes[0].Budget, open.Lanes[1].Budget), open.Fee)
	wantRefund.Sub(wantRefund, paid)
	wantRefund.Sub(wantRefund, feeShare)
	if refunded == nil || !refunded.Eq(wantRefund) {
		t.Errorf("refunded %v, want 2 lane budgets + %s reserve − %s paid − %s fees = %s", refunded, open.Fee, paid, feeShare, wantRefund)
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

// rawLane is a hand-driven session stream: the attacks speak the wire
// protocol themselves.
type rawLane struct {
	t       *testing.T
	s       network.Stream
	c       *lineConn
	first   providerMsg // the answer to the hello
	chainID string
	id      uint64
	prov    types.Address
	model   *llm.Model
	pin     *uint256.Int
	pout    *uint256.Int
}

// raw opens a session stream from host h to provider tp.
func (n *testNet) raw(h *p2p.Host, tp *testProvider, v *chain.SessionView, m *llm.Model) *rawLane {
	n.t.Helper()
	if err := h.ConnectPeer(n.ctx, tp.host.ID(), tp.host.Addrs()); err != nil {
		n.t.Fatal(err)
	}
	s, err := h.Host().NewStream(n.ctx, tp.host.ID(), SessionProtocol)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = s.Reset() })
	id, err := n.c.ChainID(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	r := &rawLane{t: n.t, s: s, c: newLineConn(s), chainID: id, id: v.ID, prov: tp.agent.Address(), model: m, pin: v.PriceIn, pout: v.PriceOut}
	if err := r.c.write(sessionHello{Session: v.ID}); err != nil {
		n.t.Fatal(err)
	}
	r.first = r.read()
	return r
}

func (r *rawLane) read() providerMsg {
	r.t.Helper()
	var m providerMsg
	if err := r.c.read(&m, 30*time.Second); err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return m
}

func (r *rawLane) send(m clientMsg) {
	r.t.Helper()
	if err := r.c.write(m); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawLane) nIn(prompt string) uint64 {
	r.t.Helper()
	toks, err := r.model.Tokenize(prompt)
	if err != nil {
		r.t.Fatal(err)
	}
	return uint64(len(toks))
}

func (r *rawLane) request(seq uint64, prompt string, maxTokens uint64, key *ecdsa.PrivateKey) (*session.Request, []byte) {
	q := &session.Request{ChainID: r.chainID, Session: r.id, Provider: r.prov, Seq: seq, Prompt: sha256.Sum256([]byte(prompt)), MaxTokens: maxTokens}
	sig, err := session.Sign(key, q.Hash())
	if err != nil {
		r.t.Fatal(err)
	}
	return q, sig
}

func (r *rawLane) voucher(seq uint64, cum *uint256.Int, key *ecdsa.PrivateKey) (*session.Voucher, []byte) {
	v := &session.Voucher{ChainID: r.chainID, Session: r.id, Provider: r.prov, Cumulative: cum, Seq: seq}
	sig, err := session.Sign(key, v.Hash())
	if err != nil {
		r.t.Fatal(err)
	}
	return v, sig
}

// refused sends msg and expects a signed refusal with reason containing
// want (and charged as said).
func (r *rawLane) refused(msg clientMsg, charged bool, want string) *session.Refusal {
	r.t.Helper()
	r.send(msg)
	m := r.read()
	if m.Refusal == nil {
		r.t.Fatalf("want a refusal with %q, got %+v", want, m)
	}
	if s, err := session.Signer(m.Refusal.Hash(), m.RefusalSig); err != nil || s != r.prov {
		r.t.Fatalf("refusal not signed by the provider: %v %s", err, s)
	}
	if m.Refusal.Charged != charged || !strings.Contains(m.Refusal.Reason, want) {
		r.t.Fatalf("refusal %+v: want charged %v and %q", m.Refusal, charged, want)
	}
	return m.Refusal
}

// answer reads the tokens and receipt of a request served from prepaid.
func (r *rawLane) answer() ([]int, *session.Receipt, []byte) {
	r.t.Helper()
	var toks []int
	for {
		m := r.read()
		switch {
		case m.Token != nil:
			toks = append(toks, *m.Token)
		case m.Receipt != nil:
			return toks, m.Receipt, m.ReceiptSig
		default:
			r.t.Fatalf("want tokens and a receipt, got %+v", m)
		}
	}
}

// pay sends the voucher for cum after request seq and reads the ack.
func (r *rawLane) pay(seq uint64, cum *uint256.Int, key *ecdsa.PrivateKey) {
	r.t.Helper()
	v, sig := r.voucher(seq, cum, key)
	r.send(clientMsg{Voucher: v, VoucherSig: sig})
	if m := r.read(); m.Ack == nil || m.Ack.Seq != seq || !m.Ack.Cumulative.Eq(cum) {
		r.t.Fatalf("want the ack of %s for seq %d, got %+v", cum, seq, m)
	}
}

// TestSessionAttacks: the rules of the session protocol, each against the
// attack it stops, with real agents on the wire.
//
//   - a lying provider's receipt is verified on its own but differs from
//     the honest lane's: the client reports the mismatch;
//   - the client refuses to send what no lane can take: max_tokens beyond
//     the budget (S4) or the context (S10), signing nothing;
//   - a receipt signed by a non-party (a provider's stream answering with
//     another key) is rejected and not paid beyond the prompt;
//   - a stranger peer is refused before any work (S17);
//   - forged (another signer), replayed (an earlier seq's), lowered,
//     over-budget and other-chain vouchers, and requests signed by a
//     stranger, are refused with nothing charged;
//   - the same request again is answered again uncharged, another request
//     on a used seq and a skipped seq are refused (S16);
//   - a client that asks for more before paying is cut off, and refused
//     until the voucher comes (S5);
//   - a prompt beyond the context (S10) and a max_tokens beyond the
//     budget (S4) are refused with a signed refusal that charges the
//     prompt;
//   - after the session's end (a close) requests are refused.
func TestSessionAttacks(t *testing.T) {
	n := newTestNet(t)
	// prov1 asks the cap: with two bids for two lanes the session clears
	// at the highest winning bid, here the cap of 0.01 (the budget checks
	// below are sized for it).
	honest := n.provider("prov1", 10, false)
	liar := n.provider("prov2", 6, true)
	cfg := n.sessionConfig()
	sc, err := OpenSession(n.ctx, cfg, n.sessionOrder(types.OGPU(3)), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	v := sc.Session()
	if !v.PriceOut.Eq(milli(10)) {
		t.Fatalf("price %s: with two bidders for two lanes the highest winning bid, prov1's 0.01ogpu", v.PriceOut)
	}
	// The liar changes its third token: both receipts verify, they differ.
	res, err := sc.Complete(n.ctx, "Once upon a time", 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified || res.Mismatch == nil || len(res.Mismatch.Receipts) != 2 || res.Mismatch.Receipts[0].Output == res.Mismatch.Receipts[1].Output {
		t.Fatalf("verified %v mismatch %+v: want the lanes' differing receipts reported", res.Verified, res.Mismatch)
	}
	// What no lane can take is not sent, and nothing is signed for it.
	before := sc.Ledger()
	most := before[liar.agent.Address()]
	if h := before[honest.agent.Address()]; h.Gt(most) {
		most = h
	}
	// A lane's budget is 3ogpu less the reservation paid at the award (S21).
	if left := sc.Remaining(); !left.Eq(new(uint256.Int).Sub(v.Lanes[0].Budget, most)) {
		t.Fatalf("remaining %s: want the least a lane has left of its %s (signed %v)", left, v.Lanes[0].Budget, before)
	}
	if _, err := sc.Complete(n.ctx, "Once upon a time", 400, nil); !errors.Is(err, ErrSessionBudget) {
		t.Fatalf("max_tokens beyond the budget: %v, want %v", err, ErrSessionBudget)
	}
	if _, err := sc.Complete(n.ctx, "Once upon a time", 600, nil); !errors.Is(err, ErrContextTooLong) {
		t.Fatalf("max_tokens beyond the context: %v, want %v", err, ErrContextTooLong)
	}
	for p, c := range sc.Ledger() {
		if !c.Eq(before[p]) {
			t.Fatalf("lane %s: the ledger moved from %s to %s for requests never sent", p, before[p], c)
		}
	}

	// A receipt signed by a non-party: the liar's stream answers with
	// another key. The honest lane answers; the other is rejected and
	// paid its prompt only.
	sc.Disconnect()
	mal := n.keys["mal2"]
	liarAddr := liar.agent.Address()
	liar.host.Host().SetStreamHandler(SessionProtocol, func(s network.Stream) {
		defer s.Close()
		c := newLineConn(s)
		var hello sessionHello
		if c.read(&hello, 10*time.Second) != nil {
			return
		}
		c.write(providerMsg{Ready: &LaneStatus{Provider: liarAddr, Seq: 1, Owed: before[liarAddr], Held: before[liarAddr], Context: 512, Credit: 64}})
		var m clientMsg
		if c.read(&m, 10*time.Second) != nil || m.Request == nil {
			return
		}
		toks, _ := cfg.Model.Tokenize(" the cat sat")
		toks = toks[1:] // without the beginning of sequence
		for _, tok := range toks {
			t := tok
			c.write(providerMsg{Token: &t, Piece: cfg.Model.Piece(tok)})
		}
		nIn, _ := cfg.Model.Tokenize("Once upon a time there was a cat")
		r := &session.Receipt{ChainID: m.Request.ChainID, Session: m.Request.Session, Provider: liarAddr, Seq: m.Request.Seq, Request: m.Request.Hash(),
			Output: sha256.Sum256([]byte(cfg.Model.Detokenize(toks))), NIn: uint64(len(nIn)), NOut: uint64(len(toks))}
		sig, _ := session.Sign(mal, r.Hash())
		c.write(providerMsg{Receipt: r, ReceiptSig: sig})
		_ = c.read(&m, 10*time.Second)
	})
	res, err = sc.Complete(n.ctx, "Once upon a time there was a cat", 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	var liarLane *LaneCompletion
	for i := range res.Lanes {
		if res.Lanes[i].Provider == liarAddr {
			liarLane = &res.Lanes[i]
		}
	}
	if res.Verified || liarLane == nil || liarLane.Err == nil || !strings.Contains(liarLane.Err.Error(), "receipt rejected: the receipt is signed by "+ethcrypto.PubkeyToAddress(mal.PublicKey).Hex()) {
		t.Fatalf("the non-party's receipt: lane %+v, verified %v; want it rejected", liarLane, res.Verified)
	}
	prompt := charge(res.PromptTokens, 0, v.PriceIn, v.PriceOut)
	if got := sc.Ledger()[liarAddr]; !got.Eq(new(uint256.Int).Add(before[liarAddr], prompt)) || !liarLane.Charged.Eq(prompt) {
		t.Fatalf("the rejected lane's ledger went from %s to %s (charged %s): want the prompt only, %s", before[liarAddr], got, liarLane.Charged, prompt)
	}
	sc.Disconnect()

	// A stranger is refused before any work (S17).
	mh, _ := n.host("mal1", n.keys["mal1"])
	stranger := n.raw(mh, honest, v, cfg.Model)
	if stranger.first.Error == "" || !strings.Contains(stranger.first.Error, "is not session") {
		t.Fatalf("a stranger's hello: %+v, want a refusal", stranger.first)
	}

	// The client's own stream, driven by hand.
	key, other := n.keys["client"], n.keys["mal1"]
	r := n.raw(cfg.Host, honest, v, cfg.Model)
	st := r.first.Ready
	if st == nil || st.Seq != 2 || !st.Owed.Eq(sc.Ledger()[honest.agent.Address()]) || !st.Held.Eq(st.Owed) {
		t.Fatalf("ready %+v: want seq 2 and the client's ledger", r.first)
	}
	base := st.Owed
	p := "Once upon a time there was a dog"
	prepaid := addCharge(base, r.nIn(p), 0, r.pin, r.pout)
	q, qsig := r.request(3, p, 8, key)
	good, goodSig := r.voucher(3, prepaid, key)
	req := func(q *session.Request, qsig []byte, v *session.Voucher, vsig []byte) clientMsg {
		return clientMsg{Request: q, RequestSig: qsig, Prompt: p, Voucher: v, VoucherSig: vsig}
	}
	forged, forgedSig := r.voucher(3, prepaid, other)
	r.refused(req(q, qsig, forged, forgedSig), false, "not by the session's client")
	lowered, loweredSig := r.voucher(3, new(uint256.Int).Sub(prepaid, uint256.NewInt(1)), key)
	r.refused(req(q, qsig, lowered, loweredSig), false, "is not what the lane is owed")
	old, oldSig := r.voucher(2, base, key) // the last voucher, replayed
	r.refused(req(q, qsig, old, oldSig), false, "it is for seq 2")
	over, overSig := r.voucher(3, types.OGPU(4), key)
	r.refused(req(q, qsig, over, overSig), false, "above the lane's budget")
	elsewhere := &session.Voucher{ChainID: "other-chain", Session: v.ID, Provider: r.prov, Cumulative: prepaid, Seq: 3}
	elsewhereSig, _ := session.Sign(key, elsewhere.Hash())
	r.refused(req(q, qsig, elsewhere, elsewhereSig), false, "is for chain")
	qx, qxSig := r.request(3, p, 8, other)
	r.refused(req(qx, qxSig, good, goodSig), false, "not signed by session")
	r.refused(req(q, qsig, nil, nil), false, "no voucher")

	// Served; then the same request again is answered again, uncharged.
	r.send(req(q, qsig, good, goodSig))
	toks, rc, rcSig := r.answer()
	final := addCharge(prepaid, 0, uint64(len(toks)), nil, r.pout)
	r.pay(3, final, key)
	r.send(req(q, qsig, good, goodSig))
	toks2, rc2, rc2Sig := r.answer()
	if !slices.Equal(toks, toks2) || rc2.Hash() != rc.Hash() || !bytes.Equal(rcSig, rc2Sig) {
		t.Fatalf("the repeated request was answered %v %+v, first %v %+v", toks2, rc2, toks, rc)
	}
	r.pay(3, final, key) // the same voucher: nothing more owed
	cat := "Once upon a time there was a cat"
	q3b, q3bSig := r.request(3, cat, 8, key)
	r.refused(clientMsg{Request: q3b, RequestSig: q3bSig, Prompt: cat, Voucher: good, VoucherSig: goodSig}, false, "seq 3 already carried another request")
	q5, q5Sig := r.request(5, p, 8, key)
	r.refused(req(q5, q5Sig, good, goodSig), false, "the next request of this lane is seq 4")

	// S5: asking again before paying ends the stream; until the voucher
	// comes, nothing more is served.
	prepaid4 := addCharge(final, r.nIn(p), 0, r.pin, r.pout)
	q4, q4Sig := r.request(4, p, 8, key)
	v4, v4Sig := r.voucher(4, prepaid4, key)
	r.send(req(q4, q4Sig, v4, v4Sig))
	toks4, _, _ := r.answer()
	final4 := addCharge(prepaid4, 0, uint64(len(toks4)), nil, r.pout)
	prepaid5 := addCharge(final4, r.nIn(p), 0, r.pin, r.pout)
	q5, q5Sig = r.request(5, p, 8, key)
	v5, v5Sig := r.voucher(5, prepaid5, key)
	r.send(req(q5, q5Sig, v5, v5Sig))
	if m := r.read(); !strings.Contains(m.Error, "must come before anything else") {
		t.Fatalf("a request before the voucher: %+v, want the stream ended", m)
	}
	r = n.raw(cfg.Host, honest, v, cfg.Model)
	if st := r.first.Ready; st == nil || st.Seq != 4 || !st.Owed.Eq(final4) || !st.Held.Eq(prepaid4) {
		t.Fatalf("ready %+v: want seq 4 owed %s holding the prepaid %s", r.first, final4, prepaid4)
	}
	r.refused(req(q5, q5Sig, v5, v5Sig), false, "the voucher for request 4")
	r.pay(4, final4, key)

	// S10 and S4 after the voucher: refused, the prompt charged, the seq
	// used up.
	long := strings.Repeat("Once upon a time there was a little dog. ", 50)
	nLong := r.nIn(long)
	if nLong+8 <= 512 {
		t.Fatalf("the long prompt is %d tokens: want it beyond the context with 8 more", nLong)
	}
	prepaid5 = addCharge(final4, nLong, 0, r.pin, r.pout)
	q5 = &session.Request{ChainID: r.chainID, Session: r.id, Provider: r.prov, Seq: 5, Prompt: sha256.Sum256([]byte(long)), MaxTokens: 8}
	q5Sig, _ = session.Sign(key, q5.Hash())
	v5, v5Sig = r.voucher(5, prepaid5, key)
	f := r.refused(clientMsg{Request: q5, RequestSig: q5Sig, Prompt: long, Voucher: v5, VoucherSig: v5Sig}, true, "exceed this provider's context")
	if f.NIn != nLong {
		t.Fatalf("refusal counts %d prompt tokens, want %d", f.NIn, nLong)
	}
	prepaid6 := addCharge(prepaid5, r.nIn(p), 0, r.pin, r.pout)
	q6, q6Sig := r.request(6, p, math.MaxUint64-2, key) // no wrap-around past the check
	v6, v6Sig := r.voucher(6, prepaid6, key)
	r.refused(req(q6, q6Sig, v6, v6Sig), true, "exceed this provider's context")
	prepaid6b := addCharge(prepaid6, r.nIn(p), 0, r.pin, r.pout)
	q6, q6Sig = r.request(7, p, 400, key)
	v6, v6Sig = r.voucher(7, prepaid6b, key)
	r.refused(req(q6, q6Sig, v6, v6Sig), true, "budget")
	prepaid6 = prepaid6b

	// After the end (a close moves it to the close's block).
	if err := sc.Close(n.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Complete(n.ctx, p, 8, nil); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("a request after the close: %v, want %v", err, ErrSessionEnded)
	}
	for l := honest.agent.lane(v.ID); ; time.Sleep(20 * time.Millisecond) {
		l.mu.Lock()
		closed := l.Closed
		l.mu.Unlock()
		if closed {
			break
		}
	}
	prepaid7 := addCharge(prepaid6, r.nIn(p), 0, r.pin, r.pout)
	q7, q7Sig := r.request(8, p, 8, key)
	v7, v7Sig := r.voucher(8, prepaid7, key)
	r.refused(req(q7, q7Sig, v7, v7Sig), false, "ended at height")
}

// TestRedeemReason: when a provider redeems a lane.
func TestRedeemReason(t *testing.T) {
	u := uint256.NewInt
	for _, c := range []struct {
		name                string
		held, redeemed      uint64
		height, expiry, due uint64
		closed              bool
		want                string
	}{
		{"below the threshold", 20, 0, 10, 100, 106, false, ""},
		{"at the threshold", 25, 0, 10, 100, 106, false, "threshold"},
		{"the unredeemed part counts", 40, 20, 10, 100, 106, false, ""},
		{"near expiry", 1, 0, 95, 100, 106, false, "near expiry"},
		{"in the grace", 1, 0, 101, 100, 106, false, "grace"},
		{"closed", 1, 0, 50, 50, 56, true, "grace"},
		{"too late: the refund comes first", 30, 0, 105, 100, 106, false, ""},
		{"nothing new", 30, 30, 101, 100, 106, false, ""},
		{"above the budget: only the budget", 200, 100, 101, 100, 106, false, ""},
	} {
		if got := redeemReason(u(c.held), u(c.redeemed), u(100), u(25), c.height, c.expiry, c.due, 5, c.closed); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSessionResumes: streams that break and a provider that restarts.
//
//   - the client loses its stream after the provider answered (receipt
//     sent, voucher not yet): on a new stream the same request is answered
//     again, uncharged, and paid once (S16);
//   - the client loses its stream while the provider generates, just as
//     it signed a voucher for a token (the provider runs two tokens ahead
//     of the vouchers here): the provider stops; on a new stream the lost
//     voucher is taken, so the lane is paid for what was sent and stays in
//     step;
//   - the provider restarts (a new peer id; its lane from disk): the
//     request sent into the dead stream is sent again on a new one, and the
//     provider redeems, from disk, exactly what the client's ledger signed.
func TestSessionResumes(t *testing.T) {
	n := newTestNet(t)
	provider := func() *testProvider {
		return n.startProvider("prov1", func(store *blobstore.Store, cfg *ProviderConfig) {
			hash, err := store.PutFile(n.modelPath)
			if err != nil {
				t.Fatal(err)
			}
			n.model = hash
			cfg.Models, cfg.Strategy, cfg.Attributes, cfg.SessionCredit = []types.Hash{hash}, pricing.PerToken{PerToken: milli(5)}, []string{"ram/16Gi"}, 2
		})
	}
	p1 := provider()
	cfg := n.sessionConfig()
	o := n.sessionOrder(types.OGPU(3))
	o.Lanes = 1
	sc, err := OpenSession(n.ctx, cfg, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	v := sc.Session()
	if _, err := sc.Complete(n.ctx, "Once upon a time", 16, nil); err != nil {
		t.Fatal(err)
	}
	answered := func() bool {
		l := p1.agent.lane(sc.ID())
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.Seq == 2 && l.Receipt != nil
	}
	before := sc.Ledger()[p1.agent.Address()]
	cut := false
	// Two tokens: the provider's credit, so it answers without a voucher.
	res, err := sc.Complete(n.ctx, "Once upon a time there was a dog", 2, func(string) {
		if !cut { // on the lane's own goroutine
			cut = true
			for !answered() {
				time.Sleep(time.Millisecond)
			}
			_ = sc.lanes[0].stream.Reset()
		}
	})
	if err != nil || res.Lanes[0].Seq != 2 {
		t.Fatalf("the answer lost with the stream: %v %+v", err, res)
	}
	if want := charge(res.PromptTokens, res.CompletionTokens, v.PriceIn, v.PriceOut); !new(uint256.Int).Sub(sc.Ledger()[p1.agent.Address()], before).Eq(want) {
		t.Fatalf("the replayed request cost %s, want %s once", new(uint256.Int).Sub(sc.Ledger()[p1.agent.Address()], before), want)
	}
	cut = false
	_, err = sc.Complete(n.ctx, "Once upon a time there was a cat", 16, func(string) {
		if !cut {
			cut = true
			_ = sc.lanes[0].stream.Reset()
		}
	})
	if err == nil || !strings.Contains(err.Error(), "was cut off after 1 tokens") {
		t.Fatalf("a request cut while generating: %v", err)
	}
	if _, err := sc.Complete(n.ctx, "Once upon a time there was a bird", 16, nil); err != nil {
		t.Fatalf("the lane after the cut: %v", err)
	}
	// The provider restarts with a new host; its lane comes from disk.
	p1.kill()
	p1 = provider()
	if l := p1.agent.lane(sc.ID()); l == nil || l.Seq != 4 {
		t.Fatalf("the restarted provider's lane %+v: want seq 4 from disk", l)
	}
	res, err = sc.Complete(n.ctx, "Once upon a time there was a boy", 16, nil)
	if err != nil || res.Lanes[0].Seq != 5 {
		t.Fatalf("after the provider's restart: %v %+v", err, res)
	}
	if _, err := p1.agent.RedeemSession(n.ctx, sc.ID()); err != nil {
		t.Fatal(err)
	}
	if v, err = n.c.Session(n.ctx, sc.ID()); err != nil {
		t.Fatal(err)
	}
	if want := sc.Ledger()[p1.agent.Address()]; !v.Lanes[0].Paid.Eq(want) {
		t.Fatalf("paid %s, the client's ledger signed %s", v.Lanes[0].Paid, want)
	}
}

// TestSessionLaneDies: with two lanes, a provider that dies while its
// tokens stream does not cut the answer: the other lane's tokens carry on
// at the same offset, the text streamed is the whole answer, and the
// session goes on with the living lane.
func TestSessionLaneDies(t *testing.T) {
	n := newTestNet(t)
	p1 := n.provider("prov1", 5, false)
	p2 := n.provider("prov2", 6, false)
	cfg := n.sessionConfig()
	sc, err := OpenSession(n.ctx, cfg, n.sessionOrder(types.OGPU(3)), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	pieces := 0
	res, err := sc.Complete(n.ctx, "Once upon a time", 24, func(s string) {
		streamed.WriteString(s)
		if pieces++; pieces == 3 {
			p1.kill()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var dead, alive *LaneCompletion
	for i := range res.Lanes {
		if res.Lanes[i].Provider == p1.agent.Address() {
			dead = &res.Lanes[i]
		} else {
			alive = &res.Lanes[i]
		}
	}
	if dead.Err == nil || alive.Err != nil || alive.Provider != p2.agent.Address() || res.Text != alive.Text || streamed.String() != res.Text || !strings.Contains(res.Text, "Lily") {
		t.Fatalf("dead lane err %v, living lane err %v, text %q, lane text %q, streamed %q", dead.Err, alive.Err, res.Text, alive.Text, streamed.String())
	}
	res, err = sc.Complete(n.ctx, "Once upon a time there was a dog", 16, nil)
	if err != nil || res.Verified || res.Lanes[1].Err != nil && res.Lanes[0].Err != nil {
		t.Fatalf("the session after a lane died: %v %+v", err, res)
	}
	if l := sc.Lanes(); (l[0].Failed == nil) == (l[1].Failed == nil) {
		t.Fatalf("lanes %+v: want the dead one failed, the other in use", l)
	}
}

// TestSessionInterimVouchers: while a request runs, the provider
// generates at most its credit ahead of the vouchers, and takes the
// interim vouchers off its decode loop with every check of S5: one paying
// more than was sent, one lower than one given, one for another seq, or a
// request instead of a voucher ends the request, and the lane keeps only
// what the good vouchers paid.
func TestSessionInterimVouchers(t *testing.T) {
	n := newTestNet(t)
	const credit = 4
	milliTok := func(x uint64) pricing.PerToken { return pricing.PerToken{Base: milli(100), PerToken: milli(x)} }
	prov := n.providerWith("prov1", milliTok(5), false, func(c *ProviderConfig) { c.SessionCredit = credit })
	n.provider("prov2", 6, false)
	cfg := n.sessionConfig()
	sc, err := OpenSession(n.ctx, cfg, n.sessionOrder(types.OGPU(3)), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	sc.Disconnect()
	v, key := sc.Session(), n.keys["client"]
	r := n.raw(cfg.Host, prov, v, cfg.Model)
	if st := r.first.Ready; st == nil || st.Credit != credit {
		t.Fatalf("ready %+v: want credit %d", r.first, credit)
	}
	const p = "Once upon a time there was a dog"
	// tokens reads exactly k token lines, then checks that no more come
	// while the provider waits for a voucher.
	tokens := func(k int) {
		t.Helper()
		for i := 0; i < k; i++ {
			if m := r.read(); m.Token == nil {
				t.Fatalf("token %d of %d: got %+v", i+1, k, m)
			}
		}
		var m providerMsg
		if err := r.c.read(&m, 300*time.Millisecond); err == nil {
			t.Fatalf("a line beyond the credit: %+v", m)
		}
	}
	start := func(seq uint64, owed *uint256.Int) *uint256.Int {
		t.Helper()
		prepaid := addCharge(owed, r.nIn(p), 0, r.pin, r.pout)
		q, qsig := r.request(seq, p, 16, key)
		vv, vsig := r.voucher(seq, prepaid, key)
		r.send(clientMsg{Request: q, RequestSig: qsig, Prompt: p, Voucher: vv, VoucherSig: vsig})
		tokens(credit)
		return prepaid
	}
	interim := func(seq uint64, cum *uint256.Int) {
		t.Helper()
		vv, vsig := r.voucher(seq, cum, key)
		r.send(clientMsg{Voucher: vv, VoucherSig: vsig})
	}
	paying := func(prepaid *uint256.Int, k uint64) *uint256.Int { return addCharge(prepaid, 0, k, nil, r.pout) }

	// Each voucher moves the credit on by what it pays; the last tokens
	// need none (max_tokens is reached): then receipt, voucher, ack.
	prepaid := start(1, new(uint256.Int))
	interim(1, paying(prepaid, 2))
	tokens(2)
	interim(1, paying(prepaid, 6))
	tokens(4)
	interim(1, paying(prepaid, 10))
	tokens(4)
	interim(1, paying(prepaid, 14))
	toks, rc, _ := r.answer()
	if len(toks) != 2 || rc.NOut != 16 {
		t.Fatalf("the last %d tokens, receipt for %d: want 2 of 16", len(toks), rc.NOut)
	}
	owed := paying(prepaid, 16)
	r.pay(1, owed, key)

	// Each bad interim voucher ends its request; the lane holds the
	// prepaid voucher and is owed no more (a new stream says so).
	bad := []struct {
		name, want string
		send       func(seq uint64, prepaid *uint256.Int)
	}{
		{"a voucher paying more than was sent", "pays more than the 4 tokens sent so far", func(seq uint64, prepaid *uint256.Int) {
			interim(seq, paying(prepaid, credit+1))
		}},
		{"a voucher below the one given", "is below one already given", func(seq uint64, prepaid *uint256.Int) {
			interim(seq, new(uint256.Int).Sub(prepaid, uint256.NewInt(1)))
		}},
		{"a voucher for another seq", "it is for seq", func(seq uint64, prepaid *uint256.Int) {
			interim(seq+1, paying(prepaid, 1))
		}},
		{"a voucher signed by another key", "not by the session's client", func(seq uint64, prepaid *uint256.Int) {
			vv, vsig := r.voucher(seq, paying(prepaid, 1), n.keys["mal1"])
			r.send(clientMsg{Voucher: vv, VoucherSig: vsig})
		}},
		{"a request instead of a voucher", "vouchers only", func(seq uint64, prepaid *uint256.Int) {
			q, qsig := r.request(seq+1, p, 16, key)
			r.send(clientMsg{Request: q, RequestSig: qsig, Prompt: p})
		}},
	}
	seq := uint64(1)
	for _, c := range bad {
		seq++
		prepaid := start(seq, owed)
		c.send(seq, prepaid)
		if m := r.read(); !strings.Contains(m.Error, c.want) {
			t.Fatalf("%s: %+v, want the request ended with %q", c.name, m, c.want)
		}
		r = n.raw(cfg.Host, prov, v, cfg.Model)
		if st := r.first.Ready; st == nil || st.Seq != seq || !st.Owed.Eq(prepaid) || !st.Held.Eq(prepaid) || st.Answered {
			t.Fatalf("%s: ready %+v, want seq %d owed and holding the prepaid %s", c.name, r.first, seq, prepaid)
		}
		owed = prepaid
	}
}
