package market

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// pipeNet is a net for pipeline jobs: a client, two providers per stage
// of a 3-stage job (the replica chains a and b), one backup provider that
// bids on every stage, three spare providers that bid only where a test
// says, and one validator, "val". Disputes last 4 blocks.
type pipeNet struct {
	*testNet
	stage  [3][2]types.Address // stage[s][j]: provider j of stage s
	backup types.Address
	spares [3]types.Address
	val    types.Address
}

func newPipeNet(t *testing.T) *pipeNet {
	t.Helper()
	params := genesis.DefaultParams()
	params.Market.DisputeBlocks = 4
	params.Market.CanaryBlocks = 1
	p := &pipeNet{backup: addrOf("pipe backup"), val: addrOf("val")}
	accts := []testAccount{{client, types.OGPU(1_000)}, {p.backup, types.OGPU(1_000)}, {p.val, types.OGPU(2_000)}}
	for s := range p.stage {
		for j := range p.stage[s] {
			p.stage[s][j] = addrOf(fmt.Sprintf("pipe stage %d chain %c", s, 'a'+j))
			accts = append(accts, testAccount{p.stage[s][j], types.OGPU(1_000)})
		}
	}
	for i := range p.spares {
		p.spares[i] = addrOf(fmt.Sprintf("pipe spare %d", i))
		accts = append(accts, testAccount{p.spares[i], types.OGPU(1_000)})
	}
	p.testNet = newTestNet(t, params, accts, []string{"val"})
	for s := range p.stage {
		for j, a := range p.stage[s] {
			p.register(a, types.OGPU(100), gpuInfo(fmt.Sprintf("s%d%c", s, 'a'+j)))
		}
	}
	p.register(p.backup, types.OGPU(100), gpuInfo("backup"))
	for i, a := range p.spares {
		p.register(a, types.OGPU(100), gpuInfo(fmt.Sprintf("spare%d", i)))
	}
	p.endBlock()
	return p
}

// pipelineJob is a 3-stage r=2 pipeline auction with a cap of 3 oGPU per
// replica: bids 2 blocks, reveals 2, execute 3, verify 3.
func pipelineJob() *MsgPostJob {
	m := auctionJob(2, types.OGPU(3))
	m.Kind, m.Stages, m.Model, m.Input = KindPipeline, 3, hashOf("pipeline model"), hashOf("encrypted input")
	return m
}

// award posts a pipeline job and runs its auction to the close: stage s
// is won by its two providers at 1 oGPU, the backup bidding 2 oGPU on
// every stage sets the clearing price at 2. It returns at the first height
// after the close.
// Extra backups, bidding 2 oGPU on stage 0, are ranked after the backup.
// The bids are revealed at the last height of the reveal window, so the
// close runs at RevealEnd and the deadlines the tests count from it hold.
func (p *pipeNet) award(extra ...types.Address) uint64 {
	p.tb.Helper()
	id := p.post(client, pipelineJob())
	for s := uint16(0); s < 3; s++ {
		for _, a := range p.stage[s] {
			p.bid(a, id, s, types.OGPU(1))
		}
		p.bid(p.backup, id, s, types.OGPU(2))
	}
	for _, a := range extra {
		p.bid(a, id, 0, types.OGPU(2))
	}
	p.advanceTo(p.job(id).RevealEnd)
	for s := uint16(0); s < 3; s++ {
		for _, a := range p.stage[s] {
			p.revealBid(a, id, s, types.OGPU(1))
		}
		p.revealBid(p.backup, id, s, types.OGPU(2))
	}
	for _, a := range extra {
		p.revealBid(a, id, 0, types.OGPU(2))
	}
	p.advanceTo(p.job(id).RevealEnd + 1)
	return id
}

func (p *pipeNet) commitResult(who types.Address, id uint64, s uint16, res types.Hash) {
	p.tb.Helper()
	p.must("commit result", func(k *Keeper) error {
		return k.CommitResult(who, &verifier.MsgCommitResult{Job: id, Stage: s, Commitment: verifier.ResultCommitment(res, hashOf("salt"), who)})
	})
}

