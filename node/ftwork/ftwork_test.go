package ftwork

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

func TestMain(m *testing.M) {
	train.MaybeWorker()
	os.Exit(m.Run())
}

// modelPath finds stories260K.gguf in $OGPU_MODELS or <repo>/../shared/models.
func modelPath(t testing.TB) string {
	dir := os.Getenv("OGPU_MODELS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "models")
	}
	p := filepath.Join(dir, "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("stories260K.gguf is not in %s (set OGPU_MODELS to the folder holding it): %v", dir, err)
	}
	return p
}

// ziggy is a small text that repeats a distinctive phrase (the dataset of
// runtime/llm/train's tests).
func ziggy(stories int) []byte {
	names := []string{"Lily", "Tom", "Sue", "Ben", "Anna", "Max", "Mia", "Sam"}
	var b strings.Builder
	for i := range stories {
		n := names[i%len(names)]
		b.WriteString("Once upon a time, there was a purple dragon named Ziggy. " + n + " met Ziggy in the park. Ziggy smiled and said, \"I love blue pancakes!\" " + n + " laughed and they were happy.\n")
	}
	return []byte(b.String())
}

func jobParams(t testing.TB, stories, epochs int) train.Params {
	return train.Params{Model: modelPath(t), Data: ziggy(stories), Epochs: epochs, LRMicro: 3000, NCtx: 64, Stride: 16, Seed: 7, Trainable: train.SetHead, Threads: 1}
}

// job is the test job: 3 stories, 2 epochs at n_ctx 64, stride 16 (24
// steps), and its terms as a client would post them.
func job(t testing.TB) (train.Params, *market.FinetuneTerms) {
	t.Helper()
	p := jobParams(t, 3, 2)
	return p, termsOf(t, p)
}

// termsOf are the terms a client posts for p: the base hash and the step
// count from the runtime.
func termsOf(t testing.TB, p train.Params) *market.FinetuneTerms {
	t.Helper()
	h0, err := train.HashCheckpoint(p.Model, p.Trainable)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := train.PlanJob(p)
	if err != nil {
		t.Fatal(err)
	}
	return &market.FinetuneTerms{Base: types.Hash(h0), DatasetSize: uint64(len(p.Data)), Epochs: uint64(p.Epochs), LRMicro: uint64(p.LRMicro),
		Ctx: uint64(p.NCtx), Stride: uint64(p.Stride), Validation: uint64(p.Validation), Steps: uint64(pl.Steps), Trainable: p.Trainable}
}

// provider is what a provider does with a job: Params from the terms, the
// seed and the files, Check, Run.
func provider(t *testing.T, terms *market.FinetuneTerms, model string, data []byte, dir string, every int) *Work {
	t.Helper()
	p, err := Params(terms, 7, model, data, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(terms, p); err != nil {
		t.Fatal(err)
	}
	w, err := Run(context.Background(), dir, p, every, nil)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(w.Hashes)) != terms.Steps+1 || w.Hashes[0] != terms.Base || w.Final != w.Hashes[terms.Steps] || w.Root != finetune.RootOf(w.Hashes) {
		t.Fatalf("%d hashes for %d steps, leaf 0 %x (base %x), root %x", len(w.Hashes), terms.Steps, w.Hashes[0], terms.Base, w.Root)
	}
	return w
}

