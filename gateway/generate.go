package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/llm"
)

const (
	routeChat       = "chat"
	routeCompletion = "completion"
)

// maxStops is OpenAI's bound on stop sequences.
const maxStops = 4

// gen is one parsed generation request.
type gen struct {
	route        string
	modelName    string
	m            *model
	msgs         []llm.ChatMessage // chat
	prompt       string
	template     string
	promptTokens uint64
	estimated    bool
	maxTokens    uint64 // 0 until prepare: the default
	stops        []string
	stream       bool
	includeUsage bool
	ignored      []string
}

func decodeJSON(body []byte, v any) *Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return invalid("", CodeInvalidJSON, "the request body is not valid JSON for this endpoint: %v", err)
	}
	if dec.More() {
		return invalid("", CodeInvalidJSON, "the request body has data after the JSON object")
	}
	return nil
}

// set reports whether an optional raw field was given (not absent, not null).
func set(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// empty reports whether raw is absent, null, [] or {}.
func empty(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return !set(t) || bytes.Equal(t, []byte("[]")) || bytes.Equal(t, []byte("{}"))
}

func (c *common) check(g *gen) *Error {
	g.modelName, g.stream = c.Model, c.Stream
	g.includeUsage = c.Stream && c.StreamOptions != nil && c.StreamOptions.IncludeUsage
	if c.N != nil && *c.N != 1 {
		return unsupported("n", "one choice per request (decoding is greedy: n choices would be n identical answers); send separate requests")
	}
	if !empty(c.LogitBias) {
		return unsupported("logit_bias", "decoding is greedy over the model's own logits")
	}
	mt := c.MaxTokens
	param := "max_tokens"
	if c.MaxCompletionTokens != nil {
		mt, param = c.MaxCompletionTokens, "max_completion_tokens"
	}
	if mt != nil {
		if *mt < 1 {
			return invalid(param, CodeInvalidValue, "%s %d: want 1 or more", param, *mt)
		}
		g.maxTokens = uint64(*mt)
	}
	if len(c.Stop) > maxStops {
		return invalid("stop", CodeInvalidValue, "%d stop sequences: at most %d", len(c.Stop), maxStops)
	}
	for _, st := range c.Stop {
		if st == "" {
			return invalid("stop", CodeInvalidValue, "a stop sequence is empty")
		}
	}
	g.stops = c.Stop
	for name, raw := range map[string]json.RawMessage{"temperature": c.Temperature, "top_p": c.TopP, "seed": c.Seed,
		"presence_penalty": c.PresencePenalty, "frequency_penalty": c.FrequencyPenalty} {
		if set(raw) {
			g.ignored = append(g.ignored, name)
		}
	}
	slices.Sort(g.ignored)
	return nil
}

func parseChat(body []byte) (*gen, *Error) {
	var req chatRequest
	if e := decodeJSON(body, &req); e != nil {
		return nil, e
	}
	g := &gen{route: routeChat}
	if e := req.check(g); e != nil {
		return nil, e
	}
	switch {
	case !empty(req.Tools):
		return nil, unsupported("tools", "the models here generate text only (no tool calls)")
	case set(req.ToolChoice) && string(bytes.TrimSpace(req.ToolChoice)) != `"none"`:
		return nil, unsupported("tool_choice", "the models here generate text only (no tool calls)")
	case !empty(req.Functions) || set(req.FunctionCall):
		return nil, unsupported("functions", "the models here generate text only (no function calls)")
	case req.ResponseFormat != nil && req.ResponseFormat.Type != "" && req.ResponseFormat.Type != "text":
		return nil, unsupported("response_format", fmt.Sprintf("type %q cannot be enforced on a greedy job; only text", req.ResponseFormat.Type))
	case req.Logprobs != nil && *req.Logprobs || set(req.TopLogprobs):
		return nil, unsupported("logprobs", "jobs return tokens, not their probabilities")
	case set(req.Audio):
		return nil, unsupported("audio", "the models here read and write text only")
	case set(req.Modalities) && string(bytes.Join(bytes.Fields(req.Modalities), nil)) != `["text"]`:
		return nil, unsupported("modalities", "the models here read and write text only")
	case len(req.Messages) == 0:
		return nil, invalid("messages", CodeInvalidValue, "messages is empty: send at least one message")
	}
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		role := m.Role
		switch role {
		case "system", "user", "assistant":
		case "developer":
			role = "system"
		case "tool", "function":
			return nil, unsupported(param+".role", "tool results need tool calls, which the models here do not make")
		default:
			return nil, invalid(param+".role", CodeInvalidValue, "role %q: want system, developer, user or assistant", m.Role)
		}
		if !empty(m.ToolCalls) {
			return nil, unsupported(param+".tool_calls", "the models here make no tool calls")
		}
		if m.Content.Unsupported != "" {
			return nil, unsupported(param+".content", fmt.Sprintf("content parts of type %q: the models here read text only", m.Content.Unsupported))
		}
		g.msgs = append(g.msgs, llm.ChatMessage{Role: role, Content: m.Content.Text})
	}
	return g, nil
}