func (p *pipeNet) revealResult(who types.Address, id uint64, s uint16, res types.Hash) {
	p.tb.Helper()
	p.must("reveal result", func(k *Keeper) error {
		return k.RevealResult(who, &verifier.MsgRevealResult{Job: id, Stage: s, Result: res, Salt: hashOf("salt")})
	})
}

// run has stage s's providers commit their results in this block and
// reveal them in the next.
func (p *pipeNet) run(id uint64, s uint16, results [2]types.Hash) {
	p.tb.Helper()
	for j, a := range p.stage[s] {
		p.commitResult(a, id, s, results[j])
	}
	p.endBlock()
	for j, a := range p.stage[s] {
		p.revealResult(a, id, s, results[j])
	}
	if p.task(id, s).Status == verifier.TaskConfirming {
		// Agreed: it settles at the end of its canary window (1 block).
		p.endBlock()
		p.endBlock()
	}
}

// eventsOf decodes the events of type E in evs.
func eventsOf[E any, PE interface {
	*E
	types.Event
}](t *testing.T, evs types.Events) []E {
	t.Helper()
	var out []E
	for _, ev := range evs {
		var e E
		if ev.Type != PE(&e).EventType() {
			continue
		}
		if err := types.DecodeEvent(ev, PE(&e)); err != nil {
			t.Fatalf("decode %s: %v", ev.Type, err)
		}
		out = append(out, e)
	}
	return out
}

// balances reads the balance of every address.
func (p *pipeNet) balances() map[types.Address]*uint256.Int {
	out := map[types.Address]*uint256.Int{client: p.balance(client), p.backup: p.balance(p.backup)}
	for s := range p.stage {
		for _, a := range p.stage[s] {
			out[a] = p.balance(a)
		}
	}
	return out
}

