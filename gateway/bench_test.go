package gateway

import (
	"bufio"
	"context"
	"encoding/json"
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
		b.Fatalf("status %d", resp.StatusCode)
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
// loopback libp2p, the gateway over loopback HTTP. The sessions are
// opened before the clock starts; a job's first token waits for its
// auction (1 + bid 4 + reveal 3 blocks). Metrics: ttft-ms, tok/s (after
// the first token), first-event-ms (the gateway's first SSE event: the
// request admitted and dispatched), and for the gateway modes tok/s-ratio
// and ttft-over-direct-ms against the direct figure.
func BenchmarkGatewaySession(b *testing.B) {
	n := newTestNet(b, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	m, err := llm.Load(n.modelPath, n.lo)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	// The direct figure, measured once beside the others.
	var ds []genTiming
	for range 5 {
		ds = append(ds, directTiming(b, m))
	}
	var direct genTiming
	for _, d := range ds[1:] {
		direct.first += d.first
		direct.last += d.last
		direct.tokens += d.tokens
	}
	direct.first /= time.Duration(len(ds) - 1)
	direct.last /= time.Duration(len(ds) - 1)
	direct.tokens /= len(ds) - 1

	b.Run("direct", func(b *testing.B) {
		var ts []genTiming
		for b.Loop() {
			ts = append(ts, directTiming(b, m))
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
			sc.Redundancy, sc.Budget = r, types.OGPU(150)
			g, _ := n.sessionGateway(n.config(dir), sc, false)
			streamTiming(b, g.testGateway) // opens the session
			var ts []genTiming
			for b.Loop() {
				ts = append(ts, streamTiming(b, g.testGateway))
			}
			report(b, ts, &direct)
			g.stop()
		})
	}
	b.Run("job", func(b *testing.B) {
		g := n.gateway(n.config(b.TempDir()), n.client, n.jobConfig())
		var ts []genTiming
		for b.Loop() {
			ts = append(ts, streamTiming(b, g))
		}
		report(b, ts, &direct)
		g.stop()
	})
}
