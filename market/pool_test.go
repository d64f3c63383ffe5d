package market

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Pool tasks awarded at the r-th eligible claim (issue 14): fillTask,
// start, unfill. Every block of these tests ends with the escrow, stake,
// supply and stage invariants checked (testNet.endBlock).

// poolJob is a pool job of stages inference tasks, r replicas each, at a
// fixed reward: claims for 2 blocks and 2 more (BidEnd 4, RevealEnd 6 when
// posted at 2), 3 blocks to commit a result, 3 to reveal.
func poolJob(stages, r uint16, reward *uint256.Int) *MsgPostJob {
	m := auctionJob(r, reward)
	m.Mode, m.Stages = ModePool, stages
	return m
}

func claimBy(p types.Address, id uint64, s uint16) func(k *Keeper) error {
	return func(k *Keeper) error { return k.ClaimTask(p, &MsgClaimTask{Job: id, Stage: s}) }
}

// since returns the events emitted from index i of n.events on.
func (n *testNet) since(i int) types.Events { return n.events[i:] }

// awardsOf are the job_awarded events of job id in evs.
func awardsOf(t *testing.T, evs types.Events, id uint64) []EventJobAwarded {
	t.Helper()
	var out []EventJobAwarded
	for _, e := range eventsOf[EventJobAwarded](t, evs) {
		if e.Job == id {
			out = append(out, e)
		}
	}
	return out
}

