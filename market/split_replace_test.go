package market

import (
	"crypto/sha256"
	"reflect"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Replacement of a split stage provider that stopped mid-generation
// (MsgReplaceStage, docs/design-notes.md "Split inference", Replacement).

// extra registers a new keyed provider advertising the whole split model,
// so that it may bid on every stage.
func (n *splitNet) extra(name string) types.Address {
	n.tb.Helper()
	h := sha256.Sum256([]byte("split key " + name))
	key, err := crypto.ToECDSA(h[:])
	if err != nil {
		n.tb.Fatal(err)
	}
	a := crypto.PubkeyToAddress(key.PublicKey)
	n.keys[a] = key
	n.must("fund "+name, func(k *Keeper) error { return k.esc.Send(n.spare, a, types.OGPU(150)) })
	info := gpuInfo(name)
	info.Models = []types.Hash{splitModel}
	n.register(a, types.OGPU(100), info)
	return a
}

// awardWith is award with more bidders: extra[s] bid the cap (3 oGPU) on
// stage s, ranking after the backup (2 oGPU), whose bid stays the
// clearing price. Like award, it reveals at RevealEnd.
func (n *splitNet) awardWith(m *MsgPostJob, extra [2][]types.Address) uint64 {
	n.tb.Helper()
	id := n.post(n.client, m)
	for s := uint16(0); s < 2; s++ {
		for _, a := range n.stage[s] {
			n.bid(a, id, s, types.OGPU(1))
		}
		n.bid(n.backup, id, s, types.OGPU(2))
		for _, a := range extra[s] {
			n.bid(a, id, s, types.OGPU(3))
		}
	}
	n.advanceTo(n.job(id).RevealEnd)
	for s := uint16(0); s < 2; s++ {
		for _, a := range n.stage[s] {
			n.revealBid(a, id, s, types.OGPU(1))
		}
		n.revealBid(n.backup, id, s, types.OGPU(2))
		for _, a := range extra[s] {
			n.revealBid(a, id, s, types.OGPU(3))
		}
	}
	n.advanceTo(n.job(id).RevealEnd + 1)
	return id
}

// replace has from order chain c of stage s of job id replaced.
func replace(from types.Address, id uint64, s, c uint16) func(k *Keeper) error {
	return func(k *Keeper) error { return k.ReplaceStage(from, &MsgReplaceStage{Job: id, Stage: s, Chain: c}) }
}

// commitSlot has the holder of chain c of stage s commit transcript x.
func (n *splitNet) commitSlot(id uint64, s, c uint16, x transcript) {
	n.tb.Helper()
	a := n.holder(id, s, c)
	n.must("commit transcript", func(k *Keeper) error {
		return k.CommitResult(a, &verifier.MsgCommitResult{Job: id, Stage: s, Commitment: SplitCommitment(id, s, c, x.steps, x.hin, x.hout, splitSalt(a, id, s), a)})
	})
}

// finish has every live slot that has not committed commit its
// transcript tr[s][c] in this block, and every live slot reveal in the
// next.
func (n *splitNet) finish(id uint64, tr [2][2]transcript) {
	n.tb.Helper()
	for s := uint16(0); s < 2; s++ {
		for c := uint16(0); c < 2; c++ {
			if sl := n.task(id, s).Slots[c]; sl.Live() && !sl.Committed {
				n.commitSlot(id, s, c, tr[s][c])
			}
		}
	}
	n.endBlock()
	for s := uint16(0); s < 2; s++ {
		for c := uint16(0); c < 2; c++ {
			if !n.task(id, s).Slots[c].Live() {
				continue
			}
			a, x := n.holder(id, s, c), tr[s][c]
			n.must("reveal transcript", func(k *Keeper) error {
				return k.RevealTranscript(a, &MsgRevealTranscript{Job: id, Stage: s, Steps: x.steps, Hin: x.hin, Hout: x.hout, Salt: splitSalt(a, id, s)})
			})
		}
	}
}

// TestSplitReplaceStage: chain 0's stage-1 provider stops mid-generation;
// the client orders it replaced at the last height of the commit window.
// The stage's backup takes the same slot (chain 0) at the same price,
// every stage gets a fresh execute window, the deadlines scheduled before
// pass without effect (nobody is marked a no-show at the old commit
// deadline, nothing is judged at the old reveal deadline), and the job
// completes with every slot that worked paid, the backup included. The
// replaced provider is slashed no_show_slash_bps, all of it burned (the
// client gains nothing by ordering it), and jailed.
func TestSplitReplaceStage(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	dead := n.holder(id, 1, 0)
	others := []types.Address{n.holder(id, 0, 0), n.holder(id, 0, 1), n.holder(id, 1, 1)}
	oldCommit, oldReveal := n.task(id, 0).CommitDeadline, n.task(id, 0).RevealDeadline
	n.advanceTo(oldCommit)
	stake, burned, clientBal := n.esc().Bonded(dead), n.esc().Burned(), n.balance(n.client)
	start := n.balancesOf(append(others, n.backup, dead)...)
	n.events = nil
	n.must("the client replaces chain 0 of stage 1", replace(n.client, id, 1, 0))

	slash := escrow.MulBps(stake, n.params.Market.NoShowSlashBps)
	want := EventSplitStageReplaced{Job: id, Stage: 1, Chain: 0, From: dead, To: n.backup,
		CommitDeadline: oldCommit + 3, RevealDeadline: oldCommit + 6, Replacements: 1}
	if got := eventsOf[EventSplitStageReplaced](t, n.events); !reflect.DeepEqual(got, []EventSplitStageReplaced{want}) {
		t.Fatalf("replaced %+v, want %+v", got, want)
	}
	if got := eventsOf[EventSlashed](t, n.events); len(got) != 1 || got[0].Account != dead || !got[0].Amount.Eq(slash) || !got[0].Burned.Eq(slash) || !got[0].Compensation.IsZero() {
		t.Fatalf("slashes %+v, want %s of %s, all burned", got, slash.Dec(), dead.Hex())
	}
	if got, want := n.esc().Burned(), new(uint256.Int).Add(burned, slash); !got.Eq(want) {
		t.Errorf("burned %s, want %s (the slash, exactly)", got.Dec(), want.Dec())
	}
	if got := n.balance(n.client); !got.Eq(clientBal) {
		t.Errorf("client's balance %s after its order, want %s: a replacement pays the client nothing", got.Dec(), clientBal.Dec())
	}
	if got, want := n.esc().Bonded(dead), new(uint256.Int).Sub(stake, slash); !got.Eq(want) {
		t.Errorf("replaced provider's stake %s, want %s", got.Dec(), want.Dec())
	}
	if p, _ := GetProvider(n.tree, dead); !p.Jailed || p.Tombstoned {
		t.Errorf("replaced provider jailed %v tombstoned %v, want jailed only", p.Jailed, p.Tombstoned)
	}
	if got := n.ver().GetReputation(dead).NoShows; got != 1 {
		t.Errorf("replaced provider has %d no-shows, want 1", got)
	}
	t1 := n.task(id, 1)
	if sl := t1.Slots[0]; sl.Provider != n.backup || !slices.Equal(sl.Replaced, []types.Address{dead}) || sl.Committed {
		t.Fatalf("stage 1 chain 0 is %+v, want the backup, replacing %s", sl, dead.Hex())
	}
	if len(t1.Backups) != 0 || t1.Slots[1].Provider != others[2] {
		t.Fatalf("stage 1: backups %v, chain 1 %s; want none left and chain 1 unchanged", t1.Backups, t1.Slots[1].Provider.Hex())
	}
	for s := uint16(0); s < 2; s++ {
		if tk := n.task(id, s); tk.CommitDeadline != want.CommitDeadline || tk.RevealDeadline != want.RevealDeadline {
			t.Fatalf("stage %d commits by %d, reveals by %d; want %d and %d", s, tk.CommitDeadline, tk.RevealDeadline, want.CommitDeadline, want.RevealDeadline)
		}
	}
	if n.tree.Get(byProviderKey(n.backup, id)) == nil {
		t.Error("the replacement is not indexed under its jobs (/jobs/provider)")
	}

	// The old commit deadline ends this block, the old reveal deadline is
	// the new commit deadline: neither may judge anybody.
	n.events = nil
	n.advanceTo(oldReveal)
	if got := len(eventsOf[EventNoShow](t, n.events)); got != 0 {
		t.Fatalf("%d no-shows at the old commit deadline, want 0", got)
	}
	n.run(id, bothChains(honest, honest))
	for s := uint16(0); s < 2; s++ {
		if got := n.task(id, s).Status; got != verifier.TaskConfirming {
			t.Fatalf("stage %d is %s after the last reveal, want confirming", s, got)
		}
	}
	n.endBlock()
	n.endBlock()
	j := n.job(id)
	if j.State != JobCompleted || j.Verified != 2 || !j.Paid.Eq(types.OGPU(8)) {
		t.Fatalf("job %s, %d verified, paid %s; want completed, 2, 8 oGPU", j.State, j.Verified, j.Paid.Dec())
	}
	end := n.balancesOf(append(others, n.backup, dead)...)
	for i := range others {
		if want := new(uint256.Int).Add(start[i], types.OGPU(2)); !end[i].Eq(want) {
			t.Errorf("%s: balance %s, want %s (its price)", others[i].Hex(), end[i].Dec(), want.Dec())
		}
	}
	if want := new(uint256.Int).Add(start[3], types.OGPU(2)); !end[3].Eq(want) {
		t.Errorf("the replacement: balance %s, want %s (the stage's clearing price)", end[3].Dec(), want.Dec())
	}
	if !end[4].Eq(start[4]) {
		t.Errorf("the replaced provider: balance %s, want %s (unpaid)", end[4].Dec(), start[4].Dec())
	}
}

// TestSplitReplaceRefusals: every order that is not the client's, or not
// for a live, uncommitted slot of a split job still executing, is refused
// with a clear error and changes nothing. The provider's neighbour and a
// backup (that would take the slot) are refused like a stranger: nobody
// but the client may say a stage died (P10), and no backup chooses itself
// in (P11).
func TestSplitReplaceRefusals(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	n.commitSlot(id, 0, 1, honest[0])
	inf := n.post(n.client, auctionJob(2, types.OGPU(3)))
	for _, c := range []struct {
		name  string
		from  types.Address
		m     MsgReplaceStage
		want  error
		texts []string
	}{
		{"by the neighbour", n.holder(id, 0, 0), MsgReplaceStage{id, 1, 0}, types.ErrUnauthorized, []string{"only job", "client"}},
		{"by the backup", n.backup, MsgReplaceStage{id, 1, 0}, types.ErrUnauthorized, []string{"only job"}},
		{"by the provider itself", n.holder(id, 1, 0), MsgReplaceStage{id, 1, 0}, types.ErrUnauthorized, []string{"only job"}},
		{"by a stranger", n.spare, MsgReplaceStage{id, 1, 0}, types.ErrUnauthorized, []string{"only job"}},
		{"a committed slot", n.client, MsgReplaceStage{id, 0, 1}, types.ErrWrongPhase, []string{"committed its transcript", "not replaced"}},
		{"no such chain", n.client, MsgReplaceStage{id, 1, 2}, types.ErrInvalidMsg, []string{"chains 0..1"}},
		{"no such stage", n.client, MsgReplaceStage{id, 2, 0}, types.ErrInvalidMsg, []string{"stages 0..1"}},
		{"no such job", n.client, MsgReplaceStage{id + 7, 0, 0}, types.ErrUnknownJob, []string{"does not exist"}},
		{"an inference job", n.client, MsgReplaceStage{inf, 0, 0}, types.ErrInvalidMsg, []string{"only a split job"}},
	} {
		n.refused(c.name, func(k *Keeper) error { return k.ReplaceStage(c.from, &c.m) }, c.want, c.texts...)
	}
	// A split job not yet awarded has nothing executing.
	early := n.post(n.client, splitJob())
	n.refused("before the award", replace(n.client, early, 0, 0), types.ErrWrongPhase, "not executing")
}

// TestSplitReplaceCommittedIsAlive: a provider that committed its
// transcript finished its part: the client cannot have it replaced (and
// slashed) at will. The order is refused, and the provider is paid when
// the job settles.
func TestSplitReplaceCommittedIsAlive(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	alive := n.holder(id, 1, 0)
	stake, before := n.esc().Bonded(alive), n.balance(alive)
	n.commitSlot(id, 1, 0, honest[1])
	n.refused("replace a committed slot", replace(n.client, id, 1, 0), types.ErrWrongPhase, "committed its transcript")
	n.finish(id, bothChains(honest, honest))
	n.endBlock()
	n.endBlock()
	if j := n.job(id); j.State != JobCompleted || !j.Paid.Eq(types.OGPU(8)) {
		t.Fatalf("job %s paid %s, want completed, 8 oGPU", j.State, j.Paid.Dec())
	}
	if got, want := n.balance(alive), new(uint256.Int).Add(before, types.OGPU(2)); !got.Eq(want) || !n.esc().Bonded(alive).Eq(stake) {
		t.Errorf("the committed provider: balance %s stake %s, want %s and %s", got.Dec(), n.esc().Bonded(alive).Dec(), want.Dec(), stake.Dec())
	}
}

// TestSplitReplaceCap (P11): each replay shows the prompt to one more
// provider, so a job has at most MaxSplitReplacements, whichever stages
// they hit. Two stage-0 replacements go to the stage's backups in rank
// order; a third, on stage 1, is refused although stage 1 still has an
// eligible backup.
func TestSplitReplaceCap(t *testing.T) {
	n := newSplitNet(t)
	e1, e2 := n.extra("e1"), n.extra("e2")
	id := n.awardWith(splitJob(), [2][]types.Address{{e1}, {e2}})
	if got := n.task(id, 0).Backups; !slices.Equal(got, []types.Address{n.backup, e1}) {
		t.Fatalf("stage 0 backups %v, want the backup then e1", got)
	}
	d0, d1 := n.holder(id, 0, 0), n.holder(id, 0, 1)
	n.must("replace chain 0 of stage 0", replace(n.client, id, 0, 0))
	n.endBlock()
	n.events = nil
	n.must("replace chain 1 of stage 0", replace(n.client, id, 0, 1))
	if got := eventsOf[EventSplitStageReplaced](t, n.events); len(got) != 1 || got[0].From != d1 || got[0].To != e1 || got[0].Replacements != 2 {
		t.Fatalf("second replacement %+v, want %s → e1, the job's second", got, d1.Hex())
	}
	if got := []types.Address{n.holder(id, 0, 0), n.holder(id, 0, 1)}; !slices.Equal(got, []types.Address{n.backup, e1}) {
		t.Fatalf("stage 0 held by %v, want the backup (chain 0) and e1 (chain 1)", got)
	}
	n.refused("a third replacement", replace(n.client, id, 1, 0), types.ErrWrongPhase, "had its 2 replacements")
	if EligibleStage(n.tree, n.params, n.height, n.job(id), 1, e2) != nil || !slices.Contains(n.task(id, 1).Backups, e2) {
		t.Fatal("stage 1 has no eligible backup left: the refusal proves nothing about the cap")
	}
	n.finish(id, bothChains(honest, honest))
	n.endBlock()
	n.endBlock()
	if j := n.job(id); j.State != JobCompleted || !j.Paid.Eq(types.OGPU(8)) {
		t.Fatalf("job %s paid %s, want completed, 8 oGPU", j.State, j.Paid.Dec())
	}
	for _, d := range []types.Address{d0, d1} {
		if p, _ := GetProvider(n.tree, d); !p.Jailed {
			t.Errorf("replaced provider %s is not jailed", d.Hex())
		}
	}
}

// TestSplitReplaceAfterCommitDeadline: after the commit window the slot
// is a no-show (its price refunded): no order can bring a replacement in.
func TestSplitReplaceAfterCommitDeadline(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	for _, c := range [][2]uint16{{0, 0}, {0, 1}, {1, 1}} {
		n.commitSlot(id, c[0], uint16(c[1]), honest[c[0]])
	}
	n.advanceTo(n.task(id, 0).CommitDeadline + 1)
	if sl := n.task(id, 1).Slots[0]; !sl.NoShow {
		t.Fatalf("stage 1 chain 0 after the commit deadline: %+v, want a no-show", sl)
	}
	n.refused("replace after the commit deadline", replace(n.client, id, 1, 0), types.ErrWrongPhase, "commit window of job", "closed at height")
}

// TestSplitReplaceSkipsSlotHolders: an account holds one slot of a split
// job (P6). The backup of both stages takes a stage-0 slot; when a stage-1
// provider is replaced, the backup is passed over and the next eligible
// one, e2, takes the slot. A backup that is jailed is passed over too.
func TestSplitReplaceSkipsSlotHolders(t *testing.T) {
	n := newSplitNet(t)
	e1, e2 := n.extra("e1"), n.extra("e2")
	id := n.awardWith(splitJob(), [2][]types.Address{nil, {e1, e2}})
	if got := n.task(id, 1).Backups; !slices.Equal(got, []types.Address{n.backup, e1, e2}) {
		t.Fatalf("stage 1 backups %v, want backup, e1, e2", got)
	}
	n.must("replace chain 1 of stage 0", replace(n.client, id, 0, 1))
	if n.holder(id, 0, 1) != n.backup {
		t.Fatal("the backup did not take stage 0 chain 1")
	}
	n.must("jail e1", func(k *Keeper) error { k.jailProvider(e1, n.height+10, false, "test"); return nil })
	n.events = nil
	n.must("replace chain 0 of stage 1", replace(n.client, id, 1, 0))
	if got := eventsOf[EventSplitStageReplaced](t, n.events); len(got) != 1 || got[0].To != e2 {
		t.Fatalf("replaced %+v, want e2 (the backup holds a slot, e1 is jailed)", got)
	}
	if got := n.task(id, 1).Backups; len(got) != 0 {
		t.Errorf("stage 1 backups %v after the replacement, want none (those passed over go too)", got)
	}
	n.finish(id, bothChains(honest, honest))
	n.endBlock()
	n.endBlock()
	if j := n.job(id); j.State != JobCompleted || !j.Paid.Eq(types.OGPU(8)) {
		t.Fatalf("job %s paid %s, want completed, 8 oGPU", j.State, j.Paid.Dec())
	}
}

// TestSplitReplaceNoBackup: with no eligible backup left the order is
// refused, says so, and changes nothing: the provider keeps its slot (and
// is judged at the commit deadline like any other).
func TestSplitReplaceNoBackup(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	n.must("replace chain 0 of stage 0", replace(n.client, id, 0, 0))
	n.refused("stage 0 has no backup left", replace(n.client, id, 0, 1), types.ErrNotEligible, "no backup left", "the slot stays with "+n.holder(id, 0, 1).Hex())
	n.refused("stage 1's backup holds a slot", replace(n.client, id, 1, 0), types.ErrNotEligible, "no backup left")
	if got := n.task(id, 1).Backups; !slices.Equal(got, []types.Address{n.backup}) {
		t.Fatalf("stage 1 backups %v after a refused order, want the backup still listed", got)
	}
}

// TestSplitReplacedCannotReturn: the replaced provider's late commit,
// reveal and hand-off proof are refused: the slot is its replacement's.
// Its replacement may commit and reveal in the fresh window.
func TestSplitReplacedCannotReturn(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	dead := n.holder(id, 0, 1)
	n.must("replace chain 1 of stage 0", replace(n.client, id, 0, 1))
	x := honest[0]
	n.refused("the replaced provider commits", func(k *Keeper) error {
		return k.CommitResult(dead, &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: SplitCommitment(id, 0, 1, x.steps, x.hin, x.hout, splitSalt(dead, id, 0), dead)})
	}, types.ErrUnauthorized, "not assigned")
	n.finish(id, bothChains(honest, honest))
	n.refused("the replaced provider reveals", func(k *Keeper) error {
		return k.RevealTranscript(dead, &MsgRevealTranscript{Job: id, Stage: 0, Steps: x.steps, Hin: x.hin, Hout: x.hout, Salt: splitSalt(dead, id, 0)})
	}, types.ErrWrongPhase, "not taking reveals") // the scan ran: stage 0 confirms
	n.refused("the replaced provider proves", func(k *Keeper) error {
		return k.ProveHandoff(dead, &MsgProveHandoff{Job: id, Stage: 0, Chain: 1, Steps: x.steps, Hin: x.hin, Sig: n.sign(n.client, id, 1, ClientStage, x.steps, x.hin)})
	}, types.ErrWrongPhase, "not executing")
}

