package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// benchPrompt and benchTokens are the request of BenchmarkGatewaySession,
// the same for every way of generating it.
const (
	benchPrompt = "Once upon a time"
	benchTokens = 128
)

// genTiming is one generation as the caller saw it: the first event
// (for the gateway, its first SSE event: the request was admitted and
// dispatched), the first token, the last token, and the tokens.
type genTiming struct {
	dispatch, first, last time.Duration
	tokens                int
}

// tokPerSec is the decoding rate after the first token.
func (g genTiming) tokPerSec() float64 {
	if g.tokens < 2 || g.last <= g.first {
		return 0
	}
	return float64(g.tokens-1) / (g.last - g.first).Seconds()
}

// streamTiming sends the benchmark request to the gateway, streamed, and
// times it from the POST.
func streamTiming(b *testing.B, g *testGateway) genTiming {
	b.Helper()
	body := map[string]any{"model": "stories260K", "max_tokens": benchTokens, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": benchPrompt}}}
	start := time.Now()
	resp := g.call(b, "POST", "/v1/chat/completions", body, nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		bz, _ := io.ReadAll(resp.Body)
		b.Fatalf("status %d: %s", resp.StatusCode, bz)
	}
	var tm genTiming
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if tm.dispatch == 0 {
			tm.dispatch = time.Since(start)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var a wireAnswer
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			b.Fatal(err)
		}
		if a.Error != nil {
			b.Fatalf("error event: %s", data)
		}
		if len(a.Choices) > 0 && a.Choices[0].Delta != nil && a.Choices[0].Delta.Content != nil && *a.Choices[0].Delta.Content != "" {
			at := time.Since(start)
			if tm.tokens == 0 {
				tm.first = at
			}
			tm.last = at
			tm.tokens++
		}
	}
	if !done || tm.tokens == 0 {
		b.Fatalf("stream ended without [DONE] or text (%d tokens): %v", tm.tokens, sc.Err())
	}
	return tm
}

