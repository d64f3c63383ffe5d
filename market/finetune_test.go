package market

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// The fine-tune tests run the market with synthetic checkpoint hashes: a
// provider's run is its list h_0..h_N (the runtime's part is tested in
// runtime/llm/train and node/ftwork). An honest run is one list; a liar
// that deviates at step k has the same hashes before k and others from k.

const trainClass = "llama.cpp-test/cpu/train-v1/head"

// ftRun is a provider's checkpoint hashes.
type ftRun []types.Hash

func honestRun(n uint64) ftRun { return deviatingRun(n, n+1, "") }

// deviatingRun agrees with the honest run before step k and differs
// (by tag) from step k on.
func deviatingRun(n, k uint64, tag string) ftRun {
	r := make(ftRun, n+1)
	for i := range r {
		name := "honest"
		if uint64(i) >= k {
			name = "liar " + tag
		}
		r[i] = sha256.Sum256(cat([]byte(name), be64(uint64(i))))
	}
	return r
}

func (r ftRun) root() types.Hash  { return finetune.Root(r) }
func (r ftRun) final() types.Hash { return r[len(r)-1] }
func (r ftRun) result() types.Hash {
	return FinetuneResult(r.root(), r.final())
}

func (r ftRun) reveal(job uint64, salt types.Hash) *MsgRevealFinetune {
	n := uint64(len(r) - 1)
	return &MsgRevealFinetune{Job: job, Salt: salt, Root: r.root(), Final: r.final(),
		ProofBase: finetune.Prove(r, 0), ProofFinal: finetune.Prove(r, n)}
}

// open answers the current round of game g for run r.
func (r ftRun) open(g *finetune.Game) *finetune.MsgOpenCheckpoints {
	m := &finetune.MsgOpenCheckpoints{Job: g.Job, Stage: g.Stage, Match: g.Match, Root: r.root(), Round: g.Round}
	for _, k := range g.Points() {
		m.Openings = append(m.Openings, finetune.Opening{Step: k, Hash: r[k], Proof: finetune.Prove(r, k)})
	}
	return m
}

func finetuneJob(r uint16, steps uint64, base types.Hash) *MsgPostJob {
	m := auctionJob(r, types.OGPU(5))
	m.Kind = KindFinetune
	m.Windows = Windows{Bid: 2, Reveal: 2, Execute: 10, Verify: 5}
	m.Req.Class = trainClass
	m.Input = hashOf("dataset")
	m.Finetune = &FinetuneTerms{Base: base, DatasetSize: 5_000, Epochs: 2, LRMicro: 3_000, Ctx: 64, Stride: 64, Steps: steps, Trainable: TrainableHead}
	return m
}

// finetuneNet is marketNet with the four providers in the training class
// and three validators (so that a 2/3 verdict needs two of them).
func finetuneNet(t *testing.T) *testNet {
	t.Helper()
	var accts []testAccount
	for _, a := range []types.Address{client, prov1, prov2, prov3, prov4, loner} {
		accts = append(accts, testAccount{a, types.OGPU(1_000)})
	}
	for _, v := range []string{"val1", "val2", "val3"} {
		accts = append(accts, testAccount{addrOf(v), types.OGPU(2_000)})
	}
	n := newTestNet(t, genesis.DefaultParams(), accts, []string{"val1", "val2", "val3"})
	for i, p := range []types.Address{prov1, prov2, prov3, prov4} {
		info := gpuInfo(string(rune('a' + i)))
		info.TrainClass = trainClass
		n.register(p, types.OGPU(100), info)
	}
	n.endBlock()
	return n
}

// awardFinetune posts a fine-tune job of steps steps and awards it to
// provs, each bidding 5 oGPU, the cap (with no losing bid the clearing
// price is the highest winning bid: 5 oGPU).
func (n *testNet) awardFinetune(steps uint64, provs ...types.Address) uint64 {
	n.tb.Helper()
	id := n.post(client, finetuneJob(uint16(len(provs)), steps, honestRun(steps)[0]))
	for _, p := range provs {
		n.bid(p, id, 0, types.OGPU(5))
	}
	n.advanceTo(n.job(id).BidEnd + 1)
	for _, p := range provs {
		n.revealBid(p, id, 0, types.OGPU(5))
	}
	n.advanceTo(n.job(id).RevealEnd + 1)
	if s := n.job(id).State; s != JobRunning {
		n.tb.Fatalf("job %d is %s after the close, want running", id, s)
	}
	return id
}

