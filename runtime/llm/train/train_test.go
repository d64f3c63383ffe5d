package train

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/runtime/llm"
)

func TestMain(m *testing.M) {
	MaybeWorker()
	os.Exit(m.Run())
}

// modelPath finds stories260K.gguf in $OGPU_MODELS or <repo>/../shared/models.
func modelPath(t testing.TB) string {
	dir := os.Getenv("OGPU_MODELS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "shared", "models")
	}
	p := filepath.Join(dir, "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("stories260K.gguf is not in %s (set OGPU_MODELS to the folder holding it): %v", dir, err)
	}
	return p
}

// ziggy is a small text that repeats a distinctive phrase.
func ziggy(stories int) []byte {
	names := []string{"Lily", "Tom", "Sue", "Ben", "Anna", "Max", "Mia", "Sam"}
	var b strings.Builder
	for i := range stories {
		n := names[i%len(names)]
		b.WriteString("Once upon a time, there was a purple dragon named Ziggy. " + n + " met Ziggy in the park. Ziggy smiled and said, \"I love blue pancakes!\" " + n + " laughed and they were happy.\n")
	}
	return []byte(b.String())
}

func params(t testing.TB, stories, epochs int) Params {
	return Params{Model: modelPath(t), Data: ziggy(stories), Epochs: epochs, LRMicro: 3000, NCtx: 64, Stride: 32, Seed: 7, Trainable: SetHead, Threads: 1}
}

// run runs p in a worker and fails the test on error.
func run(t *testing.T, p Params, o *Options) *Result {
	t.Helper()
	res, err := Run(context.Background(), p, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hashes) != res.Steps+1 || res.Final != res.Hashes[res.Steps] {
		t.Fatalf("%d hashes for %d steps", len(res.Hashes), res.Steps)
	}
	return res
}

