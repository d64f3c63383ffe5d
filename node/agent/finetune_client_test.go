package agent

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
)

func ftModel(t *testing.T) string {
	t.Helper()
	path, err := FindModel()
	if err != nil {
		t.Skipf("fine-tune client tests need the shared model: %v", err)
	}
	return path
}

func ftJob(t *testing.T) FinetuneJob {
	return FinetuneJob{Base: ftModel(t), Data: ziggyText(8), Epochs: 2, MaxPrice: types.OGPU(5)}
}

// The planned post carries exactly the contract's terms: the base file's
// hash as the model, the dataset's hash as the input, the base's trained
// tensors' hash as leaf 0, the runtime's step count, the training
// runtime and this build's class; the chain's stateless checks pass it.
func TestPlanFinetune(t *testing.T) {
	j := ftJob(t)
	p := genesis.DefaultParams()
	pl, err := PlanFinetune(j, &p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := train.PlanJob(train.Params{Model: j.Base, Data: j.Data, Epochs: 2, LRMicro: DefaultFinetuneLRMicro, NCtx: DefaultFinetuneCtx,
		Stride: DefaultFinetuneStride, Trainable: train.SetHead, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	base, size, err := blobstore.HashFile(j.Base)
	if err != nil {
		t.Fatal(err)
	}
	h0, err := train.HashCheckpoint(j.Base, train.SetHead)
	if err != nil {
		t.Fatal(err)
	}
	m := pl.Msg
	ft := m.Finetune
	switch {
	case m.Kind != market.KindFinetune || m.Mode != market.ModeAuction || m.Stages != 1:
		t.Fatalf("kind %s mode %s stages %d", m.Kind, m.Mode, m.Stages)
	case m.Model != base || m.ModelSize != size || pl.Base != base:
		t.Fatalf("model %x (%d bytes), want the base file's hash %x (%d)", m.Model, m.ModelSize, base, size)
	case m.Input != types.Hash(sha256.Sum256(j.Data)) || pl.Data != m.Input:
		t.Fatalf("input %x is not the dataset's hash", m.Input)
	case m.Req.Runtime != RuntimeTrain || m.Req.Class != train.BuildClass():
		t.Fatalf("runtime %q class %q", m.Req.Runtime, m.Req.Class)
	case ft.Base != types.Hash(h0) || ft.Trainable != market.TrainableHead:
		t.Fatalf("terms base %x set %q, want %x head", ft.Base, ft.Trainable, h0)
	case ft.Steps != uint64(want.Steps) || pl.Plan != want || want.Steps == 0:
		t.Fatalf("steps %d (plan %+v), the runtime plans %+v", ft.Steps, pl.Plan, want)
	case ft.DatasetSize != uint64(len(j.Data)) || ft.Epochs != 2 || ft.LRMicro != DefaultFinetuneLRMicro || ft.Ctx != 64 || ft.Stride != 32:
		t.Fatalf("terms %+v", ft)
	case m.Redundancy != 2 || m.Windows.Execute < MinFinetuneExecute:
		t.Fatalf("redundancy %d windows %+v", m.Redundancy, m.Windows)
	}
	if _, err := market.DecodeMsgPostJob(m.Raw().Data); err != nil {
		t.Fatal(err)
	}
	// The class and windows are overridable.
	j.Class, j.Windows = "other-class", market.Windows{Bid: 3, Reveal: 2, Execute: 50, Verify: 10}
	pl, err = PlanFinetune(j, &p)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Msg.Req.Class != "other-class" || pl.Msg.Windows != j.Windows {
		t.Fatalf("class %q windows %+v", pl.Msg.Req.Class, pl.Msg.Windows)
	}
}

// writeHeadOnly writes a GGUF holding only the given head tensors of the
// base model (enough for the tensor checks, which read the header).
func writeHeadOnly(t *testing.T, base string, edit func([]train.Tensor) []train.Tensor) string {
	t.Helper()
	ts, err := train.ReadCheckpoint(base, train.SetHead)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "head.gguf")
	if err := train.WriteCheckpoint(path, edit(ts)); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bad input is refused before anything is posted, with the runtime's
// message (or the chain's bound) saying what to change. The client is who
// would pay for a bad post: the refusal costs nothing.
func TestPlanFinetuneRefuses(t *testing.T) {
	base := ftModel(t)
	tied := writeHeadOnly(t, base, func(ts []train.Tensor) []train.Tensor {
		var out []train.Tensor
		for _, x := range ts {
			if x.Name != "output.weight" {
				out = append(out, x)
			}
		}
		return out
	})
	// A head of ggml type F16: the type field of output_norm.weight patched
	// in the header (after its name, its dimension count and dimensions).
	f16 := writeHeadOnly(t, base, func(ts []train.Tensor) []train.Tensor { return ts })
	bz, err := os.ReadFile(f16)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(bz, []byte("output_norm.weight"))
	at := i + len("output_norm.weight") + 4 + 8*1 // one dimension
	if i < 0 || bz[at] != 0 {
		t.Fatalf("cannot find output_norm.weight's type in %s", f16)
	}
	bz[at] = 1
	if err := os.WriteFile(f16, bz, 0o644); err != nil {
		t.Fatal(err)
	}
	p := genesis.DefaultParams()
	noFT := genesis.DefaultParams()
	noFT.Market.Finetune = nil
	cases := []struct {
		name   string
		edit   func(*FinetuneJob)
		params *genesis.Params
		want   string
	}{
		{"not UTF-8", func(j *FinetuneJob) { j.Data = append([]byte("Once upon a \xff"), j.Data...) }, &p, "not valid UTF-8"},
		{"empty dataset", func(j *FinetuneJob) { j.Data = nil }, &p, "dataset is empty"},
		{"larger than the runtime takes", func(j *FinetuneJob) { j.Data = bytes.Repeat([]byte("a"), train.MaxDataBytes+1) }, &p, "shorten it"},
		{"larger than the chain takes", func(j *FinetuneJob) {
			j.Data = bytes.Repeat(ziggyText(1), int(p.Market.Finetune.MaxDatasetBytes)/len(ziggyText(1))+1)
		}, &p, "max_dataset_bytes"},
		{"shorter than a datapoint", func(j *FinetuneJob) { j.Data = []byte("Once upon a time.") }, &p, "shorter than one datapoint"},
		{"ctx not a multiple of 32", func(j *FinetuneJob) { j.Ctx = 48 }, &p, "multiple of 32"},
		{"ctx 32 (llama.cpp batches at least 64)", func(j *FinetuneJob) { j.Ctx = 32 }, &p, "64..4096"},
		{"ctx too large", func(j *FinetuneJob) { j.Ctx = train.MaxNCtx + 32 }, &p, "multiple of 32"},
		{"stride above ctx", func(j *FinetuneJob) { j.Stride = 65 }, &p, "stride"},
		{"learning rate above 1", func(j *FinetuneJob) { j.LRMicro = train.MaxLRMicro + 1 }, &p, "lr_micro"},
		{"epochs above the bound", func(j *FinetuneJob) { j.Epochs = train.MaxEpochs + 1 }, &p, "epochs"},
		{"all tensors", func(j *FinetuneJob) { j.Trainable = train.SetAll }, &p, "#24305"},
		{"unknown set", func(j *FinetuneJob) { j.Trainable = "attn" }, &p, "#24305"},
		{"tied base", func(j *FinetuneJob) { j.Base = tied }, &p, "ties its output"},
		{"F16 head", func(j *FinetuneJob) { j.Base = f16 }, &p, "not F32"},
		{"missing base", func(j *FinetuneJob) { j.Base = filepath.Join(t.TempDir(), "none.gguf") }, &p, "cannot read the base model"},
		{"validation takes every datapoint", func(j *FinetuneJob) { j.Validation = 1000 }, &p, "none is left to train on"},
		{"steps beyond the windows", func(j *FinetuneJob) { j.Epochs = 200 }, &p, "max_job_blocks"},
		{"chain without fine-tune", func(*FinetuneJob) {}, &noFT, "takes no fine-tune jobs"},
		{"no price", func(j *FinetuneJob) { j.MaxPrice = nil }, &p, "price cap"},
		{"redundancy above the chain's", func(j *FinetuneJob) { j.Redundancy = uint16(p.Market.MaxRedundancy) + 1 }, &p, "redundancy"},
		{"redundancy 1", func(j *FinetuneJob) { j.Redundancy = 1 }, &p, "redundancy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := ftJob(t)
			c.edit(&j)
			pl, err := PlanFinetune(j, c.params)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v (plan %v), want an error mentioning %q", err, pl, c.want)
			}
			t.Log(err)
		})
	}
}

// The default execute window grows with the step count at the devnet's
// block time and a slower chain's windows are shorter in blocks; windows
// the job cannot live through are refused with what to change.
func TestFinetuneWindows(t *testing.T) {
	p := genesis.DefaultParams()
	w, err := FinetuneWindows(10, 2, 0, &p, market.Windows{})
	if err != nil {
		t.Fatal(err)
	}
	if w != (market.Windows{Bid: DefaultFinetuneBid, Reveal: DefaultFinetuneReveal, Execute: MinFinetuneExecute, Verify: DefaultFinetuneVerify}) {
		t.Fatalf("small job: %+v", w)
	}
	// 200 steps × 40 ms × 3 = 24 s = 120 blocks of 200 ms, 24 of 1 s.
	if w, err = FinetuneWindows(200, 2, 0, &p, market.Windows{}); err != nil || w.Execute != 120 {
		t.Fatalf("200 steps at 200 ms: %+v %v", w, err)
	}
	if w, err = FinetuneWindows(200, 2, time.Second, &p, market.Windows{}); err != nil || w.Execute != 24 {
		t.Fatalf("200 steps at 1 s: %+v %v", w, err)
	}
	given := market.Windows{Bid: 2, Reveal: 3, Execute: 7, Verify: 9}
	if w, err = FinetuneWindows(200, 2, 0, &p, given); err != nil || w != given {
		t.Fatalf("given windows: %+v %v", w, err)
	}
	for _, c := range []struct {
		name  string
		steps uint64
		r     uint16
		w     market.Windows
		want  string
	}{
		{"execute too long", 1 << 16, 2, market.Windows{}, "longer than the chain's max_job_blocks"},
		{"life too long", 1000, 2, market.Windows{}, "more than the chain's max_job_blocks"},
		{"games past unbonding", 600, 8, market.Windows{}, "unbonding_blocks"},
	} {
		if _, err := FinetuneWindows(c.steps, c.r, 0, &p, c.w); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// Progress lines round-trip; anything else (a provider's garbage, a line
// too long) is not progress.
func TestParseFinetuneProgress(t *testing.T) {
	pr, ok := ParseFinetuneProgress(FinetuneEpochLine(2, 3, 1.23456, 0.5) + "\n")
	if !ok || pr.Epoch != 2 || pr.Epochs != 3 || pr.Loss != 1.2346 || pr.Val != 0.5 || pr.Step != 0 {
		t.Fatalf("epoch line: %+v %v", pr, ok)
	}
	pr, ok = ParseFinetuneProgress(FinetuneStepLine(17, 351))
	if !ok || pr.Step != 17 || pr.Steps != 351 || pr.Epoch != 0 {
		t.Fatalf("step line: %+v %v", pr, ok)
	}
	for _, n := range []int{1, 40, 100, 351, 100000} {
		lines := 0
		for s := 1; s <= n; s++ {
			if FinetuneStepReported(s, n) {
				lines++
			}
		}
		if lines > MaxFinetuneStepLines+1 || lines < min(n, MaxFinetuneStepLines/2) || !FinetuneStepReported(n, n) {
			t.Errorf("%d steps: %d step lines", n, lines)
		}
	}
	for _, s := range []string{"", "hello", "step 0/3", "step 4/3", "step x/3", "step 1/3 more", "epoch 1/2 loss a val 1",
		"epoch 1/2 loss 1 val +Inf", "epoch 1/2 loss 1 lav 1", "step 1/" + strings.Repeat("9", 300)} {
		if pr, ok := ParseFinetuneProgress(s); ok {
			t.Errorf("%q parsed as %+v", s, pr)
		}
	}
}

// The model check: a GGUF whose trained tensors do not hash to the paid
// final is refused (a provider that trained wrongly, or serves another
// model, gains nothing: the client keeps nothing it did not pay for); the
// right one is accepted and written; a file with the right head but
// another byte changed elsewhere (an untrained tensor the chain never
// checked) is refused too.
func TestVerifyFinetuneModel(t *testing.T) {
	base := ftModel(t)
	dir := t.TempDir()
	ts, err := train.ReadCheckpoint(base, train.SetHead)
	if err != nil {
		t.Fatal(err)
	}
	perturb := func(ts []train.Tensor, at int) []train.Tensor {
		out := make([]train.Tensor, len(ts))
		for i, x := range ts {
			x.Data = bytes.Clone(x.Data)
			if x.Name == "output.weight" {
				x.Data[at] ^= 0x01
			}
			out[i] = x
		}
		return out
	}
	trained := perturb(ts, 100) // stands for the trained head
	final, err := train.HashTensors(trained)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.gguf")
	if err := train.WriteModel(base, good, trained); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.gguf")
	if err := train.WriteModel(base, bad, perturb(ts, 200)); err != nil {
		t.Fatal(err)
	}
	// The right head, and one byte of token_embd changed.
	body := filepath.Join(dir, "body.gguf")
	bz, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	embd := tensorOffset(t, good, "token_embd.weight")
	bz[embd] ^= 0x40
	if err := os.WriteFile(body, bz, 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.gguf")
	if err := os.WriteFile(junk, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "out", "model.gguf")
	for _, c := range []struct {
		name, model, want string
		mismatch          bool
	}{
		{"another head", bad, "the job paid for final hash", true},
		{"the base model itself", base, "the job paid for final hash", true},
		{"right head, changed body", body, "differs from the base model elsewhere", false},
		{"not a model", junk, "not a model", false},
	} {
		err := VerifyFinetuneModel(base, c.model, types.Hash(final), out)
		if err == nil || !errors.Is(err, ErrModelRefused) || !strings.Contains(err.Error(), c.want) || errors.Is(err, train.ErrCheckpointMismatch) != c.mismatch {
			t.Fatalf("%s: %v, want a refusal mentioning %q", c.name, err, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("%s: the refused model was written (%v)", c.name, err)
		}
	}
	if err := VerifyFinetuneModel(base, good, types.Hash(final), out); err != nil {
		t.Fatal(err)
	}
	if same, err := sameFile(out, good); err != nil || !same {
		t.Fatalf("the written model is not the served one: %v %v", same, err)
	}
	if h, err := train.HashCheckpoint(out, train.SetHead); err != nil || h != final {
		t.Fatalf("written model hashes %x, want %x (%v)", h, final, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 1 {
		t.Fatalf("left files behind: %v", ents)
	}
}

// tensorOffset is where tensor name's data starts in the GGUF at path.
func tensorOffset(t *testing.T, path, name string) int {
	t.Helper()
	infos, err := llm.ListTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range infos {
		if ti.Name == name {
			return int(ti.Offset)
		}
	}
	t.Fatalf("%s has no tensor %s", path, name)
	return 0
}

// PaidFinal names the final hash a settled job paid for and the providers
// paid for it; a provider with that final that lost a game (a bracket it
// lost before the others agreed) is not asked; a job that paid nobody, or
// has not settled, or is not a fine-tune job, has no model to fetch.
func TestPaidFinal(t *testing.T) {
	h := func(b byte) *types.Hash { x := types.Hash{b}; return &x }
	addr := func(b byte) types.Address { return types.Address{b} }
	final, other := h(0xf1), h(0xf2)
	resA, resB, resC := h(0xa), h(0xb), h(0xc)
	slot := func(p byte, res, fin *types.Hash) chain.SlotView {
		return chain.SlotView{Provider: addr(p), Committed: true, Revealed: true, Result: res, Root: res, Final: fin}
	}
	view := func(kind, status string, verdict types.Hash, games []*finetune.Game, slots ...chain.SlotView) *chain.JobView {
		return &chain.JobView{Job: &market.Job{ID: 9, Kind: kind}, Phase: "p",
			Tasks: []chain.TaskView{{Status: status, Verdict: verdict, Slots: slots, Games: games}}}
	}
	// Agreed: both paid, the settled result's first.
	got, paid, err := PaidFinal(view(market.KindFinetune, "settled", *resA, nil, slot(1, resB, final), slot(2, resA, final)))
	if err != nil || got != *final || len(paid) != 2 || paid[0] != addr(2) || paid[1] != addr(1) {
		t.Fatalf("agreed: %x %v %v", got, paid, err)
	}
	// A game: slot 3 (final f2) lost to 1, slot 2 (final f1) lost earlier
	// although its final is the survivors'; a no-show is skipped.
	games := []*finetune.Game{
		{Groups: []finetune.Group{{Final: *final, Slots: []types.Address{addr(2)}, Lost: true}, {Final: *other, Slots: []types.Address{addr(3)}}}},
		{Groups: []finetune.Group{{Final: *other, Slots: []types.Address{addr(3)}, Lost: true}, {Final: *final, Slots: []types.Address{addr(1)}}}},
	}
	noShow := chain.SlotView{Provider: addr(4), NoShow: true}
	got, paid, err = PaidFinal(view(market.KindFinetune, "settled", *resA, games, slot(1, resA, final), slot(2, resB, final), slot(3, resC, other), noShow))
	if err != nil || got != *final || len(paid) != 1 || paid[0] != addr(1) {
		t.Fatalf("game: %x %v %v", got, paid, err)
	}
	for _, c := range []struct {
		name string
		v    *chain.JobView
		want string
	}{
		{"class failure", view(market.KindFinetune, "settled", types.Hash{}, nil, slot(1, resA, final)), "refunded"},
		{"running", view(market.KindFinetune, "committing", types.Hash{}, nil), "not settled"},
		{"inference", view(market.KindInference, "settled", *resA, nil), "not finetune"},
		{"verdict without a claim", view(market.KindFinetune, "settled", *resC, nil, slot(1, resA, final)), "no slot revealed"},
	} {
		if _, _, err := PaidFinal(c.v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// On a real chain: the post RunFinetune plans is accepted with the chain's
// own checks (the life and games bound included), the job on chain
// carries the planned terms, the base model and the dataset are kept in
// the client's store, and a job no training provider bids on expires with
// the refund and the error that says why; nothing is written.
func TestRunFinetunePostsAndExpires(t *testing.T) {
	n := newTestNet(t)
	cl := n.client()
	j := ftJob(t)
	j.OutDir = t.TempDir()
	j.Windows = market.Windows{Bid: 2, Reveal: 2}
	var posted uint64
	j.OnPosted = func(id uint64, _ int64) { posted = id }
	if err := n.c.WaitHeight(n.ctx, 8); err != nil { // blocks to measure the block time on
		t.Fatal(err)
	}
	var lines []string
	res, err := cl.RunFinetune(n.ctx, j, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }, nil)
	if err == nil || !strings.Contains(err.Error(), "expired") || res == nil || res.Outcome != "expired" || res.Refunded == nil || res.Refunded.IsZero() {
		t.Fatalf("result %+v, err %v; want an expiry with a refund", res, err)
	}
	t.Log(strings.Join(lines, "\n"))
	if posted == 0 || res.Job != posted || res.Plan.Steps == 0 {
		t.Fatalf("posted %d, result %+v", posted, res)
	}
	jv, err := n.c.Job(n.ctx, posted)
	if err != nil {
		t.Fatal(err)
	}
	// The windows were sized with the chain's measured block time (its
	// timeout_commit is 200 ms; blocks take that or a little more).
	if res.BlockTime < 150*time.Millisecond || res.BlockTime > 2*time.Second {
		t.Fatalf("block time %s on a chain of 200 ms blocks", res.BlockTime)
	}
	p := genesis.DefaultParams()
	j.BlockTime = res.BlockTime
	want, err := PlanFinetune(j, &p)
	if err != nil {
		t.Fatal(err)
	}
	if jv.Kind != market.KindFinetune || jv.Finetune == nil || *jv.Finetune != *want.Msg.Finetune || jv.Input != want.Data || jv.Model != want.Base ||
		jv.Req.Runtime != RuntimeTrain || jv.Req.Class != train.BuildClass() || jv.Windows.Execute != want.Msg.Windows.Execute {
		t.Fatalf("job on chain %+v (terms %+v), planned %+v (terms %+v)", jv.Job, jv.Finetune, want.Msg, want.Msg.Finetune)
	}
	if !cl.Store.Has(want.Base) || !cl.Store.Has(want.Data) {
		t.Fatal("the base model or the dataset is not in the client's store")
	}
	if ents, _ := os.ReadDir(j.OutDir); len(ents) != 0 {
		t.Fatalf("an expired job wrote %v", ents)
	}
	// Nothing was paid for: there is no model to fetch.
	if _, err := cl.FetchFinetuneModel(n.ctx, posted, filepath.Join(j.OutDir, "m.gguf")); err == nil || !strings.Contains(err.Error(), "not settled") {
		t.Fatalf("fetch from an expired job: %v", err)
	}
}

// The client tells its user about a fine-tune job's reveals and games, and
// only about its own job's.
func TestReportFinetuneEvents(t *testing.T) {
	a, b := types.Address{1}, types.Address{2}
	evs := []types.Event{
		market.EventFinetuneRevealed{Job: 7, Provider: a, Root: types.Hash{0xaa}, Final: types.Hash{0xbb}},
		finetune.EventGameOpened{Job: 7, Steps: 40, Roots: []string{"r1", "r2"}, Deadline: 30},
		finetune.EventGameNarrowed{Job: 7, Round: 1, Lo: 20, Hi: 40, Deadline: 50},
		finetune.EventGameTimeout{Job: 7, Round: 2, Silent: []string{"r2"}},
		finetune.EventGameEnded{Job: 7, Step: 23, Rounds: 5, Deadline: 90},
		finetune.EventGameDecided{Job: 7, Outcome: "verdict", Losers: []string{b.Hex()}},
		finetune.EventBracketDone{Job: 7, Rounds: 1, Survivors: []string{"r1"}},
		finetune.EventBracketDone{Job: 7, ClassFailure: true},
		finetune.EventGameOpened{Job: 8, Steps: 40, Roots: []string{"r1", "r2"}}, // another job
	}
	var lines []string
	for _, e := range evs {
		reportEvent(types.EncodeEvent(e), 7, false, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	}
	want := []string{
		"revealed checkpoint root aa00000000000000, final model hash bb00000000000000",
		"step-bisection game 0 opened over 40 steps between 2 checkpoint trees; first openings due by 30",
		"first differ between steps 20 and 40",
		"1 checkpoint tree(s) did not open in time and lose",
		"narrowed to step 23 in 5 rounds: validators re-execute that one step",
		"decided (verdict): lost by " + b.Hex(),
		"1 checkpoint tree(s) survive",
		"class failure",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d %q does not say %q", i, lines[i], w)
		}
	}
}

// The final checkpoint (the head alone, as CheckpointProtocol serves it)
// makes the model only if it hashes to the paid final: a provider that
// serves another head gains nothing, and nothing is written.
func TestVerifyFinetuneCheckpoint(t *testing.T) {
	base := ftModel(t)
	dir := t.TempDir()
	ts, err := train.ReadCheckpoint(base, train.SetHead)
	if err != nil {
		t.Fatal(err)
	}
	head := func(at int) []train.Tensor {
		out := make([]train.Tensor, len(ts))
		for i, x := range ts {
			x.Data = bytes.Clone(x.Data)
			if x.Name == "output_norm.weight" {
				x.Data[at] ^= 0x01
			}
			out[i] = x
		}
		return out
	}
	trained := head(4)
	final, _ := train.HashTensors(trained)
	good, bad := filepath.Join(dir, "good.ckpt"), filepath.Join(dir, "bad.ckpt")
	if err := train.WriteCheckpoint(good, trained); err != nil {
		t.Fatal(err)
	}
	if err := train.WriteCheckpoint(bad, head(8)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "model.gguf")
	for _, c := range []struct{ name, ckpt, want string }{
		{"another head", bad, "the job paid for final hash"},
		{"the base model's head", base, "the job paid for final hash"},
		{"not a checkpoint", filepath.Join(dir, "none"), "not a trained head"},
	} {
		if err := VerifyFinetuneCheckpoint(base, c.ckpt, types.Hash(final), out); !errors.Is(err, ErrModelRefused) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want a refusal mentioning %q", c.name, err, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("%s: written (%v)", c.name, err)
		}
	}
	if err := VerifyFinetuneCheckpoint(base, good, types.Hash(final), out); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "want.gguf")
	if err := train.WriteModel(base, want, trained); err != nil {
		t.Fatal(err)
	}
	if same, err := sameFile(out, want); err != nil || !same {
		t.Fatalf("the model is not the base with the checkpoint's head (%v)", err)
	}
}
