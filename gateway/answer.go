package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/holiman/uint256"
)

// answer renders one request's progress into its recording: a JSON body
// at the end, or a stream of server-sent events.
type answer struct {
	s       *Server
	g       *gen
	rec     *recording
	quote   *uint256.Int
	id      string
	created int64

	// Token and Progress come from different goroutines (the token stream
	// and the chain's events).
	mu   sync.Mutex
	disp *Dispatch
	// live: streamed pieces are still forwarded. A piece the provider's
	// stream mangled (U+FFFD for a character split across tokens) stops
	// the live text; the rest comes from the verified text at the end.
	live     bool
	streamed strings.Builder
	stop     stopper
}

func newAnswer(s *Server, g *gen, rec *recording, quote *uint256.Int) *answer {
	var b [12]byte
	_, _ = rand.Read(b[:])
	prefix := "chatcmpl-"
	if g.route == routeCompletion {
		prefix = "cmpl-"
	}
	return &answer{s: s, g: g, rec: rec, quote: quote, id: prefix + hex.EncodeToString(b[:]), created: s.now().Unix(),
		live: true, stop: stopper{stops: g.stops}}
}

func (a *answer) dispatch() *Dispatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.disp
}

func (a *answer) isDispatched() bool { return a.dispatch() != nil }

func (a *answer) object() string {
	switch {
	case a.g.route == routeCompletion:
		return "text_completion"
	case a.g.stream:
		return "chat.completion.chunk"
	}
	return "chat.completion"
}

func (a *answer) frame(choices []choice) *completionAnswer {
	if choices == nil {
		choices = []choice{}
	}
	return &completionAnswer{ID: a.id, Object: a.object(), Created: a.created, Model: a.g.modelName,
		SystemFingerprint: SystemFingerprint, Choices: choices}
}

// delta is a streamed choice carrying text.
func (a *answer) delta(text string, role bool) choice {
	if a.g.route == routeCompletion {
		return choice{Text: strp(text)}
	}
	out := &chatOut{Content: strp(text)}
	if role {
		out.Role = "assistant"
	}
	return choice{Delta: out}
}

// event writes one SSE data event.
func (a *answer) event(v any) {
	bz, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs
	}
	a.rec.write([]byte("data: " + string(bz) + "\n\n"))
}

// comment writes an SSE comment (clients ignore it; curl shows it).
func (a *answer) comment(line string) {
	line = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, line)
	a.rec.write([]byte(": " + line + "\n\n"))
}

func (a *answer) headers(d *Dispatch, contentType string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", contentType)
	if d != nil {
		h.Set("X-Should-Retry", "false")
		if d.Job != 0 {
			h.Set("X-Ogpu-Job", strconv.FormatUint(d.Job, 10))
		}
		if d.Session != "" {
			h.Set("X-Ogpu-Session", d.Session)
		}
	}
	return h
}

