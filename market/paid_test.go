package market

import (
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// paidByJob sums the provider_paid events of evs per job and per
// (job, provider), after a round trip through the ABCI encoding.
func paidByJob(t *testing.T, evs types.Events) (map[uint64]*uint256.Int, map[uint64]map[types.Address]*uint256.Int, []EventProviderPaid) {
	t.Helper()
	paid := eventsOf[EventProviderPaid](t, evs)
	perJob := map[uint64]*uint256.Int{}
	perProv := map[uint64]map[types.Address]*uint256.Int{}
	for _, e := range paid {
		if perJob[e.Job] == nil {
			perJob[e.Job], perProv[e.Job] = new(uint256.Int), map[types.Address]*uint256.Int{}
		}
		perJob[e.Job].Add(perJob[e.Job], e.Amount)
		if perProv[e.Job][e.Provider] == nil {
			perProv[e.Job][e.Provider] = new(uint256.Int)
		}
		perProv[e.Job][e.Provider].Add(perProv[e.Job][e.Provider], e.Amount)
	}
	return perJob, perProv, paid
}

// TestProviderPaidAgreedAndVerdict: over a 3-stage pipeline whose stages
// 0 and 2 are agreed and stage 1 decided by a verdict against a liar, the
// provider_paid events add up to the job's Paid exactly, name each paid
// provider with its balance gain, say "job", and the slashed liar (whose
// slot was refunded) has none. A reader summing the events is never
// shown more than escrow released, nor a payment to the cheater.
func TestProviderPaidAgreedAndVerdict(t *testing.T) {
	p := newPipeNet(t)
	start := p.balances()
	liar := p.stage[1][1]
	id := p.award()
	out := [3]types.Hash{hashOf("stage 0 out"), hashOf("stage 1 out"), hashOf("stage 2 out")}
	p.events = nil
	p.run(id, 0, [2]types.Hash{out[0], out[0]})
	p.endBlock()
	p.run(id, 1, [2]types.Hash{out[1], hashOf("a lie")})
	p.advanceTo(14)
	p.vote(id, 1, out[1], p.val)
	p.endBlock()
	p.run(id, 2, [2]types.Hash{out[2], out[2]})
	j := p.job(id)
	if j.State != JobCompleted {
		t.Fatalf("job is %s, want completed", j.State)
	}
	perJob, perProv, paid := paidByJob(t, p.events)
	if len(paid) != 5 {
		t.Fatalf("%d provider_paid events, want 5 (six slots, one liar): %+v", len(paid), paid)
	}
	if perJob[id] == nil || !perJob[id].Eq(j.Paid) {
		t.Fatalf("provider_paid sum %v, want the job's paid %s", perJob[id], j.Paid.Dec())
	}
	end := p.balances()
	for s := range p.stage {
		for _, a := range p.stage[s] {
			got := perProv[id][a]
			if a == liar {
				if got != nil {
					t.Errorf("the slashed liar %s has provider_paid %s", a, got.Dec())
				}
				continue
			}
			gain := new(uint256.Int).Sub(end[a], start[a])
			if got == nil || !got.Eq(gain) || !got.Eq(types.OGPU(2)) {
				t.Errorf("stage %d provider %s: provider_paid %v, balance gain %s, want 2 oGPU both", s, a, got, gain.Dec())
			}
		}
	}
	for _, e := range paid {
		if e.Via != PaidViaJob {
			t.Errorf("event %+v: via %q, want %q", e, e.Via, PaidViaJob)
		}
	}
	if perProv[id][p.backup] != nil {
		t.Errorf("the backup, never assigned, has provider_paid %s", perProv[id][p.backup].Dec())
	}
}

// TestProviderPaidRefundedJobHasNone: a job whose providers never deliver
// is refunded; no provider_paid event claims otherwise.
func TestProviderPaidRefundedJobHasNone(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, auctionJob(2, types.OGPU(3)))
	n.bid(prov1, id, 0, types.OGPU(1))
	n.bid(prov2, id, 0, types.OGPU(1))
	n.advanceTo(n.job(id).BidEnd + 1)
	n.revealBid(prov1, id, 0, types.OGPU(1))
	n.revealBid(prov2, id, 0, types.OGPU(1))
	n.advanceTo(n.job(id).Expiry + 2)
	j := n.job(id)
	if !j.Paid.IsZero() {
		t.Fatalf("a job nobody delivered paid %s", j.Paid.Dec())
	}
	if _, _, paid := paidByJob(t, n.events); len(paid) != 0 {
		t.Fatalf("provider_paid for a refunded job: %+v", paid)
	}
}

// TestProviderPaidSessionReservation: a session's award pays each lane's
// provider its reservation; the events name the winners, say
// "reservation", and add up to the job's Paid at the award (voucher
// redemptions are session_redeemed events, not repeated).
func TestProviderPaidSessionReservation(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	m := auctionJob(2, types.OGPU(1))
	m.Kind, m.Input = KindSession, types.Hash{}
	m.Windows.Execute, m.Windows.Verify = 0, 0
	m.Session = &SessionTerms{Budget: types.OGPU(10), Blocks: 20, Grace: 5}
	id := n.post(client, m)
	for _, a := range []types.Address{prov1, prov2, prov3} {
		n.bid(a, id, 0, types.OGPU(1))
	}
	n.advanceTo(n.job(id).BidEnd + 1)
	for _, a := range []types.Address{prov1, prov2, prov3} {
		n.revealBid(a, id, 0, types.OGPU(1))
	}
	n.events = nil
	n.advanceTo(n.job(id).RevealEnd + 1)
	j := n.job(id)
	if j.State != JobRunning {
		t.Fatalf("session job is %s after the close, want running", j.State)
	}
	awards := eventsOf[EventJobAwarded](t, n.events)
	if len(awards) != 1 || len(awards[0].Providers) != 2 {
		t.Fatalf("awards %+v, want one of 2 lanes", awards)
	}
	perJob, perProv, paid := paidByJob(t, n.events)
	res := ReservationFee(n.params.Market, m.Session)
	if res.IsZero() || len(paid) != 2 || perJob[id] == nil || !perJob[id].Eq(j.Paid) {
		t.Fatalf("provider_paid %+v (sum %v), want 2 reservations of %s adding up to the job's paid %s", paid, perJob[id], res.Dec(), j.Paid.Dec())
	}
	for _, w := range awards[0].Providers {
		a, err := types.ParseAddress(w)
		if err != nil {
			t.Fatal(err)
		}
		if got := perProv[id][a]; got == nil || !got.Eq(res) {
			t.Errorf("winner %s: provider_paid %v, want the reservation %s", w, got, res.Dec())
		}
	}
	for _, e := range paid {
		if e.Via != PaidViaReservation || e.Stage != 0 {
			t.Errorf("event %+v: want via %q at stage 0", e, PaidViaReservation)
		}
	}
}
