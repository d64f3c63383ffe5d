package market

import (
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// agreeingJob posts an r = 2 job won by prov1 and prov2 (prov3 the backup
// that sets the price at 2) and has both reveal result; it returns once
// the task confirms.
func agreeingJob(t *testing.T, n *testNet, result types.Hash) uint64 {
	t.Helper()
	id := n.post(client, auctionJob(2, types.OGPU(3)))
	prices := map[types.Address]*uint256.Int{prov1: types.OGPU(1), prov2: types.OGPU(1), prov3: types.OGPU(2)}
	for _, p := range []types.Address{prov1, prov2, prov3} {
		n.bid(p, id, 0, prices[p])
	}
	n.advanceTo(n.job(id).BidEnd + 1)
	for _, p := range []types.Address{prov1, prov2, prov3} {
		n.revealBid(p, id, 0, prices[p])
	}
	n.advanceTo(n.job(id).RevealEnd + 1)
	salt := hashOf("salt")
	for _, p := range []types.Address{prov1, prov2} {
		n.must("commit", func(k *Keeper) error {
			return k.CommitResult(p, &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: verifier.ResultCommitment(result, salt, p)})
		})
	}
	n.endBlock()
	for _, p := range []types.Address{prov1, prov2} {
		n.must("reveal", func(k *Keeper) error {
			return k.RevealResult(p, &verifier.MsgRevealResult{Job: id, Stage: 0, Result: result, Salt: salt})
		})
	}
	if tk := n.task(id, 0); tk.Status != verifier.TaskConfirming || tk.DrawAt != n.height {
		t.Fatalf("task %s drawing at %d, want confirming, drawn from the beacon value of %d", tk.Status, tk.DrawAt, n.height)
	}
	return id
}

// TestRandomAuditCatchesAgreeingCartel: two providers holding both slots
// agree on junk. Drawn for an audit (every task, at audit_rate_bps
// 10,000), the validators re-execute it and vote the true answer: both
// are slashed fraud_slash_bps and tombstoned, nothing is paid, and the
// client is compensated.
func TestRandomAuditCatchesAgreeingCartel(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.AuditRateBps = 10_000
	n := marketNet(t, params)
	stakes := []*uint256.Int{n.esc().Bonded(prov1), n.esc().Bonded(prov2)}
	id := agreeingJob(t, n, hashOf("junk"))
	n.events = nil
	n.advanceTo(n.task(id, 0).ConfirmBy + 1)
	tk := n.task(id, 0)
	if tk.Status != verifier.TaskDisputed || tk.Audit != verifier.AuditRandom {
		t.Fatalf("task %s (audit %q) after its canary window, want a random audit", tk.Status, tk.Audit)
	}
	if a := eventsOf[EventAuditOpened](t, n.events); len(a) != 1 || a[0].Reason != verifier.AuditRandom || a[0].Agreeing != 2 {
		t.Fatalf("audit_opened %+v", a)
	}
	n.vote(id, 0, hashOf("the true answer"), addrOf("val"))
	j := n.job(id)
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != "verdict" || !j.Paid.IsZero() || j.Compensated.IsZero() {
		t.Fatalf("outcomes %v, paid %s, compensated %s: want the cartel's junk rejected, nothing paid, the client compensated", got, j.Paid.Dec(), j.Compensated.Dec())
	}
	for i, p := range []types.Address{prov1, prov2} {
		want := new(uint256.Int).Sub(stakes[i], escrow.MulBps(stakes[i], n.params.Market.FraudSlashBps))
		if got := n.esc().Bonded(p); !got.Eq(want) {
			t.Errorf("cartel member %d: stake %s, want %s", i+1, got.Dec(), want.Dec())
		}
		if pr, _ := GetProvider(n.tree, p); !pr.Tombstoned {
			t.Errorf("cartel member %d is not tombstoned", i+1)
		}
	}
}

// TestRandomAuditUpheldIsPaid: an honest agreement drawn for an audit is
// re-executed and paid "audited"; one nobody votes on keeps its agreement
// (the validators' absence must not cost honest providers their pay).
func TestRandomAuditUpheldIsPaid(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.AuditRateBps = 10_000
	n := marketNet(t, params)
	id := agreeingJob(t, n, hashOf("answer"))
	n.advanceTo(n.task(id, 0).ConfirmBy + 1)
	n.events = nil
	n.vote(id, 0, hashOf("answer"), addrOf("val"))
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != OutcomeAudited {
		t.Fatalf("outcomes %v, want [audited]", got)
	}
	if j := n.job(id); j.Verified != 1 || !j.Paid.Eq(types.OGPU(4)) {
		t.Fatalf("verified %d, paid %s; want 1, 4 oGPU", j.Verified, j.Paid.Dec())
	}
	id = agreeingJob(t, n, hashOf("answer 2"))
	n.advanceTo(n.task(id, 0).ConfirmBy + 1)
	n.events = nil
	n.advanceTo(n.task(id, 0).DisputeDeadline + 1)
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != "agreed" {
		t.Fatalf("outcomes %v of an audit nobody voted on, want [agreed]", got)
	}
	if j := n.job(id); !j.Paid.Eq(types.OGPU(4)) {
		t.Fatalf("paid %s, want 4 oGPU", j.Paid.Dec())
	}
}

// TestRandomAuditWaitsForTheBeacon: a task settles only once the beacon
// value of its confirming height is final. With a registered validator
// that does not reveal, the value waits beacon.Timeout blocks, and so does
// the task, past its canary window; then it is drawn. At rate 0 nothing
// is audited.
func TestRandomAuditWaitsForTheBeacon(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.AuditRateBps = 10_000
	n := marketNet(t, params)
	n.must("register a beacon chain", func(k *Keeper) error {
		if why := beacon.NewKeeper(k.kv, nil).Apply(addrOf("val"), n.height-1, &beacon.Reveal{Value: hashOf("tip"), Register: true, Length: 1000}); why != "" {
			t.Fatal(why)
		}
		return nil
	})
	id := agreeingJob(t, n, hashOf("answer"))
	drawAt := n.task(id, 0).DrawAt
	n.advanceTo(n.task(id, 0).ConfirmBy + 1)
	if tk := n.task(id, 0); tk.Status != verifier.TaskConfirming {
		t.Fatalf("task %s before the beacon value of %d is final, want confirming", tk.Status, drawAt)
	}
	n.advanceTo(drawAt + beacon.Timeout + 1)
	if _, ok := beacon.Value(n.tree, drawAt); !ok {
		t.Fatalf("beacon value of %d not final at %d", drawAt, n.height)
	}
	if tk := n.task(id, 0); tk.Status != verifier.TaskDisputed || tk.Audit != verifier.AuditRandom {
		t.Fatalf("task %s (audit %q) once the value is final, want drawn", tk.Status, tk.Audit)
	}

	params.Market.AuditRateBps = 0
	n = marketNet(t, params)
	id = agreeingJob(t, n, hashOf("answer"))
	n.events = nil
	n.advanceTo(n.task(id, 0).ConfirmBy + 1)
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != "agreed" {
		t.Fatalf("outcomes %v at audit_rate_bps 0, want [agreed]", got)
	}
}
