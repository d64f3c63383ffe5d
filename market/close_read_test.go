package market

import (
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// TestCloseReadsWritesAfterTheBids is the attack on the close's read path
// (the tree's value cache, and the bids and order book read once per
// close): the two cheapest bidders make themselves ineligible after
// revealing, hoping the close ranks them on what was read when they bid.
// prov2 unbonds below the minimum in a block saved before the close (its
// stake was read, and cached, at its bid); prov1 is jailed in the close's
// own block (that of prov4's reveal, the last: the early close), before
// its end. Read stale, either would win the job without
// its stake or while jailed. Both forfeit their deposits; prov4 and prov3
// win and get theirs back.
func TestCloseReadsWritesAfterTheBids(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, auctionJob(2, types.OGPU(5)))
	provs := []types.Address{prov1, prov2, prov3, prov4}
	prices := []*uint256.Int{types.OGPU(2), types.OGPU(1), types.OGPU(4), types.OGPU(3)}
	for i, p := range provs {
		n.bid(p, id, 0, prices[i])
	}
	n.advanceTo(5)
	for i, p := range provs[:3] {
		n.revealBid(p, id, 0, prices[i])
	}
	n.must("unbond prov2", func(k *Keeper) error { return escrow.NewKeeper(k.kv).Unbond(prov2, types.OGPU(40), 1_000) })
	n.endBlock() // block 5 saved, prov4's bid still sealed: no close yet
	n.must("jail prov1", func(k *Keeper) error { k.jailProvider(prov1, 500, false, "test"); return nil })
	n.revealBid(prov4, id, 0, prices[3]) // the last reveal: block 6 closes the auction at its end
	before := make([]*uint256.Int, len(provs))
	for i, p := range provs {
		before[i] = n.balance(p)
	}
	mark := len(n.events)
	n.advanceTo(7)

	tk := n.task(id, 0)
	if len(tk.Slots) != 2 || tk.Slots[0].Provider != prov4 || tk.Slots[1].Provider != prov3 || len(tk.Backups) != 0 {
		t.Fatalf("winners %v, backups %v: want prov4 (3) then prov3 (4), no backups", tk.Slots, tk.Backups)
	}
	reasons := map[types.Address]string{} // looked up only
	for _, e := range eventsOf[EventBidForfeited](t, n.since(mark)) {
		reasons[e.Provider] = e.Reason
	}
	for p, want := range map[types.Address]string{prov1: "is jailed", prov2: "has 60ogpu bonded, job 1 needs 100ogpu"} {
		if r := reasons[p]; !strings.Contains(r, "ineligible at the close") || !strings.Contains(r, want) {
			t.Errorf("%s forfeited with %q, want an ineligible-at-the-close reason saying %q", p, r, want)
		}
	}
	if len(reasons) != 2 {
		t.Errorf("%d forfeits, want prov1's and prov2's: %v", len(reasons), reasons)
	}
	deposit := n.params.Market.BidDeposit
	for i, p := range provs {
		want := before[i].Clone()
		if p == prov3 || p == prov4 {
			want.Add(want, deposit)
		}
		if got := n.balance(p); !got.Eq(want) {
			t.Errorf("provider %d balance %s after the close, want %s", i+1, got.Dec(), want.Dec())
		}
	}
}
