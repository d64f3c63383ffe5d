package llm

import (
	"context"
	"fmt"
	"testing"
	"time"
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

// BenchmarkSplitDecode runs one greedy generation of benchTokens tokens
// through the whole model as one stage, and through 2 (cut 3) and 3 (cuts
// 2, 4) stages in one process, one thread each: the compute cost of a
// split, without transport. It reports time to first token (prefill of the
// prompt and the first token) and decode tokens/s separately, and the bytes
// a hop carries per decoded token (a row of f32).
func BenchmarkSplitDecode(b *testing.B) {
	o := Options{Threads: 1, ContextSize: 512}
	for _, c := range []struct {
		name string
		at   []int
	}{{"whole", nil}, {"stages2", []int{3}}, {"stages3", []int{2, 4}}} {
		b.Run(c.name, func(b *testing.B) {
			var stages []*Stage
			if c.at == nil {
				s, err := LoadStage(modelPath(b), o)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(s.Close)
				stages = []*Stage{s}
			} else {
				stages = loadStages(b, splitModel(b, c.at...), o)
			}
			toks := []int{1, 403, 407, 261, 378} // "Once upon a time"
			var ttft, decode time.Duration
			var decoded int
			for b.Loop() {
				p := newPipeline(b, stages)
				start := time.Now()
				out, err := p.step(0, toks)
				if err != nil {
					b.Fatal(err)
				}
				ttft += time.Since(start)
				start = time.Now()
				for pos := len(toks); pos < len(toks)+benchTokens-1; pos++ {
					if out, err = p.step(pos, []int{out.Token}); err != nil {
						b.Fatal(err)
					}
					decoded++
				}
				decode += time.Since(start)
				for _, ss := range p.sessions {
					ss.Close()
				}
			}
			b.ReportMetric(float64(ttft.Microseconds())/float64(b.N), "ttft-µs")
			b.ReportMetric(float64(decoded)/decode.Seconds(), "tokens/s")
			b.ReportMetric(float64(decode.Microseconds())/float64(decoded), "µs/token")
			b.ReportMetric(float64(4*stages[0].NEmbd()), "hop-bytes/token")
		})
	}
}