func parseCompletion(body []byte) (*gen, *Error) {
	var req completionRequest
	if e := decodeJSON(body, &req); e != nil {
		return nil, e
	}
	g := &gen{route: routeCompletion}
	if e := req.check(g); e != nil {
		return nil, e
	}
	switch {
	case req.Suffix != nil && *req.Suffix != "":
		return nil, unsupported("suffix", "insertion needs a fill-in-the-middle template")
	case req.Echo:
		return nil, unsupported("echo", "send the prompt back yourself")
	case req.BestOf != nil && *req.BestOf != 1:
		return nil, unsupported("best_of", "decoding is greedy: one candidate")
	case set(req.Logprobs):
		return nil, unsupported("logprobs", "jobs return tokens, not their probabilities")
	}
	var one string
	var many []json.RawMessage
	switch {
	case json.Unmarshal(req.Prompt, &one) == nil:
	case json.Unmarshal(req.Prompt, &many) == nil && len(many) > 0:
		for _, p := range many {
			var s string
			if json.Unmarshal(p, &s) != nil {
				return nil, invalid("prompt", CodeInvalidValue, "prompt: want a string or an array of strings (token arrays are not supported)")
			}
		}
		if len(many) > 1 {
			return nil, unsupported("prompt", "one prompt per request; send separate requests")
		}
		_ = json.Unmarshal(many[0], &one)
	default:
		return nil, invalid("prompt", CodeInvalidValue, "prompt: want a string")
	}
	g.prompt = one
	return g, nil
}

func contextError(ctxLen, prompt, completion uint64, estimated bool) *Error {
	how := "tokens"
	if estimated {
		how = "tokens at most (counted without the model's tokenizer)"
	}
	return invalid("messages", CodeContextLength, "this model's context is %d tokens, and the request needs %d: %d %s in the prompt, %d in the completion (lower max_tokens or shorten the prompt)",
		ctxLen, prompt+completion, prompt, how, completion)
}

// prepare resolves the model, renders the prompt and fixes max_tokens.
func (s *Server) prepare(g *gen) *Error {
	m, err := s.models.resolve(g.modelName)
	if err != nil {
		return err.(*Error)
	}
	g.m = m
	if g.route == routeChat {
		p, tmpl, err := s.models.render(m, g.msgs)
		if err != nil {
			return invalid("messages", CodeInvalidValue, "cannot render the chat with template %s: %v", s.models.templateName(m), err)
		}
		g.prompt, g.template = p, tmpl
	}
	switch {
	case g.prompt == "":
		return invalid("messages", CodeInvalidValue, "the prompt is empty")
	case len(g.prompt) > agent.MaxPromptBytes:
		return invalid("messages", CodeContextLength, "the prompt is %d bytes, at most %d", len(g.prompt), agent.MaxPromptBytes)
	case strings.IndexByte(g.prompt, 0) >= 0:
		return invalid("messages", CodeInvalidValue, "the prompt contains a NUL byte")
	}
	n, exact := s.models.countTokens(m, g.prompt)
	g.promptTokens, g.estimated = n, !exact
	ctxLen := s.models.contextLength(m)
	if g.maxTokens == 0 {
		if g.promptTokens >= ctxLen {
			return contextError(ctxLen, g.promptTokens, 1, g.estimated)
		}
		g.maxTokens = min(s.cfg.DefaultMaxTokens, ctxLen-g.promptTokens)
	}
	if g.promptTokens+g.maxTokens > ctxLen {
		return contextError(ctxLen, g.promptTokens, g.maxTokens, g.estimated)
	}
	return nil
}

// isRetry: the openai SDKs number their retries.
func isRetry(r *http.Request) bool {
	n, err := strconv.Atoi(r.Header.Get("X-Stainless-Retry-Count"))
	return err == nil && n > 0
}