// TestPipelineStagesOpenInTurn runs a 3-stage r=2 pipeline job end to end
// with every stage agreed: only stage 0 opens at the close, each later
// stage opens when the one before settles, with fresh deadlines and the
// settled result as its input, and the money is exact.
func TestPipelineStagesOpenInTurn(t *testing.T) {
	p := newPipeNet(t)
	start := p.balances()
	id := p.award() // posted at 2: bids to 4, reveals to 6, close at the end of 6
	j := p.job(id)
	d := p.params.Market.DisputeBlocks
	// Expiry covers the stages in turn: 6 + 3 × (3 + 3 + 4) + (3 + 3 + 4).
	if want := j.RevealEnd + 3*(6+d) + 6 + d; j.Expiry != want || want != 46 {
		t.Fatalf("expiry %d, want %d", j.Expiry, want)
	}
	if j.State != JobRunning {
		t.Fatalf("job is %s after the close, want running", j.State)
	}
	awarded := eventsOf[EventJobAwarded](t, p.events)
	if len(awarded) != 3 {
		t.Fatalf("%d award events, want 3", len(awarded))
	}
	for s, e := range awarded {
		want := EventJobAwarded{Job: id, Stage: uint16(s), Providers: []string{p.stage[s][0].Hex(), p.stage[s][1].Hex()}, Price: types.OGPU(2)}
		if s == 0 {
			want.CommitDeadline, want.RevealDeadline = 9, 12
		}
		// The two winners tie on price and reputation: the block hash orders them.
		if e.Providers[0] == p.stage[s][1].Hex() {
			want.Providers[0], want.Providers[1] = want.Providers[1], want.Providers[0]
		}
		if !reflect.DeepEqual(e, want) {
			t.Errorf("stage %d awarded %+v, want %+v", s, e, want)
		}
	}
	for s, want := range []verifier.TaskStatus{verifier.TaskExecuting, verifier.TaskWaiting, verifier.TaskWaiting} {
		if tk := p.task(id, uint16(s)); tk.Status != want || len(tk.Slots) != 2 || len(tk.Backups) != 1 || tk.Backups[0] != p.backup {
			t.Fatalf("stage %d after the close: %s with %d slots and backups %v, want %s with 2 and the backup", s, tk.Status, len(tk.Slots), tk.Backups, want)
		}
	}

	// A stage-1 provider that has its input early still cannot commit.
	p.refused("commit to a waiting stage", func(k *Keeper) error {
		return k.CommitResult(p.stage[1][0], &verifier.MsgCommitResult{Job: id, Stage: 1, Commitment: hashOf("early")})
	}, types.ErrWrongPhase, "job 1 stage 1 opens when stage 0 settles; commit after that")
	p.refused("reveal on a waiting stage", func(k *Keeper) error {
		return k.RevealResult(p.stage[1][0], &verifier.MsgRevealResult{Job: id, Stage: 1, Result: hashOf("early"), Salt: hashOf("salt")})
	}, types.ErrWrongPhase, "job 1 stage 1 opens when stage 0 settles")

	out := [3]types.Hash{hashOf("stage 0 out"), hashOf("stage 1 out"), hashOf("stage 2 out")}
	p.events = nil
	p.run(id, 0, [2]types.Hash{out[0], out[0]}) // commits at 7, reveals at 8, confirms until 9: settles, stage 1 opens
	opened := eventsOf[EventStageOpened](t, p.events)
	if want := []EventStageOpened{{Job: id, Stage: 1, Input: out[0], CommitDeadline: 12, RevealDeadline: 15}}; !reflect.DeepEqual(opened, want) {
		t.Fatalf("after stage 0 settled at 9: opened %+v, want %+v", opened, want)
	}
	if tk := p.task(id, 1); tk.Status != verifier.TaskExecuting || tk.CommitDeadline != 12 || tk.RevealDeadline != 15 {
		t.Fatalf("stage 1: %s, deadlines %d/%d; want executing, 12/15", tk.Status, tk.CommitDeadline, tk.RevealDeadline)
	}
	p.refused("commit to stage 2 while stage 1 runs", func(k *Keeper) error {
		return k.CommitResult(p.stage[2][0], &verifier.MsgCommitResult{Job: id, Stage: 2, Commitment: hashOf("early")})
	}, types.ErrWrongPhase, "job 1 stage 2 opens when stage 1 settles; commit after that")
	p.endBlock()

	p.events = nil
	p.run(id, 1, [2]types.Hash{out[1], out[1]}) // commits at 11, reveals at 12, settles at 13
	opened = eventsOf[EventStageOpened](t, p.events)
	if want := []EventStageOpened{{Job: id, Stage: 2, Input: out[1], CommitDeadline: 16, RevealDeadline: 19}}; !reflect.DeepEqual(opened, want) {
		t.Fatalf("after stage 1 settled at 13: opened %+v, want %+v", opened, want)
	}
	p.endBlock()
	p.run(id, 2, [2]types.Hash{out[2], out[2]}) // commits at 11, reveals at 12
	j = p.job(id)
	if j.State != JobCompleted || j.Settled != 3 || j.Verified != 3 {
		t.Fatalf("job %s with %d settled, %d verified; want completed, 3, 3", j.State, j.Settled, j.Verified)
	}
	for s := uint16(0); s < 3; s++ {
		if tk := p.task(id, s); tk.Status != verifier.TaskSettled || tk.Verdict != out[s] {
			t.Errorf("stage %d: %s on %x, want settled on %x", s, tk.Status, tk.Verdict, out[s])
		}
	}
	p.advanceTo(j.Expiry + d + 1) // the stale stage-0 deadlines and the rest: nothing moves
	end := p.balances()
	for s := range p.stage {
		for _, a := range p.stage[s] {
			if want := new(uint256.Int).Add(start[a], types.OGPU(2)); !end[a].Eq(want) {
				t.Errorf("stage %d provider %s: balance %s, want %s (one clearing price)", s, a, end[a].Dec(), want.Dec())
			}
		}
	}
	if !end[p.backup].Eq(start[p.backup]) {
		t.Errorf("backup balance %s, want %s (deposits back)", end[p.backup].Dec(), start[p.backup].Dec())
	}
	fee := escrow.MulBps(types.OGPU(18), p.params.Market.ValidatorFeeBps) // 3 stages × 2 × 3 oGPU locked
	want := new(uint256.Int).Sub(start[client], types.OGPU(12))
	want.Sub(want, fee)
	if !end[client].Eq(want) {
		t.Errorf("client balance %s, want %s (start - 3 × 2 × 2 - the whole fee)", end[client].Dec(), want.Dec())
	}
	if j := p.job(id); !j.Paid.Eq(types.OGPU(12)) || !j.Refunded.Eq(types.OGPU(6)) || !p.esc().Locked(id).IsZero() {
		t.Errorf("job paid %s, refunded %s, holds %s; want 12, 6 and 0 oGPU", j.Paid.Dec(), j.Refunded.Dec(), p.esc().Locked(id).Dec())
	}
}

