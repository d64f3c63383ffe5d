package market

import (
	"slices"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Regression tests of review 2's market findings M-H1 (lone results paid
// as agreed: LLM, pool and fine-tune jobs), M-M2 (the cap paid when
// bidders ≤ slots) and M-L1 (reputation farmed by one sybil). Each was a
// passing proof of the hole against e61342d (market/audit_market_test.go
// in the review); here they assert the rule (short.go). They use only
// what existed at e61342d, so the same file fails there.

// settledOutcomes lists the task_settled outcomes of job id in evs.
func settledOutcomes(t *testing.T, evs types.Events, id uint64) []string {
	t.Helper()
	var out []string
	for _, e := range eventsOf[EventTaskSettled](t, evs) {
		if e.Job == id {
			out = append(out, e.Outcome)
		}
	}
	return out
}

// loneResult commits and reveals result for p on stage 0 of job id.
func (n *testNet) loneResult(p types.Address, id uint64, result types.Hash) {
	n.tb.Helper()
	salt := hashOf("salt of " + p.Hex())
	n.must("commit", func(k *Keeper) error {
		return k.CommitResult(p, &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: verifier.ResultCommitment(result, salt, p)})
	})
	n.endBlock()
	if tk := n.task(id, 0); !tk.AllCommitted() {
		n.advanceTo(tk.CommitDeadline + 1) // the others are no-shows: reveals open
	}
	n.must("reveal", func(k *Keeper) error {
		return k.RevealResult(p, &verifier.MsgRevealResult{Job: id, Stage: 0, Result: result, Salt: salt})
	})
}

// loneBidderJob posts an r = 3 inference auction with a 3 oGPU cap that
// gets one bid, prov1's at 0.1 oGPU, and runs it past the close.
func loneBidderJob(t *testing.T, n *testNet) uint64 {
	t.Helper()
	id := n.post(client, auctionJob(3, types.OGPU(3)))
	n.bid(prov1, id, 0, amt("0.1ogpu"))
	n.advanceTo(n.job(id).BidEnd + 1)
	n.revealBid(prov1, id, 0, amt("0.1ogpu"))
	n.advanceTo(n.job(id).RevealEnd + 1)
	return id
}

// TestLoneBidderIsAuditedNotAgreed (M-H1, M-M2, M-L1): an r = 3 job with
// one bid of 0.1 oGPU. The lone winner is paid its bid, not the cap; its
// result is never "agreed": the validators audit it. A result they reject
// is fraud (slashed, nothing paid, nothing verified, no reputation).
func TestLoneBidderIsAuditedNotAgreed(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := loneBidderJob(t, n)
	j := n.job(id)
	if j.State != JobRunning || !j.Prices[0].Eq(amt("0.1ogpu")) {
		t.Fatalf("job %s at price %s, want running at the lone bid 0.1 oGPU (not the 3 oGPU cap)", j.State, types.FormatAmount(j.Prices[0]))
	}
	bal, stake := n.balance(prov1), n.esc().Bonded(prov1)
	invented, honest := hashOf("never computed"), hashOf("the real answer")
	n.events = nil
	n.loneResult(prov1, id, invented)
	tk := n.task(id, 0)
	if tk.Status != verifier.TaskDisputed {
		t.Fatalf("one revealed result of r = 3: task %s, want a validator audit (a vote), never confirming as agreed", tk.Status)
	}
	n.vote(id, 0, honest, addrOf("val")) // the validator re-executes and votes what it computed
	j = n.job(id)
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != "verdict" {
		t.Fatalf("outcomes %v, want [verdict]: the audit found the result wrong", got)
	}
	if j.State != JobCompleted || j.Verified != 0 || !j.Paid.IsZero() {
		t.Fatalf("job %s, verified %d, paid %s; want completed, nothing verified or paid", j.State, j.Verified, types.FormatAmount(j.Paid))
	}
	if n.balance(prov1).Gt(bal) {
		t.Errorf("the liar's balance grew from %s to %s", bal.Dec(), n.balance(prov1).Dec())
	}
	slashed := new(uint256.Int).Sub(stake, n.esc().Bonded(prov1))
	if want := types.OGPU(50); !slashed.Eq(want) {
		t.Errorf("the liar lost %s of its stake, want fraud_slash_bps of 100: %s", types.FormatAmount(slashed), types.FormatAmount(want))
	}
	if r := n.ver().GetReputation(prov1); r.Agreed != 0 || r.Lost != 1 {
		t.Errorf("the liar's reputation %+v: want no agreement and one loss", r)
	}
}

