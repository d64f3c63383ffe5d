package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// wire types as a client reads them (independent of the server's).
type wireUsage struct {
	PromptTokens     uint64      `json:"prompt_tokens"`
	CompletionTokens uint64      `json:"completion_tokens"`
	TotalTokens      uint64      `json:"total_tokens"`
	Cost             json.Number `json:"cost"`
}

type wireOgpu struct {
	Mode              string   `json:"mode"`
	Job               uint64   `json:"job"`
	Providers         []string `json:"providers"`
	StreamedFrom      string   `json:"streamed_from"`
	UnitPrice         string   `json:"unit_price"`
	PriceUnit         string   `json:"price_unit"`
	Charged           string   `json:"charged"`
	ChargedOGPU       string   `json:"charged_ogpu"`
	Paid              string   `json:"paid"`
	ValidatorFee      string   `json:"validator_fee"`
	TxFee             string   `json:"tx_fee"`
	Compensated       string   `json:"compensated"`
	Verified          bool     `json:"verified"`
	Overruled         bool     `json:"overruled"`
	Outcome           string   `json:"outcome"`
	Decoding          string   `json:"decoding"`
	IgnoredParameters []string `json:"ignored_parameters"`
	Template          string   `json:"template"`
	MaxCharge         string   `json:"max_charge_ogpu"`
}

type wireChoice struct {
	Index   int `json:"index"`
	Message *struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	Delta *struct {
		Role    string  `json:"role"`
		Content *string `json:"content"`
	} `json:"delta"`
	Text         *string `json:"text"`
	FinishReason *string `json:"finish_reason"`
}

type wireAnswer struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []wireChoice `json:"choices"`
	Usage             *wireUsage   `json:"usage"`
	Ogpu              *wireOgpu    `json:"ogpu"`
	Error             *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

func u256(t *testing.T, s string) *uint256.Int {
	t.Helper()
	v, err := uint256.FromDecimal(s)
	if err != nil {
		t.Fatalf("amount %q: %v", s, err)
	}
	return v
}

// checkReceipt checks that an answer's money adds up: charged = paid +
// validator fee + tx fee, usage.cost is charged in oGPU, and the client's
// balance moved by exactly charged − compensation.
func checkReceipt(t *testing.T, a *wireAnswer, before, after *uint256.Int) {
	t.Helper()
	o := a.Ogpu
	if o == nil || a.Usage == nil {
		t.Fatalf("answer without ogpu or usage: %+v", a)
	}
	charged := u256(t, o.Charged)
	sum := new(uint256.Int).Add(u256(t, o.Paid), u256(t, o.ValidatorFee))
	sum.Add(sum, u256(t, o.TxFee))
	if !sum.Eq(charged) || charged.IsZero() || u256(t, o.TxFee).IsZero() {
		t.Fatalf("charged %s != paid %s + validator fee %s + tx fee %s", o.Charged, o.Paid, o.ValidatorFee, o.TxFee)
	}
	if !mustAmount(t, string(a.Usage.Cost)).Eq(charged) || o.ChargedOGPU != string(a.Usage.Cost) {
		t.Fatalf("usage.cost %s, charged %s (%s oGPU)", a.Usage.Cost, o.Charged, o.ChargedOGPU)
	}
	if before != nil {
		spent := sub(before, after)
		want := sub(charged, u256(t, o.Compensated))
		if !spent.Eq(want) {
			t.Fatalf("the balance moved by %s, the receipt says %s", types.FormatAmount(spent), types.FormatAmount(want))
		}
	}
}

// streamed is a parsed chat or completion stream.
type streamed struct {
	roleFirst bool
	text      string
	finish    string
	final     *wireAnswer // the chunk with finish_reason
	usage     *wireUsage
	errCode   string
	errOgpu   *wireOgpu
	done      bool
	comments  []string
	chunks    int
}

