package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// ziggyText is a short text with a distinctive phrase.
func ziggyText(stories int) []byte {
	names := []string{"Lily", "Tom", "Sue", "Ben"}
	var b strings.Builder
	for i := range stories {
		n := names[i%len(names)]
		b.WriteString("Once upon a time, there was a purple dragon named Ziggy. " + n + " met Ziggy in the park. Ziggy smiled and said, \"I love blue pancakes!\" " + n + " laughed and they were happy.\n")
	}
	return []byte(b.String())
}

// finetuneProvider starts a provider agent offering fine-tune jobs on the
// shared model (lieAt > 0: it perturbs that step).
func (n *testNet) finetuneProvider(name string, lieAt uint64) *testProvider {
	n.t.Helper()
	return n.startProvider(name, func(store *blobstore.Store, cfg *ProviderConfig) {
		hash, err := store.PutFile(n.modelPath)
		if err != nil {
			n.t.Fatal(err)
		}
		n.model = hash
		cfg.Models, cfg.Attributes, cfg.Finetune, cfg.FinetuneEvery, cfg.FinetuneLieAt = []types.Hash{hash}, []string{"ram/16Gi"}, true, 4, lieAt
	})
}

// postFinetune posts a fine-tune job of data on the shared model as the
// client, serving the dataset, and returns its id and terms.
func (n *testNet) postFinetune(c *Client, data []byte, r uint16) (uint64, *market.FinetuneTerms) {
	n.t.Helper()
	p := train.Params{Model: n.modelPath, Data: data, Epochs: 2, LRMicro: 3000, NCtx: 64, Stride: 16, Trainable: train.SetHead, Threads: 1}
	h0, err := train.HashCheckpoint(p.Model, p.Trainable)
	if err != nil {
		n.t.Fatal(err)
	}
	pl, err := train.PlanJob(p)
	if err != nil {
		n.t.Fatal(err)
	}
	terms := &market.FinetuneTerms{Base: types.Hash(h0), DatasetSize: uint64(len(data)), Epochs: 2, LRMicro: 3000, Ctx: 64, Stride: 16,
		Steps: uint64(pl.Steps), Trainable: train.SetHead}
	in, err := c.Store.Put(data)
	if err != nil {
		n.t.Fatal(err)
	}
	st, _ := os.Stat(n.modelPath)
	msg := &market.MsgPostJob{Kind: market.KindFinetune, Mode: market.ModeAuction, Model: n.model, ModelSize: uint64(st.Size()),
		Stages: 1, Redundancy: r, MaxPrice: types.OGPU(5), Input: in, Finetune: terms,
		Req:     market.Requirements{MinStake: types.OGPU(100), Class: train.BuildClass()},
		Windows: market.Windows{Bid: 4, Reveal: 3, Execute: 100, Verify: 15}}
	_, posted, err := c.postJob(n.ctx, msg, RuntimeTrain, in)
	if err != nil {
		n.t.Fatal(err)
	}
	return posted.Job, terms
}

// finished waits until job id is no longer open.
func (n *testNet) finished(id uint64) *market.Job {
	n.t.Helper()
	return n.waitJob(id, "finished", func(j *chain.JobView) bool { return !j.State.Open() }).Job
}

