package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/runtime/stagehost"
	"github.com/ogpu-network/ogpu/split"
	"github.com/ogpu-network/ogpu/types"
)

// TestMain lets this test binary be a supervised split stage worker or
// training worker.
func TestMain(m *testing.M) {
	stagehost.MaybeServe()
	train.MaybeWorker()
	os.Exit(m.Run())
}

// splitModel cuts the shared model at the given layers into the test
// net's home and returns the manifest and the slice files.
func (n *testNet) splitModel(at ...int) (*llm.SplitManifest, []llm.SliceFile) {
	n.t.Helper()
	info, err := llm.Inspect(n.modelPath)
	if err != nil {
		n.t.Fatal(err)
	}
	r, err := llm.Cuts(info.Layers, len(at)+1, at)
	if err != nil {
		n.t.Fatal(err)
	}
	dir := filepath.Join(n.home, "slices")
	os.MkdirAll(dir, 0o755)
	files, err := llm.WriteSlices(n.modelPath, dir, r)
	if err != nil {
		n.t.Fatal(err)
	}
	return llm.NewSplitManifest(info, files), files
}

// splitProvider starts a provider agent serving one slice.
func (n *testNet) splitProvider(name string, slice llm.SliceFile, perTokenMilli uint64, lie bool) *testProvider {
	return n.splitProviderWith(name, slice, perTokenMilli, lie, false)
}

// splitProviderWith is splitProvider; with fetch the provider gets its
// slice from peers by hash (WantSlices) instead of from a file.
func (n *testNet) splitProviderWith(name string, slice llm.SliceFile, perTokenMilli uint64, lie, fetch bool) *testProvider {
	n.t.Helper()
	milli := func(x uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(x), uint256.NewInt(1000)) }
	return n.startProvider(name, func(store *blobstore.Store, cfg *ProviderConfig) {
		if fetch {
			cfg.WantSlices = []types.Hash{slice.Hash}
		} else {
			hash, err := store.PutFile(slice.Path)
			if err != nil {
				n.t.Fatal(err)
			}
			cfg.Slices = []types.Hash{hash}
		}
		cfg.Strategy, cfg.Lie = pricing.PerToken{Base: milli(100), PerToken: milli(perTokenMilli)}, lie
	})
}

// splitJob is a 2-chain split job on manifest m.
func (n *testNet) splitJob(m *llm.SplitManifest, v *llm.Vocab, maxTokens uint64) SplitJob {
	return SplitJob{
		Manifest: m, Vocab: v, Prompt: "Once upon a time", MaxTokens: maxTokens, Redundancy: 2,
		MaxPrice: types.OGPU(5), Req: market.Requirements{MinStake: types.OGPU(100)},
		Windows:     market.Windows{Bid: 4, Reveal: 3, Execute: 40, Verify: 15},
		ContextSize: n.lo.ContextSize, Chunk: n.lo.BatchSize,
	}
}