// TestSplitReplacedRevealRefused: while the stages still take reveals,
// the replaced provider's reveal is refused as not its slot.
func TestSplitReplacedRevealRefused(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	dead := n.holder(id, 1, 1)
	n.must("replace chain 1 of stage 1", replace(n.client, id, 1, 1))
	for s := uint16(0); s < 2; s++ {
		for c := uint16(0); c < 2; c++ {
			n.commitSlot(id, s, c, honest[s])
		}
	}
	n.endBlock()
	x := honest[1]
	n.refused("the replaced provider reveals", func(k *Keeper) error {
		return k.RevealTranscript(dead, &MsgRevealTranscript{Job: id, Stage: 1, Steps: x.steps, Hin: x.hin, Hout: x.hout, Salt: splitSalt(dead, id, 1)})
	}, types.ErrUnauthorized, "not assigned")
}

// TestSplitReplacementNoShow: the moved deadlines are the ones that run.
// A replacement that never commits either is a no-show at the new commit
// deadline (slashed, burned, its price refunded); a slot that commits but
// never reveals is one at the new reveal deadline, where the scan runs:
// the other slots are paid unverified and the escrow ends empty.
func TestSplitReplacementNoShow(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	n.advanceTo(n.task(id, 0).CommitDeadline)
	n.must("replace chain 0 of stage 1", replace(n.client, id, 1, 0))
	stake := n.esc().Bonded(n.backup)
	for _, c := range [][2]uint16{{0, 0}, {0, 1}, {1, 1}} {
		n.commitSlot(id, c[0], c[1], honest[c[0]])
	}
	commitBy, revealBy := n.task(id, 0).CommitDeadline, n.task(id, 0).RevealDeadline
	n.events = nil
	n.advanceTo(commitBy)
	if got := eventsOf[EventNoShow](t, n.events); len(got) != 0 {
		t.Fatalf("no-shows %+v before the new commit deadline, want none", got)
	}
	n.endBlock()
	if got := eventsOf[EventNoShow](t, n.events); len(got) != 1 || got[0].Provider != n.backup || got[0].Missed != "commit" {
		t.Fatalf("no-shows %+v, want the replacement missing its commit", got)
	}
	if got, want := n.esc().Bonded(n.backup), new(uint256.Int).Sub(stake, escrow.MulBps(stake, n.params.Market.NoShowSlashBps)); !got.Eq(want) {
		t.Errorf("replacement's stake %s, want %s", got.Dec(), want.Dec())
	}
	for _, c := range [][2]uint16{{0, 1}, {1, 1}} { // chain 0's stage 0 never reveals
		a, x := n.holder(id, c[0], c[1]), honest[c[0]]
		n.must("reveal", func(k *Keeper) error {
			return k.RevealTranscript(a, &MsgRevealTranscript{Job: id, Stage: c[0], Steps: x.steps, Hin: x.hin, Hout: x.hout, Salt: splitSalt(a, id, c[0])})
		})
	}
	n.advanceTo(revealBy)
	if j := n.job(id); j.State != JobRunning {
		t.Fatalf("job %s before the new reveal deadline, want running", j.State)
	}
	n.events = nil
	n.endBlock()
	got := outcomes(t, n.events)
	if len(got) != 0 {
		t.Fatalf("outcomes %v at the new reveal deadline, want none: chain 1's slots are audited (M-H4)", got)
	}
	for s := uint16(0); s < 2; s++ {
		if tk := n.task(id, s); tk.Status != verifier.TaskDisputed || tk.Audit != verifier.AuditSplit {
			t.Fatalf("stage %d is %s (audit %q), want chain 1's lone slot audited", s, tk.Status, tk.Audit)
		}
		n.vote(id, s, honest[s].hout, n.val)
	}
	if j := n.job(id); j.State != JobCompleted || !j.Paid.Eq(types.OGPU(4)) || !n.esc().Locked(id).IsZero() {
		t.Fatalf("job %s paid %s, %s locked; want completed, 4 oGPU, nothing", j.State, j.Paid.Dec(), n.esc().Locked(id).Dec())
	}
}

