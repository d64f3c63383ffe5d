package market

import (
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// TestExposureCap (M-M1): a provider's stake must back every slot it holds
// open at price × deterrence_bps / audit_rate_bps (20× at the defaults).
// With 100 oGPU bonded it may bid on a job capped at 5 oGPU, not at 5.01;
// once it holds a 4 oGPU slot it may not take another job at cap 2 until
// that slot settles; the refusal says what to do and writes nothing.
func TestExposureCap(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	over := n.post(client, auctionJob(2, amt("5.01ogpu")))
	n.refused("a bid its stake cannot back", func(k *Keeper) error {
		return k.CommitBid(prov1, &MsgCommitBid{Job: over, Stage: 0, Commitment: hashOf("c")})
	}, types.ErrNotEligible, "need 100.2ogpu at stake", "bond more")
	id := n.post(client, auctionJob(2, types.OGPU(5)))
	for _, p := range []types.Address{prov1, prov2, prov3} {
		n.bid(p, id, 0, types.OGPU(4))
	}
	n.advanceTo(n.job(id).BidEnd + 1)
	for _, p := range []types.Address{prov1, prov2, prov3} {
		n.revealBid(p, id, 0, types.OGPU(4))
	}
	n.advanceTo(n.job(id).RevealEnd + 1)
	held := n.task(id, 0).Slots[0].Provider
	if got := Exposure(n.tree, held); !got.Eq(types.OGPU(4)) {
		t.Fatalf("exposure of a 4 oGPU slot's holder: %s", got.Dec())
	}
	next := n.post(client, auctionJob(2, types.OGPU(2)))
	n.refused("a second job while its stake backs the first", func(k *Keeper) error {
		return k.CommitBid(held, &MsgCommitBid{Job: next, Stage: 0, Commitment: hashOf("c")})
	}, types.ErrNotEligible, "its open slots (4ogpu)")
	result, salt := hashOf("answer"), hashOf("salt")
	for _, p := range []types.Address{n.task(id, 0).Slots[0].Provider, n.task(id, 0).Slots[1].Provider} {
		n.must("commit", func(k *Keeper) error {
			return k.CommitResult(p, &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: verifier.ResultCommitment(result, salt, p)})
		})
	}
	n.endBlock()
	for _, p := range []types.Address{n.task(id, 0).Slots[0].Provider, n.task(id, 0).Slots[1].Provider} {
		n.must("reveal", func(k *Keeper) error {
			return k.RevealResult(p, &verifier.MsgRevealResult{Job: id, Stage: 0, Result: result, Salt: salt})
		})
	}
	for n.job(id).State.Open() {
		if tk := n.task(id, 0); tk.Status == verifier.TaskDisputed && len(n.ver().Votes(id, 0)) == 0 {
			n.vote(id, 0, result, addrOf("val")) // drawn for an audit: upheld
			continue
		}
		n.endBlock()
	}
	if got := Exposure(n.tree, held); !got.IsZero() {
		t.Fatalf("exposure after the task settled: %s", got.Dec())
	}
	later := n.post(client, auctionJob(2, types.OGPU(2)))
	n.bid(held, later, 0, types.OGPU(2)) // now its stake backs it
}

// TestFraudSlashGrowsWithPrice (M-M1): a lie caught at price P costs at
// least P × 20 of stake (the defaults), more than fraud_slash_bps of it
// once P is large: here a provider with 1,000 oGPU bonded lies on a 40 oGPU
// lone slot, is audited with certainty and loses 800, not 500.
func TestFraudSlashGrowsWithPrice(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	n.must("bond", func(k *Keeper) error { return k.esc.Bond(prov1, types.OGPU(890)) }) // 990 bonded
	id := n.post(client, auctionJob(2, types.OGPU(40)))
	n.bid(prov1, id, 0, types.OGPU(40))
	n.advanceTo(n.job(id).BidEnd + 1)
	n.revealBid(prov1, id, 0, types.OGPU(40))
	n.advanceTo(n.job(id).RevealEnd + 1)
	stake := n.esc().Bonded(prov1)
	n.loneResult(prov1, id, hashOf("a lie"))
	n.advanceTo(n.task(id, 0).RevealDeadline + 1)
	n.vote(id, 0, hashOf("the truth"), addrOf("val"))
	lost := new(uint256.Int).Sub(stake, n.esc().Bonded(prov1))
	if want := AtRisk(n.params.Market, types.OGPU(40)); !lost.Eq(want) || !want.Eq(types.OGPU(800)) {
		t.Fatalf("the liar lost %s, want the 800 oGPU at risk on a 40 oGPU slot", types.FormatAmount(lost))
	}
}