// Two providers of one job, in separate folders, train byte-identical
// models under equal roots and so commit alike (but bound to each
// provider); they keep exactly the checkpoints after steps 0, every k-th
// and N; a restarted provider reopens its work from the folder without
// training; a damaged folder is refused, not served.
func TestRunIsReproducibleAndReopens(t *testing.T) {
	p, terms := job(t)
	var progress []int
	q, err := Params(terms, 7, p.Model, p.Data, 2)
	if err != nil {
		t.Fatal(err)
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	a := provider(t, terms, p.Model, p.Data, dirA, 5)
	b, err := Run(context.Background(), dirB, q, 5, func(pr train.Progress) {
		if pr.Step > 0 {
			progress = append(progress, pr.Step)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Root != b.Root || !slices.Equal(a.Hashes, b.Hashes) {
		t.Fatal("two runs of one job (1 and 2 threads) have different hash lists")
	}
	if len(progress) != int(terms.Steps) {
		t.Fatalf("progress saw %d steps of %d", len(progress), terms.Steps)
	}
	ma, err := os.ReadFile(a.Model)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := os.ReadFile(b.Model)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ma, mb) {
		t.Fatal("two runs of one job saved different models")
	}
	salt := types.Hash{1}
	pa, pb := types.BytesToAddress([]byte{0xa}), types.BytesToAddress([]byte{0xb})
	if a.Commitment(salt, pa) != b.Commitment(salt, pa) || a.Commitment(salt, pa) == b.Commitment(salt, pb) {
		t.Fatal("commitments: equal work must commit alike for one provider and differently for two (T13)")
	}
	if a.Commitment(salt, pa) != verifier.ResultCommitment(market.FinetuneResult(a.Root, a.Final), salt, pa) {
		t.Fatal("the commitment is not the market's")
	}
	var kept []int
	ents, err := os.ReadDir(dirA)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k <= int(terms.Steps); k++ {
		if slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == train.CheckpointFile(k) }) {
			kept = append(kept, k)
		}
	}
	if want := []int{0, 5, 10, 15, 20, 24}; !slices.Equal(kept, want) {
		t.Fatalf("kept checkpoints %v, want %v", kept, want)
	}

	// A restart: the work comes back from the folder alone.
	o, err := Open(dirA)
	if err != nil {
		t.Fatal(err)
	}
	if o.Root != a.Root || o.Final != a.Final || !slices.Equal(o.Hashes, a.Hashes) || o.Model != a.Model || o.Dir != a.Dir || o.Every != 5 ||
		!bytes.Equal(o.Params().Data, p.Data) || o.Params().Model != p.Model || o.Params().Seed != 7 || o.Params().Class() != a.Params().Class() {
		t.Fatalf("reopened %+v, ran %+v", o, a)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an empty folder: %v", err)
	}

	// Damage: each is refused with what is wrong.
	damage := []struct {
		name, file string
		edit       func([]byte) []byte
		says       string
	}{
		{"a hash in the list", workFile, func(b []byte) []byte {
			h := a.Hashes[3].Hex()
			return bytes.Replace(b, []byte(h), []byte(a.Hashes[4].Hex()), 1)
		}, "root"},
		{"the dataset", dataFile, func(b []byte) []byte { return append(b, 'x') }, "dataset"},
		{"the model", train.ModelFile, func([]byte) []byte { return mb[:len(mb)-1] }, "fine-tuned model"},
		{"the model's head", train.ModelFile, func([]byte) []byte { return headOf(t, p.Model) }, "leaf N"},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			path := filepath.Join(dirB, d.file)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, d.edit(slices.Clone(orig)), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(path, orig, 0o644)
			if _, err := Open(dirB); err == nil || !strings.Contains(err.Error(), d.says) {
				t.Fatalf("got %v, want an error saying %q", err, d.says)
			}
		})
	}
	if _, err := Open(dirB); err != nil {
		t.Fatalf("the restored folder: %v", err)
	}
}

// headOf is the base model file itself: a "fine-tuned model" whose head
// is the base's.
func headOf(t *testing.T, model string) []byte {
	b, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	slotH   = types.BytesToAddress([]byte{0x01}) // the honest provider
	slotH2  = types.BytesToAddress([]byte{0x02}) // a second honest slot
	slotL   = types.BytesToAddress([]byte{0x0f}) // the liar
	relayer = types.BytesToAddress([]byte{0xee})
)

const jobID, stage = uint64(42), uint16(0)

// chain is a real finetune keeper over a real in-memory IAVL store.
type chain struct {
	t      testing.TB
	kv     *store.Tree
	height uint64
}

func newChain(t testing.TB) *chain { return &chain{t: t, kv: store.NewMemTree(), height: 100} }

func (c *chain) keeper() *finetune.Keeper {
	return finetune.NewKeeper(finetune.Context{KV: c.kv, Height: c.height, Params: finetune.DefaultParams()})
}