func (a *answer) dispatched(d Dispatch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.disp = &d
	if !a.g.stream {
		return
	}
	h := a.headers(&d, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	a.rec.start(http.StatusOK, h)
	if d.Session != "" {
		// (A job's progress lines, from the backend, say it was posted.)
		a.comment("ogpu: session " + d.Session)
	}
	if a.g.route == routeChat {
		a.event(a.frame([]choice{a.delta("", true)}))
	}
}

// emit streams text (after stop sequences).
func (a *answer) emit(text string) {
	if text != "" {
		a.event(a.frame([]choice{a.delta(text, false)}))
	}
}

func (a *answer) token(piece string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.g.stream || a.disp == nil || !a.live {
		return
	}
	if strings.ContainsRune(piece, utf8.RuneError) {
		a.live = false
		return
	}
	a.streamed.WriteString(piece)
	a.emit(a.stop.push(piece))
}

func (a *answer) progress(line string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.g.stream && a.disp != nil {
		a.comment("ogpu: " + line)
	}
}

func (a *answer) info(res *Result) *ogpuInfo {
	r := res.Receipt
	info := &ogpuInfo{Receipt: r, Verified: res.Verified, Overruled: res.Overruled, Decoding: "greedy",
		IgnoredParameters: a.g.ignored, Template: a.g.template, PromptTokensEstimated: a.g.estimated,
		MaxCharge: ogpuAmount(a.quote)}
	if r.Charged != nil {
		info.ChargedOGPU = ogpuAmount(r.Charged)
	}
	if r.UnitPrice != nil {
		info.PriceOGPU = ogpuAmount(r.UnitPrice)
	}
	return info
}

func (a *answer) usage(res *Result) *usage {
	u := &usage{PromptTokens: a.g.promptTokens, CompletionTokens: uint64(res.Tokens), Cost: "0"}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if res.Receipt.Charged != nil {
		u.Cost = json.Number(ogpuAmount(res.Receipt.Charged))
	}
	return u
}

func finishReason(stopped bool, res *Result) string {
	if stopped || res.EndOfText {
		return "stop"
	}
	return "length"
}

// complete answers with a verified result.
func (a *answer) complete(res *Result) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.g.stream {
		text, stopped := cutAtStop(res.Text, a.g.stops)
		fr := finishReason(stopped, res)
		c := choice{FinishReason: &fr}
		if a.g.route == routeCompletion {
			c.Text = &text
		} else {
			c.Message = &chatOut{Role: "assistant", Content: &text}
		}
		body := a.frame([]choice{c})
		body.Usage, body.Ogpu = a.usage(res), a.info(res)
		bz, _ := json.Marshal(body)
		a.rec.start(http.StatusOK, a.headers(a.disp, "application/json"))
		a.rec.write(append(bz, '\n'))
		return
	}
	if !a.rec.started() {
		// A backend that never dispatched (nothing to pay) still streams.
		a.disp = &Dispatch{}
		a.rec.start(http.StatusOK, a.headers(nil, "text/event-stream"))
		if a.g.route == routeChat {
			a.event(a.frame([]choice{a.delta("", true)}))
		}
	}
	// The client holds the streamed text. If it is the start of the
	// verified text the stream goes on with the rest (a lost stream, or a
	// streamed replica that lied only in what it committed); if not, it
	// ends with an error: an OpenAI stream cannot take text back.
	streamed := a.streamed.String()
	if !strings.HasPrefix(res.Text, streamed) {
		info := a.info(res)
		info.Overruled = true
		a.streamError(&Error{Type: TypeAPI, Code: CodeResultOverruled, NoRetry: true, Message: fmt.Sprintf(
			"the streamed text came from a provider whose result the network overruled: the verified text differs after %d bytes (%s)",
			commonPrefix(streamed, res.Text), a.where())}, info)
		return
	}
	a.emit(a.stop.push(res.Text[len(streamed):]))
	stopped := a.stop.stopped
	if !stopped {
		a.emit(a.stop.flush())
	}
	fr := finishReason(stopped, res)
	last := a.frame([]choice{{Delta: &chatOut{}, FinishReason: &fr}})
	if a.g.route == routeCompletion {
		last = a.frame([]choice{{Text: strp(""), FinishReason: &fr}})
	}
	last.Ogpu = a.info(res)
	a.event(last)
	if a.g.includeUsage {
		u := a.frame(nil)
		u.Usage = a.usage(res)
		a.event(u)
	}
	a.rec.write([]byte("data: [DONE]\n\n"))
}

// where says where the verified result can be read.
func (a *answer) where() string {
	if a.disp != nil && a.disp.Job != 0 {
		return fmt.Sprintf("GET /v1/ogpu/jobs/%d returns it", a.disp.Job)
	}
	return "resend the request without streaming"
}

// errorWithReceipt is the error envelope plus, once money moved, the
// ogpu object of what was spent.
type errorWithReceipt struct {
	errorBody
	Ogpu *ogpuInfo `json:"ogpu,omitempty"`
}

// streamError ends a stream with an error event: OpenAI streams cannot
// retract what they sent, and the SDKs raise such an event as an APIError
// with its code.
func (a *answer) streamError(e *Error, info *ogpuInfo) {
	a.event(errorWithReceipt{errorBody: e.body(), Ogpu: info})
}

// fail answers with an error.
func (a *answer) fail(e *Error, res *Result) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var info *ogpuInfo
	if res != nil {
		info = a.info(res)
	}
	if a.g.stream && a.rec.started() {
		a.streamError(e, info)
		return
	}
	h := http.Header{}
	e.header(h)
	if a.disp != nil && a.disp.Job != 0 {
		h.Set("X-Ogpu-Job", strconv.FormatUint(a.disp.Job, 10))
	}
	if a.disp != nil && a.disp.Session != "" {
		h.Set("X-Ogpu-Session", a.disp.Session)
	}
	a.rec.start(e.Status, h)
	bz, _ := json.Marshal(errorWithReceipt{errorBody: e.body(), Ogpu: info})
	a.rec.write(append(bz, '\n'))
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