// TestLoneBidderAuditUpheldIsPaid: the same job, honest. The audit upholds
// the result: it settles "audited" (verified, paid the lone bid, the
// stage's validator fee to the voter) and the provider's reputation
// counts it, since validators re-executed it.
func TestLoneBidderAuditUpheldIsPaid(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := loneBidderJob(t, n)
	bal, val := n.balance(prov1), n.balance(addrOf("val"))
	result := hashOf("the real answer")
	n.events = nil
	n.loneResult(prov1, id, result)
	n.vote(id, 0, result, addrOf("val"))
	j := n.job(id)
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != OutcomeAudited {
		t.Fatalf("outcomes %v, want [audited]", got)
	}
	if j.State != JobCompleted || j.Verified != 1 || !j.Paid.Eq(amt("0.1ogpu")) {
		t.Fatalf("job %s, verified %d, paid %s; want completed, 1 verified, 0.1 oGPU paid", j.State, j.Verified, types.FormatAmount(j.Paid))
	}
	if got := new(uint256.Int).Sub(n.balance(prov1), bal); !got.Eq(amt("0.1ogpu")) {
		t.Errorf("prov1 earned %s, want its bid 0.1 oGPU", types.FormatAmount(got))
	}
	if !n.balance(addrOf("val")).Gt(val) {
		t.Errorf("the auditing validator was not paid the stage's fee")
	}
	if !VerifiedOutcome(OutcomeAudited) || VerifiedOutcome(OutcomeUnverified) {
		t.Errorf("VerifiedOutcome: audited must count as verified, unverified must not")
	}
}

// TestPoolLoneClaimIsAudited (M-H1, pool): an r = 2 pool job with one
// claim is awarded to that claimant at the close; its result is audited
// before it is paid, never "agreed".
func TestPoolLoneClaimIsAudited(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, poolJob(1, 2, types.OGPU(2)))
	n.must("claim", claimBy(prov1, id, 0))
	n.advanceTo(n.job(id).RevealEnd + 2) // the close waits a block for its beacon value
	if tk := n.task(id, 0); len(tk.Slots) != 1 {
		t.Fatalf("slots %v, want the lone claimant", tk.Slots)
	}
	n.events = nil
	n.loneResult(prov1, id, hashOf("pool answer"))
	if tk := n.task(id, 0); tk.Status != verifier.TaskDisputed {
		t.Fatalf("one claim of r = 2: task %s after its reveal, want an audit vote", tk.Status)
	}
	n.vote(id, 0, hashOf("the validators' answer"), addrOf("val"))
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != "verdict" {
		t.Fatalf("outcomes %v, want [verdict]", got)
	}
	if j := n.job(id); j.Verified != 0 || !j.Paid.IsZero() {
		t.Fatalf("verified %d, paid %s: a result the audit rejected is neither", j.Verified, types.FormatAmount(j.Paid))
	}
}

