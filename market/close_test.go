package market

import (
	"slices"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// Tests of the early close (issue 17): an auction closes at the end of the
// block in which its last sealed bid is revealed, once the bid window is
// over; at RevealEnd while a sealed bid is unrevealed; at the end of the
// bid window with no sealed bid.

// longRevealJob is auctionJob with a reveal window of 5 blocks: posted at
// 2, bids 2..4, reveals 5..9, the close at the end of 9 at the latest.
func longRevealJob(r uint16) *MsgPostJob {
	m := auctionJob(r, types.OGPU(3))
	m.Windows.Reveal = 5
	return m
}

// closeKeyAt reports whether the job's close is scheduled at height h.
func (n *testNet) closeKeyAt(h, job uint64) bool {
	return n.tree.Get(scheduleKey(h, job, stageNone, deadlineClose)) != nil
}

// TestAuctionClosesAtLastReveal: three sealed bids, two revealed at 5, the
// last at 6: the job is still revealing after 5 and closes at the end of
// 6, three blocks before RevealEnd, with the award of the close at
// RevealEnd (the two lowest at the third bid's price, deposits back, the
// execute window counted from 6), and nothing is left scheduled at
// RevealEnd.
func TestAuctionClosesAtLastReveal(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, longRevealJob(2))
	if j := n.job(id); j.BidEnd != 4 || j.RevealEnd != 9 {
		t.Fatalf("windows: bid end %d, reveal end %d; want 4, 9", j.BidEnd, j.RevealEnd)
	}
	n.bid(prov1, id, 0, types.OGPU(1))
	n.bid(prov2, id, 0, types.OGPU(2))
	n.advanceTo(4)
	n.bid(prov3, id, 0, types.OGPU(3)) // the last bid height
	n.advanceTo(5)
	n.revealBid(prov1, id, 0, types.OGPU(1))
	n.revealBid(prov3, id, 0, types.OGPU(3))
	n.events = nil
	n.endBlock()
	if j := n.job(id); j.State != JobRevealing || j.Opened != 2 {
		t.Fatalf("after 5: %s with %d opened, want revealing with 2 (prov2's bid is sealed)", j.State, j.Opened)
	}
	if got := eventsOf[EventBidsRevealed](t, n.events); len(got) != 0 {
		t.Fatalf("events %+v with a sealed bid left", got)
	}
	before := n.balance(prov2)
	n.revealBid(prov2, id, 0, types.OGPU(2))
	if got := eventsOf[EventBidsRevealed](t, n.events); len(got) != 1 || got[0] != (EventBidsRevealed{Job: id, Bids: 3, CloseAt: 6, RevealEnd: 9}) {
		t.Fatalf("bids revealed %+v, want job %d, 3 bids, close at 6 (reveal end 9)", got, id)
	}
	if n.closeKeyAt(9, id) || !n.closeKeyAt(6, id) {
		t.Fatalf("close scheduled at 9: %v, at 6: %v; want moved to 6", n.closeKeyAt(9, id), n.closeKeyAt(6, id))
	}
	n.events = nil
	n.endBlock()
	j := n.job(id)
	if j.State != JobRunning {
		t.Fatalf("after the last reveal's block: %s, want running", j.State)
	}
	awarded := eventsOf[EventJobAwarded](t, n.events)
	if len(awarded) != 1 || awarded[0].CommitDeadline != 6+3 || awarded[0].RevealDeadline != 6+3+3 || !awarded[0].Price.Eq(types.OGPU(3)) {
		t.Fatalf("awarded %+v, want one award at 3 oGPU committing by 9, revealing by 12", awarded)
	}
	if w := awarded[0].Providers; len(w) != 2 || w[0] != prov1.Hex() || w[1] != prov2.Hex() {
		t.Fatalf("winners %v, want prov1, prov2", w)
	}
	if got, want := n.balance(prov2), new(uint256.Int).Add(before, n.params.Market.BidDeposit); !got.Eq(want) {
		t.Errorf("prov2 has %s, want %s: its deposit back", got.Dec(), want.Dec())
	}
	if n.closeKeyAt(6, id) || n.closeKeyAt(9, id) {
		t.Error("a close is still scheduled after the job closed")
	}
	// RevealEnd passes with nothing to do.
	n.events = nil
	n.advanceTo(10)
	if got := eventsOf[EventJobAwarded](t, n.events); len(got) != 0 {
		t.Fatalf("awarded again at RevealEnd: %+v", got)
	}
	n.refused("reveal after the early close", func(k *Keeper) error {
		return k.RevealBid(prov2, &MsgRevealBid{Job: id, Stage: 0, Price: types.OGPU(2), Salt: bidSalt(prov2, id, 0)})
	}, types.ErrWrongPhase, "job 1 is running")
}