// greedy generates from prompt with the model at path (runtime/llm).
func greedy(t *testing.T, path, prompt string) string {
	t.Helper()
	m, err := llm.Load(path, llm.Options{Threads: 1, ContextSize: 256, BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out, err := m.Generate(context.Background(), llm.Request{Prompt: prompt, MaxTokens: 40}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out.Text
}

// The model learns the dataset's phrase: the validation loss falls by more
// than half, and greedy generation, which never says "Ziggy" before,
// says it after. Leaves 0 and N are the base and the saved model's tensors.
func TestLearnsThePhrase(t *testing.T) {
	p := params(t, 12, 3)
	p.Validation = 2
	const prompt = "Once upon a time, there was a"
	before := greedy(t, p.Model, prompt)
	if strings.Contains(before, "Ziggy") {
		t.Fatalf("the base model already says Ziggy: %q", before)
	}
	var epochs []Progress
	res := run(t, p, &Options{Progress: func(pr Progress) {
		if pr.Step == 0 {
			epochs = append(epochs, pr)
		}
	}})
	if pl, err := PlanJob(p); err != nil || pl != res.Plan {
		t.Fatalf("PlanJob %+v (%v), the run's plan %+v", pl, err, res.Plan)
	}
	t.Logf("%d steps; epoch losses %.3f; validation %.3f", res.Steps, res.EpochLoss, res.ValLoss)
	if len(res.ValLoss) != p.Epochs+1 || len(epochs) != p.Epochs || epochs[p.Epochs-1].ValLoss != res.ValLoss[p.Epochs] {
		t.Fatalf("validation losses %v, epoch progress %+v", res.ValLoss, epochs)
	}
	if first, last := res.ValLoss[0], res.ValLoss[p.Epochs]; !(last < first/2) {
		t.Fatalf("validation loss %.3f -> %.3f: want it to fall by more than half", first, last)
	}
	after := greedy(t, res.Model, prompt)
	t.Logf("before %q\nafter  %q", before, after)
	if !strings.Contains(after, "Ziggy") {
		t.Fatalf("the fine-tuned model does not say Ziggy: %q", after)
	}
	if h, err := HashCheckpoint(p.Model, p.Trainable); err != nil || h != res.Hashes[0] {
		t.Fatalf("leaf 0 %s, the base model's trained tensors %s (%v)", res.Hashes[0], h, err)
	}
	if h, err := HashCheckpoint(res.Model, p.Trainable); err != nil || h != res.Final {
		t.Fatalf("leaf N %s, the saved model's trained tensors %s (%v)", res.Final, h, err)
	}
	// The fine-tuned file is the base file with the head's bytes replaced:
	// its metadata (context_length 2048, not the training n_ctx) is the
	// base's.
	base, err := os.ReadFile(p.Model)
	if err != nil {
		t.Fatal(err)
	}
	tuned, err := os.ReadFile(res.Model)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := llm.ListTensors(p.Model)
	if err != nil {
		t.Fatal(err)
	}
	if len(base) != len(tuned) {
		t.Fatalf("the fine-tuned file is %d bytes, the base %d", len(tuned), len(base))
	}
	changed := 0
	for _, ti := range infos {
		r := base[ti.Offset : ti.Offset+ti.Size]
		if !bytes.Equal(r, tuned[ti.Offset:ti.Offset+ti.Size]) {
			if ti.Name != "output.weight" && ti.Name != "output_norm.weight" {
				t.Fatalf("tensor %s changed", ti.Name)
			}
			changed++
		}
		copy(tuned[ti.Offset:], r)
	}
	if changed != 2 || !bytes.Equal(base, tuned) {
		t.Fatalf("%d trained tensors changed; the rest of the file equal: %v", changed, bytes.Equal(base, tuned))
	}
}

// Two workers, one with 1 thread and one with 2, give the same N+1 hashes,
// byte-identical trained tensors and byte-identical model files; another seed or learning rate gives
// other hashes (the hashes do depend on the job).
func TestThreadsDoNotMatter(t *testing.T) {
	p := params(t, 4, 2)
	a := run(t, p, nil)
	p.Threads = 2
	b := run(t, p, nil)
	if !slices.Equal(a.Hashes, b.Hashes) {
		for k := range a.Hashes {
			if k >= len(b.Hashes) || a.Hashes[k] != b.Hashes[k] {
				t.Fatalf("1 vs 2 threads: hashes differ first at step %d of %d", k, a.Steps)
			}
		}
	}
	ta, err := ReadCheckpoint(a.Model, SetHead)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := ReadCheckpoint(b.Model, SetHead)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ta {
		if !bytes.Equal(ta[i].Data, tb[i].Data) {
			t.Fatalf("tensor %s differs between the two workers", ta[i].Name)
		}
	}
	// Within one build the saver is deterministic too: the two files are
	// byte-identical.
	fa, err := os.ReadFile(a.Model)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.ReadFile(b.Model)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fa, fb) {
		t.Fatal("the two workers saved different model files")
	}
	// Golden values pin the scheme: leaf 0 is the base file's data (any
	// build); the training hashes hold for the stock build's class ("cpu":
	// ggml without SIMD flags), and a change of anything that reaches them
	// (step scheme, data order, hash encoding, optimizer) must change
	// Version.
	if want := "56340d385ef27417c89c6e510933eb6131fcc303df52a801dfe03d306fe0da32"; a.Hashes[0].String() != want {
		t.Errorf("leaf 0 %s, want %s", a.Hashes[0], want)
	}
	if llm.Backend() == "cpu" {
		if want := "601edd349c0965a627024bdf6fdaf5f95a9e05bb1282c49545471e785a189f50"; a.Steps != 18 || a.Final.String() != want {
			t.Errorf("%d steps, final %s: want 18 steps and %s in class %s", a.Steps, a.Final, want, p.Class())
		}
	}
	p.Threads, p.Seed = 1, 8
	c := run(t, p, nil)
	if c.Hashes[0] != a.Hashes[0] || c.Hashes[1] == a.Hashes[1] && c.Final == a.Final {
		t.Fatalf("seed 7 and 8: leaf 0 %s/%s, final %s/%s: want the same base and different training", a.Hashes[0], c.Hashes[0], a.Final, c.Final)
	}
	p.Seed, p.LRMicro = 7, 2000
	d := run(t, p, nil)
	if d.Hashes[1] == a.Hashes[1] {
		t.Fatal("lr 2e-3 and 3e-3 give the same step 1")
	}
}

// A validator re-executes step k alone from the checkpoint after step k-1
// and gets exactly h_k; from the wrong checkpoint (a liar's step k-2
// claimed as k-1) its Before hash exposes the mismatch.
func TestRunStepReplaysOneStep(t *testing.T) {
	p := params(t, 4, 2)
	const k = 9
	dir := t.TempDir()
	res, err := Run(context.Background(), p, dir, &Options{Checkpoints: []int{k - 2, k - 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps < k+1 {
		t.Fatalf("only %d steps", res.Steps)
	}
	// A checkpoint holds only the trained tensors (4 B per trained
	// parameter plus a small header).
	if st, err := os.Stat(filepath.Join(dir, CheckpointFile(k-1))); err != nil || st.Size() > 132_000 {
		t.Fatalf("checkpoint file: %v, %v", st, err)
	}
	got, err := RunStep(context.Background(), p, filepath.Join(dir, CheckpointFile(k-1)), k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Before != res.Hashes[k-1] || got.After != res.Hashes[k] {
		t.Fatalf("step %d replayed: before %s after %s, want %s and %s", k, got.Before, got.After, res.Hashes[k-1], res.Hashes[k])
	}
	// Step 1 from the base model.
	first, err := RunStep(context.Background(), p, p.Model, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Before != res.Hashes[0] || first.After != res.Hashes[1] {
		t.Fatalf("step 1 from the base: %s -> %s, want %s -> %s", first.Before, first.After, res.Hashes[0], res.Hashes[1])
	}
	// The validator checks the checkpoint against the agreed h_{k-1} first.
	if err := VerifyCheckpoint(filepath.Join(dir, CheckpointFile(k-1)), p.Trainable, res.Hashes[k-1]); err != nil {
		t.Fatal(err)
	}
	if err := VerifyCheckpoint(filepath.Join(dir, CheckpointFile(k-2)), p.Trainable, res.Hashes[k-1]); !errors.Is(err, ErrCheckpointMismatch) {
		t.Fatalf("step %d's checkpoint offered as step %d's: %v", k-2, k-1, err)
	}
	wrong, err := RunStep(context.Background(), p, filepath.Join(dir, CheckpointFile(k-2)), k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if wrong.Before == res.Hashes[k-1] || wrong.After == res.Hashes[k] {
		t.Fatalf("a step %d checkpoint passed for step %d", k-2, k-1)
	}
	if _, err := RunStep(context.Background(), p, p.Model, res.Steps+1, nil); err == nil || !strings.Contains(err.Error(), "steps") {
		t.Fatalf("step beyond the job: %v", err)
	}

	// Given only step k's datapoint (no dataset), the validator gets h_k
	// too; a datapoint changed by one token gives another hash; a token
	// outside the vocabulary (which llama.cpp would abort on as a label) is
	// refused with an error.
	toks, err := StepTokens(p, k)
	if err != nil {
		t.Fatal(err)
	}
	q := p
	q.Data = nil
	ckpt := filepath.Join(dir, CheckpointFile(k-1))
	got, err = RunStepTokens(context.Background(), q, ckpt, k, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Before != res.Hashes[k-1] || got.After != res.Hashes[k] {
		t.Fatalf("step %d from its tokens: %s -> %s, want %s -> %s", k, got.Before, got.After, res.Hashes[k-1], res.Hashes[k])
	}
	v, err := llm.LoadVocab(p.Model)
	if err != nil {
		t.Fatal(err)
	}
	nv := int32(v.NumVocab())
	v.Close()
	bad := slices.Clone(toks)
	bad[len(bad)-1] = (bad[len(bad)-1] + 1) % nv
	if got, err := RunStepTokens(context.Background(), q, ckpt, k, bad, nil); err != nil || got.After == res.Hashes[k] {
		t.Fatalf("a changed label still gives h_k (%v)", err)
	}
	bad[len(bad)-1] = nv
	if _, err := RunStepTokens(context.Background(), q, ckpt, k, bad, nil); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") || !errors.Is(err, ErrBadInput) {
		t.Fatalf("label %d of a %d-token vocabulary: %v", nv, nv, err)
	}
	if _, err := RunStepTokens(context.Background(), q, ckpt, k, toks[1:], nil); err == nil || !strings.Contains(err.Error(), "n_ctx+1") {
		t.Fatalf("a short datapoint: %v", err)
	}
	if _, err := StepTokens(p, res.Steps+1); err == nil {
		t.Fatal("StepTokens beyond the job")
	}
}

// RunStep with Options.Save writes the checkpoint after the step: it
// hashes to h_k and has the very bytes Run's own checkpoint after step k
// has, so a provider that keeps every k-th checkpoint recomputes the
// others exactly; chained, the steps reproduce the run. A run without
// Save writes nothing.
func TestRunStepSaves(t *testing.T) {
	p := params(t, 4, 1)
	dir := t.TempDir()
	const k = 3
	res, err := Run(context.Background(), p, dir, &Options{Checkpoints: []int{k - 2, k}})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	prev := filepath.Join(dir, CheckpointFile(k-2))
	for j := k - 1; j <= k; j++ {
		save := filepath.Join(out, CheckpointFile(j))
		got, err := RunStep(context.Background(), p, prev, j, &Options{Save: save})
		if err != nil {
			t.Fatal(err)
		}
		if h, err := HashCheckpoint(save, p.Trainable); err != nil || h != got.After || h != res.Hashes[j] {
			t.Fatalf("step %d saved: %s (%v), reported %s, the run's %s", j, h, err, got.After, res.Hashes[j])
		}
		prev = save
	}
	want, err := os.ReadFile(filepath.Join(dir, CheckpointFile(k)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(prev); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the recomputed checkpoint after step %d differs from the run's (%v)", k, err)
	}
	toks, err := StepTokens(p, k)
	if err != nil {
		t.Fatal(err)
	}
	q := p
	q.Data = nil
	save := filepath.Join(out, "from-tokens.gguf")
	if _, err := RunStepTokens(context.Background(), q, filepath.Join(out, CheckpointFile(k-1)), k, toks, &Options{Save: save}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(save); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("RunStepTokens saved another checkpoint (%v)", err)
	}
	if _, err := RunStep(context.Background(), p, p.Model, 1, nil); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 3 {
		t.Fatalf("%d files in the output folder, want the 3 saved", len(ents))
	}
}
