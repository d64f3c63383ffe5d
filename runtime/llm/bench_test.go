package llm

import (
	"context"
	"fmt"
	"testing"
)

// benchTokens is the output length of both benchmarks, so that
// BenchmarkVerify / BenchmarkGenerate is the cost of checking an output
// relative to producing it.
const benchTokens = 256

// benchThreads are the thread counts benchmarked: 1 and DefaultThreads().
func benchThreads() []int {
	if d := DefaultThreads(); d != 1 {
		return []int{1, d}
	}
	return []int{1}
}

func BenchmarkGenerate(b *testing.B) {
	for _, threads := range benchThreads() {
		b.Run(fmt.Sprintf("t%d", threads), func(b *testing.B) {
			m := loadModel(b, Options{Threads: threads, ContextSize: 512})
			req := Request{Prompt: prompt, MaxTokens: benchTokens}
			n := 0
			for b.Loop() {
				out, err := m.Generate(context.Background(), req, nil)
				if err != nil {
					b.Fatal(err)
				}
				n += len(out.Tokens)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, threads := range benchThreads() {
		b.Run(fmt.Sprintf("t%d", threads), func(b *testing.B) {
			m := loadModel(b, Options{Threads: threads, ContextSize: 512})
			out := greedy(b, m, benchTokens)
			n := 0
			for b.Loop() {
				mm, err := m.Verify(context.Background(), out.PromptTokens, out.Tokens, benchTokens)
				if err != nil || mm != nil {
					b.Fatal(mm, err)
				}
				n += len(out.Tokens)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