// TestWithheldRevealDelaysOnlyToRevealEnd: the attack of a bidder that
// seals a bid and never reveals it, to hold the auction open. The close
// waits for it to the end of the reveal window, no further; there the
// withheld bid's deposit is burned and the revealed bids win as before.
func TestWithheldRevealDelaysOnlyToRevealEnd(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, longRevealJob(2))
	n.bid(prov1, id, 0, types.OGPU(1))
	n.bid(prov2, id, 0, types.OGPU(2))
	n.bid(prov3, id, 0, types.OGPU(1)) // never revealed
	n.advanceTo(5)
	n.revealBid(prov1, id, 0, types.OGPU(1))
	n.revealBid(prov2, id, 0, types.OGPU(2))
	n.events = nil
	for n.height < 9 {
		n.endBlock()
		if s := n.job(id).State; s != JobRevealing {
			t.Fatalf("after %d: %s, want revealing until RevealEnd 9 (prov3's bid is sealed)", n.height-1, s)
		}
	}
	burned := n.esc().Burned()
	n.endBlock() // 9: RevealEnd
	if s := n.job(id).State; s != JobRunning {
		t.Fatalf("after RevealEnd: %s, want running", s)
	}
	if got := eventsOf[EventBidsRevealed](t, n.events); len(got) != 0 {
		t.Fatalf("bids revealed %+v, yet prov3 never revealed", got)
	}
	forfeit := eventsOf[EventBidForfeited](t, n.events)
	if len(forfeit) != 1 || forfeit[0].Provider != prov3 || forfeit[0].Reason != "not revealed" {
		t.Fatalf("forfeited %+v, want prov3's unrevealed bid", forfeit)
	}
	if got, want := n.esc().Burned(), new(uint256.Int).Add(burned, n.params.Market.BidDeposit); !got.Eq(want) {
		t.Errorf("burned %s, want %s", got.Dec(), want.Dec())
	}
	awarded := eventsOf[EventJobAwarded](t, n.events)
	if len(awarded) != 1 || awarded[0].CommitDeadline != 9+3 || awarded[0].Providers[0] != prov1.Hex() || awarded[0].Providers[1] != prov2.Hex() {
		t.Fatalf("awarded %+v, want prov1 and prov2 committing by 12", awarded)
	}
}

// TestClientCannotCloseEarlyWithoutHonestBid: the attack of a client that
// wants its job closed before an honest bidder can win it, with sybil
// providers of its own (the client cannot bid on its own job). The two
// sybils bid at the cap and reveal at the first reveal height; the honest
// bidder sealed its bid at the last bid height and reveals at the last
// reveal height. Until then the auction stays open, and the honest bid
// wins a slot. Nor can a sybil bid after the bid window to move the
// count.
func TestClientCannotCloseEarlyWithoutHonestBid(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	sybil1, sybil2, honest := prov1, prov3, prov2
	id := n.post(client, longRevealJob(2))
	n.bid(sybil1, id, 0, types.OGPU(3))
	n.bid(sybil2, id, 0, types.OGPU(3))
	n.advanceTo(4)
	n.bid(honest, id, 0, types.OGPU(1))
	n.advanceTo(5)
	n.revealBid(sybil1, id, 0, types.OGPU(3))
	n.revealBid(sybil2, id, 0, types.OGPU(3))
	n.refused("a sybil's bid after the bid window", func(k *Keeper) error {
		return k.CommitBid(prov4, &MsgCommitBid{Job: id, Stage: 0, Commitment: BidCommitment(id, 0, types.OGPU(3), bidSalt(prov4, id, 0), prov4)})
	}, types.ErrWrongPhase, "bid window ended at height 4")
	n.advanceTo(9)
	if s := n.job(id).State; s != JobRevealing {
		t.Fatalf("at 9: %s, want revealing: the honest bid is still sealed", s)
	}
	n.revealBid(honest, id, 0, types.OGPU(1))
	n.events = nil
	n.endBlock()
	awarded := eventsOf[EventJobAwarded](t, n.events)
	if len(awarded) != 1 || len(awarded[0].Providers) != 2 || awarded[0].Providers[0] != honest.Hex() || !awarded[0].Price.Eq(types.OGPU(3)) {
		t.Fatalf("awarded %+v, want the honest bidder first, at the sybils' 3 oGPU", awarded)
	}
}