func ftSalt(p types.Address) types.Hash { return sha256.Sum256(cat([]byte("ft salt"), p[:])) }

// results has each provider commit its run's result and then reveal it.
func (n *testNet) ftResults(id uint64, runs map[types.Address]ftRun, order ...types.Address) {
	n.tb.Helper()
	for _, p := range order {
		c := verifier.ResultCommitment(runs[p].result(), ftSalt(p), p)
		n.must("commit", func(k *Keeper) error { return k.CommitResult(p, &verifier.MsgCommitResult{Job: id, Commitment: c}) })
	}
	n.endBlock()
	for _, p := range order {
		m := runs[p].reveal(id, ftSalt(p))
		n.must("reveal "+p.Hex(), func(k *Keeper) error { return k.RevealFinetune(p, m) })
	}
}

func (n *testNet) game(id uint64, match uint16) *finetune.Game {
	n.tb.Helper()
	g, ok := finetune.GetGame(n.tree, id, 0, match)
	if !ok {
		n.tb.Fatalf("job %d has no game %d", id, match)
	}
	return g
}

// gameVote has vals seal hStar on game match and open it.
func (n *testNet) gameVote(id uint64, match uint16, hStar types.Hash, vals ...types.Address) {
	n.tb.Helper()
	for _, v := range vals {
		salt := sha256.Sum256(cat([]byte("game vote"), v[:]))
		n.must("seal game vote", func(k *Keeper) error {
			return k.SealGameVote(v, &finetune.MsgSealGameVote{Job: id, Match: match, Commitment: finetune.GameVoteCommitment(id, 0, match, hStar, salt, v)})
		})
	}
	if len(vals) != len(n.validators) {
		n.advanceTo(n.game(id, match).SealBy + 1)
	}
	for _, v := range vals {
		salt := sha256.Sum256(cat([]byte("game vote"), v[:]))
		n.must("open game vote", func(k *Keeper) error {
			return k.OpenGameVote(v, &finetune.MsgOpenGameVote{Job: id, Match: match, HStar: hStar, Salt: salt})
		})
	}
}

func TestFinetuneAgreedIsPaid(t *testing.T) {
	n := finetuneNet(t)
	const steps = 40
	id := n.awardFinetune(steps, prov1, prov2)
	j := n.job(id)
	// T10: the seed is the award block's, fixed by nobody's choice: the
	// block of the last bid reveal (BidEnd + 1), where the auction closed.
	award := sha256.Sum256(be64(j.BidEnd + 1))
	if j.TrainSeed != FinetuneSeed(j.Seal, award[:]) || j.TrainSeed == FinetuneSeed(j.Seal, nil) {
		t.Fatalf("seed %d is not FinetuneSeed(seal, award block hash)", j.TrainSeed)
	}
	run := honestRun(steps)
	b1 := n.balance(prov1)
	n.ftResults(id, map[types.Address]ftRun{prov1: run, prov2: run}, prov1, prov2)
	if s := n.task(id, 0).Status; s != verifier.TaskConfirming {
		t.Fatalf("equal results: task %s, want confirming", s)
	}
	n.advanceTo(n.task(id, 0).ConfirmBy + 1)
	j = n.job(id)
	if j.State != JobCompleted || !j.Paid.Eq(types.OGPU(10)) {
		t.Fatalf("job %s, paid %s; want completed, 10 oGPU", j.State, j.Paid)
	}
	if got := new(uint256.Int).Sub(n.balance(prov1), b1); !got.Eq(types.OGPU(5)) {
		t.Fatalf("prov1 earned %s, want the clearing price 5 oGPU", got)
	}
	if c, ok := GetFinetuneClaim(n.tree, id, 0, run.result()); !ok || c.Root != run.root() || c.Final != run.final() {
		t.Fatalf("the claim behind the result is not kept: %+v %v", c, ok)
	}
}