// TestPipelineLieAtStage1: provider b of stage 1 lies. Stage 2 stays
// closed through the dispute (so b's successor, who computed on the lie,
// is not judged on it); the validators' verdict opens stage 2 with the
// correct result as its input; the liar is slashed and the honest
// providers of every stage are paid.
func TestPipelineLieAtStage1(t *testing.T) {
	p := newPipeNet(t)
	start := p.balances()
	liar := p.stage[1][1]
	stake := p.esc().Bonded(liar)
	id := p.award()
	out := [3]types.Hash{hashOf("stage 0 out"), hashOf("stage 1 out"), hashOf("stage 2 out")}
	p.run(id, 0, [2]types.Hash{out[0], out[0]})
	p.endBlock()
	p.events = nil
	p.run(id, 1, [2]types.Hash{out[1], hashOf("a lie")}) // reveals at 12: sealed votes until 14, opened until 16
	disputes := eventsOf[EventDisputeOpened](t, p.events)
	if len(disputes) != 1 || disputes[0].Stage != 1 || disputes[0].SealBy != 14 || disputes[0].Deadline != 16 {
		t.Fatalf("dispute events %+v, want stage 1 sealed by 14, until 16", disputes)
	}
	if tk := p.task(id, 2); tk.Status != verifier.TaskWaiting {
		t.Fatalf("stage 2 is %s during stage 1's dispute, want waiting", tk.Status)
	}
	p.advanceTo(14) // stage 1's reveal window is over: stage 2 still waits on the vote
	p.refused("commit to stage 2 during the dispute", func(k *Keeper) error {
		return k.CommitResult(p.stage[2][1], &verifier.MsgCommitResult{Job: id, Stage: 2, Commitment: hashOf("on the lie")})
	}, types.ErrWrongPhase, "job 1 stage 2 opens when stage 1 settles")
	p.events = nil
	p.vote(id, 1, out[1], p.val)
	settled := eventsOf[EventTaskSettled](t, p.events)
	if len(settled) != 1 || settled[0].Outcome != "verdict" || settled[0].Result != out[1] || !settled[0].Paid.Eq(types.OGPU(2)) || !settled[0].Refund.Eq(types.OGPU(2)) {
		t.Fatalf("settled %+v, want stage 1 on the verdict: 2 oGPU paid, 2 refunded", settled)
	}
	opened := eventsOf[EventStageOpened](t, p.events)
	if want := []EventStageOpened{{Job: id, Stage: 2, Input: out[1], CommitDeadline: 17, RevealDeadline: 20}}; !reflect.DeepEqual(opened, want) {
		t.Fatalf("opened %+v, want %+v", opened, want)
	}
	if prov, _ := GetProvider(p.tree, liar); !prov.Tombstoned {
		t.Error("the liar is not tombstoned")
	}
	slashed := escrow.MulBps(stake, p.params.Market.FraudSlashBps)
	if got, want := p.esc().Bonded(liar), new(uint256.Int).Sub(stake, slashed); !got.Eq(want) {
		t.Errorf("liar's stake %s, want %s", got.Dec(), want.Dec())
	}
	p.endBlock()
	p.run(id, 2, [2]types.Hash{out[2], out[2]}) // commits at 14, reveals at 15
	j := p.job(id)
	if j.State != JobCompleted || j.Verified != 3 {
		t.Fatalf("job %s with %d verified stages, want completed with 3", j.State, j.Verified)
	}
	end := p.balances()
	for s := range p.stage {
		for _, a := range p.stage[s] {
			want := new(uint256.Int).Add(start[a], types.OGPU(2))
			if a == liar {
				want = start[a]
			}
			if !end[a].Eq(want) {
				t.Errorf("stage %d provider %s: balance %s, want %s", s, a, end[a].Dec(), want.Dec())
			}
		}
	}
	fee := escrow.MulBps(types.OGPU(18), p.params.Market.ValidatorFeeBps)
	want := new(uint256.Int).Sub(start[client], types.OGPU(10)) // five honest replicas paid
	want.Sub(want, fee)
	want.Add(want, j.Compensated)
	if j.Compensated.IsZero() || !end[client].Eq(want) {
		t.Errorf("client balance %s (compensated %s), want %s: start - 5 × 2 - fee + compensation", end[client].Dec(), j.Compensated.Dec(), want.Dec())
	}
}

