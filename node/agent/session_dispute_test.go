package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// waitDecided follows the chain until session id's dispute n is decided.
func (n *testNet) waitDecided(from int64, id, d uint64) (*session.EventDisputeDecided, int64) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Minute)
	defer cancel()
	blocks, err := n.c.Subscribe(ctx, from)
	if err != nil {
		n.t.Fatal(err)
	}
	for b := range blocks {
		for _, e := range node.EventsOf[session.EventDisputeDecided](b.Events) {
			if e.Session == id && e.Dispute == d {
				cancel()
				for range blocks {
				}
				return &e, b.Height
			}
		}
	}
	n.t.Fatalf("session %d dispute %d never decided", id, d)
	return nil, 0
}

// feesPaidBy sums the transaction fees addr paid in blocks (from, to].
func (n *testNet) feesPaidBy(addr types.Address, from, to int64) *uint256.Int {
	n.t.Helper()
	sum := new(uint256.Int)
	for h := from + 1; h <= to; h++ {
		_, evs := n.blockTxs(h)
		for _, ev := range evs {
			if ev.Type != chain.EventTypeTx {
				continue
			}
			e, err := chain.ParseEventTx(ev)
			if err != nil {
				n.t.Fatal(err)
			}
			if e.From == addr {
				sum.Add(sum, e.Fee)
			}
		}
	}
	return sum
}

