package market

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Tests of the ranking at the reveal (leaders.go, AppVersion 7): each
// auction stage keeps its 3r + 1 best revealed bids, a reveal pushes out
// the last one and returns its deposit, the close checks and awards the
// leaders only.

// leadersNet is a net with a client, n registered providers (200 oGPU
// bonded each, enough to back a slot of these tests' 10 oGPU cap, and
// 1,000 oGPU of balance) and one validator, at height 2.
func leadersNet(t *testing.T, n int) (*testNet, []types.Address) {
	t.Helper()
	provs := make([]types.Address, n)
	accts := []testAccount{{client, types.OGPU(1_000)}, {addrOf("val"), types.OGPU(2_000)}}
	for i := range provs {
		provs[i] = addrOf(fmt.Sprintf("leader test provider %d", i))
		accts = append(accts, testAccount{provs[i], types.OGPU(1_000)})
	}
	net := newTestNet(t, genesis.DefaultParams(), accts, []string{"val"})
	for i, p := range provs {
		net.register(p, types.OGPU(200), gpuInfo(fmt.Sprint("leader", i)))
	}
	net.endBlock()
	return net, provs
}

// firstRevealHeight is the first reveal block of a job posted at 2:
// auctionJob bids at 2..4, reveals at 5..6.
const firstRevealHeight = 5

// TestEvictedLoserRefundedOnce: r = 2 keeps 7 leaders. Nine bids revealed
// worst first: the eighth reveal pushes out the worst, the ninth the next;
// each gets its deposit back in that reveal, exactly once (its balance
// does not move again at the close, and the escrow invariant, checked
// every block, holds the job to the deposits it still owes). The close
// awards the two best at the third-best price.
func TestEvictedLoserRefundedOnce(t *testing.T) {
	n, provs := leadersNet(t, 9)
	id := n.post(client, auctionJob(2, types.OGPU(10)))
	start := make([]*uint256.Int, len(provs))
	for i, p := range provs {
		start[i] = n.balance(p)
		n.bid(p, id, 0, types.OGPU(uint64(9-i))) // provs[0] bids 9, ..., provs[8] bids 1
	}
	n.advanceTo(firstRevealHeight)
	deposit := n.params.Market.BidDeposit
	for i, p := range provs {
		mark := len(n.events)
		n.revealBid(p, id, 0, types.OGPU(uint64(9-i)))
		ev := eventsOf[EventBidEvicted](t, n.since(mark))
		switch {
		case i < 7 && len(ev) != 0:
			t.Fatalf("reveal %d evicted %+v with the list not full", i, ev)
		case i >= 7 && (len(ev) != 1 || ev[0].Provider != provs[i-7] || !ev[0].Deposit.Eq(deposit) || ev[0].Leaders != 7):
			t.Fatalf("reveal %d evicted %+v, want provs[%d] (the worst leader) with its deposit, 7 leaders left", i, ev, i-7)
		}
		if i >= 7 && !n.balance(provs[i-7]).Eq(start[i-7]) {
			t.Fatalf("provs[%d] has %s after its eviction, want its deposit back: %s", i-7, n.balance(provs[i-7]).Dec(), start[i-7].Dec())
		}
	}
	if l := GetLeaders(n.tree, id, 0); len(l.List) != 7 || l.Evicted != 2 || !l.EvictedMin.Eq(types.OGPU(8)) {
		t.Fatalf("leaders %d, evicted %d, lowest evicted %s; want 7, 2, 8 oGPU", len(l.List), l.Evicted, l.EvictedMin.Dec())
	}
	mark := len(n.events)
	n.advanceTo(firstRevealHeight + 1) // every bid revealed: the close ran at the end of 5
	tk := n.task(id, 0)
	if len(tk.Slots) != 2 || tk.Slots[0].Provider != provs[8] || tk.Slots[1].Provider != provs[7] || !slices.Equal(tk.Backups, []types.Address{provs[6], provs[5], provs[4], provs[3], provs[2]}) {
		t.Fatalf("slots %v backups %v: want provs[8], [7] winning, [6] to [2] as backups", tk.Slots, tk.Backups)
	}
	if p := n.job(id).Prices[0]; !p.Eq(types.OGPU(3)) {
		t.Fatalf("price %s, want 3 oGPU (the third best)", p.Dec())
	}
	if got := eventsOf[EventBidForfeited](t, n.since(mark)); len(got) != 0 {
		t.Fatalf("forfeits %+v, want none", got)
	}
	for i, p := range provs {
		if got := n.balance(p); !got.Eq(start[i]) {
			t.Errorf("provs[%d] has %s after the close, want %s: every deposit back exactly once", i, got.Dec(), start[i].Dec())
		}
	}
	if n.tree.Get(LeadersKey(id, 0)) != nil {
		t.Error("the leaders list outlived the close")
	}
}