// TestFinetuneJobEndToEnd: two provider agents fine-tune one job; their
// results agree (byte-identical models, one root), both are paid, and the
// client fetches the final checkpoint, which hashes to the final on chain.
func TestFinetuneJobEndToEnd(t *testing.T) {
	n := newTestNet(t)
	p1 := n.finetuneProvider("prov1", 0)
	p2 := n.finetuneProvider("prov2", 0)
	c := n.client()
	id, terms := n.postFinetune(c, ziggyText(3), 2)
	// The client serves the dataset to the winners once they are named.
	go func() {
		for _, a := range []types.Address{p1.agent.Address(), p2.agent.Address()} {
			_, _ = connectProvider(n.ctx, c.Host, c.Chain, a)
		}
	}()
	j := n.finished(id)
	// Two bids for two slots: both are paid the highest winning bid
	// (AppVersion 8; it was the cap).
	if j.State != market.JobCompleted || j.Prices[0].IsZero() || j.Prices[0].Gt(j.MaxPrice) || !j.Paid.Eq(new(uint256.Int).Mul(j.Prices[0], uint256.NewInt(2))) {
		v, _ := n.c.Job(n.ctx, id)
		t.Fatalf("job %s, paid %s (%s)", j.State, j.Paid, v.Phase)
	}
	v, err := n.c.Job(n.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	slots := v.Tasks[0].Slots
	if len(slots) != 2 || slots[0].Root == nil || slots[1].Root == nil || *slots[0].Root != *slots[1].Root || *slots[0].Final != *slots[1].Final {
		t.Fatalf("the two providers' claims differ: %+v", slots)
	}
	// Byte-identical models: the two providers' fine-tuned files.
	m1, err := os.ReadFile(filepath.Join(p1.agent.finetuneDir(taskKey{id, 0}), train.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := os.ReadFile(filepath.Join(p2.agent.finetuneDir(taskKey{id, 0}), train.ModelFile))
	if err != nil || string(m1) != string(m2) {
		t.Fatalf("the two providers' models differ (%d and %d bytes, %v)", len(m1), len(m2), err)
	}
	// The client fetches the final checkpoint: it is the final on chain.
	pid, err := connectProvider(n.ctx, c.Host, c.Chain, p1.agent.Address())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "final.bin")
	if err := FetchCheckpoint(n.ctx, c.Host, pid, id, 0, terms.Steps, path); err != nil {
		t.Fatal(err)
	}
	if err := train.VerifyCheckpoint(path, train.SetHead, train.Hash(*slots[0].Final)); err != nil {
		t.Fatal(err)
	}
	// A stranger (another key) may not fetch it.
	stranger := n.keys["mal1"]
	sh, _ := n.host("stranger", stranger)
	spid, err := connectProvider(n.ctx, sh, c.Chain, p1.agent.Address())
	if err != nil {
		t.Fatal(err)
	}
	if err := FetchCheckpoint(n.ctx, sh, spid, id, 0, terms.Steps, filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "may not fetch") {
		t.Fatalf("a stranger fetched the client's model: %v", err)
	}
	// T13: nor may a co-provider, which could copy checkpoints instead of
	// training (here after the job; before its commitment it is refused
	// by the same rule), nor the validator while no game is on (T14).
	for _, who := range []struct {
		name string
		h    *p2p.Host
	}{{"the co-provider", p2.host}, {"the validator outside a game", n.validator.Host}} {
		pid, err := connectProvider(n.ctx, who.h, c.Chain, p1.agent.Address())
		if err != nil {
			t.Fatal(err)
		}
		if err := FetchCheckpoint(n.ctx, who.h, pid, id, 0, 5, filepath.Join(t.TempDir(), "y")); err == nil || !strings.Contains(err.Error(), "may not fetch") {
			t.Fatalf("%s fetched a checkpoint: %v", who.name, err)
		}
	}
}

// TestFinetuneLiarCaughtByBisection: a provider that perturbs step k is
// located at k by the game its agent plays by itself against the honest
// one, the validator re-executes that one step, the liar is slashed and
// tombstoned, and the honest provider is paid.
func TestFinetuneLiarCaughtByBisection(t *testing.T) {
	n := newTestNet(t)
	// A late step: the liar trains on from its perturbed weights one step
	// per worker (ftwork.RunPerturbed), which under the race detector
	// takes about a second a step; the game finds any step alike.
	const k = 21
	honest := n.finetuneProvider("prov1", 0)
	liar := n.finetuneProvider("mal1", k)
	c := n.client()
	id, terms := n.postFinetune(c, ziggyText(3), 2)
	go func() {
		for _, a := range []types.Address{honest.agent.Address(), liar.agent.Address()} {
			_, _ = connectProvider(n.ctx, c.Host, c.Chain, a)
		}
	}()
	before, err := n.c.Account(n.ctx, honest.agent.Address())
	if err != nil {
		t.Fatal(err)
	}
	j := n.finished(id)
	v, err := n.c.Job(n.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Tasks) == 0 || len(v.Tasks[0].Games) != 1 {
		t.Fatalf("job %s (%s): no game", j.State, v.Phase)
	}
	g := v.Tasks[0].Games[0]
	if g.Hi != k || g.Lo != k-1 || g.Outcome != finetune.OutcomeVerdict || g.Round > finetune.MaxRounds(terms.Steps, 2) {
		t.Fatalf("the game ended at (%d, %d] after %d rounds (%s); want (%d, %d] within %d", g.Lo, g.Hi, g.Round, g.Outcome, k-1, k, finetune.MaxRounds(terms.Steps, 2))
	}
	after, err := n.c.Account(n.ctx, honest.agent.Address())
	if err != nil {
		t.Fatal(err)
	}
	// Paid the price, less the fees of its openings (well below 0.01 oGPU).
	got := new(uint256.Int).Sub(after.Balance, before.Balance)
	floor := new(uint256.Int).Sub(j.Prices[0], new(uint256.Int).Div(types.OGPU(1), uint256.NewInt(100)))
	if got.Gt(j.Prices[0]) || !got.Gt(floor) {
		t.Fatalf("the honest provider earned %s, want the price %s less its fees", got, j.Prices[0])
	}
	if st, err := n.c.Stake(n.ctx, honest.agent.Address()); err != nil || !st.Bonded.Eq(types.OGPU(200)) {
		t.Fatalf("the honest provider's stake changed: %v %v", st, err)
	}
	pv, err := n.c.Provider(n.ctx, liar.agent.Address())
	if err != nil {
		t.Fatal(err)
	}
	if !pv.Tombstoned {
		t.Fatalf("the liar is not tombstoned: %+v", pv.Provider)
	}
	n.supplyIsCap()
}

// TestFinetuneBadDatasetSlashesNobody: a client whose dataset is larger
// than it declares, or is not UTF-8 text, gets no training: the providers
// report the input, the validator finds it bad, the task settles
// bad_input (the providers are paid their reservation by the client) and
// nobody is slashed (T11).
func TestFinetuneBadDatasetSlashesNobody(t *testing.T) {
	n := newTestNet(t)
	p1 := n.finetuneProvider("prov1", 0)
	p2 := n.finetuneProvider("prov2", 0)
	c := n.client()
	good := ziggyText(3)
	post := func(data []byte, declared uint64) uint64 {
		in, err := c.Store.Put(data)
		if err != nil {
			t.Fatal(err)
		}
		h0, err := train.HashCheckpoint(n.modelPath, train.SetHead)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(n.modelPath)
		msg := &market.MsgPostJob{Kind: market.KindFinetune, Mode: market.ModeAuction, Model: n.model, ModelSize: uint64(st.Size()),
			Stages: 1, Redundancy: 2, MaxPrice: types.OGPU(5), Input: in,
			Finetune: &market.FinetuneTerms{Base: types.Hash(h0), DatasetSize: declared, Epochs: 2, LRMicro: 3000, Ctx: 64, Stride: 16, Steps: 24, Trainable: train.SetHead},
			Req:      market.Requirements{MinStake: types.OGPU(100), Class: train.BuildClass()},
			Windows:  market.Windows{Bid: 4, Reveal: 3, Execute: 60, Verify: 15}}
		_, posted, err := c.postJob(n.ctx, msg, RuntimeTrain, in)
		if err != nil {
			t.Fatal(err)
		}
		return posted.Job
	}
	larger := post(good, uint64(len(good))-1)
	binary := append([]byte{0xff, 0xfe}, good[2:]...)
	notText := post(binary, uint64(len(binary)))
	go func() {
		for _, a := range []types.Address{p1.agent.Address(), p2.agent.Address()} {
			_, _ = connectProvider(n.ctx, c.Host, c.Chain, a)
		}
	}()
	for _, id := range []uint64{larger, notText} {
		j := n.finished(id)
		v, err := n.c.Job(n.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Tasks[0].Verdict != verifier.InputBad || !j.Paid.Eq(new(uint256.Int).Mul(j.Prices[0], uint256.NewInt(2))) {
			t.Fatalf("job %d: verdict %x, paid %s (%s); want bad input, both reservations paid", id, v.Tasks[0].Verdict, j.Paid, v.Phase)
		}
	}
	for _, p := range []*testProvider{p1, p2} {
		if st, err := n.c.Stake(n.ctx, p.agent.Address()); err != nil || !st.Bonded.Eq(types.OGPU(200)) {
			t.Fatalf("%s was slashed for the client's dataset: %v %v", p.agent.Address(), st, err)
		}
	}
}