// A lying provider in a session is caught by the comparison and slashed:
// the client disputes the two receipts, the validator fetches the prompt
// and outputs from the client (and only the validator may), re-generates,
// finds the liar's receipt invalid and the honest one valid; the liar
// loses stake, the client is compensated at most the disproven request's
// charge and gets its bond back.
func TestSessionLiarSlashed(t *testing.T) {
	n := newTestNet(t)
	n.provider("prov1", 5, false)
	liar := n.provider("mal1", 5, true)
	cfg := n.sessionConfig()
	sc, err := OpenSession(n.ctx, cfg, n.sessionOrder(types.OGPU(3)), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sc.Complete(n.ctx, "Once upon a time", 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified || res.Mismatch == nil {
		t.Fatalf("a lying lane went unnoticed: verified %v, mismatch %v", res.Verified, res.Mismatch)
	}
	client := ethcrypto.PubkeyToAddress(n.keys["client"].PublicKey)
	st, err := n.c.RPC.Status(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h0 := st.SyncInfo.LatestBlockHeight
	before := n.balanceAt(client, h0)
	sent, err := sc.Dispute(n.ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	d := sent.Index
	view, err := n.c.SessionDispute(n.ctx, sc.ID(), d)
	if err != nil || view.Status != session.DisputeOpen {
		t.Fatalf("dispute %d: %v %+v", d, err, view)
	}

	// A stranger (an account with no validator) is refused the data.
	sk, _ := ethcrypto.GenerateKey()
	sh, _ := n.host("stranger", sk)
	if _, err := FetchDispute(n.ctx, sh, view); err == nil || !strings.Contains(err.Error(), "validators only") {
		t.Fatalf("a stranger fetched the dispute's prompt: %v", err)
	}

	dec, hDec := n.waitDecided(h0, sc.ID(), d)
	liarAt := -1
	for i, r := range view.Receipts {
		if r.Receipt.Provider == liar.agent.Address() {
			liarAt = i
		}
	}
	if dec.Verdict != uint64(1)<<liarAt {
		t.Fatalf("verdict %b (%s), want only receipt %d (the liar's) invalid", dec.Verdict, dec.Outcome, liarAt)
	}
	if !n.slashed("mal1") || n.slashed("prov1") {
		t.Fatalf("slashed: liar %v, honest %v", n.slashed("mal1"), n.slashed("prov1"))
	}
	// Compensation: at most the disproven request's charge, and the bond
	// back; the client sent one transaction (the dispute) since "before".
	r := view.Receipts[liarAt].Receipt
	sv := sc.Session()
	cap := charge(r.NIn, r.NOut, sv.PriceIn, sv.PriceOut)
	if dec.Compensated == nil || dec.Compensated.IsZero() || dec.Compensated.Gt(cap) {
		t.Fatalf("compensated %v, want (0, %s]", dec.Compensated, cap)
	}
	after := n.balanceAt(client, hDec)
	fees := n.feesPaidBy(client, h0, hDec)
	want := new(uint256.Int).Add(before, dec.Compensated)
	want.Sub(want, fees)
	if !after.Eq(want) {
		t.Fatalf("client balance %s, want %s + %s compensation − %s fees (the bond back) = %s", after, before, dec.Compensated, fees, want)
	}
	t.Logf("liar slashed %s, client compensated %s (request charge %s), verdict %b: %s", types.FormatAmount(dec.Slashed), types.FormatAmount(dec.Compensated), types.FormatAmount(cap), dec.Verdict, dec.Outcome)
	n.supplyIsCap()
}

// A client cannot frame an honest provider: an audit dispute of a correct
// receipt is decided "every receipt valid" (nobody slashed, the bond goes
// to the fee pool), and a dispute whose data the client withholds is
// dismissed (S12: missing data never counts against the accused).
func TestSessionDisputeCannotFrame(t *testing.T) {
	n := newTestNet(t)
	p1 := n.provider("prov1", 5, false)
	n.provider("prov2", 5, false)
	cfg := n.sessionConfig()
	sc, err := OpenSession(n.ctx, cfg, n.sessionOrder(types.OGPU(3)), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	complete := func(prompt string) *Completion {
		res, err := sc.Complete(n.ctx, prompt, 12, nil)
		if err != nil || !res.Verified {
			t.Fatalf("%q: %v, verified %v", prompt, err, res != nil && res.Verified)
		}
		return res
	}
	st, err := n.c.RPC.Status(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h0 := st.SyncInfo.LatestBlockHeight

	// An honest answer disputed alone.
	res := complete("Once upon a time")
	sent, err := sc.DisputeLane(n.ctx, res, p1.agent.Address())
	if err != nil {
		t.Fatal(err)
	}
	d := sent.Index
	dec, _ := n.waitDecided(h0, sc.ID(), d)
	if dec.Verdict != 0 || !dec.Slashed.IsZero() || !dec.Compensated.IsZero() {
		t.Fatalf("an honest receipt disputed: verdict %b (%s), slashed %s, compensated %s", dec.Verdict, dec.Outcome, dec.Slashed, dec.Compensated)
	}
	view, err := n.c.SessionDispute(n.ctx, sc.ID(), d)
	if err != nil || view.Status != session.DisputeDecided {
		t.Fatalf("dispute %d: %v %+v", d, err, view)
	}

	// The same receipt again: refused (each receipt is disputed once).
	if _, err := sc.DisputeLane(n.ctx, res, p1.agent.Address()); err == nil {
		t.Fatal("the same receipt was disputed twice")
	}

	// Data withheld: the client stops serving it.
	res = complete("Once upon a time there was a dog")
	cfg.Host.Host().RemoveStreamHandler(DisputeProtocol)
	sc.evOnce.Do(func() {}) // the handler stays removed
	if sent, err = sc.DisputeLane(n.ctx, res, p1.agent.Address()); err != nil {
		t.Fatal(err)
	}
	d = sent.Index
	dec, _ = n.waitDecided(h0, sc.ID(), d)
	if dec.Verdict != uint64(session.VerdictNoData) || !dec.Slashed.IsZero() {
		t.Fatalf("withheld data: verdict %d (%s), slashed %s", dec.Verdict, dec.Outcome, dec.Slashed)
	}
	if n.slashed("prov1") || n.slashed("prov2") {
		t.Fatal("an honest provider lost stake to a client's dispute")
	}
	n.supplyIsCap()
}