// TestCancelAfterEviction: a job cancelled after a reveal pushed a bid
// out returns the leaders' and the sealed bids' deposits, not the evicted
// one's a second time: every provider ends where it started and the
// job's escrow is empty (the escrow invariant).
func TestCancelAfterEviction(t *testing.T) {
	n, provs := leadersNet(t, 9)
	id := n.post(client, auctionJob(2, types.OGPU(10)))
	start := make([]*uint256.Int, len(provs))
	for i, p := range provs {
		start[i] = n.balance(p)
		n.bid(p, id, 0, types.OGPU(uint64(10-i)))
	}
	n.advanceTo(firstRevealHeight)
	for i, p := range provs[:8] { // provs[8] stays sealed
		n.revealBid(p, id, 0, types.OGPU(uint64(10-i)))
	}
	if ev := eventsOf[EventBidEvicted](t, n.events); len(ev) != 1 || ev[0].Provider != provs[0] {
		t.Fatalf("evicted %+v, want provs[0]", ev)
	}
	n.must("cancel", func(k *Keeper) error { return k.CancelJob(client, id) })
	n.endBlock()
	for i, p := range provs {
		if got := n.balance(p); !got.Eq(start[i]) {
			t.Errorf("provs[%d] has %s after the cancel, want %s", i, got.Dec(), start[i].Dec())
		}
	}
	if l := n.esc().Locked(id); !l.IsZero() {
		t.Errorf("job escrow holds %s after the cancel", l.Dec())
	}
	if n.tree.Get(LeadersKey(id, 0)) != nil {
		t.Error("the leaders list outlived the cancel")
	}
}

// TestIneligibleLeaderForfeits: the best leader is jailed after its
// reveal. At the close it forfeits its deposit (L1, as before the leaders
// list) and the next leader wins, at the price of the one after it.
func TestIneligibleLeaderForfeits(t *testing.T) {
	n, provs := leadersNet(t, 4)
	id := n.post(client, auctionJob(2, types.OGPU(10)))
	for i, p := range provs {
		n.bid(p, id, 0, types.OGPU(uint64(i+1)))
	}
	n.advanceTo(firstRevealHeight)
	for i, p := range provs[:3] {
		n.revealBid(p, id, 0, types.OGPU(uint64(i+1)))
	}
	n.must("jail provs[0]", func(k *Keeper) error { k.jailProvider(provs[0], 500, false, "test"); return nil })
	before := n.balance(provs[0])
	burned := n.esc().Burned()
	n.revealBid(provs[3], id, 0, types.OGPU(4)) // the last: the close at the end of this block
	mark := len(n.events)
	n.endBlock()
	tk := n.task(id, 0)
	if len(tk.Slots) != 2 || tk.Slots[0].Provider != provs[1] || tk.Slots[1].Provider != provs[2] || !slices.Equal(tk.Backups, []types.Address{provs[3]}) {
		t.Fatalf("slots %v backups %v: want provs[1], [2] winning, provs[3] the backup", tk.Slots, tk.Backups)
	}
	if p := n.job(id).Prices[0]; !p.Eq(types.OGPU(4)) {
		t.Fatalf("price %s, want 4 oGPU", p.Dec())
	}
	f := eventsOf[EventBidForfeited](t, n.since(mark))
	if len(f) != 1 || f[0].Provider != provs[0] || !strings.Contains(f[0].Reason, "ineligible at the close") || !strings.Contains(f[0].Reason, "jailed") {
		t.Fatalf("forfeits %+v, want provs[0]'s, ineligible at the close (jailed)", f)
	}
	if got := n.balance(provs[0]); !got.Eq(before) {
		t.Errorf("jailed leader's balance %s, want %s: its deposit burned", got.Dec(), before.Dec())
	}
	if got, want := n.esc().Burned(), new(uint256.Int).Add(burned, n.params.Market.BidDeposit); !got.Eq(want) {
		t.Errorf("burned %s, want %s", got.Dec(), want.Dec())
	}
}