// TestPoolAwardAtRthClaim: the second claim of an r = 2 pool task awards
// it in its own transaction, first come first served, and starts the job
// with its execute and verify windows counted from that height, not from
// the close at RevealEnd. The claimants get their deposits back at once;
// a third claim, a repeated claim and a claim after the close are
// refused; the bid-window end and the close that follow change nothing;
// the job settles paying exactly the fixed reward twice.
func TestPoolAwardAtRthClaim(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	reward := types.OGPU(2)
	id := n.post(client, poolJob(1, 2, reward)) // at 2: claims until 6
	j := n.job(id)
	if j.RevealEnd != 6 {
		t.Fatalf("reveal end %d, want 6", j.RevealEnd)
	}
	clientStart := n.balance(client)
	bal := map[types.Address]*uint256.Int{prov1: n.balance(prov1), prov3: n.balance(prov3)}
	n.must("first claim", claimBy(prov3, id, 0))
	if !n.balance(prov3).Eq(new(uint256.Int).Sub(bal[prov3], n.params.Market.BidDeposit)) {
		t.Fatalf("prov3 has %s after claiming, want its deposit locked", n.balance(prov3).Dec())
	}
	n.refused("claim twice", claimBy(prov3, id, 0), types.ErrDuplicate, "already claimed job 1 task 0")
	if j := n.job(id); j.State != JobBidding || j.Filled != 0 {
		t.Fatalf("after one claim of two: %s, %d filled", j.State, j.Filled)
	}
	n.advanceTo(3)
	mark := len(n.events)
	n.must("second claim", claimBy(prov1, id, 0)) // prov1's address sorts before prov3's: arrival decides
	j = n.job(id)
	if j.State != JobRunning || j.Filled != 1 {
		t.Fatalf("after the r-th claim the job is %s with %d filled, want running, 1", j.State, j.Filled)
	}
	tk := n.task(id, 0)
	if tk.Status != verifier.TaskExecuting || len(tk.Slots) != 2 || tk.Slots[0].Provider != prov3 || tk.Slots[1].Provider != prov1 || len(tk.Backups) != 0 {
		t.Fatalf("task %+v: want executing, prov3 then prov1 (first come), no backups", tk)
	}
	if tk.CommitDeadline != 3+3 || tk.RevealDeadline != 3+3+3 {
		t.Fatalf("deadlines %d/%d, want 6/9: counted from the award at 3, not from the close at 6", tk.CommitDeadline, tk.RevealDeadline)
	}
	evs := n.since(mark)
	filled := eventsOf[EventTaskFilled](t, evs)
	aw := awardsOf(t, evs, id)
	if len(filled) != 1 || filled[0].Filled != 1 || filled[0].Stages != 1 || strings.Join(filled[0].Providers, ",") != prov3.Hex()+","+prov1.Hex() ||
		len(aw) != 1 || !aw[0].Price.Eq(reward) || aw[0].CommitDeadline != 6 {
		t.Fatalf("events of the r-th claim: filled %+v, awarded %+v", filled, aw)
	}
	for p, b := range bal {
		if !n.balance(p).Eq(b) {
			t.Errorf("%s has %s after the award, want its deposit back (%s)", p.Hex(), n.balance(p).Dec(), b.Dec())
		}
	}
	n.refused("a third claim", claimBy(prov4, id, 0), types.ErrWrongPhase, "job 1 was awarded", "takes no more")
	n.advanceTo(7) // the bid-window end (4) and the close (6) pass
	n.refused("claim after the close", claimBy(prov2, id, 0), types.ErrWrongPhase, "took claims until height 6 (now 7)")
	if aw := awardsOf(t, n.since(mark), id); len(aw) != 1 {
		t.Fatalf("%d awards of the job, want the r-th claim's only: the close must not award again", len(aw))
	}
	if len(eventsOf[EventJobRevealing](t, n.since(mark))) != 0 {
		t.Fatal("the bid-window end moved a running job to revealing")
	}
	// Nobody committed job 1 by 6: both are no-shows. Run a second job
	// to the end, committing in time.
	clientStart = n.balance(client)
	id2 := n.post(client, poolJob(1, 2, reward))
	bal = map[types.Address]*uint256.Int{prov2: n.balance(prov2), prov4: n.balance(prov4)}
	n.must("claim", claimBy(prov2, id2, 0))
	n.must("claim", claimBy(prov4, id2, 0))
	result, salt := hashOf("pool result"), hashOf("salt")
	for _, p := range []types.Address{prov2, prov4} {
		n.must("commit", func(k *Keeper) error {
			return k.CommitResult(p, &verifier.MsgCommitResult{Job: id2, Stage: 0, Commitment: verifier.ResultCommitment(result, salt, p)})
		})
	}
	for _, p := range []types.Address{prov2, prov4} {
		n.must("reveal", func(k *Keeper) error {
			return k.RevealResult(p, &verifier.MsgRevealResult{Job: id2, Stage: 0, Result: result, Salt: salt})
		})
	}
	n.advanceTo(n.task(id2, 0).ConfirmBy + 1)
	j2 := n.job(id2)
	if j2.State != JobCompleted || !j2.Paid.Eq(new(uint256.Int).Mul(reward, uint256.NewInt(2))) {
		t.Fatalf("job %s paid %s, want completed paying 2 × %s", j2.State, j2.Paid.Dec(), reward.Dec())
	}
	for p, b := range bal {
		if want := new(uint256.Int).Add(b, reward); !n.balance(p).Eq(want) {
			t.Errorf("%s has %s, want %s: the reward, its deposit back", p.Hex(), n.balance(p).Dec(), want.Dec())
		}
	}
	// The client paid the two rewards and the validator fee, nothing else.
	spent := new(uint256.Int).Sub(clientStart, n.balance(client))
	if want := new(uint256.Int).Add(j2.Paid, j2.feeSpent()); !spent.Eq(want) {
		t.Errorf("client spent %s, want %s (rewards and validator fee)", spent.Dec(), want.Dec())
	}
}

