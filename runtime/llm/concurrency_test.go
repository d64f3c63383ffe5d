package llm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestConcurrentGenerationDeterministic: replicas of one determinism class
// must produce identical tokens, and in one process (the devnet, the agent
// tests, a provider serving several jobs) models generate at the same time.
// Two models loaded from the same file generate the same prompts at once,
// many times; every output must equal a model's sequential output. (Built
// for x86-64-v3, two agents in one process disagreed in 2 of 14 runs of an
// agent test; this isolates the runtime.)
func TestConcurrentGenerationDeterministic(t *testing.T) {
	o := Options{Threads: 1, ContextSize: 512}
	a, b := loadModel(t, o), loadModel(t, o)
	prompts := []string{"Once upon a time", "The little bear was sad because", "A boy found a shiny box", "Lily and Tom went to the park"}
	want := map[string][]int{}
	for _, p := range prompts {
		out, err := a.Generate(context.Background(), Request{Prompt: p, MaxTokens: 48}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[p] = out.Tokens
	}
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for r := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(prompts))
		for _, m := range []*Model{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range prompts {
					p := prompts[(i+r)%len(prompts)]
					out, err := m.Generate(context.Background(), Request{Prompt: p, MaxTokens: 48}, nil)
					if err != nil {
						errs <- err
						return
					}
					if !slices.Equal(out.Tokens, want[p]) {
						errs <- fmt.Errorf("round %d, prompt %q: tokens differ from the sequential run (class %s)", r, p, m.Class(Sampler{}))
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
	}
}

// TestGenerationIndependentOfHistory: a model's output for a prompt does
// not depend on what it generated before (its KV cache is reused between
// generations): each prompt, after every other prompt, equals its output on
// a fresh model.
func TestGenerationIndependentOfHistory(t *testing.T) {
	o := Options{Threads: 1, ContextSize: 512}
	prompts := []string{"Once upon a time", "The little bear was sad because", "A boy found a shiny box", "Lily and Tom went to the park"}
	fresh := map[string][]int{}
	for _, p := range prompts {
		m := loadModel(t, o)
		out, err := m.Generate(context.Background(), Request{Prompt: p, MaxTokens: 48}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fresh[p] = out.Tokens
		m.Close()
	}
	m := loadModel(t, o)
	for _, before := range prompts {
		for _, p := range prompts {
			if _, err := m.Generate(context.Background(), Request{Prompt: before, MaxTokens: 48}, nil); err != nil {
				t.Fatal(err)
			}
			out, err := m.Generate(context.Background(), Request{Prompt: p, MaxTokens: 48}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Tokens, fresh[p]) {
				t.Errorf("%q after %q differs from a fresh model's (class %s)", p, before, m.Class(Sampler{}))
			}
		}
	}
}