// TestRevealRefusedWhileIneligible: a reveal ranks its bid, so its
// provider must be eligible then. A jailed provider's reveal is refused
// and changes nothing; its bid stays sealed (the auction waits for it to
// RevealEnd), and once unjailed it reveals and wins.
func TestRevealRefusedWhileIneligible(t *testing.T) {
	n, provs := leadersNet(t, 3)
	id := n.post(client, longRevealJob(2))
	for i, p := range provs {
		n.bid(p, id, 0, types.OGPU(uint64(i+1)))
	}
	n.must("jail provs[0]", func(k *Keeper) error { k.jailProvider(provs[0], 6, false, "test"); return nil })
	n.advanceTo(firstRevealHeight)
	n.revealBid(provs[1], id, 0, types.OGPU(2))
	n.revealBid(provs[2], id, 0, types.OGPU(3))
	n.refused("reveal while jailed", func(k *Keeper) error {
		return k.RevealBid(provs[0], &MsgRevealBid{Job: id, Stage: 0, Price: types.OGPU(1), Salt: bidSalt(provs[0], id, 0)})
	}, types.ErrNotEligible, "is jailed", "the bid stays sealed", "by height 9")
	n.endBlock()
	if s := n.job(id).State; s != JobRevealing {
		t.Fatalf("after the refused reveal's block: %s, want revealing (a sealed bid is left)", s)
	}
	n.must("unjail", func(k *Keeper) error { return k.UnjailProvider(provs[0]) })
	n.revealBid(provs[0], id, 0, types.OGPU(1))
	n.endBlock()
	tk := n.task(id, 0)
	if len(tk.Slots) != 2 || tk.Slots[0].Provider != provs[0] || !n.job(id).Prices[0].Eq(types.OGPU(3)) {
		t.Fatalf("slots %v price %s: want provs[0] first, at 3 oGPU", tk.Slots, n.job(id).Prices[0].Dec())
	}
}