// TestPoolTasksFillOneByOne: a two-task pool job. The first task filled
// waits (no deadlines, no results taken, no more claims) while the job
// still takes claims for the other; the claim that fills the second
// starts the job: both tasks' windows count from that height.
func TestPoolTasksFillOneByOne(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, poolJob(2, 2, types.OGPU(2)))
	n.must("claim", claimBy(prov1, id, 0))
	n.must("claim", claimBy(prov1, id, 1)) // one provider may claim several tasks of an inference job
	mark := len(n.events)
	n.must("claim", claimBy(prov2, id, 0))
	if j := n.job(id); j.State != JobBidding || j.Filled != 1 {
		t.Fatalf("job %s with %d filled after task 0's r-th claim, want bidding, 1", j.State, j.Filled)
	}
	if tk := n.task(id, 0); tk.Status != verifier.TaskWaiting || tk.CommitDeadline != 0 || len(tk.Slots) != 2 {
		t.Fatalf("task 0 %+v: want waiting, two slots, no deadlines", tk)
	}
	if len(eventsOf[EventTaskFilled](t, n.since(mark))) != 1 || len(awardsOf(t, n.since(mark), id)) != 0 {
		t.Fatal("task 0 filled: want task_filled and no job_awarded yet")
	}
	n.refused("claim a filled task", claimBy(prov3, id, 0), types.ErrWrongPhase, "job 1 task 0 was awarded to its first 2 eligible claimants", "claim another task")
	n.refused("commit before the job runs", func(k *Keeper) error {
		return k.CommitResult(prov1, &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: hashOf("early")})
	}, types.ErrWrongPhase, "job 1 is bidding: it takes results once it runs")
	n.advanceTo(5) // into the reveal window: still claims
	if j := n.job(id); j.State != JobRevealing {
		t.Fatalf("job %s at 5, want revealing (the claim window's second part)", j.State)
	}
	n.must("claim", claimBy(prov3, id, 1))
	j := n.job(id)
	if j.State != JobRunning || j.Filled != 2 {
		t.Fatalf("job %s with %d filled, want running with both", j.State, j.Filled)
	}
	for s := uint16(0); s < 2; s++ {
		if tk := n.task(id, s); tk.Status != verifier.TaskExecuting || tk.CommitDeadline != 5+3 || tk.RevealDeadline != 5+6 {
			t.Errorf("task %d %s by %d/%d, want executing by 8/11 (from the last fill at 5)", s, tk.Status, tk.CommitDeadline, tk.RevealDeadline)
		}
	}
	if aw := awardsOf(t, n.since(mark), id); len(aw) != 2 {
		t.Fatalf("%d job_awarded events, want one per task when the job starts", len(aw))
	}
	n.advanceTo(7) // the close passes
	if aw := awardsOf(t, n.since(mark), id); len(aw) != 2 {
		t.Fatalf("%d job_awarded events after the close, want 2", len(aw))
	}
}

// TestPoolCloseAwardsShortTasks: at the close, a task filled early keeps
// its winners, a task with one claim of two is awarded to it (the other
// reward refunded), a task nobody claimed settles refunded; every running
// task's windows count from the close.
func TestPoolCloseAwardsShortTasks(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	reward := types.OGPU(2)
	id := n.post(client, poolJob(3, 2, reward))
	n.must("claim", claimBy(prov1, id, 0))
	n.must("claim", claimBy(prov2, id, 0)) // fills task 0
	n.must("claim", claimBy(prov3, id, 1))
	before := n.balance(client)
	n.advanceTo(7)
	j := n.job(id)
	if j.State != JobRunning {
		t.Fatalf("job %s after the close, want running", j.State)
	}
	t0, t1 := n.task(id, 0), n.task(id, 1)
	if len(t0.Slots) != 2 || t0.Slots[0].Provider != prov1 || len(t1.Slots) != 1 || t1.Slots[0].Provider != prov3 {
		t.Fatalf("slots %v and %v", t0.Slots, t1.Slots)
	}
	for _, tk := range []*verifier.Task{t0, t1} {
		if tk.Status != verifier.TaskExecuting || tk.CommitDeadline != 6+3 {
			t.Errorf("task %s by %d, want executing by 9 (from the close at 6)", tk.Status, tk.CommitDeadline)
		}
	}
	if _, ok := n.ver().GetTask(id, 2); ok {
		t.Fatal("task 2 nobody claimed has a task record")
	}
	// Refunds at the close: one reward of task 1, both of task 2.
	if got, want := new(uint256.Int).Sub(n.balance(client), before), new(uint256.Int).Mul(reward, uint256.NewInt(3)); !got.Eq(want) {
		t.Errorf("client got %s back at the close, want %s", got.Dec(), want.Dec())
	}
	if j.Settled != 1 {
		t.Errorf("%d settled stages, want task 2 (no claims)", j.Settled)
	}
}

