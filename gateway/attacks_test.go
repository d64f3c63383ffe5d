package gateway

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/types"
)

var storyChat = map[string]any{
	"model": "stories260K", "max_tokens": 16,
	"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}},
}

func with(base map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// rawPost posts body as is with the given content type and headers.
func (g *testGateway) rawPost(t *testing.T, path, contentType string, body []byte, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", g.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.Key())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestGatewayAttacks: who gains by breaking each rule, refused with the
// error a client can act on, and nothing posted or spent. A web page the
// user visits (wrong key, foreign Host after DNS rebinding, a form post
// skipping the CORS preflight, a cross-origin read), a client asking for
// more than the caps or its balance allow, requests the gateway cannot
// honour, and a retried request that must not pay twice.
func TestGatewayAttacks(t *testing.T) {
	n := newTestNet(t, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	dir := t.TempDir()
	g := n.gateway(n.config(dir), n.client, n.jobConfig())
	me := n.client.Address()
	body := []byte(`{"model":"stories260K","max_tokens":16,"messages":[{"role":"user","content":"Once upon a time"}]}`)

	// nothingSpent runs f and checks that no job was posted, the balance
	// did not move and the ledger counts nothing more.
	nothingSpent := func(t *testing.T, f func()) {
		t.Helper()
		bal, jobs := n.balance(me), n.jobsOf(me)
		_, spent := g.ledger.spent()
		f()
		_, spent2 := g.ledger.spent()
		if n.jobsOf(me) != jobs || !n.balance(me).Eq(bal) || !spent2.Eq(spent) {
			t.Fatalf("something was spent: jobs %d -> %d, balance %s -> %s, ledger %s -> %s", jobs, n.jobsOf(me), bal, n.balance(me), spent, spent2)
		}
	}

	t.Run("wrong key", func(t *testing.T) {
		nothingSpent(t, func() {
			for _, auth := range []string{"", "Bearer ogpu-gw-guess", "Bearer " + g.Key() + "x", "Basic " + g.Key(), g.Key()} {
				req, _ := http.NewRequest("POST", g.url+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				wantError(t, resp, http.StatusUnauthorized, CodeInvalidAPIKey, false)
			}
			req, _ := http.NewRequest("GET", g.url+"/v1/models", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			wantError(t, resp, http.StatusUnauthorized, CodeInvalidAPIKey, false)
		})
	})

	t.Run("foreign Host header (DNS rebinding)", func(t *testing.T) {
		nothingSpent(t, func() {
			for _, host := range []string{"evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io", "0.0.0.0:8080"} {
				resp := g.rawPost(t, "/v1/chat/completions", "application/json", body, map[string]string{"Host": host})
				wantError(t, resp, http.StatusForbidden, CodeHostNotAllowed, false)
			}
			// An empty Host (HTTP/1.0) is refused too.
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
			req.Host = ""
			req.Header.Set("Authorization", "Bearer "+g.Key())
			req.Header.Set("Content-Type", "application/json")
			g.ServeHTTP(rec, req)
			if rec.Code != http.StatusForbidden {
				t.Fatalf("empty Host: %d", rec.Code)
			}
		})
		for _, host := range []string{"localhost", "LOCALHOST:1234", "127.0.0.1:9", "[::1]:8080", "localhost."} {
			resp := g.rawPost(t, "/v1/models", "", nil, map[string]string{"Host": host})
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed { // POST: past the Host check
				t.Fatalf("Host %q: %d", host, resp.StatusCode)
			}
		}
	})

	t.Run("form-encoded body (no CORS preflight)", func(t *testing.T) {
		nothingSpent(t, func() {
			for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x", ""} {
				resp := g.rawPost(t, "/v1/chat/completions", ct, body, nil)
				wantError(t, resp, http.StatusUnsupportedMediaType, CodeUnsupportedMedia, false)
			}
			resp := g.rawPost(t, "/v1/chat/completions", "application/x-www-form-urlencoded", []byte("model=stories260K&prompt=hi"), nil)
			wantError(t, resp, http.StatusUnsupportedMediaType, CodeUnsupportedMedia, false)
		})
		// application/json with a charset is JSON.
		resp := g.rawPost(t, "/v1/chat/completions", "application/json; charset=utf-8", []byte(`{`), nil)
		wantError(t, resp, http.StatusBadRequest, CodeInvalidJSON, false)
	})

	t.Run("no CORS for unconfigured origins", func(t *testing.T) {
		nothingSpent(t, func() {
			resp := g.rawPost(t, "/v1/chat/completions", "application/json", body, map[string]string{"Origin": "https://evil.example"})
			if resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Fatal("CORS header sent to an unconfigured origin")
			}
			wantError(t, resp, http.StatusForbidden, "origin_not_allowed", false)
			req, _ := http.NewRequest("OPTIONS", g.url+"/v1/chat/completions", nil)
			req.Header.Set("Origin", "https://evil.example")
			req.Header.Set("Access-Control-Request-Method", "POST")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Headers") != "" {
				t.Fatalf("preflight from an unconfigured origin: %d %v", resp.StatusCode, resp.Header)
			}
		})
		cfg := n.config(t.TempDir())
		cfg.CORSOrigins = []string{"http://localhost:3000"}
		g2 := n.gateway(cfg, n.client, n.jobConfig())
		req, _ := http.NewRequest("OPTIONS", g2.url+"/v1/chat/completions", nil)
		req.Header.Set("Origin", "http://localhost:3000")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
			t.Fatalf("preflight from a configured origin: %d %v", resp.StatusCode, resp.Header)
		}
	})

	t.Run("request over the per-request cap", func(t *testing.T) {
		cfg := n.config(t.TempDir())
		cfg.MaxPerRequest = types.OGPU(3) // 16 tokens at most cost 2 × (0.2 + 1.6) + fees
		g2 := n.gateway(cfg, n.client, n.jobConfig())
		nothingSpent(t, func() {
			e := wantError(t, g2.call(t, "POST", "/v1/chat/completions", storyChat, nil), http.StatusPaymentRequired, CodeBudgetExceeded, true)
			if !strings.Contains(e.Error.Message, "per-request cap of 3ogpu") {
				t.Fatalf("message %q", e.Error.Message)
			}
			_, spent := g2.ledger.spent()
			if !spent.IsZero() {
				t.Fatalf("ledger %s", spent)
			}
		})
		// Fewer tokens fit under the cap (not run here: admitted is enough).
		q, err := g2.backend.Quote(n.ctx, &Request{Model: n.model, Prompt: "Once upon a time", MaxTokens: 5})
		if err != nil || q.Gt(types.OGPU(3)) {
			t.Fatalf("quote for 5 tokens %s, %v", q, err)
		}
	})

	t.Run("unsupported and invalid requests", func(t *testing.T) {
		nothingSpent(t, func() {
			for _, tc := range []struct {
				name  string
				req   map[string]any
				param string
				code  string
			}{
				{"n=2", with(storyChat, "n", 2), "n", CodeUnsupportedParameter},
				{"tools", with(storyChat, "tools", []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}), "tools", CodeUnsupportedParameter},
				{"tool_choice", with(storyChat, "tool_choice", "required"), "tool_choice", CodeUnsupportedParameter},
				{"json mode", with(storyChat, "response_format", map[string]any{"type": "json_object"}), "response_format", CodeUnsupportedParameter},
				{"logprobs", with(storyChat, "logprobs", true), "logprobs", CodeUnsupportedParameter},
				{"logit_bias", with(storyChat, "logit_bias", map[string]any{"1": 5}), "logit_bias", CodeUnsupportedParameter},
				{"image", with(storyChat, "messages", []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "http://x"}}}}}), "messages[0].content", CodeUnsupportedParameter},
				{"tool message", with(storyChat, "messages", []any{map[string]any{"role": "tool", "content": "x", "tool_call_id": "1"}}), "messages[0].role", CodeUnsupportedParameter},
				{"no messages", with(storyChat, "messages", []any{}), "messages", CodeInvalidValue},
				{"bad role", with(storyChat, "messages", []any{map[string]any{"role": "root", "content": "x"}}), "messages[0].role", CodeInvalidValue},
				{"max_tokens 0", with(storyChat, "max_tokens", 0), "max_tokens", CodeInvalidValue},
				{"over the context", with(storyChat, "max_tokens", 600), "messages", CodeContextLength},
				{"five stops", with(storyChat, "stop", []string{"a", "b", "c", "d", "e"}), "stop", CodeInvalidValue},
				{"no model", with(storyChat, "model", ""), "model", CodeInvalidValue},
			} {
				t.Run(tc.name, func(t *testing.T) {
					e := wantError(t, g.call(t, "POST", "/v1/chat/completions", tc.req, nil), http.StatusBadRequest, tc.code, false)
					if e.Error.Param == nil || *e.Error.Param != tc.param {
						t.Fatalf("param %v, want %s (%s)", e.Error.Param, tc.param, e.Error.Message)
					}
				})
			}
			wantError(t, g.call(t, "POST", "/v1/completions", map[string]any{"model": "stories260K", "prompt": []int{1, 2}}, nil), http.StatusBadRequest, CodeInvalidValue, false)
			wantError(t, g.call(t, "POST", "/v1/completions", map[string]any{"model": "stories260K", "prompt": []string{"a", "b"}}, nil), http.StatusBadRequest, CodeUnsupportedParameter, false)
			wantError(t, g.call(t, "POST", "/v1/completions", map[string]any{"model": "stories260K", "prompt": "x", "echo": true}, nil), http.StatusBadRequest, CodeUnsupportedParameter, false)
			wantError(t, g.call(t, "GET", "/v1/chat/completions", nil, nil), http.StatusMethodNotAllowed, CodeMethodNotAllowed, false)
			wantError(t, g.call(t, "GET", "/v1/embeddings", nil, nil), http.StatusNotFound, CodeUnknownURL, false)
			big := bytes.Repeat([]byte("a"), DefaultMaxRequestBytes+1)
			wantError(t, g.rawPost(t, "/v1/completions", "application/json", big, nil), http.StatusRequestEntityTooLarge, CodeRequestTooLarge, false)
		})
	})

	t.Run("unknown model", func(t *testing.T) {
		nothingSpent(t, func() {
			wantError(t, g.call(t, "POST", "/v1/chat/completions", with(storyChat, "model", "gpt-4o"), nil), http.StatusNotFound, CodeModelNotFound, false)
			unserved := modelID(types.Hash{1, 2, 3})
			wantError(t, g.call(t, "POST", "/v1/chat/completions", with(storyChat, "model", unserved), nil), http.StatusNotFound, CodeModelNotFound, false)
			wantError(t, g.call(t, "GET", "/v1/models/gpt-4o", nil, nil), http.StatusNotFound, CodeModelNotFound, false)
		})
	})

	t.Run("not enough providers", func(t *testing.T) {
		jc := n.jobConfig()
		jc.Redundancy = 3
		g2 := n.gateway(n.config(t.TempDir()), n.client, jc)
		nothingSpent(t, func() {
			wantError(t, g2.call(t, "POST", "/v1/chat/completions", storyChat, nil), http.StatusServiceUnavailable, CodeNoProviders, true)
		})
	})

	t.Run("insufficient funds", func(t *testing.T) {
		poor := n.newClient("poor")
		g2 := n.gateway(n.config(t.TempDir()), poor, n.jobConfig())
		bal := n.balance(poor.Address())
		e := wantError(t, g2.call(t, "POST", "/v1/chat/completions", storyChat, nil), http.StatusPaymentRequired, CodeInsufficientFunds, true)
		if !strings.Contains(e.Error.Message, "holds 1ogpu") || n.jobsOf(poor.Address()) != 0 || !n.balance(poor.Address()).Eq(bal) {
			t.Fatalf("%q; jobs %d", e.Error.Message, n.jobsOf(poor.Address()))
		}
	})

	t.Run("a retried request does not pay twice", func(t *testing.T) {
		stream := []byte(`{"model":"stories260K","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"Once upon a time"}]}`)
		bal, jobs := n.balance(me), n.jobsOf(me)
		// The first attempt's client gives up as soon as the job is
		// posted (a timeout, a dropped connection), as the SDK does before
		// retrying.
		ctx, cancel := context.WithCancel(n.ctx)
		req, _ := http.NewRequestWithContext(ctx, "POST", g.url+"/v1/chat/completions", bytes.NewReader(stream))
		req.Header.Set("Authorization", "Bearer "+g.Key())
		req.Header.Set("Content-Type", "application/json")
		first, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if first.StatusCode != http.StatusOK || first.Header.Get("X-Should-Retry") != "false" {
			t.Fatalf("first attempt: %d %v", first.StatusCode, first.Header)
		}
		cancel()
		first.Body.Close()
		// The SDK retries anyway (say a proxy dropped the header): the same
		// body with its retry count joins the posted job.
		retry := readSSE(t, g.rawPost(t, "/v1/chat/completions", "application/json", stream, map[string]string{"X-Stainless-Retry-Count": "1"}))
		s := parseStream(t, retry)
		if !s.done || s.errCode != "" || s.text == "" || s.final.Ogpu == nil {
			t.Fatalf("retry: %+v", s)
		}
		// A second retry after the end replays the same answer.
		again := parseStream(t, readSSE(t, g.rawPost(t, "/v1/chat/completions", "application/json", stream, map[string]string{"X-Stainless-Retry-Count": "2"})))
		if again.text != s.text || again.final.ID != s.final.ID || again.final.Ogpu.Job != s.final.Ogpu.Job {
			t.Fatalf("second retry: %+v, first %+v", again.final, s.final)
		}
		if got := n.jobsOf(me) - jobs; got != 1 {
			t.Fatalf("%d jobs posted for one request and two retries", got)
		}
		charged := u256(t, s.final.Ogpu.Charged)
		if spent := sub(bal, n.balance(me)); !spent.Eq(charged) {
			t.Fatalf("paid %s, one request costs %s", spent, charged)
		}
		// An Idempotency-Key makes two requests one, without the SDK's header.
		key := map[string]string{"Idempotency-Key": "order-42"}
		var a1, a2 wireAnswer
		decode(t, g.rawPost(t, "/v1/chat/completions", "application/json", body, key), http.StatusOK, &a1)
		decode(t, g.rawPost(t, "/v1/chat/completions", "application/json", body, key), http.StatusOK, &a2)
		if a1.ID != a2.ID || a1.Ogpu.Job != a2.Ogpu.Job || n.jobsOf(me)-jobs != 2 {
			t.Fatalf("idempotency key: %s/%d and %s/%d; %d jobs", a1.ID, a1.Ogpu.Job, a2.ID, a2.Ogpu.Job, n.jobsOf(me)-jobs)
		}
	})

	t.Run("concurrency cap", func(t *testing.T) {
		cfg := n.config(t.TempDir())
		cfg.MaxConcurrent = 1
		g2 := n.gateway(cfg, n.client, n.jobConfig())
		jobs := n.jobsOf(me)
		first := g2.call(t, "POST", "/v1/chat/completions", with(storyChat, "stream", true), nil)
		defer first.Body.Close()
		resp := g2.call(t, "POST", "/v1/chat/completions", storyChat, nil)
		if resp.Header.Get("Retry-After") != "2" {
			t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
		}
		wantError(t, resp, http.StatusTooManyRequests, CodeConcurrencyLimit, false)
		if s := parseStream(t, readSSE(t, first)); !s.done {
			t.Fatalf("first: %+v", s)
		}
		if n.jobsOf(me)-jobs != 1 {
			t.Fatal("the refused request posted a job")
		}
	})

	t.Run("the day's budget is gone, across restarts", func(t *testing.T) {
		cfg := n.config(t.TempDir())
		b, err := NewJobBackend(n.client, n.jobConfig())
		if err != nil {
			t.Fatal(err)
		}
		worst, err := b.Quote(n.ctx, &Request{Model: n.model, ModelSize: n.modelSize, Prompt: "Once upon a time", MaxTokens: 16, PromptTokens: 5})
		if err != nil {
			t.Fatal(err)
		}
		// One request's worst case: the first fits, then what it cost stays
		// counted and the next worst case no longer does.
		cfg.BudgetPerDay = worst
		g2 := n.gateway(cfg, n.client, n.jobConfig())
		var a wireAnswer
		decode(t, g2.call(t, "POST", "/v1/chat/completions", storyChat, nil), http.StatusOK, &a)
		nothingSpent(t, func() {
			e := wantError(t, g2.call(t, "POST", "/v1/chat/completions", storyChat, nil), http.StatusPaymentRequired, CodeBudgetExceeded, true)
			if !strings.Contains(e.Error.Message, "day's budget") {
				t.Fatalf("message %q", e.Error.Message)
			}
		})
		g2.stop()
		g3 := n.gateway(cfg, n.client, n.jobConfig())
		wantError(t, g3.call(t, "POST", "/v1/chat/completions", storyChat, nil), http.StatusPaymentRequired, CodeBudgetExceeded, true)
		_, spent := g3.ledger.spent()
		if !spent.Eq(u256(t, a.Ogpu.Charged)) {
			t.Fatalf("restarted ledger %s, the request charged %s", spent, a.Ogpu.Charged)
		}
	})
}
