package gateway

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/types"
)

// scrapeSeries GETs a /metrics URL and returns every sample by series.
func scrapeSeries(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out, err := metrics.Scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGatewayMetrics: a real gateway in job mode on a real chain with two
// llama.cpp providers, wrapped as `ogpu gateway --metrics.laddr` wraps
// it: one streamed chat request and one bad URL move the request
// counters, the TTFT histogram (once: the role event sent at dispatch is
// not the first token) and the spent counter by what the answer said it
// cost.
func TestGatewayMetrics(t *testing.T) {
	n := newTestNet(t, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	cfg := n.config(t.TempDir())
	if _, err := metrics.Gateway(http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	cfg.Wrap = func(h http.Handler) http.Handler { w, _ := metrics.Gateway(h); return w }
	cfg.OnSpent = metrics.AddGatewaySpent
	g := n.gateway(cfg, n.client, n.jobConfig())
	ms := httptest.NewServer(metrics.Handler())
	defer ms.Close()

	before := scrapeSeries(t, ms.URL)
	resp := g.call(t, "POST", "/v1/chat/completions", map[string]any{
		"model": "stories260K", "max_tokens": 16, "stream": true, "stream_options": map[string]any{"include_usage": true},
		"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}},
	}, nil)
	s := parseStream(t, readSSE(t, resp))
	if !s.done || s.errCode != "" || s.final == nil || s.final.Ogpu == nil {
		t.Fatalf("stream %+v", s)
	}
	g.call(t, "GET", "/v1/no/such/thing", nil, nil).Body.Close()
	after := scrapeSeries(t, ms.URL)
	delta := func(k string) float64 { return after[k] - before[k] }
	for k, want := range map[string]float64{
		`ogpu_gateway_requests_total{code="200",endpoint="/v1/chat/completions",mode="job"}`:         1,
		`ogpu_gateway_requests_total{code="404",endpoint="other",mode="none"}`:                       1,
		`ogpu_gateway_time_to_first_token_seconds_count{endpoint="/v1/chat/completions",mode="job"}`: 1,
		`ogpu_gateway_request_duration_seconds_count{endpoint="/v1/chat/completions",mode="job"}`:    1,
	} {
		if got := delta(k); got != want {
			t.Errorf("%s moved by %v, want %v", k, got, want)
		}
	}
	ttft := delta(`ogpu_gateway_time_to_first_token_seconds_sum{endpoint="/v1/chat/completions",mode="job"}`)
	dur := delta(`ogpu_gateway_request_duration_seconds_sum{endpoint="/v1/chat/completions",mode="job"}`)
	if ttft <= 0 || ttft > dur {
		t.Errorf("TTFT %v s, request %v s: want 0 < TTFT <= duration", ttft, dur)
	}
	charged := u256(t, s.final.Ogpu.Charged)
	if charged.IsZero() {
		t.Fatal("a paid request charged nothing")
	}
	want, _ := strconv.ParseFloat(strings.TrimSuffix(types.FormatAmount(charged), types.Denom), 64)
	if spent := delta("ogpu_gateway_spent_ogpu_total"); math.Abs(spent-want) > 1e-9*want {
		t.Errorf("spent moved by %v oGPU, the answer charged %v", spent, want)
	}
}

// TestGatewaySessionMetrics: a real gateway in session mode on a real
// chain with two llama.cpp providers, its open sessions watched as
// `ogpu gateway --metrics.laddr` watches them: none before the first
// request, the one it opened while it serves (one request in mode
// session), none once it stopped and closed it on chain.
func TestGatewaySessionMetrics(t *testing.T) {
	n := newTestNet(t, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	dir := t.TempDir()
	cfg := n.config(dir)
	if _, err := metrics.Gateway(http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	cfg.Wrap = func(h http.Handler) http.Handler { w, _ := metrics.Gateway(h); return w }
	g, _ := n.sessionGateway(cfg, n.sessionConfig(dir), false)
	metrics.WatchGatewaySessions(func() int { return len(g.b.Sessions()) })
	defer metrics.WatchGatewaySessions(nil)
	ms := httptest.NewServer(metrics.Handler())
	defer ms.Close()

	const open = "ogpu_gateway_sessions_open"
	before := scrapeSeries(t, ms.URL)
	if before[open] != 0 {
		t.Fatalf("%s = %v before any request", open, before[open])
	}
	var chat sessionAnswer
	decode(t, g.call(t, "POST", "/v1/chat/completions", storyChat, nil), 200, &chat)
	if chat.Ogpu == nil || chat.Ogpu.Session == "" {
		t.Fatalf("answer %+v: not served by a session", chat.Ogpu)
	}
	during := scrapeSeries(t, ms.URL)
	if got, want := during[open], float64(len(g.b.Sessions())); got != 1 || got != want {
		t.Errorf("%s = %v while serving, the backend holds %v, want 1", open, got, want)
	}
	const served = `ogpu_gateway_requests_total{code="200",endpoint="/v1/chat/completions",mode="session"}`
	if got := during[served] - before[served]; got != 1 {
		t.Errorf("%s moved by %v, want 1", served, got)
	}
	id, err := strconv.ParseUint(chat.Ogpu.Session, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	g.stop()
	if got := scrapeSeries(t, ms.URL)[open]; got != 0 {
		t.Errorf("%s = %v after the gateway stopped", open, got)
	}
	if v, err := n.c.Session(n.ctx, id); err != nil || !v.Closed {
		t.Errorf("session %d after the gateway stopped: %+v %v", id, v, err)
	}
}