// TestPoolIneligibleClaimsDoNotCount: a claimant jailed or unbonded after
// claiming does not count toward r: the claim that would have been the
// r-th drops it (its deposit burned, as at the close) and the task waits
// for another claim. Claimants ineligible at their claim are refused
// with nothing written. A provider cannot claim a task twice, even after
// its claim was dropped.
func TestPoolIneligibleClaimsDoNotCount(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, poolJob(1, 3, types.OGPU(2)))
	n.must("claim", claimBy(prov1, id, 0))
	n.must("claim", claimBy(prov2, id, 0))
	n.refused("an unregistered claimant", claimBy(loner, id, 0), types.ErrNotEligible, "not a registered provider")
	n.refused("the client claiming its own job", claimBy(client, id, 0), types.ErrNotEligible)
	n.must("jail prov1", func(k *Keeper) error { k.jailProvider(prov1, 500, false, "test"); return nil })
	n.must("unbond prov2", func(k *Keeper) error { return escrow.NewKeeper(k.kv).Unbond(prov2, types.OGPU(40), 1_000) })
	burned := n.esc().Burned()
	mark := len(n.events)
	n.must("the third claim", claimBy(prov3, id, 0))
	if j := n.job(id); j.State != JobBidding || j.Filled != 0 {
		t.Fatalf("job %s, %d filled: two of three claimants are ineligible, nothing may be awarded", j.State, j.Filled)
	}
	if _, ok := n.ver().GetTask(id, 0); ok {
		t.Fatal("a task was awarded with ineligible claimants")
	}
	out := eventsOf[EventBidForfeited](t, n.since(mark))
	if len(out) != 2 || !strings.Contains(out[0].Reason, "ineligible when the task reached its claims") {
		t.Fatalf("forfeits %+v, want prov1's and prov2's", out)
	}
	if got, want := new(uint256.Int).Sub(n.esc().Burned(), burned), new(uint256.Int).Mul(n.params.Market.BidDeposit, uint256.NewInt(2)); !got.Eq(want) {
		t.Errorf("burned %s, want two deposits (%s)", got.Dec(), want.Dec())
	}
	n.must("unjail prov1's record", func(k *Keeper) error {
		p, _ := k.GetProvider(prov1)
		p.Jailed = false
		k.setProvider(prov1, p)
		return nil
	})
	n.refused("a dropped claimant claiming again", claimBy(prov1, id, 0), types.ErrDuplicate, "already claimed")
	n.must("claim", claimBy(prov4, id, 0))
	if j := n.job(id); j.Filled != 0 {
		t.Fatalf("%d filled with two eligible claims of three", j.Filled)
	}
	fresh, jailed := addrOf("fresh"), addrOf("jailed")
	for _, a := range []types.Address{fresh, jailed} {
		n.must("fund", func(k *Keeper) error { return escrow.NewKeeper(k.kv).Send(client, a, types.OGPU(200)) })
		n.register(a, types.OGPU(100), gpuInfo(a.Hex()))
	}
	n.must("jail", func(k *Keeper) error { k.jailProvider(jailed, 500, false, "test"); return nil })
	n.refused("a jailed claimant", claimBy(jailed, id, 0), types.ErrNotEligible, "is jailed")
	// A fresh eligible provider makes the third.
	n.must("claim", claimBy(fresh, id, 0))
	tk := n.task(id, 0)
	if len(tk.Slots) != 3 || tk.Slots[0].Provider != prov3 || tk.Slots[1].Provider != prov4 || tk.Slots[2].Provider != fresh {
		t.Fatalf("slots %v, want prov3, prov4, fresh", tk.Slots)
	}
	n.endBlock()
}

// TestPoolClaimAwardsInTheCloseBlock: the r-th claim lands in the block
// whose end runs the close (height RevealEnd). The claim awards and starts
// the job; the close at the end of that block finds it running and does
// nothing: one award, no second refund, windows from the claim.
func TestPoolClaimAwardsInTheCloseBlock(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	reward := types.OGPU(2)
	id := n.post(client, poolJob(1, 2, reward))
	n.must("claim", claimBy(prov1, id, 0))
	n.advanceTo(n.job(id).RevealEnd)
	before := n.balance(client)
	mark := len(n.events)
	n.must("the r-th claim at the close height", claimBy(prov2, id, 0))
	n.endBlock() // the close runs
	j := n.job(id)
	if j.State != JobRunning || awardsOf(t, n.since(mark), id)[0].CommitDeadline != 6+3 || len(awardsOf(t, n.since(mark), id)) != 1 {
		t.Fatalf("job %s, awards %+v: want running, awarded once by the claim at 6", j.State, awardsOf(t, n.since(mark), id))
	}
	if !n.balance(client).Eq(before) {
		t.Errorf("client balance moved by the close: %s → %s", before.Dec(), n.balance(client).Dec())
	}
}