// TestSplitLifeFitsReplacements: a split job's life leaves a fresh
// execute window for each of its MaxSplitReplacements replacements, even
// ordered at the last height of each commit window and with an execute
// window longer than the verify window (the life of an inference job,
// 2 × (execute + verify), would not hold them). Hand-off proofs and a
// dispute of the last window end within the expiry + dispute_blocks that
// unbonding is sized for.
func TestSplitLifeFitsReplacements(t *testing.T) {
	n := newSplitNet(t)
	e1 := n.extra("e1")
	m := splitJob()
	m.Windows.Execute, m.Windows.Verify = 6, 1
	id := n.awardWith(m, [2][]types.Address{nil, {e1}})
	j := n.job(id)
	if want := j.Posted + 2 + 2 + 3*6 + 1 + 2*4; j.Expiry != want {
		t.Fatalf("expiry %d, want posted + bid + reveal + 3 × execute + verify + stages × dispute = %d", j.Expiry, want)
	}
	if inference := j.Posted + 2 + 2 + 2*(6+1) + 4; inference >= j.Expiry {
		t.Fatalf("an inference job's life %d is as long: the case proves nothing", inference)
	}
	n.advanceTo(n.task(id, 0).CommitDeadline)
	n.must("first replacement, at the commit deadline", replace(n.client, id, 0, 0))
	n.advanceTo(n.task(id, 0).CommitDeadline)
	n.must("second replacement, at the new commit deadline", replace(n.client, id, 1, 1))
	tk := n.task(id, 0)
	if tk.RevealDeadline+2*n.params.Market.DisputeBlocks != j.Expiry {
		t.Fatalf("reveals until %d, hand-off proofs until %d; want a dispute window before the expiry %d (the held stage's audit)", tk.RevealDeadline, tk.RevealDeadline+n.params.Market.DisputeBlocks, j.Expiry)
	}
	// Chain 1's stage 0 lies: the dispute opens at the last reveal and
	// ends within the expiry + dispute blocks.
	lie := [2]transcript{{12, honest[0].hin, hashOf("wrong")}, {12, hashOf("wrong"), hashOf("wrong tokens")}}
	n.finish(id, bothChains(honest, lie))
	if d := n.task(id, 0); d.Status != verifier.TaskDisputed || d.DisputeDeadline > j.Expiry+n.params.Market.DisputeBlocks {
		t.Fatalf("stage 0 is %s until %d, want disputed within %d", d.Status, d.DisputeDeadline, j.Expiry+n.params.Market.DisputeBlocks)
	}
	n.vote(id, 0, honest[0].hout, n.val)
	// Stage 1 was held until that verdict; the honest chain's slot is then
	// audited, also within the expiry + dispute blocks.
	if d := n.task(id, 1); d.Status != verifier.TaskDisputed || d.DisputeDeadline > j.Expiry+n.params.Market.DisputeBlocks {
		t.Fatalf("stage 1 is %s until %d, want audited within %d", d.Status, d.DisputeDeadline, j.Expiry+n.params.Market.DisputeBlocks)
	}
	n.vote(id, 1, honest[1].hout, n.val)
	if j := n.job(id); j.State != JobCompleted {
		t.Fatalf("job %s, want completed", j.State)
	}
}

// TestSplitReplaceNoTimeLeft: an award that ran late (deadline work
// deferred past the reveal end; simulated by a shorter expiry) may leave
// no room for a fresh window: the order is refused rather than let the
// stages run past the expiry.
func TestSplitReplaceNoTimeLeft(t *testing.T) {
	n := newSplitNet(t)
	id := n.award()
	n.must("shorten the expiry", func(k *Keeper) error {
		j := n.job(id)
		j.Expiry = n.task(id, 0).RevealDeadline + n.params.Market.DisputeBlocks
		k.setJob(j)
		return nil
	})
	n.refused("no time left", replace(n.client, id, 1, 0), types.ErrWrongPhase, "no time left for a replacement")
}
