package market

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Pool jobs (pool.go): claims for the whole claim window, the r winners of
// each task drawn at the close from the beacon value of its last claim
// height. Every block of these tests ends with the escrow, stake, supply,
// exposure and stage invariants checked (testNet.endBlock).

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

// claimAll has each of provs claim task s of job id, in that order.
func (n *testNet) claimAll(id uint64, s uint16, provs ...types.Address) {
	n.tb.Helper()
	for _, p := range provs {
		n.must("claim", claimBy(p, id, s))
	}
}

// drawOrder is provs sorted by their pool draw of task s of job id from
// the beacon value of the job's last claim height.
func (n *testNet) drawOrder(id uint64, s uint16, provs ...types.Address) []types.Address {
	n.tb.Helper()
	v, ok := beacon.Value(n.tree, n.job(id).RevealEnd)
	if !ok {
		n.tb.Fatalf("the beacon value of job %d's last claim height is not final", id)
	}
	out := slices.Clone(provs)
	slices.SortFunc(out, func(a, b types.Address) int {
		da, db := PoolDraw(v, id, s, a), PoolDraw(v, id, s, b)
		return bytes.Compare(da[:], db[:])
	})
	return out
}

// TestPoolDrawsAtTheClose (M-M4): an r = 2 pool task claimed by four
// providers. No claim awards it; the close, once the beacon value of the
// last claim height is final, gives it to the two with the lowest draws
// (the next two are backups), whatever order the claims came in: the same
// four claims in reverse order award the same two. Over many jobs the two
// who always claim first win both slots only as often as the draw says
// (before AppVersion 8 they won every task).
func TestPoolDrawsAtTheClose(t *testing.T) {
	provs := []types.Address{prov1, prov2, prov3, prov4}
	var first []types.Address
	for _, order := range [][]types.Address{provs, {prov4, prov3, prov2, prov1}} {
		n := marketNet(t, genesis.DefaultParams())
		id := n.post(client, poolJob(1, 2, types.OGPU(2))) // at 2: claims until 6
		n.claimAll(id, 0, order...)
		n.refused("claim twice", claimBy(order[0], id, 0), types.ErrDuplicate, "already claimed")
		if _, ok := n.ver().GetTask(id, 0); ok {
			t.Fatal("a claim awarded the task before the close")
		}
		n.advanceTo(n.job(id).RevealEnd + 1)
		if j := n.job(id); j.State != JobRevealing {
			t.Fatalf("job %s at the end of its claim window, want waiting for the beacon value of %d", j.State, j.RevealEnd)
		}
		n.refused("claim after the window", claimBy(loner, id, 0), types.ErrWrongPhase, "took claims until height 6")
		n.endBlock() // the value of 6 is final: the close runs
		want := n.drawOrder(id, 0, provs...)
		tk := n.task(id, 0)
		if n.job(id).State != JobRunning || len(tk.Slots) != 2 || tk.Slots[0].Provider != want[0] || tk.Slots[1].Provider != want[1] ||
			!slices.Equal(tk.Backups, want[2:]) {
			t.Fatalf("claims in order %v: slots %v backups %v, want the draw order %v", order, tk.Slots, tk.Backups, want)
		}
		if first == nil {
			first = want[:2]
		} else if !slices.Equal(first, want[:2]) {
			t.Fatalf("the claim order changed the winners: %v, then %v", first, want[:2])
		}
	}
	n := marketNet(t, genesis.DefaultParams())
	for _, p := range provs {
		n.must("bond", func(k *Keeper) error { return k.esc.Bond(p, types.OGPU(800)) })
	}
	firstTwo, jobs := 0, 30
	var ids []uint64
	for range jobs {
		id := n.post(client, poolJob(1, 2, amt("0.1ogpu")))
		n.claimAll(id, 0, provs...) // prov1 and prov2 always claim first
		ids = append(ids, id)
	}
	n.advanceTo(n.job(ids[len(ids)-1]).RevealEnd + 2)
	for _, id := range ids {
		tk := n.task(id, 0)
		if a := []types.Address{tk.Slots[0].Provider, tk.Slots[1].Provider}; slices.Contains(a, prov1) && slices.Contains(a, prov2) {
			firstTwo++
		}
	}
	if firstTwo > jobs/2 {
		t.Fatalf("the first two claimants won both slots of %d of %d tasks: arrival decides", firstTwo, jobs)
	}
	t.Logf("the first two claimants won both slots of %d of %d tasks (1 in 6 expected)", firstTwo, jobs)
}