// TestPoolUnfill: a job whose early-filled task will never run gives it
// up: a pipeline whose second stage nobody claimed expires at the close,
// and a client may cancel a job with a filled task before it runs. The
// task records and the winners' job index go, everything is refunded, and
// the stage invariant finds no task of a job that never ran.
func TestPoolUnfill(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	pipe := poolJob(2, 2, types.OGPU(2))
	pipe.Kind = KindPipeline
	start := n.balance(client)
	id := n.post(client, pipe)
	n.must("claim", claimBy(prov1, id, 0))
	n.must("claim", claimBy(prov2, id, 0)) // fills stage 0
	if j := n.job(id); j.Filled != 1 || j.State != JobBidding {
		t.Fatalf("pipeline: %d filled, %s", j.Filled, j.State)
	}
	n.advanceTo(7)
	j := n.job(id)
	if j.State != JobExpired || j.Filled != 0 {
		t.Fatalf("pipeline with an unclaimed stage: %s, %d filled; want expired, 0", j.State, j.Filled)
	}
	if _, ok := n.ver().GetTask(id, 0); ok {
		t.Fatal("the expired pipeline kept its filled task")
	}
	if n.tree.Get(byProviderKey(prov1, id)) != nil {
		t.Fatal("prov1 is still indexed as working on the expired job")
	}
	if !n.balance(client).Eq(start) {
		t.Errorf("client has %s, want everything back (%s)", n.balance(client).Dec(), start.Dec())
	}

	id2 := n.post(client, poolJob(2, 2, types.OGPU(2)))
	n.must("claim", claimBy(prov3, id2, 1))
	n.must("claim", claimBy(prov4, id2, 1)) // fills task 1
	n.must("claim", claimBy(prov1, id2, 0)) // task 0: one claim, its deposit still held
	p1 := n.balance(prov1)
	n.must("cancel", func(k *Keeper) error { return k.CancelJob(client, id2) })
	if j := n.job(id2); j.State != JobCancelled || !n.esc().Locked(id2).IsZero() {
		t.Fatalf("job %s holding %s after cancel", j.State, n.esc().Locked(id2).Dec())
	}
	if _, ok := n.ver().GetTask(id2, 1); ok {
		t.Fatal("the cancelled job kept its filled task")
	}
	if want := new(uint256.Int).Add(p1, n.params.Market.BidDeposit); !n.balance(prov1).Eq(want) {
		t.Errorf("prov1 has %s, want its held deposit back (%s)", n.balance(prov1).Dec(), want.Dec())
	}
	n.endBlock()
}

// TestPoolSplitAwardsAtTheClose: a split pool job's stages are awarded
// at the close only (an account wins one slot across stages): r claims on
// a stage award nothing before it.
func TestPoolSplitAwardsAtTheClose(t *testing.T) {
	n := newSplitNet(t)
	m := splitJob()
	m.Mode = ModePool
	id := n.post(n.client, m)
	for s := uint16(0); s < 2; s++ {
		for _, a := range n.stage[s] {
			n.must("claim", claimBy(a, id, s))
		}
	}
	if j := n.job(id); j.State != JobBidding || j.Filled != 0 {
		t.Fatalf("split pool job %s, %d filled before the close", j.State, j.Filled)
	}
	n.advanceTo(n.job(id).RevealEnd + 1)
	if j := n.job(id); j.State != JobRunning {
		t.Fatalf("split pool job %s after the close, want running", j.State)
	}
}

// TestPoolFillWorkIsBounded: whatever the claimants do, a claim runs the
// attribute matching at most r times (its own check and the r-1 earlier
// claims' re-checks), the bound the chain charges it for
// (genesis.MsgWork.Awards): providers that claim and then make themselves
// ineligible are dropped by the claim that finds them, so they are never
// re-checked by the next one.
func TestPoolFillWorkIsBounded(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.MaxBidsPerStage = 64
	n := marketNet(t, params)
	const r = 3
	m := poolJob(1, r, types.OGPU(2))
	m.Req.Attributes = []string{"gpu/vendor/nvidia", "ram>=32Gi"}
	m.Windows.Bid = 40
	var provs []types.Address
	for i := range 12 {
		a := addrOf("claimant " + string(rune('a'+i)))
		from := []types.Address{client, loner}[i%2]
		n.must("fund", func(k *Keeper) error { return escrow.NewKeeper(k.kv).Send(from, a, types.OGPU(102)) })
		n.register(a, types.OGPU(100), gpuInfo(a.Hex()))
		provs = append(provs, a)
	}
	id := n.post(client, m)
	most := uint64(0)
	for i, a := range provs {
		before := MatchAllRuns()
		n.must("claim", claimBy(a, id, 0))
		most = max(most, MatchAllRuns()-before)
		if i < len(provs)-1 {
			// Every claimant but the last re-registers at once without
			// the GPU the job requires (the matching is the last and
			// dearest eligibility check): each claim finds r-1 earlier
			// ones, all ineligible.
			info := gpuInfo(a.Hex())
			info.Attributes = []string{"cpu/cores/16"}
			n.must("update", func(k *Keeper) error { return k.RegisterProvider(a, &info, true) })
		}
	}
	if most > r {
		t.Fatalf("a claim ran the matching %d times, more than r = %d", most, r)
	}
	if most < r {
		t.Fatalf("a claim ran the matching at most %d times: the re-checks of earlier claims did not run", most)
	}
	if j := n.job(id); j.Filled != 0 || j.Bids[0] != 12 {
		t.Fatalf("%d filled, %d claims: every earlier claimant dropped its GPU", j.Filled, j.Bids[0])
	}
	n.endBlock()
}

