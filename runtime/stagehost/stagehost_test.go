package stagehost

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ogpu-network/ogpu/runtime/llm"
)

func TestMain(m *testing.M) {
	MaybeServe()
	os.Exit(m.Run())
}

func modelPath(t testing.TB) string {
	dir := os.Getenv("OGPU_MODELS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "models")
	}
	p := filepath.Join(dir, "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("stories260K.gguf is not in %s (set OGPU_MODELS): %v", dir, err)
	}
	return p
}

var opts = llm.Options{Threads: 1, ContextSize: 256, BatchSize: 64}

// slices2 cuts stories260K at layer 3.
func slices2(t *testing.T) []llm.SliceFile {
	r, err := llm.Cuts(5, 2, []int{3})
	if err != nil {
		t.Fatal(err)
	}
	files, err := llm.WriteSlices(modelPath(t), t.TempDir(), r)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// whole is the whole model's greedy generation.
func whole(t *testing.T, n int) *llm.Output {
	m, err := llm.Load(modelPath(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out, err := m.Generate(context.Background(), llm.Request{Prompt: "Once upon a time", MaxTokens: n}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// run generates through workers, calling hook before each decode step.
func run(t *testing.T, ws []*Worker, prompt []int, n int, hook func(step int)) ([]int, error) {
	forward := func(pos0 int, toks []int) (int, error) {
		out, err := ws[0].Forward(pos0, toks, nil)
		if err != nil {
			return 0, err
		}
		for _, w := range ws[1:] {
			if out, err = w.Forward(pos0, nil, out.Rows); err != nil {
				return 0, err
			}
		}
		return out.Token, nil
	}
	tok, err := forward(0, prompt)
	if err != nil {
		return nil, err
	}
	got := []int{tok}
	for len(got) < n {
		if hook != nil {
			hook(len(got))
		}
		if tok, err = forward(len(prompt)+len(got)-1, []int{tok}); err != nil {
			return got, err
		}
		got = append(got, tok)
	}
	return got, nil
}

func start(t *testing.T, f llm.SliceFile) *Worker {
	w, err := Start(Config{Slice: f.Path, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestWorkerEqualsWhole: stages in supervised worker processes give the
// whole model's tokens.
func TestWorkerEqualsWhole(t *testing.T) {
	want := whole(t, 30)
	files := slices2(t)
	ws := []*Worker{start(t, files[0]), start(t, files[1])}
	if i := ws[0].Info(); !i.First() || i.Last() || i.NEmbd != 64 || i.From != 0 || i.To != 3 {
		t.Fatalf("stage 0 info %+v", i)
	}
	got, err := run(t, ws, want.PromptTokens, 30, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want.Tokens) {
		t.Fatalf("got %v\nwant %v", got, want.Tokens)
	}
	// A bad frame is an error, not a crash: the worker still serves.
	bad := make([]float32, 64)
	bad[3] = float32(math.NaN())
	if _, err := ws[1].Forward(100, nil, bad); err == nil || !strings.Contains(err.Error(), "must be finite") {
		t.Fatalf("NaN frame: %v", err)
	}
	if ws[1].Restarts() != 0 {
		t.Fatal("a refused frame restarted the worker")
	}
}

// TestWorkerAbortSupervised: a worker killed by SIGABRT (what llama.cpp's
// GGML_ABORT does) mid-generation gives a clear error, not a dead
// provider; after Reset a fresh worker replays the transcript and the
// generation ends with the whole model's tokens.
func TestWorkerAbortSupervised(t *testing.T) {
	want := whole(t, 30)
	files := slices2(t)
	ws := []*Worker{start(t, files[0]), start(t, files[1])}
	got, err := run(t, ws, want.PromptTokens, 30, func(step int) {
		if step == 12 {
			syscall.Kill(ws[1].Pid(), syscall.SIGABRT)
		}
	})
	if !errors.Is(err, ErrWorkerDied) || !strings.Contains(err.Error(), "SIGABRT") {
		t.Fatalf("after SIGABRT: %v", err)
	}
	if _, err := ws[1].Forward(0, nil, make([]float32, 64)); !errors.Is(err, ErrWorkerDied) {
		t.Fatalf("a dead worker answered: %v", err)
	}
	// Replay: both stages restart at 0 with the tokens so far.
	for _, w := range ws {
		if err := w.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	if ws[1].Restarts() != 1 || ws[0].Restarts() != 0 {
		t.Fatalf("restarts %d, %d", ws[0].Restarts(), ws[1].Restarts())
	}
	prefix := append(slices.Clone(want.PromptTokens), got...)
	rest, err := run(t, ws, prefix, 30-len(got), nil)
	if err != nil {
		t.Fatal(err)
	}
	if all := append(got, rest...); !slices.Equal(all, want.Tokens) {
		t.Fatalf("after replay: %v\nwant %v", all, want.Tokens)
	}
}

// TestWorkerStartErrors: a missing or corrupt slice is reported by Start.
func TestWorkerStartErrors(t *testing.T) {
	if _, err := Start(Config{Slice: filepath.Join(t.TempDir(), "none.gguf"), Options: opts}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing slice: %v", err)
	}
	files := slices2(t)
	data, _ := os.ReadFile(files[1].Path)
	p := filepath.Join(t.TempDir(), "short.gguf")
	os.WriteFile(p, data[:len(data)/2], 0o644)
	if _, err := Start(Config{Slice: p, Options: opts}); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated slice: %v", err)
	}
	if _, err := Start(Config{Slice: files[0].Path, Options: llm.Options{}}); err == nil || !strings.Contains(err.Error(), "threads") {
		t.Fatalf("no threads: %v", err)
	}
}
