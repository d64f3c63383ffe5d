package chain

import (
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// TestPoolClaimPaysItsAward: a pool claim may award its task (issue 14:
// the r-th eligible claim re-checks the r-1 earlier claimants and writes
// r slots), so every claim pays for that award at its bound, computed
// from the message alone: stage_gas + max_redundancy × (slot_gas + one
// eligibility check at the matching bound). A claim paying only a bid's
// fee is refused before anything runs.
func TestPoolClaimPaysItsAward(t *testing.T) {
	claim := (&market.MsgClaimTask{Job: 1, Stage: 0}).Raw()
	bid := (&market.MsgCommitBid{Job: 1, Stage: 0, Commitment: types.Hash{3}}).Raw()
	if w := MsgWorks([]types.RawMsg{claim}); w[0] != claimWork || w[0].Awards != 1 || w[0].Matches != genesis.MaxWorkMatches {
		t.Fatalf("a claim's work %+v, want a bid's matching and one award", w[0])
	}
	doc := testGenesis()
	p := doc.Params
	award := p.WorkGas.StageGas + p.Market.MaxRedundancy*(p.WorkGas.SlotGas+genesis.MaxWorkMatches*p.WorkGas.MatchGas)
	if got := p.Gas(100, MsgWorks([]types.RawMsg{claim})) - p.Gas(100, MsgWorks([]types.RawMsg{bid})); got != award {
		t.Fatalf("a claim costs %d gas more than a bid, want the award's bound %d", got, award)
	}
	t.Logf("claim gas at 100 bytes: %d (a bid: %d)", p.Gas(100, MsgWorks([]types.RawMsg{claim})), p.Gas(100, MsgWorks([]types.RawMsg{bid})))

	h := newHarness(t, store.NewMemTree(), doc)
	size := len(signTxFee(t, "bob", 0, new(uint256.Int).SetAllOne(), claim))
	bidFee := p.RequiredFee(size, MsgWorks([]types.RawMsg{bid}))
	if res := h.checkTx(signTxFee(t, "bob", 0, bidFee, claim)); res.Code != types.CodeOf(types.ErrFeeTooLow) {
		t.Errorf("a claim paying a bid's fee: code %d (%s), want fee too low", res.Code, res.Log)
	}
	claimFee := p.RequiredFee(size, MsgWorks([]types.RawMsg{claim}))
	if res := h.checkTx(signTxFee(t, "bob", 0, claimFee, claim)); res.Code != types.CodeOf(types.ErrUnknownJob) {
		t.Errorf("a claim paying its fee, on no job: code %d (%s), want the fee accepted and the job unknown", res.Code, res.Log)
	}
}
