package llm

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

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

// testOptions are the options tests load with: one thread, so that the
// tests run fast on a busy machine.
var testOptions = Options{Threads: 1, ContextSize: 512}

func loadModel(t testing.TB, o Options) *Model {
	m, err := Load(modelPath(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

const prompt = "Once upon a time"

func greedy(t testing.TB, m *Model, maxTokens int) *Output {
	out, err := m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: maxTokens}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTokenize(t *testing.T) {
	m := loadModel(t, testOptions)
	toks, err := m.Tokenize(prompt)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) < 2 || toks[0] != 1 {
		t.Fatalf("tokens %v: want the beginning-of-sequence token 1 first", toks)
	}
	if got := m.Detokenize(toks[1:]); got != " "+prompt {
		t.Fatalf("Detokenize = %q, want %q", got, " "+prompt)
	}
	if m.Piece(2) != "</s>" || !m.IsEOG(2) || m.IsEOG(1) {
		t.Fatalf("token 2 is %q (EOG %v), token 1 EOG %v: want </s>, true, false", m.Piece(2), m.IsEOG(2), m.IsEOG(1))
	}
	for _, bad := range []int{-1, m.NumVocab(), 1 << 40} {
		if m.Piece(bad) != "" || m.IsEOG(bad) || m.Detokenize([]int{bad}) != "" {
			t.Fatalf("token %d outside the vocabulary gave a piece or EOG", bad)
		}
	}
}

func TestGenerateGreedy(t *testing.T) {
	m := loadModel(t, testOptions)
	var emitted []int
	var pieces strings.Builder
	out, err := m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 100}, func(tok int, piece string) error {
		emitted = append(emitted, tok)
		pieces.WriteString(piece)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Text, ", there was a little girl named Lily") {
		t.Fatalf("text %q: want the TinyStories opening \", there was a little girl named Lily\"", out.Text)
	}
	if len(out.Tokens) != 100 || out.StoppedOnEOG {
		t.Fatalf("%d tokens, stopped on EOG %v: want 100 tokens (stories260K does not emit </s> here)", len(out.Tokens), out.StoppedOnEOG)
	}
	if !slices.Equal(emitted, out.Tokens) || pieces.String() != out.Text {
		t.Fatalf("emit saw %v / %q, output is %v / %q", emitted, pieces.String(), out.Tokens, out.Text)
	}
	if got := m.Detokenize(out.Tokens); got != out.Text {
		t.Fatalf("Detokenize(Tokens) = %q, Text = %q", got, out.Text)
	}
	again := greedy(t, m, 100)
	if !slices.Equal(again.Tokens, out.Tokens) {
		t.Fatalf("second greedy generation differs:\n%v\n%v", out.Tokens, again.Tokens)
	}
	// Another batch size decodes the prompt differently but must agree
	// exactly on this model (and is another determinism class anyway).
	small := loadModel(t, Options{Threads: 1, BatchSize: 2, ContextSize: 512})
	if got := greedy(t, small, 100); !slices.Equal(got.Tokens, out.Tokens) {
		t.Fatalf("batch size 2 generated\n%v\nwant\n%v", got.Tokens, out.Tokens)
	}
}

func TestGenerateSeeded(t *testing.T) {
	m := loadModel(t, testOptions)
	gen := func(seed uint32) []int {
		out, err := m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 64, Sampler: Sampler{Temperature: 1, TopK: 40, TopP: 0.95, Seed: seed}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out.Tokens
	}
	a, b, c := gen(42), gen(42), gen(43)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 42 twice gave\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatalf("seeds 42 and 43 gave the same 64 tokens %v", a)
	}
	if slices.Equal(a, greedy(t, m, 64).Tokens) {
		t.Fatal("sampling at temperature 1 gave the greedy output")
	}
}

