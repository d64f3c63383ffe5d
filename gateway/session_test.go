package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

func milli(x uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(x), uint256.NewInt(1000)) }

// sessionConfig are session terms for 200 ms blocks: two lanes of 20 oGPU
// at most 0.06 oGPU per output token (the test providers ask 0.04 and
// 0.05: with two bidders for two lanes the cap clears).
func (n *testNet) sessionConfig(dir string) SessionConfig {
	return SessionConfig{Redundancy: 2, Budget: types.OGPU(20), MaxPrice: milli(60), InputPriceBps: 2500, Blocks: 300, Grace: 5,
		Req: market.Requirements{MinStake: types.OGPU(100)}, Windows: market.Windows{Bid: 4, Reveal: 3},
		LedgerDir: filepath.Join(dir, "sessions"), Logger: n.config(dir).Logger}
}

// sessionGateway is a gateway over a session backend of the wallet's
// client; tap, if set, sees each streamed piece before the client does
// (a test kills providers from it).
type sessionGateway struct {
	*testGateway
	b *SessionBackend
}

// tapped is a session backend whose Generate lets a test act on tokens as
// they are generated; all else is the session backend's.
type tapped struct {
	*SessionBackend
	mu  sync.Mutex
	tap func(piece string)
}

func (t *tapped) setTap(f func(string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tap = f
}

func (t *tapped) Generate(ctx context.Context, req *Request, ev Events) (*Result, error) {
	t.mu.Lock()
	tap := t.tap
	t.mu.Unlock()
	if tap != nil {
		token := ev.Token
		ev.Token = func(piece string) {
			tap(piece)
			if token != nil {
				token(piece)
			}
		}
	}
	return t.SessionBackend.Generate(ctx, req, ev)
}

func (n *testNet) sessionGateway(cfg Config, sc SessionConfig, fallback bool) (*sessionGateway, *tapped) {
	n.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.t.Fatal(err)
	}
	return n.sessionGatewayOn(ln, cfg, sc, fallback)
}