// TestFinetuneLoneBidderRefunded (M-H1, fine-tune): an r = 2 fine-tune
// job with one bid. Fine-tune jobs are not audited by a vote, so the
// stage is not awarded: the job expires, the client gets everything back
// and the lone bidder never gets to reveal an invented model.
func TestFinetuneLoneBidderRefunded(t *testing.T) {
	n := finetuneNet(t)
	start := n.balance(client)
	id := n.post(client, finetuneJob(2, 4, honestRun(4)[0]))
	n.bid(prov1, id, 0, types.OGPU(2))
	n.advanceTo(n.job(id).BidEnd + 1)
	n.revealBid(prov1, id, 0, types.OGPU(2))
	n.advanceTo(n.job(id).RevealEnd + 1)
	j := n.job(id)
	if j.State != JobExpired || !j.Paid.IsZero() || j.Verified != 0 {
		t.Fatalf("job %s, paid %s, verified %d; want expired with nothing paid", j.State, types.FormatAmount(j.Paid), j.Verified)
	}
	if got := n.balance(client); !got.Eq(start) {
		t.Errorf("client balance %s, want all of %s back", got.Dec(), start.Dec())
	}
	if _, ok := n.ver().GetTask(id, 0); ok {
		t.Errorf("a task was awarded to the lone trainer")
	}
}

// TestFinetuneNoShowLeavesOneRefunded: r = 2, both awarded, one never
// commits (no backup): the other's model is not paid as agreed;
// it settles "unverified" and the client gets its price back.
func TestFinetuneNoShowLeavesOneRefunded(t *testing.T) {
	n := finetuneNet(t)
	id := n.awardFinetune(4, prov1, prov2)
	run := honestRun(4)
	c := verifier.ResultCommitment(run.result(), ftSalt(prov1), prov1)
	n.must("commit", func(k *Keeper) error { return k.CommitResult(prov1, &verifier.MsgCommitResult{Job: id, Commitment: c}) })
	n.advanceTo(n.task(id, 0).CommitDeadline + 1)
	n.events = nil
	m := run.reveal(id, ftSalt(prov1))
	n.must("reveal", func(k *Keeper) error { return k.RevealFinetune(prov1, m) })
	n.advanceTo(n.task(id, 0).RevealDeadline + 1)
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != OutcomeUnverified {
		t.Fatalf("outcomes %v, want [unverified]", got)
	}
	if j := n.job(id); !j.Paid.IsZero() || j.Verified != 0 {
		t.Fatalf("paid %s, verified %d: one trainer of two is neither", types.FormatAmount(j.Paid), j.Verified)
	}
}

// TestShortRefundPolicy: a client that chose "refund" gets a short stage
// back at the close (stage_short says so), and a stage left with one
// result by a no-show settles "unverified" with nobody paid or slashed.
func TestShortRefundPolicy(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	start := n.balance(client)
	m := auctionJob(3, types.OGPU(3))
	m.Short = ShortRefund
	id := n.post(client, m)
	n.bid(prov1, id, 0, types.OGPU(1))
	n.advanceTo(n.job(id).BidEnd + 1)
	n.events = nil
	n.revealBid(prov1, id, 0, types.OGPU(1))
	n.advanceTo(n.job(id).RevealEnd + 1)
	short := eventsOf[EventStageShort](t, n.events)
	if len(short) != 1 || short[0].Providers != 1 || short[0].Redundancy != 3 || short[0].Policy != ShortRefund {
		t.Fatalf("stage_short %+v, want one provider of 3, refund", short)
	}
	if j := n.job(id); j.State != JobExpired || !n.balance(client).Eq(start) {
		t.Fatalf("job %s, client %s of %s: want expired, all back", j.State, n.balance(client).Dec(), start.Dec())
	}

	// r = 2, two winners, one no-show and no backup.
	m = auctionJob(2, types.OGPU(3))
	m.Short = ShortRefund
	id = n.post(client, m)
	for _, p := range []types.Address{prov1, prov2} {
		n.bid(p, id, 0, types.OGPU(1))
	}
	n.advanceTo(n.job(id).BidEnd + 1)
	for _, p := range []types.Address{prov1, prov2} {
		n.revealBid(p, id, 0, types.OGPU(1))
	}
	n.advanceTo(n.job(id).RevealEnd + 1)
	stake := n.esc().Bonded(prov1)
	n.events = nil
	n.loneResult(prov1, id, hashOf("answer"))
	n.advanceTo(n.task(id, 0).RevealDeadline + 1)
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != OutcomeUnverified {
		t.Fatalf("outcomes %v, want [unverified]", got)
	}
	if j := n.job(id); !j.Paid.IsZero() || j.Verified != 0 {
		t.Fatalf("paid %s, verified %d; want neither", types.FormatAmount(j.Paid), j.Verified)
	}
	if !n.esc().Bonded(prov1).Eq(stake) {
		t.Errorf("the provider that revealed lost stake: nothing shows a lie")
	}
}