func TestGenerateStops(t *testing.T) {
	m := loadModel(t, testOptions)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	out, err := m.Generate(ctx, Request{Prompt: prompt, MaxTokens: 50}, func(int, string) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || out == nil || len(out.Tokens) != 3 {
		t.Fatalf("cancel after 3 tokens: err %v, output %+v", err, out)
	}
	if _, err := m.Generate(ctx, Request{Prompt: prompt, MaxTokens: 5}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: err %v", err)
	}

	stop := errors.New("enough")
	out, err = m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 50}, func(int, string) error { return stop })
	if !errors.Is(err, stop) || len(out.Tokens) != 1 {
		t.Fatalf("emit error: err %v, output %+v", err, out)
	}
	// The model is still usable after an aborted generation.
	if got := greedy(t, m, 10); got.Text[:10] != ", there wa" {
		t.Fatalf("after aborts: %q", got.Text)
	}
}

func TestGenerateErrors(t *testing.T) {
	m := loadModel(t, Options{Threads: 1, BatchSize: 16, ContextSize: 32})
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"context too small", Request{Prompt: prompt, MaxTokens: 30}, "exceed the context size 32"},
		{"long prompt", Request{Prompt: strings.Repeat("Once upon a time ", 20), MaxTokens: 1}, "exceed the context size 32"},
		{"no tokens", Request{Prompt: prompt}, "max tokens 0"},
		{"negative temperature", Request{Prompt: prompt, MaxTokens: 5, Sampler: Sampler{Temperature: -1}}, "temperature"},
		{"random seed", Request{Prompt: prompt, MaxTokens: 5, Sampler: Sampler{Temperature: 1, Seed: 0xFFFFFFFF}}, "random seed"},
		{"top_p", Request{Prompt: prompt, MaxTokens: 5, Sampler: Sampler{Temperature: 1, TopP: 2}}, "top_p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Generate(context.Background(), tc.req, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if out, err := m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 27}, nil); err != nil || len(out.Tokens) != 27 {
		t.Fatalf("prompt + max tokens = context size: %v", err)
	}
}