func parseStream(t *testing.T, evs []sseEvent) streamed {
	t.Helper()
	var s streamed
	for i, ev := range evs {
		if ev.comment != "" {
			s.comments = append(s.comments, ev.comment)
			continue
		}
		if s.done {
			t.Fatalf("event after [DONE]: %q", ev.data)
		}
		if ev.data == "[DONE]" {
			s.done = true
			continue
		}
		var a wireAnswer
		if err := json.Unmarshal([]byte(ev.data), &a); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, ev.data)
		}
		if a.Error != nil {
			s.errCode, s.errOgpu = a.Error.Code, a.Ogpu
			continue
		}
		s.chunks++
		if a.SystemFingerprint != SystemFingerprint {
			t.Fatalf("chunk without the greedy fingerprint: %s", ev.data)
		}
		if len(a.Choices) == 0 {
			if a.Usage == nil {
				t.Fatalf("a chunk with no choices and no usage: %s", ev.data)
			}
			s.usage = a.Usage
			continue
		}
		c := a.Choices[0]
		if s.chunks == 1 && c.Delta != nil && c.Delta.Role == "assistant" {
			s.roleFirst = true
		}
		if c.Delta != nil && c.Delta.Content != nil {
			s.text += *c.Delta.Content
		}
		if c.Text != nil {
			s.text += *c.Text
		}
		if c.FinishReason != nil {
			s.finish, s.final = *c.FinishReason, &a
		}
	}
	return s
}