// TestPoolRandomClaims: random pool jobs (inference and pipeline, 1 to 3
// tasks, r of 2 or 3) under random claims, jailings, unjailings and
// cancellations (and the no-shows of tasks nobody runs), with the escrow, stake, supply and
// stage invariants checked after every block; at the end every job is
// closed or running with nothing unaccounted, and every filled task of a
// job that never ran is gone.
func TestPoolRandomClaims(t *testing.T) {
	ran, unfilled := 0, 0
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 14))
		params := genesis.DefaultParams()
		params.Market.MaxBidsPerStage, params.Market.MaxRedundancy = 6, 4
		n := marketNet(t, params)
		provs := []types.Address{prov1, prov2, prov3, prov4}
		for _, p := range provs {
			// Room for no-show slashes (nobody commits here).
			n.must("bond", func(k *Keeper) error { return escrow.NewKeeper(k.kv).Bond(p, types.OGPU(400)) })
		}
		var jobs []uint64
		for step := 0; step < 150; step++ {
			switch x := rng.IntN(10); {
			case x < 2 && len(jobs) < 30:
				m := poolJob(uint16(1+rng.IntN(3)), uint16(2+rng.IntN(2)), types.OGPU(1))
				if rng.IntN(3) == 0 {
					m.Kind = KindPipeline
				}
				m.Windows.Bid, m.Windows.Reveal = uint64(2+rng.IntN(6)), uint64(rng.IntN(3))
				jobs = append(jobs, n.post(client, m))
			case x < 7 && len(jobs) > 0:
				id, p := jobs[max(0, len(jobs)-1-rng.IntN(3))], provs[rng.IntN(len(provs))] // the latest jobs
				_ = n.exec(claimBy(p, id, uint16(rng.IntN(int(n.job(id).Stages)))))
			case x == 7:
				p := provs[rng.IntN(len(provs))]
				n.must("jail", func(k *Keeper) error { k.jailProvider(p, n.height+uint64(rng.IntN(5)), false, "test"); return nil })
			case x == 8:
				// Unjail at once (no-shows jail for long: nobody
				// commits here), or the pool would run dry.
				p := provs[rng.IntN(len(provs))]
				n.must("unjail", func(k *Keeper) error {
					pr, _ := k.GetProvider(p)
					pr.Jailed = false
					k.setProvider(p, pr)
					return nil
				})
			case len(jobs) > 0:
				_ = n.exec(func(k *Keeper) error { return k.CancelJob(client, jobs[rng.IntN(len(jobs))]) })
			}
			if rng.IntN(3) == 0 {
				n.endBlock()
			}
		}
		n.advanceTo(n.height + 200) // every deadline passes
		filled := map[uint64]bool{}
		for _, e := range eventsOf[EventTaskFilled](t, n.events) {
			filled[e.Job] = true
		}
		for _, id := range jobs {
			j := n.job(id)
			if j.State.Open() || !n.esc().Locked(id).IsZero() {
				t.Fatalf("seed %d: job %d %s holding %s after every deadline", seed, id, j.State, n.esc().Locked(id).Dec())
			}
			switch {
			case filled[id] && (j.State == JobCancelled || j.State == JobExpired):
				unfilled++
			case filled[id]:
				ran++
			}
		}
	}
	// The seeds reach both ends of an early award.
	if ran == 0 || unfilled == 0 {
		t.Fatalf("%d jobs with a filled task ran, %d were cancelled or expired: the seeds miss a path", ran, unfilled)
	}
	t.Logf("jobs with a task filled early: %d ran, %d cancelled or expired", ran, unfilled)
}