// TestPipelineUnresolvedStage0: stage 0's replicas disagree and no vote
// reaches 2/3. Stages 1 and 2 never open: they settle "no_input" with
// their slots refunded, the job completes, no fee is taken (nothing was
// verified), and the client has every unit back.
func TestPipelineUnresolvedStage0(t *testing.T) {
	p := newPipeNet(t)
	start := p.balances()
	id := p.award()
	p.run(id, 0, [2]types.Hash{hashOf("x"), hashOf("y")}) // reveals at 8: dispute until 12
	p.events = nil
	p.advanceTo(13)
	settled := eventsOf[EventTaskSettled](t, p.events)
	if len(settled) != 3 {
		t.Fatalf("%d settlements at the dispute deadline, want 3: %+v", len(settled), settled)
	}
	for s, e := range settled {
		outcome := "no_input"
		if s == 0 {
			outcome = "unresolved"
		}
		if e.Stage != uint16(s) || e.Outcome != outcome || !e.Paid.IsZero() || !e.Refund.Eq(types.OGPU(4)) {
			t.Errorf("settlement %d: %+v, want stage %d %s, nothing paid, 4 oGPU refunded", s, e, s, outcome)
		}
	}
	if opened := eventsOf[EventStageOpened](t, p.events); len(opened) != 0 {
		t.Errorf("stages opened without an input: %+v", opened)
	}
	done := eventsOf[EventJobCompleted](t, p.events)
	if len(done) != 1 || !done[0].ValidatorFee.IsZero() || !done[0].Paid.IsZero() {
		t.Fatalf("completion %+v, want one, paying nothing and no fee", done)
	}
	for s := uint16(1); s < 3; s++ {
		if tk := p.task(id, s); tk.Status != verifier.TaskSettled || tk.Slots[0].Committed {
			t.Errorf("stage %d: %s, want settled without a commitment", s, tk.Status)
		}
	}
	if j := p.job(id); j.State != JobCompleted || j.Verified != 0 || !p.esc().Locked(id).IsZero() {
		t.Errorf("job %s with %d verified holding %s, want completed, 0, nothing", j.State, j.Verified, p.esc().Locked(id).Dec())
	}
	for a, b := range p.balances() {
		if !b.Eq(start[a]) {
			t.Errorf("%s: balance %s, want %s unchanged", a, b.Dec(), start[a].Dec())
		}
	}
}