// TestCartelCannotEvictHonestBid: the attacks of a cartel on an honest
// low bid through the leaders list.
//
//   - Dearer bids, however many and revealed before or after it, cannot
//     push it out: it is ranked by price, and only a better bid evicts.
//   - Cheaper bids can push it out (they would outrank it anyway), and the
//     cartel then makes all but one of them ineligible before the close,
//     hoping its last two bidders win at the cap with nobody left to set the
//     price. It does not: a stage left without a backup clears at the
//     lowest evicted price, the honest bid's, exactly what the ranking of
//     every bid would have given. The cartel pays five forfeited deposits
//     for nothing.
func TestCartelCannotEvictHonestBid(t *testing.T) {
	for _, honestFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("dearer/honest-first=%v", honestFirst), func(t *testing.T) {
			n, provs := leadersNet(t, 11)
			honest, cartel := provs[0], provs[1:]
			id := n.post(client, auctionJob(2, types.OGPU(10)))
			n.bid(honest, id, 0, types.OGPU(2))
			for _, c := range cartel {
				n.bid(c, id, 0, types.OGPU(3))
			}
			n.advanceTo(firstRevealHeight)
			if honestFirst {
				n.revealBid(honest, id, 0, types.OGPU(2))
			}
			for _, c := range cartel {
				n.revealBid(c, id, 0, types.OGPU(3))
			}
			if !honestFirst {
				n.revealBid(honest, id, 0, types.OGPU(2))
			}
			for _, e := range eventsOf[EventBidEvicted](t, n.events) {
				if e.Provider == honest {
					t.Fatal("the honest low bid was evicted by dearer bids")
				}
			}
			n.endBlock()
			if tk := n.task(id, 0); tk.Slots[0].Provider != honest || !n.job(id).Prices[0].Eq(types.OGPU(3)) {
				t.Fatalf("winner %s at %s, want the honest bid at 3 oGPU", tk.Slots[0].Provider, n.job(id).Prices[0].Dec())
			}
		})
	}
	t.Run("cheaper then ineligible", func(t *testing.T) {
		n, provs := leadersNet(t, 8)
		honest, cartel := provs[0], provs[1:] // 7 = 3r + 1 cartel bids
		id := n.post(client, auctionJob(2, types.OGPU(10)))
		n.bid(honest, id, 0, types.OGPU(2))
		for _, c := range cartel {
			n.bid(c, id, 0, types.OGPU(1))
		}
		n.advanceTo(firstRevealHeight)
		n.revealBid(honest, id, 0, types.OGPU(2))
		hb := n.balance(honest)
		for _, c := range cartel {
			n.revealBid(c, id, 0, types.OGPU(1))
		}
		if ev := eventsOf[EventBidEvicted](t, n.events); len(ev) != 1 || ev[0].Provider != honest {
			t.Fatalf("evicted %+v, want the honest bid", ev)
		}
		if got, want := n.balance(honest), new(uint256.Int).Add(hb, n.params.Market.BidDeposit); !got.Eq(want) {
			t.Fatalf("honest balance %s, want %s: its deposit back at the eviction", got.Dec(), want.Dec())
		}
		for _, c := range cartel[2:] {
			n.must("cartel unbonds", func(k *Keeper) error { return escrow.NewKeeper(k.kv).Unbond(c, types.OGPU(50), 1_000) })
		}
		burned := n.esc().Burned()
		n.endBlock()
		tk := n.task(id, 0)
		if len(tk.Slots) != 2 || len(tk.Backups) != 0 {
			t.Fatalf("slots %v backups %v, want the cartel's two eligible bidders, no backup", tk.Slots, tk.Backups)
		}
		if p := n.job(id).Prices[0]; !p.Eq(types.OGPU(2)) {
			t.Fatalf("price %s, want 2 oGPU (the evicted honest bid's), not the cap", p.Dec())
		}
		if got, want := n.esc().Burned(), new(uint256.Int).Add(burned, types.OGPU(5)); !got.Eq(want) {
			t.Errorf("burned %s, want %s: the five ineligible cartel deposits", got.Dec(), want.Dec())
		}
	})
}

// TestRevealOrderDoesNotMatter is a property test (fixed seed): the same
// sealed bids revealed in random orders, spread over the two reveal
// blocks, give the same winners, backups, price and balances every time,
// equal to ranking every bid at once (price, then the tie hash seeded by
// the first reveal's block; reputations are equal here). Each reveal
// evicts at most one bid and the list never exceeds 3r + 1: the reveal's
// extra work is bounded.
func TestRevealOrderDoesNotMatter(t *testing.T) {
	const bidders, r = 14, 2
	rng := rand.New(rand.NewPCG(17, 7))
	prices := make([]*uint256.Int, bidders)
	for i := range prices {
		prices[i] = types.OGPU(uint64(1 + rng.IntN(5))) // 5 prices: ties
	}
	type outcome struct {
		slots, backups []types.Address
		price          string
		balances       []string
		burned         string
	}
	var first *outcome
	for round := range 12 {
		n, provs := leadersNet(t, bidders)
		id := n.post(client, auctionJob(r, types.OGPU(10)))
		for i, p := range provs {
			n.bid(p, id, 0, prices[i])
		}
		n.advanceTo(firstRevealHeight)
		order := rng.Perm(bidders)
		split := 1 + rng.IntN(bidders-1) // reveals in block 5, the rest in 6
		for k, i := range order {
			if k == split {
				n.endBlock()
			}
			mark := len(n.events)
			n.revealBid(provs[i], id, 0, prices[i])
			if ev := eventsOf[EventBidEvicted](t, n.since(mark)); len(ev) > 1 {
				t.Fatalf("one reveal evicted %d bids", len(ev))
			}
			if l := GetLeaders(n.tree, id, 0); len(l.List) > 3*r+1 {
				t.Fatalf("%d leaders, cap %d", len(l.List), 3*r+1)
			}
		}
		n.endBlock()
		tk := n.task(id, 0)
		o := &outcome{price: n.job(id).Prices[0].Dec(), burned: n.esc().Burned().Dec(), backups: tk.Backups}
		for _, s := range tk.Slots {
			o.slots = append(o.slots, s.Provider)
		}
		for _, p := range provs {
			o.balances = append(o.balances, n.balance(p).Dec())
		}
		if first == nil {
			first = o
			// The reference: every bid ranked at once.
			seed := blockHashAt(firstRevealHeight)
			all := make([]int, bidders)
			for i := range all {
				all[i] = i
			}
			slices.SortFunc(all, func(a, b int) int {
				return cmpLeader(&Leader{Price: prices[a], Tie: TieHash(seed, id, 0, provs[a])}, &Leader{Price: prices[b], Tie: TieHash(seed, id, 0, provs[b])})
			})
			want := []types.Address{provs[all[0]], provs[all[1]]}
			var backups []types.Address
			for _, i := range all[r : 3*r+1] {
				backups = append(backups, provs[i])
			}
			if !slices.Equal(o.slots, want) || o.price != prices[all[r]].Dec() || !slices.Equal(o.backups, backups) {
				t.Fatalf("winners %v at %s, backups %v; ranking every bid gives %v at %s", o.slots, o.price, o.backups, want, prices[all[r]].Dec())
			}
			continue
		}
		if !slices.Equal(o.slots, first.slots) || !slices.Equal(o.backups, first.backups) || o.price != first.price || !slices.Equal(o.balances, first.balances) || o.burned != first.burned {
			t.Fatalf("round %d (order %v, split %d): %+v, first round %+v", round, order, split, o, first)
		}
	}
}