// TestNoShowLeavesOneAudited: r = 2 under the default policy: one winner
// never commits and no backup takes its slot, so the other's result is
// audited, not confirmed on its own.
func TestNoShowLeavesOneAudited(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, auctionJob(2, types.OGPU(3)))
	for _, p := range []types.Address{prov1, prov2} {
		n.bid(p, id, 0, types.OGPU(1))
	}
	n.advanceTo(n.job(id).BidEnd + 1)
	for _, p := range []types.Address{prov1, prov2} {
		n.revealBid(p, id, 0, types.OGPU(1))
	}
	n.advanceTo(n.job(id).RevealEnd + 1)
	n.events = nil
	n.loneResult(prov1, id, hashOf("answer"))
	n.advanceTo(n.task(id, 0).RevealDeadline + 1)
	tk := n.task(id, 0)
	if tk.Status != verifier.TaskDisputed || tk.Audit != verifier.AuditShort {
		t.Fatalf("task %s (audit %q), want a short audit", tk.Status, tk.Audit)
	}
	if a := eventsOf[EventAuditOpened](t, n.events); len(a) != 1 || a[0].Agreeing != 1 || a[0].Redundancy != 2 || a[0].Reason != verifier.AuditShort {
		t.Fatalf("audit_opened %+v", a)
	}
	n.vote(id, 0, hashOf("answer"), addrOf("val"))
	if got := settledOutcomes(t, n.events, id); len(got) != 1 || got[0] != OutcomeAudited {
		t.Fatalf("outcomes %v, want [audited]", got)
	}
}

// TestNewcomerIsNotPaidTheCap (M-M2): the review's newcomer job: r = 2,
// cap 5, bids of 0.056 and 1.6 oGPU and nobody else. Both were paid 5;
// now both are paid 1.6, the highest winning bid, at every cap from 1.6
// to 49.5 oGPU (the most the providers' 990 oGPU of stake can back).
func TestNewcomerIsNotPaidTheCap(t *testing.T) {
	for _, capOGPU := range []string{"1.6ogpu", "2ogpu", "5ogpu", "49.5ogpu"} {
		n := marketNet(t, genesis.DefaultParams())
		for _, p := range []types.Address{prov1, prov2} {
			n.must("bond", func(k *Keeper) error { return k.esc.Bond(p, types.OGPU(900-10)) }) // 10 left for deposits
		}
		id := n.post(client, auctionJob(2, amt(capOGPU)))
		bids := map[types.Address]*uint256.Int{prov1: amt("0.056ogpu"), prov2: amt("1.6ogpu")}
		for _, p := range []types.Address{prov1, prov2} {
			n.bid(p, id, 0, bids[p])
		}
		n.advanceTo(n.job(id).BidEnd + 1)
		for _, p := range []types.Address{prov1, prov2} {
			n.revealBid(p, id, 0, bids[p])
		}
		n.advanceTo(n.job(id).RevealEnd + 1)
		if got := n.job(id).Prices[0]; !got.Eq(amt("1.6ogpu")) {
			t.Errorf("cap %s: clearing price %s, want 1.6 oGPU, the highest winning bid", capOGPU, types.FormatAmount(got))
		}
	}
}