// directTiming generates the benchmark request with llama.cpp directly,
// as the provider does (the same model, options and greedy decoding).
func directTiming(b *testing.B, m *llm.Model) genTiming {
	b.Helper()
	var tm genTiming
	start := time.Now()
	_, err := m.Generate(context.Background(), llm.Request{Prompt: benchPrompt, MaxTokens: benchTokens}, func(tok int, piece string) error {
		at := time.Since(start)
		if m.IsEOG(tok) {
			return nil
		}
		if tm.tokens == 0 {
			tm.first = at
		}
		tm.last = at
		tm.tokens++
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return tm
}

// directPair generates the benchmark request on two models at once, as
// two providers of an r = 2 session on this one machine do, and returns
// the first model's timing.
func directPair(b *testing.B, m1, m2 *llm.Model) genTiming {
	b.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = m2.Generate(context.Background(), llm.Request{Prompt: benchPrompt, MaxTokens: benchTokens}, func(int, string) error { return nil })
	}()
	tm := directTiming(b, m1)
	<-done
	return tm
}

// meanOf is the mean timing of ts (the first left out: warm-up).
func meanOf(ts []genTiming) genTiming {
	ts = ts[1:]
	var m genTiming
	for _, t := range ts {
		m.first += t.first
		m.last += t.last
		m.tokens += t.tokens
	}
	m.first /= time.Duration(len(ts))
	m.last /= time.Duration(len(ts))
	m.tokens /= len(ts)
	return m
}

// report reports the mean of timings, and its ratio to direct's.
func report(b *testing.B, ts []genTiming, direct *genTiming) genTiming {
	var sum genTiming
	var rate float64
	for _, t := range ts {
		sum.dispatch += t.dispatch
		sum.first += t.first
		sum.last += t.last
		sum.tokens += t.tokens
		rate += t.tokPerSec()
	}
	n := time.Duration(len(ts))
	mean := genTiming{dispatch: sum.dispatch / n, first: sum.first / n, last: sum.last / n, tokens: sum.tokens / len(ts)}
	tps := rate / float64(len(ts))
	b.ReportMetric(float64(mean.first.Microseconds())/1000, "ttft-ms")
	b.ReportMetric(tps, "tok/s")
	b.ReportMetric(float64(mean.tokens), "tokens")
	if mean.dispatch > 0 {
		b.ReportMetric(float64(mean.dispatch.Microseconds())/1000, "first-event-ms")
	}
	if direct != nil && direct.tokPerSec() > 0 {
		b.ReportMetric(tps/direct.tokPerSec(), "tok/s-ratio")
		b.ReportMetric(float64((mean.first-direct.first).Microseconds())/1000, "ttft-over-direct-ms")
	}
	return mean
}

// BenchmarkGatewaySession: time to first token and tokens/s of one
// streamed chat (benchPrompt, at most benchTokens tokens, stories260K)
// through the gateway in session mode with r = 1 and r = 2, against the
// same provider generating directly (llm.Model with the providers'
// options, in this process) and against job mode. One in-process chain
// at 200 ms blocks, two provider agents (one llama.cpp thread each) on
// loopback libp2p, the gateway over loopback HTTP. Each request through
// the gateway is paired with a direct generation right after it, under the
// same load (the machine is shared): two at once for session-r2 (its two
// providers share this machine's cores, as direct-pair measures), one
// otherwise; the ratios are of the means of the pairs. The sessions are
// opened before the clock starts; a job's first token waits for its
// auction (1 + bid 4 + reveal 3 blocks). Metrics: ttft-ms, tok/s (after
// the first token), first-event-ms (the gateway's first SSE event: the
// request admitted and dispatched), and for the gateway modes tok/s-ratio
// and ttft-over-direct-ms against the direct figure.
func BenchmarkGatewaySession(b *testing.B) {
	n := newTestNet(b, false)
	// Cheap providers (0.001 and 0.002 oGPU per token): the counts and
	// iterations of make bench must not drain the test accounts, nor a
	// session's budget (a renewal would run while the clock does).
	n.provider("prov1", 1, false)
	n.provider("prov2", 2, false)
	m, err := llm.Load(n.modelPath, n.lo)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	m2, err := llm.Load(n.modelPath, n.lo)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m2.Close)

	b.Run("direct", func(b *testing.B) {
		var ts []genTiming
		for b.Loop() {
			ts = append(ts, directTiming(b, m))
		}
		report(b, ts, nil)
	})
	b.Run("direct-pair", func(b *testing.B) {
		var ts []genTiming
		for b.Loop() {
			ts = append(ts, directPair(b, m, m2))
		}
		report(b, ts, nil)
	})
	for _, r := range []uint16{1, 2} {
		name := "session-r1"
		if r == 2 {
			name = "session-r2"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			sc := n.sessionConfig(dir)
			sc.Redundancy, sc.Budget, sc.MaxPrice = r, types.OGPU(50), milli(3)
			g, _ := n.sessionGateway(n.config(dir), sc, false)
			streamTiming(b, g.testGateway) // opens the session
			var ts, ds []genTiming
			for b.Loop() {
				ts = append(ts, streamTiming(b, g.testGateway))
				// The direct figure under the same load, right after.
				b.StopTimer()
				if r == 1 {
					ds = append(ds, directTiming(b, m))
				} else {
					ds = append(ds, directPair(b, m, m2))
				}
				b.StartTimer()
			}
			base := meanOf(append([]genTiming{{}}, ds...))
			report(b, ts, &base)
			g.stop()
		})
	}
	b.Run("job", func(b *testing.B) {
		// Caps a little above the providers' asks: with exactly r bidders a job
		// clears at the cap.
		jc := n.jobConfig()
		jc.MaxPriceBase, jc.MaxPricePerToken = milli(150), milli(3)
		g := n.gateway(n.config(b.TempDir()), n.client, jc)
		var ts, ds []genTiming
		for b.Loop() {
			ts = append(ts, streamTiming(b, g))
			b.StopTimer()
			ds = append(ds, directTiming(b, m))
			b.StartTimer()
		}
		base := meanOf(append([]genTiming{{}}, ds...))
		report(b, ts, &base)
		g.stop()
	})
}