// TestPipelineNoShowAtOpenedStage: a stage-1 provider that never commits
// after its stage opened is a no-show; its slot goes to the backup, which
// finishes the stage, and stage 2 opens on the result.
func TestPipelineNoShowAtOpenedStage(t *testing.T) {
	p := newPipeNet(t)
	id := p.award()
	out := [3]types.Hash{hashOf("stage 0 out"), hashOf("stage 1 out"), hashOf("stage 2 out")}
	p.run(id, 0, [2]types.Hash{out[0], out[0]}) // stage 1 opens at the end of 9: commits until 12
	p.endBlock()
	absent := p.stage[1][1]
	stake := p.esc().Bonded(absent)
	p.commitResult(p.stage[1][0], id, 1, out[1])
	p.events = nil
	p.advanceTo(13)
	moved := eventsOf[EventSlotReassigned](t, p.events)
	if want := []EventSlotReassigned{{Job: id, Stage: 1, From: absent, To: p.backup, CommitDeadline: 15, RevealDeadline: 18}}; !reflect.DeepEqual(moved, want) {
		t.Fatalf("reassigned %+v, want %+v", moved, want)
	}
	if got, want := p.esc().Bonded(absent), new(uint256.Int).Sub(stake, escrow.MulBps(stake, p.params.Market.NoShowSlashBps)); !got.Eq(want) {
		t.Errorf("no-show's stake %s, want %s", got.Dec(), want.Dec())
	}
	p.commitResult(p.backup, id, 1, out[1])
	p.endBlock()
	p.events = nil
	p.revealResult(p.stage[1][0], id, 1, out[1])
	p.revealResult(p.backup, id, 1, out[1])
	p.endBlock()
	p.endBlock() // the canary window
	if opened := eventsOf[EventStageOpened](t, p.events); len(opened) != 1 || opened[0].Stage != 2 || opened[0].Input != out[1] || opened[0].CommitDeadline != 18 {
		t.Fatalf("opened %+v, want stage 2 on stage 1's result, commits until 18", opened)
	}
	p.endBlock()
	p.run(id, 2, [2]types.Hash{out[2], out[2]})
	if j := p.job(id); j.State != JobCompleted || j.Verified != 3 {
		t.Fatalf("job %s with %d verified, want completed with 3", j.State, j.Verified)
	}
}

// TestPipelineReassignLeavesRoomForLaterStages: no-shows at stage 0 are
// replaced by backups only while a fresh execute and verify window still
// leaves every later stage its worst case (execute + verify + dispute)
// before the job's expiry; after that the slot is refunded and the stage
// finishes with the provider it has.
func TestPipelineReassignLeavesRoomForLaterStages(t *testing.T) {
	p := newPipeNet(t)
	id := p.award(p.spares[:]...) // stage 0 has four backups
	if tk := p.task(id, 0); len(tk.Backups) != 4 {
		t.Fatalf("stage 0 backups %v, want 4", tk.Backups)
	}
	stay := p.task(id, 0).Slots[0].Provider
	out := [3]types.Hash{hashOf("stage 0 out"), hashOf("stage 1 out"), hashOf("stage 2 out")}
	p.commitResult(stay, id, 0, out[0])
	client0 := p.balance(client)
	// Expiry 46, later stages need 2 × (3 + 3 + 4) = 20: a reassignment at
	// height h needs h + 6 + 20 <= 46. At 9, 12, 15 and 18 it fits (the new
	// provider never commits either); at 21 it does not.
	p.events = nil
	p.advanceTo(22)
	moved := eventsOf[EventSlotReassigned](t, p.events)
	if len(moved) != 4 || moved[3].CommitDeadline != 21 {
		t.Fatalf("reassigned %+v, want 4 times, the last committing until 21", moved)
	}
	if n := len(eventsOf[EventNoShow](t, p.events)); n != 5 {
		t.Errorf("%d no-shows, want 5", n)
	}
	// The unfilled slot's price went back to the client, with the no-show
	// compensations.
	want := new(uint256.Int).Add(client0, types.OGPU(2))
	want.Add(want, p.job(id).Compensated)
	if got := p.balance(client); !got.Eq(want) {
		t.Errorf("client balance %s, want %s", got.Dec(), want.Dec())
	}
	p.events = nil
	p.revealResult(stay, id, 0, out[0])
	p.endBlock() // the reveal deadline: one result of r = 2, so it is audited (short.go)
	if tk := p.task(id, 0); tk.Status != verifier.TaskDisputed || tk.Audit != verifier.AuditShort {
		t.Fatalf("stage 0 with one result of two: %s (audit %q), want an audit vote", tk.Status, tk.Audit)
	}
	p.vote(id, 0, out[0], p.val)
	opened := eventsOf[EventStageOpened](t, p.events)
	if len(opened) != 1 || opened[0].Stage != 1 || opened[0].Input != out[0] {
		t.Fatalf("opened %+v, want stage 1 on stage 0's result", opened)
	}
	if j := p.job(id); opened[0].RevealDeadline+10 > j.Expiry {
		t.Errorf("stage 1 reveals until %d: stage 2's worst case no longer fits before expiry %d", opened[0].RevealDeadline, j.Expiry)
	}
}