func TestFinetuneRevealRefusals(t *testing.T) {
	n := finetuneNet(t)
	const steps = 18
	id := n.awardFinetune(steps, prov1, prov2)
	run := honestRun(steps)
	for _, p := range []types.Address{prov1, prov2} {
		c := verifier.ResultCommitment(run.result(), ftSalt(p), p)
		n.must("commit", func(k *Keeper) error { return k.CommitResult(p, &verifier.MsgCommitResult{Job: id, Commitment: c}) })
	}
	n.endBlock()
	n.refused("a plain reveal of a fine-tune result", func(k *Keeper) error {
		return k.RevealResult(prov1, &verifier.MsgRevealResult{Job: id, Result: run.result(), Salt: ftSalt(prov1)})
	}, types.ErrInvalidMsg, "reveal-finetune")
	// T2: a tree that does not start at the job's base model.
	other := deviatingRun(steps, 0, "from another base")
	n.refused("a tree from another base", func(k *Keeper) error { return k.RevealFinetune(prov1, other.reveal(id, ftSalt(prov1))) },
		types.ErrCommitMismatch, "leaf 0", "base hash")
	// T2: leaf N is not the claimed final hash.
	bad := run.reveal(id, ftSalt(prov1))
	bad.Final = hashOf("a final the tree does not end at")
	n.refused("a final the tree does not open", func(k *Keeper) error { return k.RevealFinetune(prov1, bad) },
		types.ErrCommitMismatch, "leaf 18")
	// A proof of the wrong length (the tree of another step count).
	short := run.reveal(id, ftSalt(prov1))
	short.ProofFinal = short.ProofFinal[1:]
	n.refused("a proof for another tree shape", func(k *Keeper) error { return k.RevealFinetune(prov1, short) }, types.ErrCommitMismatch)
	// Someone else's commitment (T13): a copied reveal does not open prov2's.
	n.refused("prov1's reveal sent by a stranger", func(k *Keeper) error { return k.RevealFinetune(prov3, run.reveal(id, ftSalt(prov1))) }, types.ErrUnauthorized)
	// A canary answer has no place in a fine-tune job.
	n.refused("a canary claim", func(k *Keeper) error {
		return k.RevealCanary(addrOf("val1"), &verifier.MsgRevealCanary{Job: id, StageHashes: []types.Hash{hashOf("x")}})
	}, types.ErrInvalidMsg, "step-bisection")
}

func TestFinetunePostRefusals(t *testing.T) {
	n := finetuneNet(t)
	cases := []struct {
		name  string
		edit  func(m *MsgPostJob)
		texts []string
	}{
		{"a trainable set the runtime cannot train", func(m *MsgPostJob) { m.Finetune.Trainable = "all" }, []string{"llama.cpp #24305"}},
		{"a context that is not a multiple of 32", func(m *MsgPostJob) { m.Finetune.Ctx = 80 }, []string{"multiple of 32"}},
		{"no training class", func(m *MsgPostJob) { m.Req.Class = "" }, []string{"training determinism class"}},
		{"no dataset", func(m *MsgPostJob) { m.Input = types.Hash{} }, []string{"dataset"}},
		{"zero learning rate", func(m *MsgPostJob) { m.Finetune.LRMicro = 0 }, []string{"learning rate"}},
		{"steps not a multiple of epochs", func(m *MsgPostJob) { m.Finetune.Steps = 41 }, []string{"multiple of epochs"}},
		{"two stages", func(m *MsgPostJob) { m.Stages = 2 }, []string{"one stage"}},
		{"terms on an inference job", func(m *MsgPostJob) { m.Kind = KindInference }, []string{"fine-tune terms go with kind finetune"}},
	}
	for _, c := range cases {
		m := finetuneJob(2, 40, hashOf("base"))
		c.edit(m)
		_, err := DecodeMsgPostJob(m.Raw().Data)
		if err == nil {
			t.Fatalf("%s: accepted", c.name)
		}
		for _, s := range c.texts {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", c.name, err, s)
			}
		}
	}
	// What depends on the chain's parameters is PostJob's.
	big := finetuneJob(2, 40, hashOf("base"))
	big.Finetune.DatasetSize = n.params.Market.Finetune.MaxDatasetBytes + 1
	n.refused("a dataset above max_dataset_bytes", func(k *Keeper) error { _, err := k.PostJob(client, big); return err }, types.ErrInvalidMsg, "max_dataset_bytes")
	long := finetuneJob(4, 1<<20, hashOf("base")) // 20 rounds × 20 + 40 = 440 blocks a game, up to 3 games in a row for 4 slots
	n.refused("games that outlive the stake", func(k *Keeper) error { _, err := k.PostJob(client, long); return err }, types.ErrInvalidMsg, "unbonding_blocks")
	off := n.params
	off.Market.Finetune = nil
	n.params = off
	n.refused("fine-tune jobs off", func(k *Keeper) error { _, err := k.PostJob(client, finetuneJob(2, 40, hashOf("base"))); return err }, types.ErrInvalidMsg, "no fine-tune jobs")
}