func TestVerify(t *testing.T) {
	m := loadModel(t, Options{Threads: 1, BatchSize: 32, ContextSize: 512})
	const maxTok = 80
	out := greedy(t, m, maxTok)
	ctx := context.Background()
	with := func(k, tok int) []int {
		c := slices.Clone(out.Tokens)
		c[k] = tok
		return c
	}
	for _, tc := range []struct {
		name    string
		claimed []int
		max     int
		want    *Mismatch // nil: verified
	}{
		{"honest", out.Tokens, maxTok, nil},
		{"honest prefix at its own max", out.Tokens[:40], 40, nil},
		{"tampered first", with(0, 0), maxTok, &Mismatch{Index: 0, Claimed: 0, Expected: out.Tokens[0]}},
		{"tampered middle", with(37, 0), maxTok, &Mismatch{Index: 37, Claimed: 0, Expected: out.Tokens[37]}},
		{"tampered last", with(maxTok-1, 0), maxTok, &Mismatch{Index: maxTok - 1, Claimed: 0, Expected: out.Tokens[maxTok-1]}},
		{"stopped early", out.Tokens[:50], maxTok, &Mismatch{Index: 50, Claimed: -1, Expected: out.Tokens[50]}},
		{"empty", nil, maxTok, &Mismatch{Index: 0, Claimed: -1, Expected: out.Tokens[0]}},
		{"longer than max", out.Tokens, 60, &Mismatch{Index: 60, Claimed: out.Tokens[60], Expected: -1}},
		{"token after EOG", append(slices.Clone(out.Tokens[:10]), 2, out.Tokens[10]), maxTok, &Mismatch{Index: 10, Claimed: 2, Expected: out.Tokens[10]}},
		{"outside the vocabulary", with(20, 9999), maxTok, &Mismatch{Index: 20, Claimed: 9999, Expected: out.Tokens[20]}},
		{"negative id", with(5, -7), maxTok, &Mismatch{Index: 5, Claimed: -7, Expected: out.Tokens[5]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.Verify(ctx, out.PromptTokens, tc.claimed, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if got != nil {
					t.Fatalf("honest output refused: %s", got)
				}
				return
			}
			if got == nil {
				t.Fatal("verified a wrong output")
			}
			if got.Index != tc.want.Index || got.Claimed != tc.want.Claimed || got.Expected != tc.want.Expected {
				t.Fatalf("mismatch %+v, want %+v", *got, *tc.want)
			}
			if got.Expected >= 0 && got.ExpectedPiece != m.Piece(got.Expected) {
				t.Fatalf("expected piece %q, want %q", got.ExpectedPiece, m.Piece(got.Expected))
			}
		})
	}

	for _, tc := range []struct {
		name    string
		prompt  []int
		claimed []int
		max     int
		want    string
	}{
		{"no prompt", nil, out.Tokens, maxTok, "no prompt tokens"},
		{"bad prompt token", []int{1, 100000}, out.Tokens, maxTok, "outside the vocabulary"},
		{"zero max", out.PromptTokens, out.Tokens, 0, "max tokens 0"},
		{"context", out.PromptTokens, slices.Repeat(out.Tokens, 10), 1000, "exceed the context size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.Verify(ctx, tc.prompt, tc.claimed, tc.max); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Verify(cancelled, out.PromptTokens, out.Tokens, maxTok); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestVerifyRandomTampering changes one random token of an honest output
// many times; every change to a token far below the greedy choice is caught
// at its index.
func TestVerifyRandomTampering(t *testing.T) {
	m := loadModel(t, testOptions)
	out := greedy(t, m, 64)
	rng := rand.New(rand.NewPCG(1, 2))
	caught := 0
	for range 40 {
		k, tok := rng.IntN(len(out.Tokens)), rng.IntN(m.NumVocab())
		if tok == out.Tokens[k] {
			continue
		}
		c := slices.Clone(out.Tokens)
		c[k] = tok
		got, err := m.Verify(context.Background(), out.PromptTokens, c, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			// Only a near tie within VerifyTolerance may pass; none is
			// this close at random on this output.
			t.Fatalf("tampering token %d with %d passed", k, tok)
		}
		if got.Index != k || got.Expected != out.Tokens[k] {
			t.Fatalf("tampering token %d: mismatch %+v", k, *got)
		}
		caught++
	}
	if caught < 30 {
		t.Fatalf("only %d tamperings tried", caught)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	model, err := os.ReadFile(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	random := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name string
		path string
		o    Options
		want string
	}{
		{"missing", filepath.Join(dir, "nope.gguf"), testOptions, "does not exist"},
		{"directory", dir, testOptions, "not a regular file"},
		{"empty", write("empty.gguf", nil), testOptions, "is empty"},
		{"random bytes", write("random.gguf", random), testOptions, "not a GGUF file"},
		{"wrong magic", write("magic.gguf", append([]byte("GGML"), model[4:]...)), testOptions, `starts with "GGML"`},
		{"truncated half", write("half.gguf", model[:len(model)/2]), testOptions, "is truncated: 592688 bytes, the header describes at least 1185376"},
		{"truncated header", write("head.gguf", model[:1000]), testOptions, "is truncated: 1000 bytes, its GGUF header ends early"},
		{"one byte short", write("short.gguf", model[:len(model)-1]), testOptions, "is truncated"},
		{"gguf but not a model", write("tiny.gguf", tinyGGUF()), testOptions, "cannot load model"},
		{"no threads", modelPath(t), Options{}, "threads 0"},
		{"batch beyond context", modelPath(t), Options{Threads: 1, BatchSize: 64, ContextSize: 32}, "exceeds the context size"},
		{"negative gpu layers", modelPath(t), Options{Threads: 1, GPULayers: -1}, "gpu layers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(tc.path, tc.o)
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestClass(t *testing.T) {
	m := loadModel(t, testOptions)
	want := "llama.cpp/ollama-v0.9.6/cpu"
	if c := m.Class(Sampler{}); !strings.HasPrefix(c, want) || !strings.HasSuffix(c, "/t1/b512/greedy") {
		t.Fatalf("class %q, want %s[+features]/<arch>/t1/b512/greedy", c, want)
	}
	// The CPU backend's feature list is read (every build has llamafile);
	// the stock build has no SIMD flags beyond the baseline.
	if f := ggmlCPUFeatures(); f["llamafile"] != "1" {
		t.Fatalf("ggml CPU features %v: want llamafile=1", f)
	}
	t.Logf("class %s, ggml CPU features %v", m.Class(Sampler{}), ggmlCPUFeatures())
	classes := map[string]bool{}
	for _, o := range []Options{{Threads: 1}, {Threads: 2}, {Threads: 1, BatchSize: 64}} {
		mm := loadModel(t, o)
		for _, s := range []Sampler{{}, {Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 42}, {Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 43}} {
			classes[mm.Class(s)] = true
		}
	}
	if len(classes) != 9 {
		t.Fatalf("%d distinct classes, want 9: %v", len(classes), classes)
	}
}

func TestSamplerString(t *testing.T) {
	for _, tc := range []struct {
		s    Sampler
		want string
	}{
		{Sampler{}, "greedy"},
		{Sampler{TopK: 40, Seed: 9}, "greedy"},
		{Sampler{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 42}, "temp=0.8,top_k=40,top_p=0.9,seed=42"},
		{Sampler{Temperature: 1, Seed: 1}, "temp=1,top_k=0,top_p=1,seed=1"},
		{Sampler{Temperature: 1, TopP: 1, Seed: 1}, "temp=1,top_k=0,top_p=1,seed=1"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestContextLayout(t *testing.T) {
	// Fails loudly if a new ollama version moves the C pointers that
	// contextPtr and modelPtr read.
	if err := checkContextLayout(); err != nil {
		t.Fatal(err)
	}
	m := loadModel(t, testOptions)
	if err := checkContext(m.lctx, m.lm); err != nil {
		t.Fatal(err)
	}
	if n := contextSize(m.lctx); n < 512 {
		t.Fatalf("llama_n_ctx = %d, want >= 512", n)
	}
}

func TestConcurrentUse(t *testing.T) {
	m := loadModel(t, testOptions)
	want := greedy(t, m, 40)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 4 {
		wg.Go(func() {
			out, err := m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 40}, nil)
			if err != nil {
				errs <- err
				return
			}
			if !slices.Equal(out.Tokens, want.Tokens) {
				errs <- errors.New("concurrent generation differs")
			}
			if mm, err := m.Verify(context.Background(), out.PromptTokens, out.Tokens, 40); err != nil || mm != nil {
				errs <- errors.Join(err, errors.New("concurrent verify failed"))
			}
			_ = m.Piece(out.Tokens[i])
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClosed(t *testing.T) {
	m, err := Load(modelPath(t), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	out := greedy(t, m, 5)
	m.Close()
	m.Close()
	if _, err := m.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 5}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Generate after Close: %v", err)
	}
	if _, err := m.Verify(context.Background(), out.PromptTokens, out.Tokens, 5); !errors.Is(err, ErrClosed) {
		t.Fatalf("Verify after Close: %v", err)
	}
	if _, err := m.Tokenize("x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Tokenize after Close: %v", err)
	}
	if m.Detokenize(out.Tokens) != out.Text || !m.IsEOG(2) {
		t.Fatal("the vocabulary tables do not outlive Close")
	}
}

func TestMeasureTPS(t *testing.T) {
	m := loadModel(t, testOptions)
	tps, err := MeasureTPS(context.Background(), m, 64)
	if err != nil || tps <= 0 {
		t.Fatalf("tps %v, err %v", tps, err)
	}
	if _, err := MeasureTPS(context.Background(), m, 0); err == nil {
		t.Fatal("0 tokens measured")
	}
	if _, err := MeasureTPS(context.Background(), m, 600); err == nil || !strings.Contains(err.Error(), "context size") {
		t.Fatalf("600 tokens in a 512 context: %v", err)
	}
}