// TestPipelineUnawardedStageExpires: a pipeline with a stage nobody won
// cannot run, so the close expires the whole job, naming the stage, and
// refunds the client everything.
func TestPipelineUnawardedStageExpires(t *testing.T) {
	cases := []struct {
		name   string
		stage  uint16
		reveal bool // the stage's one bidder seals a bid but does not reveal it
		reason string
	}{
		{name: "unrevealed bid", stage: 1, reveal: false, reason: "stage 1 has no eligible revealed bids"},
		{name: "no bids", stage: 2, reason: "stage 2 has no bids"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPipeNet(t)
			start := p.balances()
			id := p.post(client, pipelineJob())
			for s := uint16(0); s < 3; s++ {
				if s == tc.stage && tc.name == "no bids" {
					continue
				}
				for _, a := range p.stage[s] {
					p.bid(a, id, s, types.OGPU(1))
				}
			}
			p.advanceTo(p.job(id).BidEnd + 1)
			for s := uint16(0); s < 3; s++ {
				if s == tc.stage {
					continue
				}
				for _, a := range p.stage[s] {
					p.revealBid(a, id, s, types.OGPU(1))
				}
			}
			p.events = nil
			p.advanceTo(p.job(id).RevealEnd + 1)
			expired := eventsOf[EventJobExpired](t, p.events)
			if len(expired) != 1 || !strings.Contains(expired[0].Reason, tc.reason) {
				t.Fatalf("expiry events %+v, want one saying %q", expired, tc.reason)
			}
			if n := len(eventsOf[EventJobAwarded](t, p.events)); n != 0 {
				t.Errorf("%d stages awarded in an expired pipeline", n)
			}
			for s := uint16(0); s < 3; s++ {
				if _, ok := p.ver().GetTask(id, s); ok {
					t.Errorf("stage %d has a task", s)
				}
			}
			if j := p.job(id); j.State != JobExpired || !p.esc().Locked(id).IsZero() {
				t.Fatalf("job %s holding %s, want expired holding nothing", j.State, p.esc().Locked(id).Dec())
			}
			if got := p.balance(client); !got.Eq(start[client]) {
				t.Errorf("client balance %s, want all of %s back", got.Dec(), start[client].Dec())
			}
			// Revealed bidders get their deposits back; a sealed bid loses its.
			for s := range p.stage {
				for _, a := range p.stage[s] {
					want := start[a]
					if uint16(s) == tc.stage && tc.name != "no bids" {
						want = new(uint256.Int).Sub(want, p.params.Market.BidDeposit)
					}
					if got := p.balance(a); !got.Eq(want) {
						t.Errorf("stage %d bidder: balance %s, want %s", s, got.Dec(), want.Dec())
					}
				}
			}
		})
	}
}