func TestFinetuneNeedsTheTrainingClass(t *testing.T) {
	n := finetuneNet(t)
	info := gpuInfo("x")
	info.TrainClass = "another build"
	n.register(loner, types.OGPU(100), info)
	id := n.post(client, finetuneJob(2, 40, hashOf("base")))
	j := n.job(id)
	if err := Eligible(n.tree, n.params, n.height, j, loner); err == nil || !strings.Contains(err.Error(), "training class") {
		t.Fatalf("a provider of another training class: %v", err)
	}
	if err := Eligible(n.tree, n.params, n.height, j, prov1); err != nil {
		t.Fatalf("a provider of the class: %v", err)
	}
}

// TestFinetuneBisectionCatchesTheLiar is the game through the market: a
// provider deviating at step k of n is located at step k in at most
// ⌈log2 n⌉ rounds, the validators re-execute only step k (their vote is
// the honest h_k), the liar is slashed, tombstoned and its payment
// refunded, and the honest provider is paid.
func TestFinetuneBisectionCatchesTheLiar(t *testing.T) {
	for _, k := range []uint64{1, 13, 40} {
		n := finetuneNet(t)
		const steps = 40
		id := n.awardFinetune(steps, prov1, prov2)
		honest, liar := honestRun(steps), deviatingRun(steps, k, "perturbed")
		runs := map[types.Address]ftRun{prov1: honest, prov2: liar}
		b1, c0 := n.balance(prov1), n.balance(client)
		stake2 := n.esc().Bonded(prov2)
		n.ftResults(id, runs, prov1, prov2)
		if s := n.task(id, 0).Status; s != verifier.TaskGame {
			t.Fatalf("k=%d: differing results: task %s, want game", k, s)
		}
		rounds := 0
		for n.game(id, 0).Status == finetune.StatusOpen {
			g := n.game(id, 0)
			rounds++
			for _, r := range []ftRun{honest, liar} {
				m := r.open(g)
				n.must("open checkpoints", func(k *Keeper) error { return k.OpenCheckpoints(prov3, m) }) // relayed
			}
			n.endBlock()
		}
		g := n.game(id, 0)
		if g.Hi != k || g.Lo != k-1 || uint64(rounds) > finetune.MaxRounds(steps, 2) {
			t.Fatalf("k=%d: the game ended at (%d, %d] after %d rounds; want (%d, %d] in at most %d", k, g.Lo, g.Hi, rounds, k-1, k, finetune.MaxRounds(steps, 2))
		}
		n.gameVote(id, 0, honest[k], n.validators...)
		j := n.job(id)
		if j.State != JobCompleted {
			t.Fatalf("k=%d: job %s after the verdict", k, j.State)
		}
		if got := new(uint256.Int).Sub(n.balance(prov1), b1); !got.Eq(types.OGPU(5)) {
			t.Fatalf("k=%d: the honest provider earned %s, want 5 oGPU", k, got)
		}
		p2, _ := n.keeperOver(n.tree, nil).GetProvider(prov2)
		if !p2.Tombstoned || !n.esc().Bonded(prov2).Lt(stake2) {
			t.Fatalf("k=%d: the liar is not slashed and tombstoned: %+v, bonded %s of %s", k, p2, n.esc().Bonded(prov2), stake2)
		}
		// The client gets back the liar's price and, from its slash, at
		// most what it paid for the disproven work (§4 rule 4): 5 oGPU of
		// a 50 oGPU slash; the rest is burned.
		refund := new(uint256.Int).Sub(n.balance(client), c0)
		if !j.Compensated.Eq(types.OGPU(5)) || !refund.Gt(types.OGPU(5)) {
			t.Fatalf("k=%d: the client got %s back, compensated %s; want 5 oGPU compensation", k, refund, j.Compensated)
		}
		if n.task(id, 0).Status != verifier.TaskSettled {
			t.Fatalf("k=%d: task %s", k, n.task(id, 0).Status)
		}
	}
}