// TestRevealTwiceDoesNotCount: the attack of a bidder that reveals its bid
// twice (or opens it with a wrong salt, or one stage's bid as another's)
// to make the count reach the number of sealed bids while another is
// still sealed. Each is refused and counts nothing: the auction stays open
// for the sealed bid.
func TestRevealTwiceDoesNotCount(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	m := longRevealJob(2)
	m.Stages = 2
	id := n.post(client, m)
	n.bid(prov1, id, 0, types.OGPU(1))
	n.bid(prov1, id, 1, types.OGPU(2))
	n.bid(prov2, id, 0, types.OGPU(2))
	n.advanceTo(5)
	n.revealBid(prov1, id, 0, types.OGPU(1))
	reveal := func(p types.Address, stage uint16, price *uint256.Int, salt types.Hash) func(k *Keeper) error {
		return func(k *Keeper) error {
			return k.RevealBid(p, &MsgRevealBid{Job: id, Stage: stage, Price: price, Salt: salt})
		}
	}
	n.refused("the same reveal again", reveal(prov1, 0, types.OGPU(1), bidSalt(prov1, id, 0)), types.ErrDuplicate, "already revealed")
	n.refused("stage 0's opening on stage 1", reveal(prov1, 1, types.OGPU(1), bidSalt(prov1, id, 0)), types.ErrCommitMismatch)
	n.refused("a wrong salt", reveal(prov2, 0, types.OGPU(2), hashOf("not the salt")), types.ErrCommitMismatch)
	n.refused("a reveal with no sealed bid", reveal(prov3, 0, types.OGPU(1), bidSalt(prov3, id, 0)), types.ErrUnknownJob)
	n.revealBid(prov1, id, 1, types.OGPU(2))
	if j := n.job(id); j.Opened != 2 || j.SealedBids() != 3 {
		t.Fatalf("%d of %d opened, want 2 of 3", j.Opened, j.SealedBids())
	}
	n.endBlock()
	if s := n.job(id).State; s != JobRevealing {
		t.Fatalf("after 5: %s, want revealing (prov2's bid is sealed)", s)
	}
	n.revealBid(prov2, id, 0, types.OGPU(2))
	n.endBlock()
	if j := n.job(id); j.State != JobRunning || j.Opened != 3 {
		t.Fatalf("after 6: %s with %d opened, want running with 3", j.State, j.Opened)
	}
}

// TestRevealThenDodgeInTheCloseBlock: L1 holds at the early close. A
// bidder that reveals and then, in the same block (now the close block),
// makes itself ineligible is dropped and loses its deposit.
func TestRevealThenDodgeInTheCloseBlock(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, longRevealJob(2))
	n.bid(prov1, id, 0, types.OGPU(1))
	n.bid(prov2, id, 0, types.OGPU(2))
	n.bid(prov3, id, 0, types.OGPU(2))
	n.advanceTo(5)
	n.revealBid(prov2, id, 0, types.OGPU(2))
	n.revealBid(prov3, id, 0, types.OGPU(2))
	n.revealBid(prov1, id, 0, types.OGPU(1))
	n.must("prov1 unbonds below the minimum", func(k *Keeper) error {
		return escrow.NewKeeper(k.kv).Unbond(prov1, uint256.NewInt(1), 1_000)
	})
	n.events = nil
	n.endBlock()
	forfeit := eventsOf[EventBidForfeited](t, n.events)
	if len(forfeit) != 1 || forfeit[0].Provider != prov1 {
		t.Fatalf("forfeited %+v, want prov1's", forfeit)
	}
	awarded := eventsOf[EventJobAwarded](t, n.events)
	if len(awarded) != 1 || len(awarded[0].Providers) != 2 || slices.Contains(awarded[0].Providers, prov1.Hex()) {
		t.Fatalf("awarded %+v, want prov2 and prov3", awarded)
	}
}