func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request, route string) {
	body, e := s.readJSON(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	parse := parseChat
	if route == routeCompletion {
		parse = parseCompletion
	}
	g, e := parse(body)
	if e == nil {
		e = s.prepare(g)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	// A retry of a request that was posted replays its answer.
	idem := r.Header.Get("Idempotency-Key")
	print := bodyPrint(body)
	key := requestKey(route, idem, print)
	if isRetry(r) || idem != "" {
		if f := s.flights.join(key); f != nil {
			if f.print != print {
				writeError(w, &Error{Status: http.StatusConflict, Type: TypeInvalidRequest, Code: CodeIdempotencyReused, Param: "Idempotency-Key", NoRetry: true,
					Message: fmt.Sprintf("Idempotency-Key %q was used for another request in the last %s: send a new key for a new request", idem, s.cfg.RetryWindow)})
				return
			}
			s.log.Info("a retried request joins its first attempt instead of posting again", "route", route, "retry", r.Header.Get("X-Stainless-Retry-Count"))
			f.rec.replay(r.Context(), w, s.cfg.WriteTimeout)
			return
		}
	}
	select {
	case s.slots <- struct{}{}:
	default:
		writeError(w, &Error{Status: http.StatusTooManyRequests, Type: TypeRateLimit, Code: CodeConcurrencyLimit, RetryAfter: DefaultRetryAfter,
			Message: fmt.Sprintf("the gateway runs at most %d requests at once: retry shortly", s.cfg.MaxConcurrent)})
		return
	}
	release := func() { <-s.slots }
	req, quote, resv, e := s.admit(r.Context(), g)
	if e != nil {
		release()
		writeError(w, e)
		return
	}
	f := s.flights.add(key, print)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer release()
		s.run(f, g, req, quote, resv)
	}()
	f.rec.replay(r.Context(), w, s.cfg.WriteTimeout)
}

// admit checks that a provider serves the model, asks the backend for the
// worst case and reserves it against the caps.
func (s *Server) admit(ctx context.Context, g *gen) (*Request, *uint256.Int, *reservation, *Error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	served, err := s.models.isServed(ctx, g.m.Hash)
	if err != nil {
		return nil, nil, nil, s.chainError(err)
	}
	if !served {
		return nil, nil, nil, notFound(g.modelName, "no unjailed provider serves it")
	}
	if e := s.ledger.exhausted(); e != nil {
		// Nothing is left today: refuse before a backend opens a session
		// or prices a job.
		return nil, nil, nil, e
	}
	req := &Request{Model: g.m.Hash, ModelSize: g.m.Size, Prompt: g.prompt, MaxTokens: g.maxTokens, ModelFile: g.m.file}
	if !g.estimated {
		req.PromptTokens = g.promptTokens
	}
	quote, err := s.backend.Quote(ctx, req)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = s.chainError(err)
		}
		return nil, nil, nil, e
	}
	resv, err := s.ledger.reserve(quote)
	if err != nil {
		if a, ok := s.backend.(abandoner); ok {
			a.abandon(req)
		}
		return nil, nil, nil, err.(*Error)
	}
	return req, quote, resv, nil
}

// abandoner is a backend that reserved something in Quote for a request
// the server then refused (a spending cap).
type abandoner interface{ abandon(req *Request) }

// run does the work behind a flight and records its answer.
func (s *Server) run(f *flight, g *gen, req *Request, quote *uint256.Int, resv *reservation) {
	a := newAnswer(s, g, f.rec, quote)
	defer s.flights.end(f)
	defer f.rec.finish()
	ev := Events{
		Dispatched: func(d Dispatch) {
			s.flights.setDispatched(f)
			a.dispatched(d)
		},
		Token:    a.token,
		Progress: a.progress,
	}
	res, err := s.backend.Generate(s.ctx, req, ev)
	switch {
	case res != nil && res.Receipt.Charged != nil:
		resv.settle(res.Receipt.Charged)
	case a.isDispatched():
		resv.settle(nil) // cost unknown: the worst case stays counted
	default:
		resv.settle(new(uint256.Int))
	}
	if err != nil {
		a.fail(s.classify(err, a.dispatch()), res)
		return
	}
	a.complete(res)
}

// classify turns a backend error into an API error; after dispatch it is
// never to be retried.
func (s *Server) classify(err error, d *Dispatch) *Error {
	var e *Error
	if !errors.As(err, &e) {
		switch {
		case s.ctx.Err() != nil:
			e = &Error{Status: http.StatusServiceUnavailable, Type: TypeAPI, Code: CodeShuttingDown, Message: "the gateway is shutting down: " + err.Error()}
		case errors.Is(err, context.DeadlineExceeded):
			e = &Error{Status: http.StatusGatewayTimeout, Type: TypeAPI, Code: CodeTimeout, Message: err.Error()}
		default:
			e = &Error{Status: http.StatusBadGateway, Type: TypeAPI, Code: CodeChain, Message: err.Error()}
		}
	}
	if d != nil {
		c := *e
		c.NoRetry = true
		if d.Job == 0 && d.Session != "" && !strings.Contains(c.Message, "session "+d.Session) {
			c.Message += fmt.Sprintf(" (session %s: what was generated is paid; do not resend the request)", d.Session)
		}
		if d.Job != 0 && !strings.Contains(c.Message, "/v1/ogpu/jobs/") {
			c.Message += fmt.Sprintf(" (job %d was posted and is paid: GET /v1/ogpu/jobs/%d shows how it ends; do not resend the request)", d.Job, d.Job)
		}
		e = &c
	}
	return e
}