// TestPipelineLifetime: a pipeline's life counts its stages in turn, each
// with a dispute window; the same windows in an inference job count once.
func TestPipelineLifetime(t *testing.T) {
	p := newPipeNet(t) // max job blocks 1000, dispute 4 blocks
	post := func(m *MsgPostJob) func(k *Keeper) error {
		return func(k *Keeper) error { _, err := k.PostJob(client, m); return err }
	}
	m := pipelineJob()
	m.Stages, m.Windows = 40, Windows{Bid: 10, Reveal: 10, Execute: 10, Verify: 10}
	// 10 + 10 + 40 × (10 + 10 + 4) + (10 + 10 + 4) = 1004: 39 stages fit.
	m.Stages = 39
	id := p.post(client, m)
	if j := p.job(id); j.Expiry != j.Posted+980 {
		t.Errorf("expiry %d, want posted + 980", j.Expiry)
	}
	m.Stages = 40
	p.refused("one stage too many", post(m), types.ErrInvalidMsg,
		"a pipeline's stages run one after another: bid + reveal + stages × (execute + verify + 4 dispute blocks) + (execute + verify + dispute) must be at most 1000 blocks, this job needs 1004")
	m.Kind = KindInference
	id = p.post(client, m)
	if j := p.job(id); j.Expiry != j.Posted+64 {
		t.Errorf("inference expiry %d, want posted + 64 (bid + reveal + 2 × (execute + verify) + dispute)", j.Expiry)
	}
	huge := pipelineJob()
	huge.Windows.Execute = 1 << 63
	p.refused("windows that would overflow", post(huge), types.ErrInvalidMsg, "this job needs more: one window alone is longer than 1000 blocks")
	huge.Kind = KindInference
	p.refused("inference windows that overflow", post(huge), types.ErrInvalidMsg, "bid + reveal + 2 × (execute + verify) + 4 dispute blocks must be at most 1000 blocks")
}

// TestStageInvariant: the invariant fails on a waiting stage holding a
// commitment or deadlines, and on a later stage running before the one it
// follows settled.
func TestStageInvariant(t *testing.T) {
	p := newPipeNet(t)
	id := p.award()
	if err := StageInvariant(p.tree); err != nil {
		t.Fatalf("a freshly awarded pipeline: %v", err)
	}
	first := p.task(id, 1).Slots[0].Provider
	cases := []struct {
		name string
		edit func(tk *verifier.Task)
		want string
	}{
		{"commitment while waiting", func(tk *verifier.Task) { tk.Slots[0].Committed = true }, "waiting, yet " + first.String() + " committed a result"},
		{"deadline while waiting", func(tk *verifier.Task) { tk.CommitDeadline = 20 }, "waiting, yet it has deadlines"},
		{"open too early", func(tk *verifier.Task) { tk.Status = verifier.TaskExecuting }, "job 1 (pipeline running) stage 1: executing before stage 0 settled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := store.NewCache(p.tree) // never written back
			ver := verifier.NewKeeper(c)
			tk, _ := ver.GetTask(id, 1)
			tc.edit(tk)
			ver.SetTask(id, 1, tk)
			if err := StageInvariant(c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("invariant: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestEventStageOpenedRoundTrip(t *testing.T) {
	e := EventStageOpened{Job: 7, Stage: 2, Input: hashOf("verdict"), CommitDeadline: 120, RevealDeadline: 130}
	ev := types.EncodeEvent(e)
	if ev.Type != "stage_opened" {
		t.Fatalf("type %q", ev.Type)
	}
	var got EventStageOpened
	if err := types.DecodeEvent(ev, &got); err != nil {
		t.Fatal(err)
	}
	if got != e {
		t.Fatalf("round trip %+v, want %+v", got, e)
	}
	var wrong EventJobAwarded
	if err := types.DecodeEvent(ev, &wrong); err == nil {
		t.Fatalf("decoded a stage_opened event as job_awarded")
	}
}