// TestBidlessAuctionClosesAtBidEnd: an auction with no sealed bid when its
// bid window ends expires there and refunds its client, the reveal window
// having nothing to wait for; one sealed bid at the last bid height keeps
// it open; a pool job without claims still takes claims to RevealEnd.
func TestBidlessAuctionClosesAtBidEnd(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	empty := n.post(client, longRevealJob(2))
	late := n.post(client, longRevealJob(2))
	pm := longRevealJob(2)
	pm.Mode = ModePool
	pool := n.post(client, pm)
	before := n.balance(client)
	n.advanceTo(4)
	n.bid(prov1, late, 0, types.OGPU(1))
	n.events = nil
	n.endBlock()
	exp := eventsOf[EventJobExpired](t, n.events)
	if len(exp) != 1 || exp[0].Job != empty {
		t.Fatalf("expired %+v at the bid end, want job %d only", exp, empty)
	}
	if j := n.job(empty); j.State != JobExpired || !n.esc().Locked(empty).IsZero() || n.closeKeyAt(j.RevealEnd, empty) {
		t.Fatalf("job %d: %s holding %s, close at RevealEnd scheduled %v; want expired, empty, none", empty, j.State, n.esc().Locked(empty).Dec(), n.closeKeyAt(j.RevealEnd, empty))
	}
	if got, want := n.balance(client), new(uint256.Int).Add(before, exp[0].Refund); !got.Eq(want) {
		t.Errorf("client has %s, want %s", got.Dec(), want.Dec())
	}
	if s := n.job(late).State; s != JobRevealing {
		t.Errorf("job %d with a sealed bid: %s, want revealing", late, s)
	}
	if s := n.job(pool).State; s != JobRevealing {
		t.Errorf("pool job %d: %s, want still taking claims", pool, s)
	}
	n.must("a claim on the pool job in its reveal window", func(k *Keeper) error {
		return k.ClaimTask(prov2, &MsgClaimTask{Job: pool, Stage: 0})
	})
}

// TestEarlyClosesShareTheDeadlineBound: the attack of a spammer that has
// many multi-stage jobs' bids all revealed in one block, so that they all
// close at its end. The closes are deadlines like any: at most
// max_deadline_work units per block, the rest carried over in order, and
// each job closes once (its RevealEnd key is gone).
func TestEarlyClosesShareTheDeadlineBound(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.MaxDeadlineWork = 200 // four 40-stage jobs (41 units each) per block
	n := marketNet(t, params)
	var ids []uint64
	for range 10 {
		m := auctionJob(2, uint256.NewInt(1))
		m.Stages = 40
		m.Windows.Reveal = 20
		ids = append(ids, n.post(client, m))
	}
	for _, id := range ids {
		n.bid(prov1, id, 0, uint256.NewInt(1))
	}
	reveal := n.job(ids[0]).BidEnd + 1
	n.advanceTo(reveal)
	for _, id := range ids {
		n.revealBid(prov1, id, 0, uint256.NewInt(1))
	}
	closedBy := map[uint64]uint64{}
	for h := reveal; len(closedBy) < len(ids); h++ {
		if h > reveal+5 {
			// The closes carry over only: no job may wait for RevealEnd.
			t.Fatalf("after %d blocks only %d of %d jobs closed", h-reveal, len(closedBy), len(ids))
		}
		n.events = nil
		n.endBlock()
		work := uint64(0)
		for _, id := range ids {
			if _, done := closedBy[id]; !done && n.job(id).State == JobRunning {
				closedBy[id] = h
				work += 41
			}
		}
		if work > params.Market.MaxDeadlineWork {
			t.Fatalf("block %d closed %d units of jobs, the bound is %d", h, work, params.Market.MaxDeadlineWork)
		}
	}
	for i, id := range ids {
		if want := reveal + uint64(i/4); closedBy[id] != want {
			t.Errorf("job %d closed at %d, want %d", id, closedBy[id], want)
		}
		if j := n.job(id); j.Settled != 39 || n.closeKeyAt(j.RevealEnd, id) {
			t.Errorf("job %d: %d stages settled, close at RevealEnd scheduled %v; want 39 (no bids), none", id, j.Settled, n.closeKeyAt(j.RevealEnd, id))
		}
	}
}