// open starts the game between the honest group (two slots) and the
// other one.
func (c *chain) open(base types.Hash, honest, other *Work) {
	c.t.Helper()
	if _, err := c.keeper().OpenGame(finetune.Spec{Job: jobID, Stage: stage, Steps: honest.Steps(), Base: base, Groups: []finetune.GroupSpec{
		{Root: honest.Root, Final: honest.Final, Slots: []types.Address{slotH, slotH2}},
		{Root: other.Root, Final: other.Final, Slots: []types.Address{slotL}},
	}}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *chain) game() *finetune.Game {
	c.t.Helper()
	g, ok := finetune.GetGame(c.kv, jobID, stage, 0)
	if !ok {
		c.t.Fatal("no game")
	}
	return g
}

// send delivers m as a block would carry it.
func (c *chain) send(m *finetune.MsgOpenCheckpoints) error {
	dm, err := finetune.DecodeMsgOpenCheckpoints(m.Raw().Data)
	if err != nil {
		return err
	}
	return c.keeper().OpenCheckpoints(relayer, dm)
}

// play has every work answer each round with OpenMsg (one block a round)
// until the game is down to one step; it returns the rounds played.
func (c *chain) play(ws ...*Work) uint64 {
	c.t.Helper()
	for c.game().Status == finetune.StatusOpen {
		for _, w := range ws {
			m, err := w.OpenMsg(c.game())
			if err != nil {
				c.t.Fatal(err)
			}
			if err := c.send(m); err != nil {
				c.t.Fatal(err)
			}
		}
		if err := finetune.Invariant(c.kv); err != nil {
			c.t.Fatal(err)
		}
		c.height++
	}
	return c.game().Round
}

// fakeWork is a work whose hashes after step from are made up: no
// training, for the tests of the openings alone.
func fakeWork(w *Work, from int) *Work {
	hs := slices.Clone(w.Hashes)
	for k := from; k < len(hs); k++ {
		hs[k] = sha256.Sum256(append(hs[k-1][:], "made up"...))
	}
	return &Work{Hashes: hs, Root: finetune.Root(hs), Final: hs[len(hs)-1], p: w.p}
}

// The reveal's proofs open leaf 0 to the job's base and leaf N to the
// final hash and survive the wire; every round's openings (OpenMsg of the
// game's Points) verify against the root and the keeper takes them; a
// tampered hash or proof fails finetune.Verify and the keeper refuses it;
// openings outside the work and a game of another job size are refused.
func TestRevealAndOpeningsVerify(t *testing.T) {
	p, terms := job(t)
	w := provider(t, terms, p.Model, p.Data, t.TempDir(), 7)
	n := w.Steps() + 1
	r := w.Reveal(jobID, stage, types.Hash{9})
	dr, err := market.DecodeMsgRevealFinetune(r.Raw().Data)
	if err != nil {
		t.Fatal(err)
	}
	if market.FinetuneResult(dr.Root, dr.Final) != w.Result() || dr.Salt != (types.Hash{9}) || dr.Job != jobID ||
		!finetune.Verify(dr.Root, n, 0, terms.Base, dr.ProofBase) || !finetune.Verify(dr.Root, n, n-1, dr.Final, dr.ProofFinal) {
		t.Fatal("the reveal does not open leaves 0 and N to the base and the final hash")
	}
	if finetune.Verify(dr.Root, n, 0, dr.Final, dr.ProofBase) || finetune.Verify(dr.Root, n, n-1, terms.Base, dr.ProofFinal) {
		t.Fatal("the reveal's proofs open the wrong hashes")
	}

	other := fakeWork(w, 17)
	c := newChain(t)
	c.open(terms.Base, w, other)
	for c.game().Status == finetune.StatusOpen {
		g := c.game()
		m, err := w.OpenMsg(g)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Openings) != len(g.Points()) || m.Round != g.Round || m.Root != w.Root {
			t.Fatalf("round %d: %d openings for points %v", g.Round, len(m.Openings), g.Points())
		}
		for i, o := range m.Openings {
			if o.Step != g.Points()[i] || o.Hash != w.Hashes[o.Step] || !finetune.Verify(w.Root, n, o.Step, o.Hash, o.Proof) {
				t.Fatalf("round %d: opening of step %d does not verify", g.Round, o.Step)
			}
		}
		// Tampered: another hash, or a proof of another step.
		bad := *m
		bad.Openings = slices.Clone(m.Openings)
		last := len(bad.Openings) - 1
		bad.Openings[last].Hash[0] ^= 1
		if finetune.Verify(w.Root, n, bad.Openings[last].Step, bad.Openings[last].Hash, bad.Openings[last].Proof) {
			t.Fatal("a tampered hash verifies")
		}
		if err := c.send(&bad); err == nil {
			t.Fatal("the keeper took a tampered opening")
		}
		bad.Openings = slices.Clone(m.Openings)
		bad.Openings[0].Proof = m.Openings[last].Proof
		if last > 0 && c.send(&bad) == nil {
			t.Fatal("the keeper took another step's proof")
		}
		if err := c.send(m); err != nil {
			t.Fatal(err)
		}
		mo, err := other.OpenMsg(g)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.send(mo); err != nil {
			t.Fatal(err)
		}
		c.height++
	}
	if g := c.game(); g.Lo != 16 || g.Hi != 17 {
		t.Fatalf("ended at (%d, %d), want (16, 17)", g.Lo, g.Hi)
	}
	if _, err := w.OpenMsg(c.game()); err == nil || !strings.Contains(err.Error(), "no round") {
		t.Fatalf("a game awaiting its verdict: %v", err)
	}
	if _, err := w.Openings([]uint64{0, w.Steps() + 1}); err == nil || !strings.Contains(err.Error(), "steps 0..24") {
		t.Fatalf("a step beyond N: %v", err)
	}
	short := &Work{Hashes: w.Hashes[:10], Root: finetune.Root(w.Hashes[:10])}
	c2 := newChain(t)
	c2.open(terms.Base, w, other)
	if _, err := short.OpenMsg(c2.game()); err == nil || !strings.Contains(err.Error(), "24 steps, the work has 9") {
		t.Fatalf("a game of another size: %v", err)
	}
	stranger := fakeWork(w, 3)
	if _, err := stranger.OpenMsg(c2.game()); err == nil || !strings.Contains(err.Error(), "no group") {
		t.Fatalf("a game without the work's root: %v", err)
	}
}