// sessionGatewayOn serves the session gateway on ln.
func (n *testNet) sessionGatewayOn(ln net.Listener, cfg Config, sc SessionConfig, fallback bool) (*sessionGateway, *tapped) {
	n.t.Helper()
	var fb Backend
	if fallback {
		jb, err := NewJobBackend(n.client, n.jobConfig())
		if err != nil {
			n.t.Fatal(err)
		}
		fb = jb
	}
	b, err := NewSessionBackend(n.client, sc, fb)
	if err != nil {
		n.t.Fatal(err)
	}
	tb := &tapped{SessionBackend: b}
	s, err := New(cfg, n.c, n.client.Store, tb)
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &testGateway{Server: s, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { g.done <- s.Serve(ctx, ln, 5*time.Second) }()
	n.t.Cleanup(g.stop)
	return &sessionGateway{testGateway: g, b: b}, tb
}

// lanesSigned is what the gateway's session clients signed on each lane
// of each warm session, by session and provider.
func (g *sessionGateway) lanesSigned() map[string]*uint256.Int {
	out := map[string]*uint256.Int{}
	for _, st := range g.b.Sessions() {
		for _, l := range st.Lanes {
			out[laneKey(st.Session, l.Provider.Hex())] = l.Signed
		}
	}
	return out
}

func laneKey(session uint64, provider string) string {
	return strings.ToLower(provider) + "@" + strconv.FormatUint(session, 10)
}

// feesOf adds up the transaction fees addr's transactions paid, from the
// chain's blocks.
func (n *testNet) feesOf(addr types.Address) *uint256.Int {
	n.t.Helper()
	st, err := n.c.RPC.Status(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	total := new(uint256.Int)
	for h := int64(1); h <= st.SyncInfo.LatestBlockHeight; h++ {
		res, err := n.c.RPC.BlockResults(n.ctx, &h)
		if err != nil && h == st.SyncInfo.LatestBlockHeight {
			break // its results are not stored yet: the next read counts it
		}
		if err != nil {
			n.t.Fatal(err)
		}
		for _, tx := range res.TxResults {
			for _, ev := range tx.Events {
				if ev.Type != chain.EventTypeTx {
					continue
				}
				if e, err := chain.ParseEventTx(ev); err == nil && e.From == addr {
					total.Add(total, e.Fee)
				}
			}
		}
	}
	return total
}

// wireLane is a lane in a session answer's ogpu object.
type wireLane struct {
	Provider   string `json:"provider"`
	Seq        uint64 `json:"seq"`
	Charged    string `json:"charged"`
	Cumulative string `json:"cumulative"`
	Error      string `json:"error"`
}

// sessionBook adds up what answers said they charged, per lane, and
// checks it against the session clients' ledgers and the gateway's
// spending ledger: nothing charged twice, nothing uncounted.
type sessionBook struct {
	t       *testing.T
	charged *uint256.Int // sum of ogpu.charged
	lanes   map[string]*uint256.Int
	seqs    map[string]uint64
	answers atomic.Int64
}

func newSessionBook(t *testing.T) *sessionBook {
	return &sessionBook{t: t, charged: new(uint256.Int), lanes: map[string]*uint256.Int{}, seqs: map[string]uint64{}}
}

// add checks one session answer's receipt (charged = paid + validator
// fee, paid = the sum of its lanes' charges, each lane's seq the next
// one, each lane's cumulative its previous plus its charge) and counts it.
func (sb *sessionBook) add(session string, o *sessionOgpu) {
	t := sb.t
	t.Helper()
	if o.Mode != "session" || o.Session != session && session != "" {
		t.Fatalf("mode %q session %q, want session %q", o.Mode, o.Session, session)
	}
	paid := new(uint256.Int)
	for _, l := range o.Lanes {
		k := strings.ToLower(l.Provider) + "@" + o.Session
		c := u256(t, l.Charged)
		paid.Add(paid, c)
		prev := sb.lanes[k]
		if prev == nil {
			prev = new(uint256.Int)
		}
		if l.Error == "" || !c.IsZero() {
			if want := new(uint256.Int).Add(prev, c); !u256(t, l.Cumulative).Eq(want) {
				t.Fatalf("lane %s: cumulative %s after a charge of %s, the last was %s", k, l.Cumulative, l.Charged, prev)
			}
			sb.lanes[k] = u256(t, l.Cumulative)
		}
		if l.Seq != 0 {
			if l.Seq != sb.seqs[k]+1 {
				t.Fatalf("lane %s: seq %d after %d: one seq per request", k, l.Seq, sb.seqs[k])
			}
			sb.seqs[k] = l.Seq
		}
	}
	if !paid.Eq(u256(t, o.Paid)) {
		t.Fatalf("paid %s, the lanes were charged %s", o.Paid, paid)
	}
	sum := new(uint256.Int).Add(u256(t, o.Paid), u256(t, o.ValidatorFee))
	if !sum.Eq(u256(t, o.Charged)) || !u256(t, o.TxFee).IsZero() {
		t.Fatalf("charged %s != paid %s + validator fee %s (tx fee %s)", o.Charged, o.Paid, o.ValidatorFee, o.TxFee)
	}
	sb.charged.Add(sb.charged, u256(t, o.Charged))
	sb.answers.Add(1)
}

// check compares the book with the session clients' ledgers (to the base
// unit, lane by lane) and the gateway's day ledger (the answers' charges
// plus the sessions' open and close fees, fees() reading them from the
// chain; a close the gateway sends in the background may be in a block
// before the gateway counts it, so the ledger is given a few seconds).
func (sb *sessionBook) check(g *sessionGateway, fees func() *uint256.Int) {
	t := sb.t
	t.Helper()
	for k, signed := range g.lanesSigned() {
		want := sb.lanes[k]
		if want == nil {
			want = new(uint256.Int)
		}
		if !signed.Eq(want) {
			t.Fatalf("lane %s: the session client signed %s, the answers add up to %s", k, signed, want)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		f := fees()
		_, spent := g.ledger.spent()
		want := new(uint256.Int).Add(sb.charged, f)
		if spent.Eq(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the day's ledger counts %s; the answers charged %s and the sessions' transactions cost %s", spent, sb.charged, f)
		}
	}
}

// sessionOgpu is a session answer's ogpu object.
type sessionOgpu struct {
	wireOgpu
	Session  string     `json:"session"`
	PriceIn  string     `json:"price_in"`
	PriceOut string     `json:"price_out"`
	Lanes    []wireLane `json:"lanes"`
	Fallback string     `json:"fallback"`
}

// sessionAnswer is a non-streamed session answer.
type sessionAnswer struct {
	wireAnswer
	Ogpu *sessionOgpu `json:"ogpu"`
}

// sessionStream reads a stream and returns it parsed, with the final
// chunk's ogpu object (or the error event's) as a session receipt.
func sessionStream(t *testing.T, g *testGateway, body map[string]any, hdr map[string]string) (streamed, *sessionOgpu) {
	t.Helper()
	evs := readSSE(t, g.call(t, "POST", "/v1/chat/completions", body, hdr))
	st := parseStream(t, evs)
	for _, ev := range evs {
		var a struct {
			Choices []wireChoice    `json:"choices"`
			Ogpu    *sessionOgpu    `json:"ogpu"`
			Error   *map[string]any `json:"error"`
		}
		if ev.data == "" || ev.data == "[DONE]" || json.Unmarshal([]byte(ev.data), &a) != nil {
			continue
		}
		if a.Ogpu != nil {
			return st, a.Ogpu
		}
	}
	return st, nil
}

// TestGatewaySession drives the gateway in session mode over HTTP against
// a real chain and two llama.cpp providers: the first request opens a
// session by auction (two lanes), then chat, a streamed chat with usage,
// and a legacy completion go straight to both lanes with no transaction;
// both lanes agree (verified), every answer's money adds up from the
// client's own counts, and a retried request (the same Idempotency-Key,
// or the SDK's retry header) replays the first answer without a new seq
// or a second charge. At the end the lanes' vouchers and the day's ledger
// match the answers to the base unit, and the session is closed on chain.
func TestGatewaySession(t *testing.T) {
	n := newTestNet(t, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	dir := t.TempDir()
	g, _ := n.sessionGateway(n.config(dir), n.sessionConfig(dir), false)
	me := n.client.Address()
	book := newSessionBook(t)

	// Non-streamed chat: opens the session.
	var chat sessionAnswer
	resp := g.call(t, "POST", "/v1/chat/completions", with(storyChat, "temperature", 0.7), nil)
	decode(t, resp, 200, &chat)
	o := chat.Ogpu
	// Two bids for two lanes (prov1's 0.04, prov2's 0.05 oGPU a token)
	// and no third: the lanes clear at the highest winning bid, 0.05, and
	// input at 25% of it (AppVersion 8: not the 0.06 cap).
	priceOut, priceIn := milli(50), new(uint256.Int).Div(milli(50), uint256.NewInt(4))
	if o == nil || o.Session == "" || !o.Verified || o.Outcome != "agreed" || len(o.Providers) != 2 || len(o.Lanes) != 2 || o.PriceUnit != "token" ||
		!u256(t, o.PriceOut).Eq(priceOut) || !u256(t, o.PriceIn).Eq(priceIn) || resp.Header.Get("X-Ogpu-Session") != o.Session ||
		resp.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("chat answer %+v, ogpu %+v, headers %v", chat.wireAnswer, o, resp.Header)
	}
	text := chat.Choices[0].Message.Content
	if text == "" || chat.Usage.CompletionTokens != 16 || chat.Choices[0].FinishReason == nil || *chat.Choices[0].FinishReason != "length" {
		t.Fatalf("chat %q usage %+v", text, chat.Usage)
	}
	// usage.cost is charged; the charge is the client's own count.
	want := laneCharge(chat.Usage.PromptTokens, chat.Usage.CompletionTokens, priceIn, priceOut)
	want.Mul(want, uint256.NewInt(2))
	if !u256(t, o.Paid).Eq(want) || !mustAmount(t, string(chat.Usage.Cost)).Eq(u256(t, o.Charged)) {
		t.Fatalf("paid %s, want 2 lanes × (%d prompt, %d output tokens) = %s; cost %s charged %s", o.Paid, chat.Usage.PromptTokens, chat.Usage.CompletionTokens, want, chat.Usage.Cost, o.Charged)
	}
	book.add("", o)
	session := o.Session
	hOpen := n.height()

	// The same chat streamed, with usage: the same text (greedy).
	st, so := sessionStream(t, g.testGateway, with(storyChat, "stream", true, "stream_options", map[string]any{"include_usage": true}), nil)
	if st.errCode != "" || !st.done || !st.roleFirst || st.text != text || st.usage == nil || st.usage.CompletionTokens != 16 || so == nil || !so.Verified {
		t.Fatalf("stream %+v ogpu %+v, want %q", st, so, text)
	}
	if !strings.Contains(strings.Join(st.comments, "\n"), "session "+session) {
		t.Fatalf("stream comments %q: want the session named", st.comments)
	}
	book.add(session, so)

	// A legacy completion of the same prompt.
	var cmpl sessionAnswer
	decode(t, g.call(t, "POST", "/v1/completions", map[string]any{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 16}, nil), 200, &cmpl)
	if cmpl.Choices[0].Text == nil || *cmpl.Choices[0].Text != text {
		t.Fatalf("completion %+v, want %q", cmpl, text)
	}
	book.add(session, cmpl.Ogpu)

	// Idempotency (S16): the same key twice is one request, one seq, one
	// charge; so is the SDK's retry of a request sent without a key.
	key := map[string]string{"Idempotency-Key": "order-7"}
	body := with(storyChat, "max_tokens", 12)
	var first, again, retried, plain sessionAnswer
	decode(t, g.call(t, "POST", "/v1/chat/completions", body, key), 200, &first)
	book.add(session, first.Ogpu)
	decode(t, g.call(t, "POST", "/v1/chat/completions", body, key), 200, &again)
	if again.ID != first.ID || again.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Fatalf("the same Idempotency-Key answered anew: %s then %s", first.ID, again.ID)
	}
	// The key reused for another request (who gains: nobody, but a
	// client bug would get someone else's answer): refused, nothing sent.
	e := wantError(t, g.call(t, "POST", "/v1/chat/completions", with(storyChat, "max_tokens", 11), key), 409, CodeIdempotencyReused, true)
	if !strings.Contains(e.Error.Message, "order-7") {
		t.Fatalf("409: %q", e.Error.Message)
	}
	body = with(storyChat, "max_tokens", 10)
	decode(t, g.call(t, "POST", "/v1/chat/completions", body, nil), 200, &plain)
	book.add(session, plain.Ogpu)
	decode(t, g.call(t, "POST", "/v1/chat/completions", body, map[string]string{"X-Stainless-Retry-Count": "1"}), 200, &retried)
	if retried.ID != plain.ID {
		t.Fatalf("the SDK's retry answered anew: %s then %s", plain.ID, retried.ID)
	}
	for _, l := range retried.Ogpu.Lanes {
		if l.Seq != 5 {
			t.Fatalf("lane %+v: the retry must replay seq 5", l)
		}
	}
	// Concurrent requests share the session one at a time: each gets
	// its own seq on both lanes, none waits on an auction.
	var wg sync.WaitGroup
	answers := make([]sessionAnswer, 3)
	errs := make([]error, 3)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bz, _ := json.Marshal(with(storyChat, "max_tokens", 6+i))
			req, _ := http.NewRequest("POST", g.url+"/v1/chat/completions", bytes.NewReader(bz))
			req.Header.Set("Authorization", "Bearer "+g.Key())
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				defer resp.Body.Close()
				err = json.NewDecoder(resp.Body).Decode(&answers[i])
				if err == nil && (resp.StatusCode != 200 || answers[i].Ogpu == nil) {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(answers, func(a, b sessionAnswer) int { return int(a.Ogpu.Lanes[0].Seq) - int(b.Ogpu.Lanes[0].Seq) })
	for _, a := range answers {
		if a.Ogpu.Session != session || !a.Ogpu.Verified {
			t.Fatalf("a concurrent request: %+v", a.Ogpu)
		}
		book.add(session, a.Ogpu)
	}
	// No transaction since the session opened: requests are off chain.
	if c := n.txsOf(me, hOpen+1, n.height()); c != 0 {
		t.Fatalf("%d transactions from the client since the session opened", c)
	}
	book.check(g, func() *uint256.Int { return n.feesOf(me) })
	sessions := g.b.Sessions()
	g.stop()
	// Closed on chain when the gateway stopped; the fees of opening and
	// closing are in the ledger.
	if len(sessions) != 1 {
		t.Fatalf("warm sessions %+v: want one", sessions)
	}
	v, err := n.c.Session(n.ctx, sessions[0].Session)
	if err != nil || !v.Closed {
		t.Fatalf("session %d after the gateway stopped: %+v %v", sessions[0].Session, v, err)
	}
	_, spent := g.ledger.spent()
	if want := new(uint256.Int).Add(book.charged, n.feesOf(me)); !spent.Eq(want) {
		t.Fatalf("ledger %s, want the answers' %s plus the session transactions' fees", spent, book.charged)
	}
}

// height is the chain's latest height.
func (n *testNet) height() int64 {
	n.t.Helper()
	st, err := n.c.RPC.Status(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	return st.SyncInfo.LatestBlockHeight
}

// txsOf counts addr's transactions in blocks from..to.
func (n *testNet) txsOf(addr types.Address, from, to int64) int {
	n.t.Helper()
	// Block to's results are stored once the next block exists.
	if err := n.c.WaitHeight(n.ctx, to+1); err != nil {
		n.t.Fatal(err)
	}
	c := 0
	for h := from; h <= to; h++ {
		res, err := n.c.RPC.BlockResults(n.ctx, &h)
		if err != nil {
			n.t.Fatal(err)
		}
		for _, tx := range res.TxResults {
			for _, ev := range tx.Events {
				if e, err := chain.ParseEventTx(ev); ev.Type == chain.EventTypeTx && err == nil && e.From == addr {
					c++
				}
			}
		}
	}
	return c
}

// killer kills provider p (its agent and its host) the first time it is
// called: a provider that dies mid-stream.
func killer(p *testProvider) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.cancel()
			_ = p.host.Close()
		})
	}
}