// blockHashAt is testNet.blockHash of height h.
func blockHashAt(h uint64) []byte {
	n := testNet{height: h}
	return n.blockHash()
}

// TestReputationReadAtReveal: the ranking among equal prices uses each
// provider's reputation at its reveal (the key is fixed then, so the
// reveal order cannot change it). A provider whose score falls after its
// reveal keeps its place among equal prices; a fall below the job's
// minimum reputation still makes it ineligible at the close (L1), and it
// forfeits.
func TestReputationReadAtReveal(t *testing.T) {
	for _, minRep := range []uint64{0, 400} {
		t.Run(fmt.Sprint("min-rep=", minRep), func(t *testing.T) {
			n, provs := leadersNet(t, 3)
			good := provs[0]
			n.must("good record", func(k *Keeper) error {
				k.ver.UpdateReputation(good, func(r *verifier.Reputation) { r.Done, r.Agreed = 20, 20 })
				return nil
			})
			m := auctionJob(2, types.OGPU(10))
			m.Req.MinReputation = minRep
			id := n.post(client, m)
			for _, p := range provs {
				n.bid(p, id, 0, types.OGPU(2))
			}
			n.advanceTo(firstRevealHeight)
			for _, p := range provs {
				n.revealBid(p, id, 0, types.OGPU(2))
			}
			n.must("good loses disputes after its reveal", func(k *Keeper) error {
				k.ver.UpdateReputation(good, func(r *verifier.Reputation) { r.Lost += 20 })
				return nil
			})
			if s := n.ver().GetReputation(good).Score(); s >= 400 || s >= n.ver().GetReputation(provs[1]).Score() {
				t.Fatalf("good's score %d after the losses: the test needs it below the others' and below 400", s)
			}
			n.endBlock() // the close
			tk := n.task(id, 0)
			if minRep == 0 {
				if tk.Slots[0].Provider != good {
					t.Fatalf("slots %v: want good first, ranked on its score at the reveal", tk.Slots)
				}
				return
			}
			if tk.SlotOf(good) >= 0 || slices.Contains(tk.Backups, good) {
				t.Fatalf("slots %v backups %v: good is below the job's minimum reputation at the close", tk.Slots, tk.Backups)
			}
			f := eventsOf[EventBidForfeited](t, n.events)
			if len(f) != 1 || f[0].Provider != good || !strings.Contains(f[0].Reason, "reputation") {
				t.Fatalf("forfeits %+v, want good's, for its reputation", f)
			}
		})
	}
}