// TestShortPolicyRefusals: a post names a known policy its kind takes;
// otherwise it is refused with what to do, and nothing is written.
func TestShortPolicyRefusals(t *testing.T) {
	for _, c := range []struct {
		name, kind, short, want string
	}{
		{"unknown", KindInference, "maybe", "want audit"},
		{"fine-tune audit", KindFinetune, ShortAudit, "use refund"},
		{"session", KindSession, ShortRefund, "takes no short-stage policy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := validateShort(c.kind, c.short); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validateShort(%s, %q) = %v, want an error saying %q", c.kind, c.short, err, c.want)
			}
		})
	}
	m := auctionJob(2, types.OGPU(3))
	m.Short = "sometimes"
	if _, err := DecodeMsgPostJob(m.Raw().Data); err == nil || !strings.Contains(err.Error(), "want audit") {
		t.Fatalf("post with short %q: %v", m.Short, err)
	}
	for _, c := range []struct{ kind, want string }{{KindInference, ShortAudit}, {KindFinetune, ShortRefund}} {
		if got := ShortDefault(c.kind); got != c.want {
			t.Errorf("default for %s: %q, want %q", c.kind, got, c.want)
		}
	}
}

// TestSplitKnockoutLiarIsAudited (M-H4, M-L2): the review's knock-out. A
// cartel holds chain 0's stage 0 and chain 1's stage 1. Its stage-0 member
// never commits (a 2 oGPU no-show), so the honest chain-0 stage 1 gets no
// input and cannot prove one; the cartel's stage 1 reveals the true input
// and an invented output, alone on it. It was paid "unverified" with no
// dispute; now it is audited and, rejected, slashed and unpaid: the
// attempt costs the cartel the no-show's 2 oGPU and the liar's 50.
func TestSplitKnockoutLiarIsAudited(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	noShow, honestDown, liar := n.holder(id, 0, 0), n.holder(id, 1, 0), n.holder(id, 1, 1)
	liarStake, liarBal := n.esc().Bonded(liar), n.balance(liar)
	invented := transcript{12, honest[1].hin, hashOf("invented tokens")}
	empty := transcript{0, types.Hash{}, hashOf("nothing")}
	reveal := map[[2]uint16]transcript{{0, 1}: honest[0], {1, 0}: empty, {1, 1}: invented}
	for _, sc := range [][2]uint16{{0, 1}, {1, 0}, {1, 1}} {
		n.commitSlot(id, sc[0], sc[1], reveal[sc])
	}
	n.advanceTo(n.task(id, 0).CommitDeadline + 1)
	for _, sc := range [][2]uint16{{0, 1}, {1, 0}, {1, 1}} {
		a, x := n.holder(id, sc[0], sc[1]), reveal[sc]
		n.must("reveal", func(k *Keeper) error {
			return k.RevealTranscript(a, &MsgRevealTranscript{Job: id, Stage: sc[0], Steps: x.steps, Hin: x.hin, Hout: x.hout, Salt: splitSalt(a, id, sc[0])})
		})
	}
	n.events = nil
	n.advanceTo(n.task(id, 0).RevealDeadline + n.params.Market.DisputeBlocks + 1) // past the hand-off proofs
	got := outcomes(t, n.events)
	if !slices.Equal(got["1/0"], []string{SplitInputUnproven}) || len(got["1/1"]) != 0 {
		t.Fatalf("outcomes %v: want 1/0 input_unproven and the liar's 1/1 audited, not paid unverified", got)
	}
	for s := uint16(0); s < 2; s++ {
		if tk := n.task(id, s); tk.Status != verifier.TaskDisputed || tk.Audit != verifier.AuditSplit {
			t.Fatalf("stage %d is %s (audit %q), want its lone slot audited", s, tk.Status, tk.Audit)
		}
	}
	n.vote(id, 0, honest[0].hout, n.val)
	n.vote(id, 1, honest[1].hout, n.val) // the validator replays the liar's input: the true output differs
	if n.balance(liar).Gt(liarBal) {
		t.Errorf("the liar was paid: balance %s, was %s", n.balance(liar).Dec(), liarBal.Dec())
	}
	if slashed := new(uint256.Int).Sub(liarStake, n.esc().Bonded(liar)); !slashed.Eq(escrow.MulBps(liarStake, n.params.Market.FraudSlashBps)) {
		t.Errorf("the liar lost %s of its stake, want fraud_slash_bps", slashed.Dec())
	}
	if p, _ := GetProvider(n.tree, noShow); !p.Jailed {
		t.Error("the no-show is not jailed")
	}
	if p, _ := GetProvider(n.tree, honestDown); p.Jailed || !n.esc().Bonded(honestDown).Eq(types.OGPU(100)) {
		t.Error("the knocked-out honest downstream was slashed or jailed")
	}
	if j := n.job(id); j.State != JobCompleted || j.Verified != 1 || !j.Paid.Eq(types.OGPU(2)) {
		t.Errorf("job %s, %d verified, paid %s: want completed, 1 (the honest stage 0, audited), 2 oGPU", j.State, j.Verified, j.Paid.Dec())
	}
}