// atPiece calls f at the n-th streamed piece.
func atPiece(n int, f func()) func(string) {
	var seen atomic.Int64
	return func(string) {
		if seen.Add(1) == int64(n) {
			f()
		}
	}
}

// TestGatewaySessionLaneDeath: providers die mid-stream. One lane's
// provider dies at the third token: the other lane carries the stream to
// a complete answer (unverified: one lane answered), and the gateway
// opens the next session in the background (a lane is gone). Then the
// last lane of the session dies mid-stream: the client gets a clear error
// event and no [DONE], having paid only what the vouchers held; the broken
// session is dropped, and the next request is served by another session
// on the provider still alive. Nothing is charged twice: every answer's
// lanes add up to the session clients' vouchers, and the day's ledger to
// the answers plus the sessions' transaction fees, to the base unit.
func TestGatewaySessionLaneDeath(t *testing.T) {
	n := newTestNet(t, false)
	p1 := n.provider("prov1", 40, false)
	p2 := n.provider("prov2", 50, false)
	p3 := n.provider("prov3", 60, false)
	dir := t.TempDir()
	g, tb := n.sessionGateway(n.config(dir), n.sessionConfig(dir), false)
	me := n.client.Address()
	book := newSessionBook(t)
	body := with(storyChat, "stream", true, "max_tokens", 24)

	// The reference answer, both lanes alive.
	st, o := sessionStream(t, g.testGateway, body, nil)
	if st.errCode != "" || !st.done || o == nil || !o.Verified {
		t.Fatalf("first stream %+v ogpu %+v", st, o)
	}
	book.add("", o)
	ref, first := st.text, o.Session
	lanes := map[string]bool{}
	for _, p := range o.Providers {
		lanes[strings.ToLower(p)] = true
	}
	if !lanes[strings.ToLower(p1.agent.Address().Hex())] || !lanes[strings.ToLower(p2.agent.Address().Hex())] {
		t.Fatalf("session lanes %v: want prov1 and prov2 (the cheapest)", o.Providers)
	}

	// prov1 dies at the third token: prov2 carries the stream.
	tb.setTap(atPiece(3, killer(p1)))
	st, o = sessionStream(t, g.testGateway, body, nil)
	if st.errCode != "" || !st.done || st.text != ref || o == nil || o.Verified || o.Outcome != "one_lane" ||
		len(o.Providers) != 1 || !strings.EqualFold(o.Providers[0], p2.agent.Address().Hex()) {
		t.Fatalf("stream with prov1 dying: %+v ogpu %+v, want %q from prov2 alone", st, o, ref)
	}
	book.add(first, o)

	// prov2, the last lane, dies at the third token: an error event, no
	// [DONE].
	tb.setTap(atPiece(3, killer(p2)))
	st, o = sessionStream(t, g.testGateway, body, nil)
	if st.errCode != CodeSessionFailed || st.done || !strings.HasPrefix(ref, st.text) || o == nil || o.Session != first {
		t.Fatalf("stream with every lane dying: %+v ogpu %+v", st, o)
	}
	book.add(first, o)
	tb.setTap(nil)

	// The next request: another session, served by prov3 (and prov2's
	// lane, if the session was bought before it died, fails).
	st, o = sessionStream(t, g.testGateway, body, nil)
	if st.errCode != "" || !st.done || st.text != ref || o == nil || o.Session == first {
		t.Fatalf("the request after the session broke: %+v ogpu %+v", st, o)
	}
	if len(o.Providers) != 1 || !strings.EqualFold(o.Providers[0], p3.agent.Address().Hex()) {
		t.Fatalf("served by %v, want prov3 alone", o.Providers)
	}
	book.add(o.Session, o)
	book.check(g, func() *uint256.Int { return n.feesOf(me) })
	g.stop()
	_, spent := g.ledger.spent()
	if want := new(uint256.Int).Add(book.charged, n.feesOf(me)); !spent.Eq(want) {
		t.Fatalf("ledger %s, want the answers' %s plus the session transactions' fees", spent, book.charged)
	}
}