// A provider that keeps every 5th checkpoint serves any other one by
// recomputing it from the nearest kept one below, and it hashes to its
// leaf; a kept file that does not match its leaf is passed over; a hash
// list that is not the run's is caught at the first step that differs.
func TestCheckpointRecomputes(t *testing.T) {
	p, terms := job(t)
	w := provider(t, terms, p.Model, p.Data, t.TempDir(), 5)
	ctx := context.Background()
	stored := filepath.Join(w.Dir, train.CheckpointFile(10))
	if got, err := w.Checkpoint(ctx, 10); err != nil || got != stored {
		t.Fatalf("a kept checkpoint: %s, %v", got, err)
	}
	for _, j := range []int{7, 1, 23} {
		path, err := w.Checkpoint(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := train.HashCheckpoint(path, p.Trainable); err != nil || types.Hash(h) != w.Hashes[j] {
			t.Fatalf("checkpoint %d recomputed: %s (%v), want %x", j, h, err, w.Hashes[j])
		}
	}
	// A kept checkpoint damaged on disk: step 15 holds step 10's tensors.
	// Step 17 is recomputed from step 10, not from the damaged file.
	b, err := os.ReadFile(stored)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.Dir, train.CheckpointFile(15)), b, 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := w.Checkpoint(ctx, 17)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := train.HashCheckpoint(path, p.Trainable); types.Hash(h) != w.Hashes[17] {
		t.Fatal("checkpoint 17 recomputed over a damaged step 15 is wrong")
	}
	// A list that is not this run's from step 12 on.
	lie := *w
	lie.Hashes = slices.Clone(w.Hashes)
	lie.Hashes[12][0] ^= 1
	if _, err := lie.Checkpoint(ctx, 13); err == nil || !strings.Contains(err.Error(), "step 12 recomputed") {
		t.Fatalf("a wrong hash list: %v", err)
	}
	for _, j := range []int{-1, 25} {
		if _, err := w.Checkpoint(ctx, j); err == nil || !strings.Contains(err.Error(), "steps 0..24") {
			t.Fatalf("checkpoint %d: %v", j, err)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(w.Dir, "recompute-*")); len(ents) != 0 {
		t.Fatalf("left over: %v", ents)
	}
}

// The liar perturbs the weights after step k and trains on honestly: its
// hashes equal the honest ones up to k−1 and differ from k on. Both answer
// a real game with OpenMsg; it narrows to (k−1, k) within ⌈log2 N⌉
// rounds; the validator, from the honest provider's checkpoint after k−1
// (recomputed: it was not kept), computes the honest h_k, not the liar's,
// with the dataset or with step k's datapoint only; the verdict convicts
// the liar alone. The liar's own copy of θ_{k−1} is as good (both claimed
// it); its θ_k offered instead is refused; and a validator voting Withheld
// (nobody served θ_{k−1}) makes both groups lose.
func TestLiarIsLocatedAndConvicted(t *testing.T) {
	p, terms := job(t)
	const k = 11
	ctx := context.Background()
	honest := provider(t, terms, p.Model, p.Data, t.TempDir(), 4)
	var steps []int
	liar, err := RunPerturbed(ctx, t.TempDir(), p, 4, k, DefaultPerturbation, func(pr train.Progress) {
		if pr.Step > 0 {
			steps = append(steps, pr.Step)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != int(terms.Steps) {
		t.Fatalf("the liar's progress saw %d steps", len(steps))
	}
	for j := range honest.Hashes {
		if (honest.Hashes[j] == liar.Hashes[j]) != (j < k) {
			t.Fatalf("step %d: honest %x, liar %x: want equal before step %d and different from it", j, honest.Hashes[j], liar.Hashes[j], k)
		}
	}
	if o, err := Open(liar.Dir); err != nil || o.Root != liar.Root {
		t.Fatalf("the liar's work does not reopen: %v", err)
	}

	c := newChain(t)
	c.open(terms.Base, honest, liar)
	rounds := c.play(honest, liar)
	g := c.game()
	if g.Status != finetune.StatusReexecute || g.Lo != k-1 || g.Hi != k || g.Groups[0].HLo != honest.Hashes[k-1] {
		t.Fatalf("the game ended at (%d, %d) %s, want (%d, %d)", g.Lo, g.Hi, g.Status, k-1, k)
	}
	if bound := finetune.MaxRounds(terms.Steps, 2); rounds > bound {
		t.Fatalf("%d rounds, more than ⌈log2 %d⌉ = %d", rounds, terms.Steps, bound)
	}
	t.Logf("N = %d, liar at step %d: located in %d rounds", terms.Steps, k, rounds)

	// The validator gets θ_lo from the honest provider.
	ckpt, err := honest.Checkpoint(ctx, int(g.Lo))
	if err != nil {
		t.Fatal(err)
	}
	vp, err := Params(terms, 7, p.Model, p.Data, 1)
	if err != nil {
		t.Fatal(err)
	}
	hStar, err := CheckStep(ctx, vp, ckpt, g.Lo, g.Groups[0].HLo)
	if err != nil {
		t.Fatal(err)
	}
	if hStar != honest.Hashes[k] || hStar == liar.Hashes[k] {
		t.Fatalf("h* %x: the honest h_%d is %x, the liar's %x", hStar, k, honest.Hashes[k], liar.Hashes[k])
	}
	toks, err := train.StepTokens(vp, k)
	if err != nil {
		t.Fatal(err)
	}
	noData := vp
	noData.Data = nil
	if h, err := CheckStepTokens(ctx, noData, ckpt, g.Lo, g.Groups[0].HLo, toks); err != nil || h != hStar {
		t.Fatalf("from step %d's datapoint only: %x (%v), want %x", k, h, err, hStar)
	}
	if lc, err := liar.Checkpoint(ctx, k-1); err != nil {
		t.Fatal(err)
	} else if h, err := CheckStep(ctx, vp, lc, g.Lo, g.Groups[0].HLo); err != nil || h != hStar {
		t.Fatalf("from the liar's copy of θ_%d: %x (%v)", k-1, h, err)
	}
	lk, err := liar.Checkpoint(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckStep(ctx, vp, lk, g.Lo, g.Groups[0].HLo); !errors.Is(err, ErrWrongCheckpoint) || errors.Is(err, ErrBadInput) {
		t.Fatalf("the liar's θ_%d offered as θ_%d: %v", k, k-1, err)
	}

	dec, err := c.keeper().Decide(jobID, stage, 0, finetune.Verdict{Agreed: true, HStar: hStar})
	if err != nil {
		t.Fatal(err)
	}
	if dec.Step != k || !slices.Equal(dec.Losers, []types.Address{slotL}) || !dec.Done || !slices.Equal(dec.Survivors, []types.Address{slotH, slotH2}) {
		t.Fatalf("decided %+v: want the liar convicted and the honest slots surviving", dec)
	}

	// Nobody served θ_{k−1}: the validators vote Withheld; both lose.
	c2 := newChain(t)
	c2.open(terms.Base, honest, liar)
	c2.play(honest, liar)
	dec, err = c2.keeper().Decide(jobID, stage, 0, finetune.Verdict{Agreed: true, HStar: Withheld})
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.Losers) != 3 || len(dec.Survivors) != 0 {
		t.Fatalf("Withheld: %+v, want all three slots to lose", dec)
	}
}

// The client's bad input is refused with ErrBadInput and a message saying
// what differs (the provider reports it and is never slashed, T11); a
// checkpoint that does not hash to h_lo is ErrWrongCheckpoint (the
// validator fetches it elsewhere), never ErrBadInput. Nothing trains.
func TestBadInputRefused(t *testing.T) {
	p, terms := job(t)
	if err := Check(terms, p); err != nil {
		t.Fatal(err)
	}
	n := len(p.Data)
	longer := append(slices.Clone(p.Data), '!')
	notUTF8 := slices.Clone(p.Data)
	notUTF8[20] = 0xff
	cases := []struct {
		name  string
		data  []byte
		edit  func(*market.FinetuneTerms)
		says  string
		input bool
	}{
		{"dataset one byte longer", longer, nil, fmt.Sprintf("the dataset is %d bytes, the job declares %d", n+1, n), true},
		{"dataset one byte shorter", p.Data[:n-1], nil, fmt.Sprintf("the dataset is %d bytes, the job declares %d", n-1, n), true},
		{"not UTF-8", notUTF8, nil, "not UTF-8 text (invalid byte 0xff at offset 20)", true},
		{"wrong base", p.Data, func(tm *market.FinetuneTerms) { tm.Base[0] ^= 1 }, "the base model's trained tensors hash " + terms.Base.Hex()[2:] + ", the job declares base", true},
		{"wrong steps", p.Data, func(tm *market.FinetuneTerms) { tm.Steps++ }, "the dataset makes 24 steps (2 epochs × 12 trained datapoints of 254 tokens) with the base model's tokenizer, the job declares 25", true},
		{"too many epochs", p.Data, func(tm *market.FinetuneTerms) { tm.Epochs = train.MaxEpochs + 1 }, "epochs is 1001, above the runtime's bound 1000", true},
		{"validation leaves nothing", p.Data, func(tm *market.FinetuneTerms) { tm.Validation = 12 }, "none is left to train on", true},
		{"a context llama.cpp cannot train", p.Data, func(tm *market.FinetuneTerms) { tm.Ctx = 32 }, "context is 32 tokens, below the runtime's minimum 64", true},
		{"another trainable set", p.Data, func(tm *market.FinetuneTerms) { tm.Trainable = train.SetAll }, "#24305", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm := *terms
			if c.edit != nil {
				c.edit(&tm)
			}
			q, err := Params(&tm, 7, p.Model, c.data, 1)
			if err == nil {
				err = Check(&tm, q)
			}
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v, want an error saying %q", err, c.says)
			}
			if errors.Is(err, ErrBadInput) != c.input {
				t.Fatalf("%v: ErrBadInput is %v, want %v", err, !c.input, c.input)
			}
		})
	}
	if _, err := Params(nil, 7, p.Model, p.Data, 1); err == nil || !strings.Contains(err.Error(), "not a fine-tune job") {
		t.Fatalf("no terms: %v", err)
	}
	// Run refuses bad input before training.
	bad := p
	bad.Data = notUTF8
	if _, err := Run(context.Background(), t.TempDir(), bad, 4, nil); !errors.Is(err, ErrBadInput) {
		t.Fatalf("Run on a non-UTF-8 dataset: %v", err)
	}

	// The validator's checkpoint: the base model is θ_0 (hash h_0); offered
	// for another h_lo, or a file that is no checkpoint, it is refused.
	ctx := context.Background()
	junk := filepath.Join(t.TempDir(), "junk.gguf")
	os.WriteFile(junk, []byte("not a gguf"), 0o644)
	for _, c := range []struct {
		name, path string
		hLo        types.Hash
		says       string
	}{
		{"another h_lo", p.Model, Withheld, "does not match its commitment"},
		{"not a checkpoint", junk, terms.Base, "bad checkpoint"},
	} {
		_, err := CheckStep(ctx, p, c.path, 0, c.hLo)
		if !errors.Is(err, ErrWrongCheckpoint) || errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), c.says) {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	h1, err := CheckStep(ctx, p, p.Model, 0, terms.Base)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := train.RunStep(ctx, p, p.Model, 1, nil); err != nil || types.Hash(r.After) != h1 {
		t.Fatalf("step 1 from the base: %x, RunStep %v (%v)", h1, r, err)
	}
	if _, err := CheckStepTokens(ctx, p, p.Model, 0, terms.Base, nil); err == nil {
		t.Fatal("CheckStepTokens without tokens")
	}
}

// Withheld is the documented constant and no checkpoint hash.
func TestWithheld(t *testing.T) {
	if Withheld != types.Hash(sha256.Sum256([]byte("ogpu/ftwithheld/v1"))) || Withheld == (types.Hash{}) {
		t.Fatal("Withheld is not sha256(\"ogpu/ftwithheld/v1\")")
	}
	_, terms := job(t)
	if Withheld == terms.Base {
		t.Fatal("Withheld is the base hash")
	}
}