// TestShortRebid: a "rebid" job whose stage has one bidder of two at the
// close takes bids for one more window instead (job_rebid); a second
// provider bids then, and the job closes with both, at the uniform price.
// A second close still short is refunded (no third window). The job's
// life holds the extra window.
func TestShortRebid(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	m := auctionJob(2, types.OGPU(3))
	m.Short = ShortRebid
	id := n.post(client, m)
	j := n.job(id)
	if plain := n.post(client, auctionJob(2, types.OGPU(3))); n.job(plain).Expiry+m.Windows.Bid+m.Windows.Reveal != j.Expiry {
		t.Fatalf("expiry %d, want a plain job's %d + bid + reveal", j.Expiry, n.job(plain).Expiry)
	}
	n.bid(prov1, id, 0, types.OGPU(1))
	n.advanceTo(j.BidEnd + 1)
	n.revealBid(prov1, id, 0, types.OGPU(1))
	n.events = nil
	n.advanceTo(j.RevealEnd + 1)
	re := eventsOf[EventJobRebid](t, n.events)
	j = n.job(id)
	if len(re) != 1 || j.State != JobBidding || j.Rebids != 1 || re[0].BidEnd != j.BidEnd || !slices.Equal(re[0].Stages, []string{"0"}) {
		t.Fatalf("job_rebid %+v, job %s with %d rebids: want one more bid window", re, j.State, j.Rebids)
	}
	if _, ok := n.ver().GetTask(id, 0); ok {
		t.Fatal("the short stage was awarded")
	}
	n.refused("prov1 bids twice", func(k *Keeper) error {
		return k.CommitBid(prov1, &MsgCommitBid{Job: id, Stage: 0, Commitment: hashOf("again")})
	}, types.ErrDuplicate)
	n.bid(prov2, id, 0, types.OGPU(2))
	n.advanceTo(j.BidEnd + 1)
	n.revealBid(prov2, id, 0, types.OGPU(2))
	n.advanceTo(j.RevealEnd + 1)
	tk := n.task(id, 0)
	if j := n.job(id); j.State != JobRunning || len(tk.Slots) != 2 || !j.Prices[0].Eq(types.OGPU(2)) {
		t.Fatalf("job %s, slots %v, price %s after the extra window: want both, at 2", j.State, tk.Slots, j.Prices[0].Dec())
	}

	// Still short after its extra window: refunded, no third window.
	m.Seal = hashOf("another")
	id = n.post(client, m)
	n.advanceTo(n.job(id).BidEnd + 1) // nobody bid: the bidless close at BidEnd opens the extra window
	if j := n.job(id); j.Rebids != 1 || j.State != JobBidding {
		t.Fatalf("a bidless rebid job after its bid window: %s with %d rebids", j.State, j.Rebids)
	}
	n.bid(prov3, id, 0, types.OGPU(1))
	n.advanceTo(n.job(id).BidEnd + 1)
	n.revealBid(prov3, id, 0, types.OGPU(1))
	n.advanceTo(n.job(id).RevealEnd + 1)
	if j := n.job(id); j.State != JobExpired || j.Rebids != 1 || !j.Paid.IsZero() || !n.esc().Locked(id).IsZero() {
		t.Fatalf("job %s with %d rebids, paid %s, %s locked: want expired after one extra window, nobody paid, all refunded", j.State, j.Rebids, j.Paid.Dec(), n.esc().Locked(id).Dec())
	}
}