// wholeText is the whole model's greedy text.
func (n *testNet) wholeText(maxTokens int) *llm.Output {
	m, err := llm.Load(n.modelPath, n.lo)
	if err != nil {
		n.t.Fatal(err)
	}
	defer m.Close()
	out, err := m.Generate(n.ctx, llm.Request{Prompt: "Once upon a time", MaxTokens: maxTokens}, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

func (n *testNet) vocab() *llm.Vocab {
	v, err := llm.LoadVocab(n.modelPath)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(v.Close)
	return v
}

// TestSplitJobEqualsWhole: a split job of 2 stages × 2 replica chains,
// each stage a separate provider agent running its slice in a supervised
// worker process, prints exactly the whole model's text; every stage
// settles agreed and every provider is paid.
func TestSplitJobEqualsWhole(t *testing.T) {
	n := newTestNet(t)
	m, files := n.splitModel(3)
	n.splitProvider("prov1", files[0], 50, false)
	n.splitProvider("prov2", files[0], 50, false)
	n.splitProvider("prov3", files[1], 50, false)
	n.splitProviderWith("mal1", files[1], 50, false, true) // fetches its slice from prov3 by hash
	want := n.wholeText(40)
	cl := n.client()
	progress := func(f string, a ...any) { t.Logf("[client] "+f, a...) }
	res, err := cl.RunSplit(n.ctx, n.splitJob(m, n.vocab(), 40), progress, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want.Text || len(res.Tokens) != len(want.Tokens) {
		t.Fatalf("split text %q (%d tokens)\nwhole text %q (%d tokens)", res.Text, len(res.Tokens), want.Text, len(want.Tokens))
	}
	for s, o := range res.Outcomes {
		if o != "agreed" {
			t.Fatalf("stage %d settled %q, want agreed", s, o)
		}
	}
	n.supplyIsCap()
}

// TestSplitLiarCaughtDownstreamPaid: in chain 1 the stage-0 provider
// nudges the residuals it sends (too little to change a token, P14). The
// client's text is still the whole model's; the chain finds the first
// stage whose outputs differ on equal inputs (stage 0) and disputes it,
// holding stage 1 until the verdict; the validator agent fetches the
// transcript, replays the slice and votes for the honest output; the liar
// is slashed and tombstoned. Stage 1 of the liar's chain computed
// faithfully on a lie: unpaid, not slashed (AppVersion 8, M-L2). Stage 1
// of the honest chain, left without a partner, is audited (the validator
// agent replays it) and paid.
func TestSplitLiarCaughtDownstreamPaid(t *testing.T) {
	n := newTestNet(t)
	m, files := n.splitModel(3)
	n.splitProvider("prov1", files[0], 50, false)
	n.splitProvider("mal1", files[0], 50, true)
	n.splitProvider("prov2", files[1], 50, false)
	n.splitProvider("prov3", files[1], 50, false)
	before := map[string]*uint256.Int{}
	for _, name := range []string{"prov1", "mal1", "prov2", "prov3"} {
		before[name] = n.balance(name)
	}
	want := n.wholeText(40)
	cl := n.client()
	progress := func(f string, a ...any) { t.Logf("[client] "+f, a...) }
	res, err := cl.RunSplit(n.ctx, n.splitJob(m, n.vocab(), 40), progress, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want.Text {
		t.Fatalf("split text %q\nwhole text %q", res.Text, want.Text)
	}
	if res.Outcomes[0] != "verdict" || res.Outcomes[1] != "audited" {
		t.Fatalf("stages settled %v, want stage 0 verdict, stage 1 audited", res.Outcomes)
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	mal := addrOf(n, "mal1")
	pv, err := n.c.Provider(n.ctx, mal)
	if err != nil {
		t.Fatal(err)
	}
	if !pv.Tombstoned {
		t.Fatalf("the liar is not tombstoned: %+v", pv)
	}
	// The liar's chain is the one its slot of stage 0 is on.
	liarChain := -1
	for c, s := range j.Tasks[0].Slots {
		if s.Provider == mal {
			liarChain = c
		}
	}
	for _, name := range []string{"prov1", "prov2", "prov3"} {
		a := addrOf(n, name)
		downstreamOfLie := liarChain >= 0 && liarChain < len(j.Tasks[1].Slots) && j.Tasks[1].Slots[liarChain].Provider == a
		got := n.balance(name)
		switch {
		case downstreamOfLie && got.Gt(before[name]):
			t.Fatalf("%s, downstream of the lie, was paid: %s -> %s", name, before[name], got)
		case !downstreamOfLie && !got.Gt(before[name]):
			t.Fatalf("%s was not paid: %s -> %s (job %+v)", name, before[name], got, j.Tasks)
		}
		if pv, err := n.c.Provider(n.ctx, a); err != nil || pv.Jailed || pv.Tombstoned {
			t.Fatalf("%s (honest) was jailed or slashed: %+v %v", name, pv, err)
		}
	}
	n.supplyIsCap()
}

// TestSplitStageKilledReplayed: the provider of the last stage of replica
// chain 1 dies mid-generation. The client notices (no token within the
// step timeout), finds the stage that does not answer, orders its
// replacement; the backup bidder takes the slot, the chain's surviving
// stage restarts, the client replays every frame and the backup rebuilds
// its KV cache; the client sees a pause, and its text is still exactly
// the whole model's. The dead provider is slashed as a no-show (burned)
// and the job settles with every stage agreed.
func TestSplitStageKilledReplayed(t *testing.T) {
	n := newTestNet(t)
	m, files := n.splitModel(3)
	provs := map[string]*testProvider{
		"prov1": n.splitProvider("prov1", files[0], 50, false),
		"prov2": n.splitProvider("prov2", files[0], 50, false),
		"prov3": n.splitProvider("prov3", files[1], 50, false),
		"mal1":  n.splitProvider("mal1", files[1], 50, false),
		"mal2":  n.splitProvider("mal2", files[1], 60, false), // the backup: ranked third
	}
	want := n.wholeText(40)
	cl := n.client()
	progress := func(f string, a ...any) { t.Logf("[client] "+f, a...) }
	job := n.splitJob(m, n.vocab(), 40)
	job.StepTimeout = 20 * time.Second // the death is seen at once (a broken stream); the timeout is a backstop
	pieces := 0
	var killed string
	res, err := cl.RunSplit(n.ctx, job, progress, func(string) {
		if pieces++; pieces != 5 {
			return
		}
		killed = runningSlot(provs, 1, 1)
		t.Logf("killing %s, the last stage of chain 1, after 5 tokens", killed)
		provs[killed].kill()
	})
	if err != nil {
		t.Fatal(err)
	}
	if killed == "" {
		t.Fatal("no provider held stage 1 of chain 1")
	}
	if res.Text != want.Text {
		t.Fatalf("split text %q\nwhole text %q", res.Text, want.Text)
	}
	for s, o := range res.Outcomes {
		if o != "agreed" {
			t.Fatalf("stage %d settled %q, want agreed", s, o)
		}
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	slot := j.Tasks[1].Slots[1]
	if len(slot.Replaced) != 1 || slot.Replaced[0] != addrOf(n, killed) || slot.Provider != addrOf(n, "mal2") {
		t.Fatalf("stage 1 chain 1: provider %s, replaced %v; want mal2 replacing %s", slot.Provider.Hex(), slot.Replaced, killed)
	}
	n.supplyIsCap()
}

// TestSplitStrangerFramesRefused: while a split job runs, a stranger (a
// registered provider with no slot in the job, and then a peer with no
// record at all) sends frames to stage 0 of chain 0 as if it were the
// client, and to stage 1 as if it were stage 0: every stream is refused
// by the provider's chain-backed access rule with a clear error, the
// generation is untouched, and nobody is slashed.
func TestSplitStrangerFramesRefused(t *testing.T) {
	n := newTestNet(t)
	m, files := n.splitModel(3)
	provs := map[string]*testProvider{
		"prov1": n.splitProvider("prov1", files[0], 50, false),
		"prov2": n.splitProvider("prov2", files[0], 50, false),
		"prov3": n.splitProvider("prov3", files[1], 50, false),
		"mal1":  n.splitProvider("mal1", files[1], 50, false),
	}
	strangerKey, _ := ethcrypto.GenerateKey()
	sh, _ := n.host("stranger", strangerKey)
	want := n.wholeText(40)
	cl := n.client()
	chainID, err := n.c.ChainID(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var refusals []error
	pieces := 0
	res, err := cl.RunSplit(n.ctx, n.splitJob(m, n.vocab(), 40), nil, func(string) {
		if pieces++; pieces != 3 {
			return
		}
		jobs, _ := n.c.Job(n.ctx, 1)
		for _, target := range []struct {
			stage, from uint16
			kind        split.Kind
		}{{0, market.ClientStage, split.KindTokens}, {1, 0, split.KindActivations}} {
			pv, err := n.c.Provider(n.ctx, jobs.Tasks[target.stage].Slots[0].Provider)
			if err != nil {
				t.Error(err)
				return
			}
			pid, _ := peer.Decode(pv.PeerID)
			_ = sh.ConnectPeer(n.ctx, pid, pv.Addrs)
			s, _ := split.NewSender(strangerKey, split.Link{ChainID: chainID, Job: 1, Chain: 0, From: target.from})
			out, _ := split.NewOutbox(sh.Host(), s, split.OutboxConfig{To: pid})
			f := split.Frame{Header: split.Header{Kind: split.KindTokens, Pos0: 0, N: 1, Flags: split.FlagReset}, Tokens: []int32{1}}
			if target.kind == split.KindActivations {
				f = split.Frame{Header: split.Header{Kind: split.KindActivations, Pos0: 0, N: 1, NEmbd: 64, Flags: split.FlagReset}, Rows: make([]float32, 64)}
			}
			err = out.Send(n.ctx, f)
			for i := 0; err == nil && i < 200; i++ {
				time.Sleep(10 * time.Millisecond) // the refusal is on its way back
				f.Flags, f.Pos0 = 0, uint32(i+1)
				err = out.Send(n.ctx, f)
			}
			refusals = append(refusals, err)
			out.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want.Text {
		t.Fatalf("split text %q\nwhole text %q", res.Text, want.Text)
	}
	if len(refusals) != 2 {
		t.Fatalf("%d stranger attempts", len(refusals))
	}
	for i, err := range refusals {
		if err == nil || !strings.Contains(err.Error(), "may not send") {
			t.Fatalf("stranger attempt %d: %v, want a refusal saying who may send", i, err)
		}
	}
	for s, o := range res.Outcomes {
		if o != "agreed" {
			t.Fatalf("stage %d settled %q", s, o)
		}
	}
	for name := range provs {
		if pv, _ := n.c.Provider(n.ctx, addrOf(n, name)); pv.Jailed || pv.Tombstoned {
			t.Fatalf("%s was punished", name)
		}
	}
	// Input transcripts (the prompt, in effect) go to active validators of
	// a dispute only: the stranger asking for one is refused.
	jv, _ := n.c.Job(n.ctx, res.Job)
	pv, _ := n.c.Provider(n.ctx, jv.Tasks[0].Slots[0].Provider)
	pid, _ := peer.Decode(pv.PeerID)
	if _, err := FetchTranscript(n.ctx, sh, pid, res.Job, 0, 0); err == nil || !strings.Contains(err.Error(), "is not disputed") {
		t.Fatalf("a stranger fetched a transcript: %v", err)
	}
	n.supplyIsCap()
}

// workerPid is the pid of the stage worker this test process started for
// a slice under dir.
func workerPid(t *testing.T, dir string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if bytes.Contains(env, []byte(stagehost.Env+"=1")) && bytes.Contains(env, []byte("OGPU_STAGE_SLICE="+dir)) {
			return pid
		}
	}
	t.Fatalf("no stage worker for a slice under %s", dir)
	return 0
}

// TestSplitWorkerAbortResumed: the llama.cpp worker of a stage aborts
// mid-generation (SIGABRT, as GGML_ABORT does). The provider is not taken
// down: it starts a fresh worker, replays the session's inputs to rebuild
// the KV cache and goes on; the neighbours see a pause, the text is the
// whole model's, nothing is replaced and nobody is slashed.
func TestSplitWorkerAbortResumed(t *testing.T) {
	n := newTestNet(t)
	m, files := n.splitModel(3)
	provs := map[string]*testProvider{
		"prov1": n.splitProvider("prov1", files[0], 50, false),
		"prov2": n.splitProvider("prov2", files[0], 50, false),
		"prov3": n.splitProvider("prov3", files[1], 50, false),
		"mal1":  n.splitProvider("mal1", files[1], 50, false),
	}
	want := n.wholeText(40)
	cl := n.client()
	pieces := 0
	var aborted string
	res, err := cl.RunSplit(n.ctx, n.splitJob(m, n.vocab(), 40), func(f string, a ...any) { t.Logf("[client] "+f, a...) }, func(string) {
		if pieces++; pieces != 5 {
			return
		}
		aborted = runningSlot(provs, 0, 0)
		pid := workerPid(t, filepath.Join(n.home, aborted))
		t.Logf("SIGABRT to %s's stage worker (pid %d) after 5 tokens", aborted, pid)
		syscall.Kill(pid, syscall.SIGABRT)
	})
	if err != nil {
		t.Fatal(err)
	}
	if aborted == "" {
		t.Fatal("no provider held stage 0 of chain 0")
	}
	if res.Text != want.Text {
		t.Fatalf("split text %q\nwhole text %q", res.Text, want.Text)
	}
	for s, o := range res.Outcomes {
		if o != "agreed" {
			t.Fatalf("stage %d settled %q, want agreed", s, o)
		}
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range j.Tasks {
		for _, sl := range task.Slots {
			if len(sl.Replaced) > 0 || sl.NoShow {
				t.Fatalf("a slot was replaced or missed: %+v", sl)
			}
		}
	}
	n.supplyIsCap()
}

// TestChooseSplit: --stages 1 runs whole; a split needs the model file; a
// split of the file follows the cut; with no stages, the providers' memory
// decides (the test net's providers advertise none: the whole model, said why).
func TestChooseSplit(t *testing.T) {
	n := newTestNet(t)
	ctx := n.ctx
	if r, _, err := ChooseSplit(ctx, n.c, n.modelPath, 1, nil, 2, 512); r != nil || err != nil {
		t.Fatalf("stages 1: %v %v", r, err)
	}
	if _, _, err := ChooseSplit(ctx, n.c, "0x1234", 2, nil, 2, 512); err == nil || !strings.Contains(err.Error(), "GGUF file") {
		t.Fatalf("split of a hash: %v", err)
	}
	r, _, err := ChooseSplit(ctx, n.c, n.modelPath, 0, []int{2, 4}, 2, 512)
	if err != nil || len(r) != 3 || r[1].From != 2 || r[2].From != 4 {
		t.Fatalf("cut at 2,4: %v %v", r, err)
	}
	if _, _, err := ChooseSplit(ctx, n.c, n.modelPath, 2, []int{4, 2}, 2, 512); err == nil {
		t.Fatal("bad cut points accepted")
	}
	r, note, err := ChooseSplit(ctx, n.c, n.modelPath, 0, nil, 2, 512)
	if err != nil || r != nil || !strings.Contains(note, "running the whole model") {
		t.Fatalf("planning without advertised memory: %v %q %v", r, note, err)
	}
}

// runningSlot names the provider running slot chain of stage of a split job.
func runningSlot(provs map[string]*testProvider, stage, chain uint16) string {
	for name, tp := range provs {
		tp.agent.mu.Lock()
		for k, r := range tp.agent.splitRestarts {
			if k.Stage == stage && r.chain == chain {
				tp.agent.mu.Unlock()
				return name
			}
		}
		tp.agent.mu.Unlock()
	}
	return ""
}