// TestCloseKeepsOnlyWhatStakeBacks: a provider that bid on both stages of
// a pipeline and is the best bid on each wins stage 0; stage 1 would take
// its open slots past what its stake backs, so the close drops it there
// (bid_forfeited says why, nothing is burned) and stage 1, short of r,
// follows the client's policy (audit: it runs with the other winner).
func TestCloseKeepsOnlyWhatStakeBacks(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	m := auctionJob(2, types.OGPU(3))
	m.Kind, m.Stages = KindPipeline, 2
	id := n.post(client, m)
	// Each stage clears at 3 (two bids, two slots): prov1's 100 oGPU backs
	// 5 oGPU of open slots, one stage's 3, not both stages' 6.
	bids := map[types.Address]*uint256.Int{prov1: amt("2ogpu"), prov2: amt("3ogpu"), prov3: amt("3ogpu")}
	for s := uint16(0); s < 2; s++ {
		n.bid(prov1, id, s, bids[prov1])
		n.bid([]types.Address{prov2, prov3}[s], id, s, bids[prov2])
	}
	n.advanceTo(n.job(id).BidEnd + 1)
	for s := uint16(0); s < 2; s++ {
		n.revealBid(prov1, id, s, bids[prov1])
		n.revealBid([]types.Address{prov2, prov3}[s], id, s, bids[prov2])
	}
	n.events = nil
	burned := n.esc().Burned()
	n.advanceTo(n.job(id).RevealEnd + 1)
	t0, t1 := n.task(id, 0), n.task(id, 1)
	if !t0.Assigned(prov1) || t1.Assigned(prov1) || len(t1.Slots) != 1 {
		t.Fatalf("stage 0 slots %v, stage 1 slots %v: want prov1 on stage 0 only", t0.Slots, t1.Slots)
	}
	var why string
	for _, e := range eventsOf[EventBidForfeited](t, n.events) {
		if e.Provider == prov1 && e.Stage == 1 {
			why = e.Reason
		}
	}
	if !strings.Contains(why, "stake does not back") || !n.esc().Burned().Eq(burned) {
		t.Fatalf("prov1's stage-1 drop: %q, burned %s more", why, new(uint256.Int).Sub(n.esc().Burned(), burned).Dec())
	}
	if got := Exposure(n.tree, prov1); !got.Eq(types.OGPU(3)) {
		t.Fatalf("prov1's exposure %s, want stage 0's price 3", got.Dec())
	}
}

// TestUnbondingDoesNotEscapeTheSlash: a lone liar that unbonds all its
// stake right after the award, to leave nothing to slash, still loses the
// stake at risk on its slot: unbonding stake stays slashable (unbonding
// outlasts every job) and the audit's fraud slash takes it from there.
func TestUnbondingDoesNotEscapeTheSlash(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, auctionJob(2, types.OGPU(5)))
	n.bid(prov1, id, 0, types.OGPU(5))
	n.advanceTo(n.job(id).BidEnd + 1)
	n.revealBid(prov1, id, 0, types.OGPU(5))
	n.advanceTo(n.job(id).RevealEnd + 1)
	n.must("unbond everything", func(k *Keeper) error {
		return k.esc.Unbond(prov1, k.esc.Bonded(prov1), n.height+n.params.Staking.UnbondingBlocks)
	})
	before := n.esc().UnbondingTotal(prov1)
	n.loneResult(prov1, id, hashOf("a lie"))
	n.advanceTo(n.task(id, 0).RevealDeadline + 1)
	n.vote(id, 0, hashOf("the truth"), addrOf("val"))
	lost := new(uint256.Int).Sub(before, n.esc().UnbondingTotal(prov1))
	if want := AtRisk(n.params.Market, types.OGPU(5)); lost.Lt(want) {
		t.Fatalf("the liar that unbonded lost %s, want at least the %s at risk on its slot", lost.Dec(), want.Dec())
	}
	if j := n.job(id); !j.Paid.IsZero() {
		t.Fatalf("the liar was paid %s", j.Paid.Dec())
	}
}
