package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

func milliOGPU(x uint64) *uint256.Int {
	return new(uint256.Int).Div(types.OGPU(x), uint256.NewInt(1000))
}

// postOnly posts an inference job for model with a served prompt, as
// RunLLM does, without following it.
func (n *testNet) postOnly(cl *Client, model types.Hash, maxTokens uint64) uint64 {
	n.t.Helper()
	j := n.job(maxTokens)
	in := &LLMInput{Version: 1, Prompt: j.Prompt}
	inHash, err := cl.Store.Put(in.Encode())
	if err != nil {
		n.t.Fatal(err)
	}
	msg := &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction, Model: model, ModelSize: j.ModelSize,
		Stages: 1, Redundancy: j.Redundancy, MaxPrice: j.MaxPrice, Req: j.Req, Input: inHash,
		Windows: j.Windows, MaxTokens: maxTokens, PromptTokens: PromptTokenBound(j.Prompt),
	}
	_, posted, err := cl.postJob(n.ctx, msg, Runtime, inHash)
	if err != nil {
		n.t.Fatal(err)
	}
	return posted.Job
}

// decisionOf waits for the agent's decision on job (stage 0).
func decisionOf(t *testing.T, p *Provider, job uint64) Decision {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, d := range p.Decisions() {
			if d.Job == job && d.Stage == 0 {
				return d
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the agent recorded no decision on job %d: %+v", job, p.Decisions())
	return Decision{}
}

// revealedBid waits for provider's revealed bid on job and returns its
// price.
func (n *testNet) revealedBid(job uint64, provider types.Address) *uint256.Int {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		bids, err := n.c.Bids(n.ctx, job)
		if err != nil {
			n.t.Fatal(err)
		}
		for _, b := range bids {
			if b.Provider == provider && b.Revealed {
				return b.Price
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.t.Fatalf("no revealed bid of %s on job %d", provider, job)
	return nil
}

// TestProviderDashboard: what the console of `ogpud provider run` shows
// and does, on a real chain with real agents. A job the agent cannot run
// is a decision with the reason; a sealed bid is a decision with its
// price; SetPricing changes the price the chain sees revealed on the next
// job while a bid sealed before keeps its own (otherwise its reveal would
// not match the commitment and the provider would lose its deposit); bad
// prices are refused and change nothing; a generation is measured; Bond
// and Unbond move the stake on chain and the chain's refusal comes back
// as it is; the agent reports its peer id, addresses and peers.
func TestProviderDashboard(t *testing.T) {
	n := newTestNet(t)
	tp := n.provider("prov1", 40, false) // 0.1 + 0.04 per token
	n.provider("prov2", 50, false)
	p := tp.agent
	prov1 := ethcrypto.PubkeyToAddress(n.keys["prov1"].PublicKey)
	cl := n.client()

	r := p.Reachability()
	if r.PeerID != tp.host.ID().String() || len(r.Addrs) == 0 || r.Peers < 1 || r.Status != "unknown" {
		t.Errorf("reachability %+v: want peer %s, its addresses, at least the bootstrap peer, AutoNAT unknown on loopback", r, tp.host.ID())
	}

	// A model nobody serves: no bid, and the decision says why.
	var other types.Hash
	_, _ = rand.Read(other[:])
	d := decisionOf(t, p, n.postOnly(cl, other, 8))
	if d.Bid || d.Price != nil || !strings.Contains(d.Reason, "is not served here") {
		t.Errorf("decision on a job for an unserved model: %+v, want no bid because the model is not served here", d)
	}

	// A job it runs: a sealed bid at 0.1 + 8 × 0.04; the price changes
	// while the bid is sealed; the job runs to the end.
	sealed := make(chan uint64, 1)
	job := n.job(8)
	job.OnPosted = func(id uint64, _ int64) { sealed <- id }
	type result struct {
		res *LLMResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cl.RunLLM(n.ctx, job, nil, nil)
		done <- result{res, err}
	}()
	first := <-sealed
	d = decisionOf(t, p, first)
	if !d.Bid || d.Price == nil || !d.Price.Eq(milliOGPU(100+8*40)) || d.Reason != "sealed bid" {
		t.Fatalf("decision on job %d: %+v, want a sealed bid at 0.42 oGPU", first, d)
	}
	before := p.Pricing()
	for _, bad := range []struct {
		name           string
		base, perToken *uint256.Int
		want           string
	}{
		{"zero per token", milliOGPU(1), new(uint256.Int), "more than 0"},
		{"no base", nil, milliOGPU(1), "give both"},
		{"above all oGPU", new(uint256.Int).AddUint64(types.MaxSupply, 1), milliOGPU(1), "can never be paid"},
	} {
		if err := p.SetPricing(bad.base, bad.perToken); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("SetPricing %s: %v, want an error saying %q", bad.name, err, bad.want)
		}
	}
	if after := p.Pricing(); !after.Base.Eq(before.Base) || !after.PerToken.Eq(before.PerToken) {
		t.Fatalf("refused prices changed the pricing: %+v → %+v", before, after)
	}
	if err := p.SetPricing(milliOGPU(200), milliOGPU(10)); err != nil {
		t.Fatal(err)
	}
	if got := p.Pricing(); !got.Base.Eq(milliOGPU(200)) || !got.PerToken.Eq(milliOGPU(10)) || got.Script != "" {
		t.Errorf("Pricing after SetPricing: %+v", got)
	}
	if got := n.revealedBid(first, prov1); !got.Eq(milliOGPU(420)) {
		t.Errorf("bid sealed before SetPricing revealed at %s, want its own 0.42 oGPU", types.FormatAmount(got))
	}
	res := <-done
	if res.err != nil || res.res.Outcome != "agreed" {
		t.Fatalf("job %d: %+v %v, want agreed", first, res.res, res.err)
	}
	speeds := p.Speeds()
	if len(speeds) == 0 || speeds[len(speeds)-1].Tokens == 0 || speeds[len(speeds)-1].Took <= 0 {
		t.Errorf("speeds after a generation: %+v, want its tokens and time", speeds)
	}

	// The next job is bid at the new price: 0.2 + 8 × 0.01.
	next := n.postOnly(cl, n.model, 8)
	if d := decisionOf(t, p, next); !d.Bid || !d.Price.Eq(milliOGPU(280)) {
		t.Errorf("decision after SetPricing: %+v, want a sealed bid at 0.28 oGPU", d)
	}
	if got := n.revealedBid(next, prov1); !got.Eq(milliOGPU(280)) {
		t.Errorf("bid after SetPricing revealed at %s on chain, want 0.28 oGPU", types.FormatAmount(got))
	}
	if ds := p.Decisions(); ds[0].Job != next || ds[len(ds)-1].Job >= next {
		t.Errorf("decisions %+v: want the newest first", ds)
	}

	// Stake: bond, unbond, and an unbond the chain refuses.
	stake := func() *uint256.Int {
		st, err := n.c.Stake(n.ctx, prov1)
		if err != nil {
			t.Fatal(err)
		}
		return st.Bonded
	}
	was := stake()
	if err := p.Bond(n.ctx, types.OGPU(50)); err != nil {
		t.Fatal(err)
	}
	if got := stake(); !got.Eq(new(uint256.Int).Add(was, types.OGPU(50))) {
		t.Errorf("bonded %s after bonding 50 oGPU onto %s", got, was)
	}
	if err := p.Unbond(n.ctx, types.OGPU(30)); err != nil {
		t.Fatal(err)
	}
	if got := stake(); !got.Eq(new(uint256.Int).Add(was, types.OGPU(20))) {
		t.Errorf("bonded %s after unbonding 30 oGPU, want %s + 20", got, was)
	}
	err := p.Unbond(n.ctx, types.OGPU(100000))
	var te *node.TxError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "cannot unbond") {
		t.Errorf("unbonding more than bonded: %v, want the chain's refusal", err)
	}
	if got := stake(); !got.Eq(new(uint256.Int).Add(was, types.OGPU(20))) {
		t.Errorf("a refused unbond changed the stake to %s", got)
	}
	if err := p.Bond(n.ctx, new(uint256.Int)); err == nil {
		t.Error("bonding 0 was accepted")
	}
}

// TestSetPricingRefusedForAScript: an agent that prices with a script
// refuses SetPricing and says to edit the script; its Pricing names the
// script.
func TestSetPricingRefusedForAScript(t *testing.T) {
	// The agent is never served: no chain is reached.
	c, err := node.Dial("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ethcrypto.GenerateKey()
	store, err := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := p2p.New(context.Background(), p2p.Config{Key: k, Listen: p2p.LoopbackListen(), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p, err := NewProvider(ProviderConfig{Chain: c, Key: k, Host: h, Store: store, Strategy: &pricing.Script{Path: "/usr/local/bin/price.sh"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.SetPricing(milliOGPU(1), milliOGPU(1))
	if err == nil || !strings.Contains(err.Error(), "edit the script") {
		t.Fatalf("SetPricing on a script-priced agent: %v, want a refusal that says to edit the script", err)
	}
	if got := p.Pricing(); got.Script != "/usr/local/bin/price.sh" || got.Base != nil {
		t.Errorf("Pricing of a script-priced agent: %+v", got)
	}
	if _, ok := p.strategy().(*pricing.Script); !ok {
		t.Errorf("the refused SetPricing replaced the script by %T", p.strategy())
	}
}

// TestDecisionsBounded: a flood of posted jobs cannot grow the agent's
// memory: it keeps the latest DecisionsKept decisions, newest first, and
// SpeedsKept generations, oldest first; what a reader gets is a copy.
func TestDecisionsBounded(t *testing.T) {
	p := &Provider{dash: newDashboard()}
	for i := range DecisionsKept + 50 {
		p.decided(uint64(i), 0, uint256.NewInt(uint64(i)), "sealed bid")
	}
	ds := p.Decisions()
	if len(ds) != DecisionsKept || ds[0].Job != DecisionsKept+49 || ds[len(ds)-1].Job != 50 {
		t.Fatalf("%d decisions from job %d to %d: want the latest %d, newest (%d) first", len(ds), ds[0].Job, ds[len(ds)-1].Job, DecisionsKept, DecisionsKept+49)
	}
	ds[0].Price.SetUint64(0)
	if again := p.Decisions(); again[0].Price.Uint64() != DecisionsKept+49 {
		t.Fatal("changing a returned decision's price changed the agent's")
	}
	for i := range SpeedsKept + 1 {
		p.dash.speeds.push(SpeedSample{Tokens: i})
	}
	if ss := p.Speeds(); len(ss) != SpeedsKept || ss[0].Tokens != 1 || ss[len(ss)-1].Tokens != SpeedsKept {
		t.Fatalf("%d speeds from %d to %d: want the latest %d, oldest first", len(ss), ss[0].Tokens, ss[len(ss)-1].Tokens, SpeedsKept)
	}
}