// TestPoolCloseAwardsShortTasks: at the close, a task with its two claims
// goes to them, a task with one claim of two is awarded to it (the other
// reward refunded; its result will be audited, short.go), a task nobody
// claimed settles refunded; every running task's windows count from the
// close.
func TestPoolCloseAwardsShortTasks(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	reward := types.OGPU(2)
	id := n.post(client, poolJob(3, 2, reward))
	n.must("claim", claimBy(prov1, id, 0))
	n.must("claim", claimBy(prov2, id, 0))
	n.must("claim", claimBy(prov3, id, 1))
	before := n.balance(client)
	n.advanceTo(8) // the close waits for the beacon value of 6, final at the end of 7
	j := n.job(id)
	if j.State != JobRunning {
		t.Fatalf("job %s after the close, want running", j.State)
	}
	t0, t1 := n.task(id, 0), n.task(id, 1)
	if len(t0.Slots) != 2 || !t0.Assigned(prov1) || !t0.Assigned(prov2) || len(t1.Slots) != 1 || t1.Slots[0].Provider != prov3 {
		t.Fatalf("slots %v and %v", t0.Slots, t1.Slots)
	}
	for _, tk := range []*verifier.Task{t0, t1} {
		if tk.Status != verifier.TaskExecuting || tk.CommitDeadline != 7+3 {
			t.Errorf("task %s by %d, want executing by 10 (from the close at 7)", tk.Status, tk.CommitDeadline)
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

// TestPoolIneligibleClaimsForfeit: claimants ineligible at their claim
// are refused with nothing written; a claimant that makes itself
// ineligible after claiming (jailed, unbonded below the minimum) is not
// drawn at the close and forfeits its deposit (L1), and a claimant cannot
// claim a task twice.
func TestPoolIneligibleClaimsForfeit(t *testing.T) {
	n := marketNet(t, genesis.DefaultParams())
	id := n.post(client, poolJob(1, 2, types.OGPU(2)))
	n.refused("an unregistered claimant", claimBy(loner, id, 0), types.ErrNotEligible, "not a registered provider")
	n.refused("the client claiming its own job", claimBy(client, id, 0), types.ErrNotEligible)
	n.claimAll(id, 0, prov1, prov2, prov3, prov4)
	n.must("jail prov1", func(k *Keeper) error { k.jailProvider(prov1, 500, false, "test"); return nil })
	n.must("unbond prov2", func(k *Keeper) error { return escrow.NewKeeper(k.kv).Unbond(prov2, types.OGPU(40), 1_000) })
	burned := n.esc().Burned()
	mark := len(n.events)
	n.advanceTo(n.job(id).RevealEnd + 2)
	tk := n.task(id, 0)
	if len(tk.Slots) != 2 || tk.Assigned(prov1) || tk.Assigned(prov2) {
		t.Fatalf("slots %v: the ineligible claimants were drawn", tk.Slots)
	}
	out := eventsOf[EventBidForfeited](t, n.since(mark))
	if len(out) != 2 || !strings.Contains(out[0].Reason, "ineligible at the close") {
		t.Fatalf("forfeits %+v, want prov1's and prov2's", out)
	}
	if got, want := new(uint256.Int).Sub(n.esc().Burned(), burned), new(uint256.Int).Mul(n.params.Market.BidDeposit, uint256.NewInt(2)); !got.Eq(want) {
		t.Errorf("burned %s, want two deposits (%s)", got.Dec(), want.Dec())
	}
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
	if j := n.job(id); j.State != JobBidding {
		t.Fatalf("split pool job %s before the close", j.State)
	}
	n.advanceTo(n.job(id).RevealEnd + 2) // the close waits a block for the beacon value
	if j := n.job(id); j.State != JobRunning {
		t.Fatalf("split pool job %s after the close, want running", j.State)
	}
}

// TestPoolRandomClaims: random pool jobs (inference and pipeline, 1 to 3
// tasks, r of 2 or 3) under random claims, jailings, unjailings and
// cancellations (and the no-shows of tasks nobody runs), with the escrow,
// stake, supply, exposure and stage invariants checked after every block;
// at the end every job is closed with nothing unaccounted.
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
		for _, id := range jobs {
			j := n.job(id)
			if j.State.Open() || !n.esc().Locked(id).IsZero() {
				t.Fatalf("seed %d: job %d %s holding %s after every deadline", seed, id, j.State, n.esc().Locked(id).Dec())
			}
			if j.State == JobCompleted {
				ran++
			} else {
				unfilled++
			}
		}
	}
	// The seeds reach both ends: jobs drawn and run, jobs cancelled or
	// expired unawarded.
	if ran == 0 || unfilled == 0 {
		t.Fatalf("%d jobs ran, %d were cancelled or expired: the seeds miss a path", ran, unfilled)
	}
	t.Logf("pool jobs: %d ran, %d cancelled or expired", ran, unfilled)
}