// TestGatewayJobMode drives the gateway over HTTP against a real chain,
// two provider agents running llama.cpp, and the wallet's client agent:
// the model list, chat and text completions with and without streaming,
// stop sequences, and every answer's receipt checked against the chain
// to the base unit.
func TestGatewayJobMode(t *testing.T) {
	n := newTestNet(t, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	g := n.gateway(n.config(t.TempDir()), n.client, n.jobConfig())
	me := n.client.Address()

	t.Run("models", func(t *testing.T) {
		var list struct {
			Object string `json:"object"`
			Data   []struct {
				ID            string `json:"id"`
				Object        string `json:"object"`
				ContextLength uint64 `json:"context_length"`
				Ogpu          struct {
					Hash      string `json:"hash"`
					Providers int    `json:"providers"`
					Template  string `json:"template"`
					Name      string `json:"general_name"`
				} `json:"ogpu"`
			} `json:"data"`
		}
		decode(t, g.call(t, "GET", "/v1/models", nil, nil), http.StatusOK, &list)
		if list.Object != "list" || len(list.Data) != 1 {
			t.Fatalf("models: %+v", list)
		}
		m := list.Data[0]
		// stories260K was trained with a 2048-token context; the test's
		// providers load 512 (the gateway's context length): the smaller
		// one is what a request can use.
		if m.ID != "stories260K" || m.Object != "model" || m.ContextLength != 512 || m.Ogpu.Hash != modelID(n.model) ||
			m.Ogpu.Providers != 2 || m.Ogpu.Template != TemplatePlain || m.Ogpu.Name != "llama" {
			t.Fatalf("model entry %+v", m)
		}
		var one struct {
			ID string `json:"id"`
		}
		decode(t, g.call(t, "GET", "/v1/models/"+modelID(n.model), nil, nil), http.StatusOK, &one)
		if one.ID != "stories260K" {
			t.Fatalf("GET /v1/models/sha256:… = %+v", one)
		}
	})

	var chatText string
	var chatJob uint64
	var total uint256.Int // what the requests charged
	t.Run("chat", func(t *testing.T) {
		before, jobs := n.balance(me), n.jobsOf(me)
		var a wireAnswer
		resp := g.call(t, "POST", "/v1/chat/completions", map[string]any{
			"model": "stories260K", "max_tokens": 24, "temperature": 0.7, "seed": 3,
			"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}},
		}, nil)
		decode(t, resp, http.StatusOK, &a)
		if resp.Header.Get("X-Should-Retry") != "false" || resp.Header.Get("X-Ogpu-Job") != strconv.FormatUint(a.Ogpu.Job, 10) {
			t.Fatalf("headers %v", resp.Header)
		}
		if a.Object != "chat.completion" || a.SystemFingerprint != "ogpu-greedy" || len(a.Choices) != 1 || a.Choices[0].Message == nil {
			t.Fatalf("answer %+v", a)
		}
		msg := a.Choices[0].Message
		o := a.Ogpu
		if msg.Role != "assistant" || msg.Content == "" || o.Mode != "job" || !o.Verified || o.Outcome != "agreed" || o.Decoding != "greedy" ||
			strings.Join(o.IgnoredParameters, ",") != "seed,temperature" || o.Template != TemplatePlain || len(o.Providers) != 2 || o.PriceUnit != "job" {
			t.Fatalf("answer %+v, ogpu %+v", msg, o)
		}
		// The text is what the chain settled on, fetched independently.
		if want := n.verifiedText(o.Job); msg.Content != want {
			t.Fatalf("content %q, verified %q", msg.Content, want)
		}
		// Prompt tokens counted with the model's tokenizer: BOS + 4.
		if a.Usage.PromptTokens != 5 || a.Usage.CompletionTokens != 24 || a.Usage.TotalTokens != 29 || *a.Choices[0].FinishReason != "length" {
			t.Fatalf("usage %+v, finish %s", a.Usage, *a.Choices[0].FinishReason)
		}
		checkReceipt(t, &a, before, n.balance(me))
		if got := n.jobsOf(me) - jobs; got != 1 {
			t.Fatalf("%d jobs posted for one request", got)
		}
		_, spent := g.ledger.spent()
		if !spent.Eq(u256(t, o.Charged)) {
			t.Fatalf("the ledger counts %s, the request charged %s", spent, o.Charged)
		}
		chatText, chatJob = msg.Content, o.Job
		total.Add(&total, u256(t, o.Charged))
	})

	t.Run("chat stream with usage", func(t *testing.T) {
		before := n.balance(me)
		resp := g.call(t, "POST", "/v1/chat/completions", map[string]any{
			"model": "stories260K", "max_completion_tokens": 24, "stream": true, "stream_options": map[string]any{"include_usage": true},
			"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}},
		}, nil)
		if resp.Header.Get("X-Should-Retry") != "false" || resp.Header.Get("X-Ogpu-Job") == "" {
			t.Fatalf("stream headers %v", resp.Header)
		}
		s := parseStream(t, readSSE(t, resp))
		// Greedy decoding: the same prompt streams the same text.
		if !s.roleFirst || !s.done || s.errCode != "" || s.text != chatText || s.finish != "length" || s.usage == nil || s.final.Ogpu == nil {
			t.Fatalf("stream %+v, want %q", s, chatText)
		}
		if s.chunks < 5 {
			t.Fatalf("%d chunks: the text did not stream token by token", s.chunks)
		}
		if !strings.HasPrefix(s.comments[0], "ogpu: posted job ") {
			t.Fatalf("comments %q", s.comments)
		}
		final := *s.final
		final.Usage = s.usage
		if s.usage.CompletionTokens != 24 || !final.Ogpu.Verified {
			t.Fatalf("usage %+v, ogpu %+v", s.usage, final.Ogpu)
		}
		checkReceipt(t, &final, before, n.balance(me))
		total.Add(&total, u256(t, final.Ogpu.Charged))
	})

	t.Run("stream without include_usage has no usage chunk", func(t *testing.T) {
		resp := g.call(t, "POST", "/v1/completions", map[string]any{
			"model": modelID(n.model), "prompt": "Once upon a time", "max_tokens": 24, "stream": true, "stop": []string{"."},
		}, nil)
		s := parseStream(t, readSSE(t, resp))
		want, _ := cutAtStop(chatText, []string{"."})
		if s.roleFirst || !s.done || s.usage != nil || s.text != want || s.final == nil {
			t.Fatalf("stream %+v, want text %q", s, want)
		}
		if strings.Contains(chatText, ".") && s.finish != "stop" {
			t.Fatalf("finish %q after a stop sequence", s.finish)
		}
		total.Add(&total, u256(t, s.final.Ogpu.Charged))
	})

	t.Run("text completion with stop", func(t *testing.T) {
		var a wireAnswer
		decode(t, g.call(t, "POST", "/v1/completions", map[string]any{
			"model": "stories260K", "prompt": []string{"Once upon a time"}, "max_tokens": 24, "stop": "e",
		}, nil), http.StatusOK, &a)
		i := strings.Index(chatText, "e")
		if i < 0 || a.Object != "text_completion" || len(a.Choices) != 1 || a.Choices[0].Text == nil ||
			*a.Choices[0].Text != chatText[:i] || *a.Choices[0].FinishReason != "stop" || a.Usage.CompletionTokens != 24 {
			t.Fatalf("answer %+v, want %q", a, chatText[:i])
		}
		checkReceipt(t, &a, nil, nil)
		total.Add(&total, u256(t, a.Ogpu.Charged))
	})

	t.Run("ledger adds up", func(t *testing.T) {
		// Four requests, four jobs: the ledger holds exactly what they
		// charged (no reservation left), and so does the file.
		_, spent := g.ledger.spent()
		if !spent.Eq(&total) || n.jobsOf(me) != 4 {
			t.Fatalf("ledger %s, the answers charged %s; %d jobs", spent, &total, n.jobsOf(me))
		}
		l, err := openLedger(g.cfg.LedgerFile, g.cfg.MaxPerRequest, g.cfg.BudgetPerDay, g.now)
		if err != nil || !l.state.Spent.Eq(&total) {
			t.Fatalf("ledger file: %+v, %v", l, err)
		}
	})

	t.Run("job lookup", func(t *testing.T) {
		var v struct {
			Job      uint64 `json:"job"`
			State    string `json:"state"`
			Verified bool   `json:"verified"`
			Text     string `json:"text"`
		}
		decode(t, g.call(t, "GET", "/v1/ogpu/jobs/"+strconv.FormatUint(chatJob, 10), nil, nil), http.StatusOK, &v)
		if v.State != "completed" || !v.Verified || v.Text != chatText {
			t.Fatalf("job %d: %+v", chatJob, v)
		}
		wantError(t, g.call(t, "GET", "/v1/ogpu/jobs/999", nil, nil), http.StatusNotFound, "job_not_found", false)
	})

}

// TestGatewayStreamOverruled: the cheapest provider wins first place, so
// its tokens are streamed, and it lies in what it commits (the devnet
// liar streams the honest tokens, then changes one in its result). The
// other replica disagrees, the validator re-generates, and the liar is
// overruled and slashed. The stream sent nothing wrong, so it completes
// with the verified text, says the streamed replica was overruled, and
// the client's compensation shows in the receipt; a non-streaming request
// then gets the honest replicas' verified text. (A stream whose text
// differs from the verified one ends with result_overruled:
// TestStreamReconcile.)
func TestGatewayStreamOverruled(t *testing.T) {
	n := newTestNet(t, true)
	liar := n.provider("prov1", 30, true)
	n.provider("prov2", 50, false)
	n.provider("prov3", 60, false)
	g := n.gateway(n.config(t.TempDir()), n.client, n.jobConfig())
	me, liarAddr := n.client.Address(), liar.agent.Address()

	before := n.balance(me)
	s := parseStream(t, readSSE(t, g.call(t, "POST", "/v1/chat/completions", with(storyChat, "stream", true, "stream_options", map[string]any{"include_usage": true}), nil)))
	if s.errCode != "" || !s.done || s.final == nil {
		t.Fatalf("stream %+v", s)
	}
	o := s.final.Ogpu
	if !o.Overruled || !o.Verified || o.Outcome != "verdict" || !strings.EqualFold(o.StreamedFrom, liarAddr.Hex()) {
		t.Fatalf("ogpu %+v, liar %s", o, liarAddr.Hex())
	}
	if verified := n.verifiedText(o.Job); s.text != verified {
		t.Fatalf("streamed %q, verified %q", s.text, verified)
	}
	final := *s.final
	final.Usage = s.usage
	checkReceipt(t, &final, before, n.balance(me))
	if u256(t, o.Compensated).IsZero() {
		t.Fatal("the client was not compensated from the liar's slash")
	}
	pv, err := n.c.Provider(n.ctx, liarAddr)
	if err != nil || !pv.Tombstoned {
		t.Fatalf("the liar is not tombstoned: %+v %v", pv, err)
	}
	var a wireAnswer
	decode(t, g.call(t, "POST", "/v1/chat/completions", storyChat, nil), http.StatusOK, &a)
	if a.Choices[0].Message.Content != s.text || !a.Ogpu.Verified || a.Ogpu.Overruled || a.Ogpu.Outcome != "agreed" {
		t.Fatalf("non-streaming: %q %+v, want %q", a.Choices[0].Message.Content, a.Ogpu, s.text)
	}
}

// dieOnFirstToken runs a backend and kills a provider when the first
// streamed token reaches the gateway; the tokens the dead provider's
// stream still had buffered are dropped, as a broken connection loses
// them.
type dieOnFirstToken struct {
	Backend
	once sync.Once
	kill func()
}

func (d *dieOnFirstToken) Generate(ctx context.Context, req *Request, ev Events) (*Result, error) {
	token := ev.Token
	ev.Token = func(piece string) {
		first := false
		d.once.Do(func() { first = true; d.kill() })
		if first && token != nil {
			token(piece)
		}
	}
	return d.Backend.Generate(ctx, req, ev)
}

// TestGatewayStreamProviderDies: the provider whose tokens are streamed
// dies as its first token arrives. Its slot goes to the backup bidder at
// the commit deadline (a no-show), the other replicas agree, and the
// stream goes on from the verified text: the client gets the whole verified
// answer, and pays for the replicas that worked.
func TestGatewayStreamProviderDies(t *testing.T) {
	n := newTestNet(t, false)
	first := n.provider("prov1", 30, false) // cheapest: first winner, streamed
	n.provider("prov2", 50, false)
	n.provider("prov3", 60, false) // the backup
	jc := n.jobConfig()
	jc.Windows.Execute = 10
	b, err := NewJobBackend(n.client, jc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := n.config(t.TempDir())
	s, err := New(cfg, n.c, n.client.Store, &dieOnFirstToken{Backend: b, kill: func() {
		first.cancel()
		_ = first.host.Close()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	g := &testGateway{Server: s, url: srv.URL}

	st := parseStream(t, readSSE(t, g.call(t, "POST", "/v1/chat/completions", with(storyChat, "stream", true), nil)))
	// The role, the one token streamed live, the rest from the verified
	// text, the finish.
	if st.errCode != "" || !st.done || st.final == nil || st.chunks != 4 {
		t.Fatalf("stream %+v", st)
	}
	o := st.final.Ogpu
	if v := n.verifiedText(o.Job); st.text != v || !o.Verified || !strings.EqualFold(o.StreamedFrom, first.agent.Address().Hex()) {
		t.Fatalf("streamed %q, verified %q; ogpu %+v", st.text, v, o)
	}
	for _, p := range o.Providers {
		if strings.EqualFold(p, first.agent.Address().Hex()) {
			t.Fatalf("the dead provider still holds a slot: %v", o.Providers)
		}
	}
	t.Logf("streamed from %s until it died; the rest came from the verified text of %v (%s)", o.StreamedFrom, o.Providers, o.Outcome)
}