// TestFinetuneSilentLoserLoses: a liar that stops answering (T6) loses at
// the round's deadline like a convicted one; the honest group is paid.
func TestFinetuneSilentLoserLoses(t *testing.T) {
	n := finetuneNet(t)
	const steps = 32
	id := n.awardFinetune(steps, prov1, prov2, prov3)
	honest, liar := honestRun(steps), deviatingRun(steps, 20, "silent")
	// prov1 and prov3 are one group (one root): T7, either may answer for it.
	n.ftResults(id, map[types.Address]ftRun{prov1: honest, prov2: liar, prov3: honest}, prov1, prov2, prov3)
	g := n.game(id, 0)
	if len(g.Groups) != 2 || len(g.Groups[0].Slots)+len(g.Groups[1].Slots) != 3 {
		t.Fatalf("groups %+v", g.Groups)
	}
	n.must("the honest group opens, once", func(k *Keeper) error { return k.OpenCheckpoints(prov3, honest.open(g)) })
	b1, b3 := n.balance(prov1), n.balance(prov3)
	n.advanceTo(g.Deadline + 1)
	if j := n.job(id); j.State != JobCompleted {
		t.Fatalf("job %s after the silent round", j.State)
	}
	for _, c := range []struct {
		p    types.Address
		b    *uint256.Int
		paid bool
	}{{prov1, b1, true}, {prov3, b3, true}} {
		if got := new(uint256.Int).Sub(n.balance(c.p), c.b); !got.Eq(types.OGPU(5)) {
			t.Fatalf("%s earned %s, want 5 oGPU", c.p, got)
		}
	}
	if p2, _ := n.keeperOver(n.tree, nil).GetProvider(prov2); !p2.Tombstoned {
		t.Fatalf("the silent liar is not tombstoned")
	}
}

// TestFinetuneClassFailureSlashesNoProvider: no 2/3 verdict (the
// validators split) is a class failure (T9): every slot is refunded to
// the client, no provider is slashed.
func TestFinetuneClassFailureSlashesNoProvider(t *testing.T) {
	n := finetuneNet(t)
	const steps = 8
	id := n.awardFinetune(steps, prov1, prov2)
	a, b := honestRun(steps), deviatingRun(steps, 5, "b")
	n.ftResults(id, map[types.Address]ftRun{prov1: a, prov2: b}, prov1, prov2)
	for n.game(id, 0).Status == finetune.StatusOpen {
		g := n.game(id, 0)
		for _, r := range []ftRun{a, b} {
			m := r.open(g)
			n.must("open", func(k *Keeper) error { return k.OpenCheckpoints(prov4, m) })
		}
		n.endBlock()
	}
	s1, s2 := n.esc().Bonded(prov1), n.esc().Bonded(prov2)
	c0 := n.balance(client)
	v := n.validators
	votes := []struct {
		val   types.Address
		hStar types.Hash
	}{{v[0], a[5]}, {v[1], b[5]}} // v[2] is silent
	salt := hashOf("salt")
	for _, x := range votes {
		n.must("seal", func(k *Keeper) error {
			return k.SealGameVote(x.val, &finetune.MsgSealGameVote{Job: id, Commitment: finetune.GameVoteCommitment(id, 0, 0, x.hStar, salt, x.val)})
		})
	}
	n.advanceTo(n.game(id, 0).SealBy + 1)
	for _, x := range votes {
		n.must("open", func(k *Keeper) error {
			return k.OpenGameVote(x.val, &finetune.MsgOpenGameVote{Job: id, HStar: x.hStar, Salt: salt})
		})
	}
	n.advanceTo(n.game(id, 0).Deadline + 1)
	j := n.job(id)
	if j.State != JobCompleted || !j.Paid.IsZero() {
		t.Fatalf("job %s paid %s after a class failure", j.State, j.Paid)
	}
	if !n.esc().Bonded(prov1).Eq(s1) || !n.esc().Bonded(prov2).Eq(s2) {
		t.Fatalf("a provider was slashed on a class failure")
	}
	if got := new(uint256.Int).Sub(n.balance(client), c0); got.Lt(types.OGPU(10)) {
		t.Fatalf("the client got %s back, want both slots' 10 oGPU at least", got)
	}
}

// TestFinetuneTreesUnderOneFinal: two roots under one final hash agree on
// the model: both are paid, no game.
func TestFinetuneTreesUnderOneFinal(t *testing.T) {
	n := finetuneNet(t)
	const steps = 16
	id := n.awardFinetune(steps, prov1, prov2)
	a := honestRun(steps)
	b := deviatingRun(steps, 7, "mid")
	b[steps] = a[steps]
	n.ftResults(id, map[types.Address]ftRun{prov1: a, prov2: b}, prov1, prov2)
	if _, ok := finetune.GetBracket(n.tree, id, 0); ok {
		t.Fatalf("a game between two trees under one final")
	}
	if j := n.job(id); j.State != JobCompleted || !j.Paid.Eq(types.OGPU(10)) {
		t.Fatalf("job %s paid %s", j.State, j.Paid)
	}
}