// TestGatewaySessionMismatch: a lying provider in a session (it changes
// its third token) is caught by the comparison of the two lanes: the
// answer says verified: false, outcome mismatch; the gateway calls
// OnMismatch with both signed receipts and disputes them on chain; the
// validator agent fetches the evidence from the gateway, finds the liar's
// receipt wrong, and the liar is slashed (the honest provider is not);
// both lanes are paid from the client's own counts, as vouchers signed
// before the mismatch showed.
func TestGatewaySessionMismatch(t *testing.T) {
	n := newTestNet(t, true)
	n.provider("prov1", 40, false)
	liar := n.provider("prov2", 50, true)
	dir := t.TempDir()
	g, _ := n.sessionGateway(n.config(dir), n.sessionConfig(dir), false)
	var mu sync.Mutex
	var caught []*agent.Completion
	g.b.OnMismatch = func(c *agent.Completion) {
		mu.Lock()
		defer mu.Unlock()
		caught = append(caught, c)
	}
	type sent struct {
		session, dispute uint64
		err              error
	}
	disputes := make(chan sent, 4)
	g.b.OnDispute = func(s, d uint64, err error) { disputes <- sent{s, d, err} }
	book := newSessionBook(t)
	var a sessionAnswer
	decode(t, g.call(t, "POST", "/v1/chat/completions", storyChat, nil), 200, &a)
	o := a.Ogpu
	if o == nil || o.Verified || o.Outcome != "mismatch" || len(o.Providers) != 2 {
		t.Fatalf("answer with a liar in the session: ogpu %+v", o)
	}
	book.add("", o)
	mu.Lock()
	defer mu.Unlock()
	if len(caught) != 1 || caught[0].Mismatch == nil || len(caught[0].Mismatch.Receipts) != 2 || len(caught[0].Mismatch.Sigs) != 2 {
		t.Fatalf("OnMismatch got %+v: want one completion with both receipts", caught)
	}
	signers := map[types.Address]bool{}
	for i, r := range caught[0].Mismatch.Receipts {
		who, err := session.Signer(r.Hash(), caught[0].Mismatch.Sigs[i])
		if err != nil || who != r.Provider {
			t.Fatalf("receipt %d signed by %s (%v), for %s", i, who, err, r.Provider)
		}
		signers[who] = true
	}
	if !signers[liar.agent.Address()] || caught[0].Mismatch.Receipts[0].Output == caught[0].Mismatch.Receipts[1].Output {
		t.Fatalf("the mismatch must carry the liar's receipt and two different outputs: %+v", caught[0].Mismatch)
	}
	mu.Unlock()
	var ds sent
	select {
	case ds = <-disputes:
	case <-n.ctx.Done():
		t.Fatal("no dispute sent")
	}
	if ds.err != nil {
		t.Fatalf("dispute: %v", ds.err)
	}
	var d *chain.DisputeView
	for d == nil || d.Status == session.DisputeOpen {
		if err := n.c.WaitHeight(n.ctx, n.height()+1); err != nil {
			t.Fatal(err)
		}
		var err error
		if d, err = n.c.SessionDispute(n.ctx, ds.session, ds.dispute); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range d.Receipts {
		wrong := d.Verdict&(1<<i) != 0
		if d.Status != session.DisputeDecided || wrong != (r.Receipt.Provider == liar.agent.Address()) {
			t.Fatalf("dispute %s, verdict %b: receipt %d by %s judged wrong=%v", d.Status, d.Verdict, i, r.Receipt.Provider, wrong)
		}
	}
	for _, p := range []types.Address{liar.agent.Address(), d.Receipts[0].Receipt.Provider, d.Receipts[1].Receipt.Provider} {
		st, err := n.c.Stake(n.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if slashed := st.Bonded.Lt(types.OGPU(200)); slashed != (p == liar.agent.Address()) {
			t.Fatalf("provider %s bonded %s after the dispute (liar %s)", p, st.Bonded, liar.agent.Address())
		}
	}
	t.Logf("dispute %d of session %d: %s, slashed %s, compensated %s", ds.dispute, ds.session, d.Status, d.Slashed, d.Compensated)
	mu.Lock()
	book.check(g, func() *uint256.Int { return n.feesOf(n.client.Address()) })
}

// TestGatewaySessionFallback: when no session can be opened (here every
// provider asks more per token than the gateway's session cap, so the
// session auction gets no bid and is refunded) the request runs as a job
// and says why (ogpu.mode job, ogpu.fallback), and the next request goes
// straight to job mode instead of waiting on another failed auction.
// Without a fallback (--mode session) the same request is a 503 the SDK
// does not retry.
func TestGatewaySessionFallback(t *testing.T) {
	n := newTestNet(t, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	dir := t.TempDir()
	sc := n.sessionConfig(dir)
	sc.MaxPrice = milli(10) // below both providers' 0.04 and 0.05
	g, _ := n.sessionGateway(n.config(dir), sc, true)
	me := n.client.Address()
	for i := range 2 {
		var a sessionAnswer
		decode(t, g.call(t, "POST", "/v1/chat/completions", storyChat, nil), 200, &a)
		o := a.Ogpu
		if o == nil || o.Mode != "job" || o.Job == 0 || !o.Verified || !strings.Contains(o.Fallback, "no providers") {
			t.Fatalf("request %d: ogpu %+v: want a verified job saying why no session", i, o)
		}
	}
	// One session was tried (and refunded), then two jobs.
	if js := n.jobsOf(me); js != 3 {
		t.Fatalf("%d jobs posted: want one session attempt and two jobs", js)
	}
	// The fallback's jobs can be looked up.
	var jv JobView
	decode(t, g.call(t, "GET", "/v1/ogpu/jobs/3", nil, nil), 200, &jv)
	if jv.Job != 3 || !jv.Verified || jv.Text == "" {
		t.Fatalf("job 3 through the session gateway: %+v", jv)
	}
	g.stop()

	g2, _ := n.sessionGateway(n.config(t.TempDir()), sc, false)
	e := wantError(t, g2.call(t, "POST", "/v1/chat/completions", storyChat, nil), 503, CodeNoProviders, true)
	if !strings.Contains(e.Error.Message, "no session") {
		t.Fatalf("503 without a fallback: %q", e.Error.Message)
	}
}

// TestGatewaySessionStaysWarm: a session that served a request is renewed
// before it expires although no request comes (short sessions: 30
// blocks, renewed 15 blocks before the end); when it expires the next one
// takes over, so the request after the expiry waits on no auction: no
// session is posted while it runs.
func TestGatewaySessionStaysWarm(t *testing.T) {
	n := newTestNet(t, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	dir := t.TempDir()
	sc := n.sessionConfig(dir)
	sc.Blocks, sc.RenewBlocks, sc.Watch = 30, 15, 200*time.Millisecond
	g, _ := n.sessionGateway(n.config(dir), sc, false)
	me := n.client.Address()
	var a sessionAnswer
	decode(t, g.call(t, "POST", "/v1/chat/completions", storyChat, nil), 200, &a)
	first := a.Ogpu.Session
	v, err := n.c.Session(n.ctx, mustUint(t, first))
	if err != nil {
		t.Fatal(err)
	}
	// Past the first session's expiry, with no request meanwhile.
	if err := n.c.WaitHeight(n.ctx, int64(v.Expiry)+2); err != nil {
		t.Fatal(err)
	}
	var cur *SessionStatus
	for deadline := time.Now().Add(10 * time.Second); cur == nil || cur.Session == mustUint(t, first); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sessions %+v: the used session was not renewed before it expired", g.b.Sessions())
		}
		for _, s := range g.b.Sessions() {
			if s.Current {
				cur = &s
			}
		}
	}
	jobs := n.jobsOf(me)
	decode(t, g.call(t, "POST", "/v1/chat/completions", storyChat, nil), 200, &a)
	if a.Ogpu.Session != strconv.FormatUint(cur.Session, 10) || n.jobsOf(me) != jobs || !a.Ogpu.Verified {
		t.Fatalf("after the expiry: served by session %s (want %d), %d jobs posted meanwhile", a.Ogpu.Session, cur.Session, n.jobsOf(me)-jobs)
	}
	if jobs != 2 {
		t.Fatalf("%d sessions posted: want the first and its renewal", jobs)
	}
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
