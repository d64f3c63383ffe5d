package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/internal/atomicfile"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// Session leases on the client.
//
// A SessionClient holds one session: it sends each request to every lane's
// provider over SessionProtocol, streams the tokens of whichever arrives
// first, and pays each lane by vouchers computed from its own counts (the
// prompt counted with the model's tokenizer, the tokens it received),
// never from a receipt's (S8). Each receipt is checked: signed by the
// lane's provider, binding the request sent, the sha256 of the text
// received and both counts. Receipts whose outputs differ between lanes
// are reported (Completion.Mismatch) and Dispute takes them to the chain
// (session_dispute.go). Every voucher is written to the lane ledger
// before it is signed, and no voucher is ever signed below one signed
// before on its lane.

// Session errors; Complete's errors wrap them.
var (
	// ErrSessionEnded: the session is closed or past its expiry.
	ErrSessionEnded = errors.New("the session has ended")
	// ErrSessionBudget: no lane's budget can pay the request's maximum
	// charge (open another session).
	ErrSessionBudget = errors.New("the session's budget cannot pay this request")
	// ErrContextTooLong: the prompt plus max_tokens exceed the provider's
	// context.
	ErrContextTooLong = errors.New("the prompt plus max_tokens exceed the provider's context")
)

// SessionClientConfig configures a SessionClient.
type SessionClientConfig struct {
	Chain *node.Client
	// Key is the session's client: it signs requests and vouchers. Host
	// must use it as its identity: providers serve the peer whose key is
	// the client's account, and nobody else.
	Key  *ecdsa.PrivateKey
	Host *p2p.Host
	// Sender sends the client's transactions (posting, closing); nil
	// makes one for Key. Share one between clients of one account.
	Sender *node.Sender
	// Model is the session's model, loaded: it counts prompt tokens and
	// renders the tokens received.
	Model *llm.Model
	// LedgerDir keeps the lane ledgers (session-ID.json); "" keeps them
	// in memory only.
	LedgerDir string
	// Evidence keeps the prompts and outputs of disputes this client
	// opens and serves them to the validators judging them (shared by
	// the clients of one host; nil: one in LedgerDir/evidence, served on
	// the first dispute).
	Evidence *Evidence
	Logger   *slog.Logger
}

// SessionOrder is a session to buy.
type SessionOrder struct {
	Model     types.Hash
	ModelSize uint64
	// Lanes is r: how many providers serve each request.
	Lanes uint16
	// MaxPrice caps the price of one output token; InputPriceBps prices
	// an input token as a share of it (in 1/10000).
	MaxPrice      *uint256.Int
	InputPriceBps uint64
	// Budget is each lane's: what one provider can be paid at most.
	Budget *uint256.Int
	// Blocks is how long the session serves from its award; Grace the
	// blocks after it open to redemptions only.
	Blocks, Grace uint64
	Req           market.Requirements
	// Windows: Bid and Reveal only.
	Windows market.Windows
	// OnPosted, if set, is called once the session job is on chain (its
	// budget locked and the transaction fee paid), whether or not an
	// award follows.
	OnPosted func(id uint64, height int64)
}

// SessionClient uses one session. Complete serves one request at a time.
type SessionClient struct {
	cfg     SessionClientConfig
	log     *slog.Logger
	sender  *node.Sender
	addr    types.Address
	chainID string
	id      uint64

	mu     sync.Mutex // one request at a time
	view   *chain.SessionView
	viewAt time.Time
	lanes  []*clientLane
	ledger *sessionLedger

	evOnce sync.Once
	ev     *Evidence
	evErr  error
}

// clientLane is the client's side of one lane.
type clientLane struct {
	provider types.Address
	budget   *uint256.Int
	stream   network.Stream
	conn     *lineConn
	status   *LaneStatus
	// failed, once set, keeps the lane out of this client's requests.
	failed error
}

// laneLedger is what the client signed on one lane.
type laneLedger struct {
	// Seq is the last request sent; Cumulative the highest voucher
	// signed, Voucher that voucher (signed again to send it again).
	Seq        uint64           `json:"seq"`
	Cumulative *uint256.Int     `json:"cumulative"`
	Voucher    *session.Voucher `json:"voucher,omitempty"`
}

// sessionLedger is a session's lane ledgers, by provider. Lanes run
// concurrently: mu guards the ledgers and the file.
type sessionLedger struct {
	mu      sync.Mutex
	path    string
	Session uint64                 `json:"session"`
	Lanes   map[string]*laneLedger `json:"lanes"`
}

// lane returns provider p's ledger (g.mu held).
func (g *sessionLedger) lane(p types.Address) *laneLedger {
	ll, ok := g.Lanes[p.Hex()]
	if !ok {
		ll = &laneLedger{Cumulative: new(uint256.Int)}
		g.Lanes[p.Hex()] = ll
	}
	return ll
}

// get returns provider p's last seq and highest cumulative.
func (g *sessionLedger) get(p types.Address) (uint64, *uint256.Int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ll := g.lane(p)
	return ll.Seq, ll.Cumulative.Clone()
}

// save writes the ledger (temporary file, synced, renamed; g.mu held).
func (g *sessionLedger) save() error {
	if g.path == "" {
		return nil
	}
	bz, err := json.Marshal(g)
	if err != nil {
		return err
	}
	return atomicfile.Write(g.path, bz, 0o600)
}

func loadLedger(dir string, id uint64) (*sessionLedger, error) {
	g := &sessionLedger{Session: id, Lanes: map[string]*laneLedger{}}
	if dir == "" {
		return g, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	g.path = filepath.Join(dir, "session-"+strconv.FormatUint(id, 10)+".json")
	bz, err := os.ReadFile(g.path)
	if errors.Is(err, os.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(bz, g); err != nil || g.Session != id {
		return nil, fmt.Errorf("lane ledger %s is unreadable or not session %d's (%v): the vouchers signed on it are unknown; move it away only if no voucher of this session was ever signed", g.path, id, err)
	}
	g.path = filepath.Join(dir, "session-"+strconv.FormatUint(id, 10)+".json")
	for _, ll := range g.Lanes {
		if ll.Cumulative == nil {
			ll.Cumulative = new(uint256.Int)
		}
	}
	return g, nil
}

// OpenSession buys a session by auction (a session job), waits for its
// award and returns a client of it. progress, if set, sees the steps.
func OpenSession(ctx context.Context, cfg SessionClientConfig, o SessionOrder, progress Progress) (*SessionClient, error) {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if cfg.Chain == nil || cfg.Key == nil {
		return nil, errors.New("session: chain and key are required")
	}
	sender := cfg.Sender
	if sender == nil {
		sender = node.NewSender(cfg.Chain, cfg.Key)
		cfg.Sender = sender
	}
	req := o.Req
	if req.MinStake == nil {
		req.MinStake = new(uint256.Int)
	}
	if req.Runtime == "" {
		req.Runtime = Runtime
	}
	msg := &market.MsgPostJob{Kind: market.KindSession, Mode: market.ModeAuction, Model: o.Model, ModelSize: o.ModelSize,
		Stages: 1, Redundancy: o.Lanes, MaxPrice: o.MaxPrice, Req: req, Windows: market.Windows{Bid: o.Windows.Bid, Reveal: o.Windows.Reveal},
		Session: &market.SessionTerms{Budget: o.Budget, InputPriceBps: o.InputPriceBps, Blocks: o.Blocks, Grace: o.Grace}}
	if _, err := rand.Read(msg.Seal[:]); err != nil {
		return nil, err
	}
	res, err := sender.Send(ctx, msg.Raw())
	if err != nil {
		return nil, fmt.Errorf("post session: %w", err)
	}
	var posted market.EventJobPosted
	if err := node.FindEvent(res, &posted); err != nil {
		return nil, err
	}
	id := posted.Job
	if o.OnPosted != nil {
		o.OnPosted(id, res.Height)
	}
	progress("posted session %d at height %d: %s locked, sealed bids until %d, reveals until %d", id, res.Height,
		types.FormatAmount(posted.Locked), posted.BidEnd, posted.RevealEnd)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	blocks, err := cfg.Chain.Subscribe(sctx, res.Height)
	if err != nil {
		return nil, err
	}
	defer func() {
		cancel()
		for range blocks {
		}
	}()
	for b := range blocks {
		for _, ev := range b.Events {
			reportEvent(ev, id, false, progress)
			switch ev.Type {
			case market.EventJobAwarded{}.EventType():
				var e market.EventJobAwarded
				if types.DecodeEvent(ev, &e) != nil || e.Job != id {
					continue
				}
				progress("session %d open at height %d: %v at %s per output token, serving until %d", id, b.Height, e.Providers, types.FormatAmount(e.Price), e.CommitDeadline)
				return NewSessionClient(ctx, cfg, id)
			case market.EventJobExpired{}.EventType():
				var e market.EventJobExpired
				if types.DecodeEvent(ev, &e) == nil && e.Job == id {
					return nil, fmt.Errorf("session %d found no providers: %s; %s refunded (ogpu query why-no-bids %d explains)", id, e.Reason, types.FormatAmount(e.Refund), id)
				}
			}
		}
	}
	return nil, ctx.Err()
}

// NewSessionClient attaches to session id, whose client cfg.Key must be.
// The streams to its providers open at the first request.
func NewSessionClient(ctx context.Context, cfg SessionClientConfig, id uint64) (*SessionClient, error) {
	if cfg.Chain == nil || cfg.Key == nil || cfg.Host == nil || cfg.Model == nil {
		return nil, errors.New("session client: chain, key, host and model are required")
	}
	addr := ethcrypto.PubkeyToAddress(cfg.Key.PublicKey)
	if who, err := p2p.AddressOf(cfg.Host.ID()); err != nil || who != addr {
		return nil, fmt.Errorf("session client: the host's identity is not the key %s: providers would refuse it", addr)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Sender == nil {
		cfg.Sender = node.NewSender(cfg.Chain, cfg.Key)
	}
	chainID, err := cfg.Chain.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	v, err := cfg.Chain.Session(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("session %d: %w", id, err)
	}
	if v.Client != addr {
		return nil, fmt.Errorf("session %d is %s's, not %s's", id, v.Client, addr)
	}
	g, err := loadLedger(cfg.LedgerDir, id)
	if err != nil {
		return nil, err
	}
	c := &SessionClient{cfg: cfg, log: cfg.Logger, sender: cfg.Sender, addr: addr, chainID: chainID, id: id, view: v, viewAt: time.Now(), ledger: g}
	for _, l := range v.Lanes {
		c.lanes = append(c.lanes, &clientLane{provider: l.Provider, budget: l.Budget})
	}
	return c, nil
}

// ID is the session's id.
func (c *SessionClient) ID() uint64 { return c.id }

// Session is the session as last read from the chain.
func (c *SessionClient) Session() *chain.SessionView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view
}

// refresh reads the session again if the copy is older than a second.
func (c *SessionClient) refresh(ctx context.Context) error {
	if time.Since(c.viewAt) < time.Second {
		return nil
	}
	v, err := c.cfg.Chain.Session(ctx, c.id)
	if err != nil {
		return err
	}
	c.view, c.viewAt = v, time.Now()
	return nil
}

// Completion is one request's outcome.
type Completion struct {
	Session uint64
	// Text is the output (the first lane to finish with a verified
	// receipt, whose tokens onToken saw); StoppedOnEOG says whether it
	// ended on an end-of-generation token (else it reached max_tokens).
	Text         string
	StoppedOnEOG bool
	// PromptTokens is the prompt's length counted with the model's
	// tokenizer; CompletionTokens the tokens of Text's lane (the
	// end-of-generation token included: it was generated and is paid).
	PromptTokens, CompletionTokens uint64
	// PriceIn and PriceOut are the session's prices per token; Cost what
	// this request added to the lanes' vouchers in all (every lane
	// serves every request).
	PriceIn, PriceOut, Cost *uint256.Int
	// Lanes has one entry per lane asked.
	Lanes []LaneCompletion
	// Verified: at least two lanes returned verified receipts with the
	// same output. Mismatch, if set, lists receipts whose outputs differ
	// (Dispute takes them to the chain).
	Verified bool
	Mismatch *OutputMismatch
	// Prompt is the prompt sent (a dispute's evidence).
	Prompt string
}

// LaneCompletion is one lane's part of a request.
type LaneCompletion struct {
	Provider types.Address
	Seq      uint64
	// Receipt is the provider's verified receipt (nil if none came);
	// Text what this lane generated.
	Receipt    *session.Receipt
	ReceiptSig []byte
	Text       string
	// Request is the signed request sent on the lane; Tokens the tokens
	// received (a dispute's evidence).
	Request    *session.Request
	RequestSig []byte
	Tokens     []int
	// Charged is what this request added to the lane's cumulative;
	// Cumulative the lane's voucher after it.
	Charged, Cumulative *uint256.Int
	Err                 error
}

// OutputMismatch reports lanes whose verified receipts for the same
// request differ: one of the providers computed wrong (SessionClient.Dispute
// sends the dispute carrying both receipts).
type OutputMismatch struct {
	Session  uint64
	Receipts []*session.Receipt
	Sigs     [][]byte
}

func (m *OutputMismatch) Error() string {
	s := fmt.Sprintf("session %d: the lanes' outputs differ:", m.Session)
	for _, r := range m.Receipts {
		s += fmt.Sprintf(" %s seq %d output %x;", r.Provider, r.Seq, r.Output[:8])
	}
	return s
}

// RefusedError is a provider's signed refusal of a request.
type RefusedError struct {
	Refusal *session.Refusal
	Sig     []byte
}

func (e *RefusedError) Error() string {
	charged := "nothing charged"
	if e.Refusal.Charged {
		charged = "the prompt is charged"
	}
	return fmt.Sprintf("provider %s refused request %d (%s): %s", e.Refusal.Provider, e.Refusal.Seq, charged, e.Refusal.Reason)
}

// tokenMerger streams the tokens of whichever lane is ahead: token i
// comes from the first lane to deliver it; a lane whose token differs
// from one already shown contributes no more.
type tokenMerger struct {
	mu       sync.Mutex
	m        *llm.Model
	toks     []int
	diverged map[int]bool
	onToken  func(string)
}

func (tm *tokenMerger) deliver(lane, i, tok int) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	switch {
	case tm.diverged[lane]:
	case i < len(tm.toks):
		if tm.toks[i] != tok {
			tm.diverged[lane] = true
		}
	case i == len(tm.toks):
		tm.toks = append(tm.toks, tok)
		if !tm.m.IsEOG(tok) && tm.onToken != nil {
			tm.onToken(tm.m.Piece(tok))
		}
	}
}

// Complete sends prompt to every lane of the session, calls onToken
// (if set) with each piece of text as the first lane produces it (one call
// at a time), pays each lane from its own counts, and returns the output
// with every lane's receipt. It fails when no lane returned a verified
// receipt; the Completion then says what each lane did and was charged.
func (c *SessionClient) Complete(ctx context.Context, prompt string, maxTokens uint64, onToken func(string)) (*Completion, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case prompt == "" || len(prompt) > MaxPromptBytes:
		return nil, fmt.Errorf("the prompt is %d bytes: want 1..%d", len(prompt), MaxPromptBytes)
	case maxTokens == 0:
		return nil, errors.New("max_tokens must be at least 1")
	}
	if err := c.refresh(ctx); err != nil {
		return nil, err
	}
	v := c.view
	if v.Closed || v.Height > v.Expiry {
		return nil, fmt.Errorf("%w: session %d served until height %d (the chain is at %d)", ErrSessionEnded, c.id, v.Expiry, v.Height)
	}
	toks, err := c.cfg.Model.Tokenize(prompt)
	if err != nil {
		return nil, err
	}
	nIn := uint64(len(toks))
	out := &Completion{Session: c.id, PromptTokens: nIn, PriceIn: v.PriceIn, PriceOut: v.PriceOut, Cost: new(uint256.Int)}
	tm := &tokenMerger{m: c.cfg.Model, diverged: map[int]bool{}, onToken: onToken}
	type laneRun struct {
		res  LaneCompletion
		toks []int
	}
	runs := make([]*laneRun, len(c.lanes))
	var wg sync.WaitGroup
	for i, l := range c.lanes {
		runs[i] = &laneRun{res: LaneCompletion{Provider: l.provider, Charged: new(uint256.Int)}}
		if l.failed != nil {
			runs[i].res.Err = l.failed
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i].toks = c.runLane(ctx, i, l, prompt, nIn, maxTokens, tm, &runs[i].res)
		}()
	}
	wg.Wait()
	var errs []error
	var best *laneRun
	bestDiverged := false
	out.Prompt = prompt
	for i, r := range runs {
		r.res.Tokens = r.toks
		out.Lanes = append(out.Lanes, r.res)
		out.Cost.Add(out.Cost, r.res.Charged)
		if r.res.Err != nil {
			errs = append(errs, fmt.Errorf("lane %s: %w", r.res.Provider, r.res.Err))
			continue
		}
		// The text returned is the one streamed: a lane that never
		// diverged from it.
		if best == nil || (bestDiverged && !tm.diverged[i]) {
			best, bestDiverged = r, tm.diverged[i]
		}
	}
	if best == nil {
		return out, fmt.Errorf("session %d: no lane answered: %w", c.id, errors.Join(errs...))
	}
	out.Text, out.CompletionTokens = best.res.Text, best.res.Receipt.NOut
	out.StoppedOnEOG = len(best.toks) > 0 && c.cfg.Model.IsEOG(best.toks[len(best.toks)-1])
	var ok []*laneRun
	for _, r := range runs {
		if r.res.Err == nil {
			ok = append(ok, r)
		}
	}
	out.Verified = len(ok) >= 2
	for _, r := range ok[1:] {
		if r.res.Receipt.Output != ok[0].res.Receipt.Output {
			out.Verified = false
			mm := &OutputMismatch{Session: c.id}
			for _, r := range ok {
				mm.Receipts, mm.Sigs = append(mm.Receipts, r.res.Receipt), append(mm.Sigs, r.res.ReceiptSig)
			}
			out.Mismatch = mm
			c.log.Warn("session lanes disagree: keep both receipts for a dispute", "session", c.id, "mismatch", mm.Error())
			break
		}
	}
	return out, nil
}

// laneFail marks l unusable for this client and returns err.
func laneFail(l *clientLane, err error) error {
	l.failed = err
	dropStream(l)
	return err
}

func dropStream(l *clientLane) {
	if l.stream != nil {
		_ = l.stream.Reset()
		l.stream, l.conn = nil, nil
	}
}

// errBroken marks a stream that broke: the request may be resumed on a
// new stream.
type errBroken struct{ err error }

func (e errBroken) Error() string { return "the stream broke: " + e.err.Error() }
func (e errBroken) Unwrap() error { return e.err }

// laneRequest is one request on one lane.
type laneRequest struct {
	q        *session.Request
	msg      clientMsg // the request with the voucher prepaying its prompt
	nIn      uint64
	base     *uint256.Int // the lane's cumulative before it
	prepaid  *uint256.Int // after its prompt
	pin      *uint256.Int
	pout     *uint256.Int
	provider types.Address
}

// runLane sends the request on lane i and follows it to the ack; it
// fills res and returns the tokens received. A stream that breaks is
// opened again once: the request is sent again if the provider never took
// it, or answered again (uncharged, S16) if it did.
func (c *SessionClient) runLane(ctx context.Context, i int, l *clientLane, prompt string, nIn, maxTokens uint64, tm *tokenMerger, res *LaneCompletion) []int {
	if l.conn == nil {
		if err := c.connect(ctx, l); err != nil {
			res.Err = err
			return nil
		}
	}
	lastSeq, base := c.ledger.get(l.provider)
	pin, pout := c.view.PriceIn, c.view.PriceOut
	if maxTokens > l.status.Context || nIn+maxTokens > l.status.Context {
		res.Err = fmt.Errorf("%w: the prompt (%d tokens) plus max_tokens (%d) exceed provider %s's context of %d tokens", ErrContextTooLong, nIn, maxTokens, l.provider, l.status.Context)
		return nil
	}
	if most := addCharge(base, nIn, maxTokens, pin, pout); most.Gt(l.budget) {
		res.Err = fmt.Errorf("%w: lane %s has %s of its %s budget left, this request may cost %s", ErrSessionBudget, l.provider,
			types.FormatAmount(new(uint256.Int).Sub(l.budget, base)), types.FormatAmount(l.budget), types.FormatAmount(charge(nIn, maxTokens, pin, pout)))
		return nil
	}
	seq := lastSeq + 1
	q := &session.Request{ChainID: c.chainID, Session: c.id, Provider: l.provider, Seq: seq, Prompt: sha256.Sum256([]byte(prompt)), MaxTokens: maxTokens}
	res.Seq = seq
	qsig, err := session.Sign(c.cfg.Key, q.Hash())
	if err != nil {
		res.Err = err
		return nil
	}
	res.Request, res.RequestSig = q, qsig
	prepaid := addCharge(base, nIn, 0, pin, pout)
	vouch, vsig, err := c.signVoucher(l.provider, seq, prepaid)
	if err != nil {
		res.Err = laneFail(l, err)
		return nil
	}
	res.Charged, res.Cumulative = new(uint256.Int).Sub(prepaid, base), prepaid
	r := &laneRequest{q: q, msg: clientMsg{Request: q, RequestSig: qsig, Prompt: prompt, Voucher: vouch, VoucherSig: vsig},
		nIn: nIn, base: base, prepaid: prepaid, pin: pin, pout: pout, provider: l.provider}
	for try := 0; ; try++ {
		toks, ferr := c.follow(ctx, i, l, r, tm, res)
		var broken errBroken
		if ferr == nil || !errors.As(ferr, &broken) || try > 0 || ctx.Err() != nil {
			if ferr != nil {
				var refused *RefusedError
				if errors.As(ferr, &refused) && refused.Refusal.Charged {
					res.Err = ferr // the lane is in step: prompt paid, seq used
				} else {
					res.Err = laneFail(l, ferr)
				}
			}
			return toks
		}
		c.log.Info("session stream broke: opening it again", "session", c.id, "provider", l.provider, "seq", seq, "err", ferr)
		dropStream(l)
		st, err := c.dial(ctx, l)
		if err != nil {
			res.Err = laneFail(l, err)
			return toks
		}
		_, cum := c.ledger.get(l.provider)
		switch {
		case st.Seq == seq-1 && st.Owed.Eq(base) && st.Held.Eq(base):
			// The provider never took the request: send it again.
		case st.Seq == seq && st.Request == q.Hash() && st.Answered:
			// It answered: the same request again replays the answer,
			// uncharged (S16).
		case st.Seq == seq && st.Request == q.Hash() && st.Owed.Eq(st.Held) && !st.Held.Gt(cum):
			// Cut off while generating: the lane is owed what was paid
			// (the last voucher again, if it was lost with the stream).
			if st.Held.Lt(cum) {
				if err := c.resendLast(l); err != nil {
					res.Err = laneFail(l, err)
					return toks
				}
			}
			res.Err = fmt.Errorf("request %d was cut off after %d tokens (paid for): %w", seq, len(toks), ferr)
			return toks
		default:
			res.Err = laneFail(l, fmt.Errorf("request %d broke off and lane %s is out of step: the provider is at seq %d, owed %s, holding %s; this client signed %s",
				seq, l.provider, st.Seq, st.Owed.Dec(), st.Held.Dec(), cum.Dec()))
			return toks
		}
	}
}

// follow sends request r on l's stream and reads its answer to the ack.
// A broken stream is errBroken; a refusal is *RefusedError.
func (c *SessionClient) follow(ctx context.Context, i int, l *clientLane, r *laneRequest, tm *tokenMerger, res *LaneCompletion) ([]int, error) {
	stop := context.AfterFunc(ctx, func() { _ = l.stream.Reset() })
	defer stop()
	seq, maxTokens := r.q.Seq, r.q.MaxTokens
	if err := l.conn.write(r.msg); err != nil {
		return nil, errBroken{fmt.Errorf("request %d not sent: %w", seq, err)}
	}
	every := max(1, l.status.Credit/2)
	var toks []int
	eog := false
	for {
		var pm providerMsg
		if err := l.conn.read(&pm, 5*time.Minute); err != nil {
			return toks, errBroken{fmt.Errorf("request %d: %w", seq, err)}
		}
		switch {
		case pm.Token != nil:
			tok := *pm.Token
			if tok < 0 || tok >= c.cfg.Model.NumVocab() || eog || uint64(len(toks)) >= maxTokens {
				return toks, fmt.Errorf("request %d: token %d (number %d) after the end, past max_tokens or outside the vocabulary: the provider breaks the protocol", seq, tok, len(toks)+1)
			}
			toks = append(toks, tok)
			eog = c.cfg.Model.IsEOG(tok)
			tm.deliver(i, len(toks)-1, tok)
			if n := uint64(len(toks)); n%every == 0 && !eog && n < maxTokens {
				cum := addCharge(r.prepaid, 0, n, nil, r.pout)
				if _, signed := c.ledger.get(l.provider); !cum.Gt(signed) {
					continue // signed already (an answer replayed)
				}
				v, sig, err := c.signVoucher(l.provider, seq, cum)
				if err != nil {
					return toks, err
				}
				res.Charged, res.Cumulative = new(uint256.Int).Sub(cum, r.base), cum
				if err := l.conn.write(clientMsg{Voucher: v, VoucherSig: sig}); err != nil {
					return toks, errBroken{fmt.Errorf("request %d: voucher not sent: %w", seq, err)}
				}
			}
		case pm.Receipt != nil:
			text := c.cfg.Model.Detokenize(withoutEOG(c.cfg.Model, toks))
			if err := verifyReceipt(pm.Receipt, pm.ReceiptSig, r.q, l.provider, text, r.nIn, uint64(len(toks))); err != nil {
				return toks, fmt.Errorf("request %d: receipt rejected: %w", seq, err)
			}
			final := addCharge(r.prepaid, 0, uint64(len(toks)), nil, r.pout)
			v, sig, err := c.signVoucher(l.provider, seq, final)
			if err != nil {
				return toks, err
			}
			res.Charged, res.Cumulative = new(uint256.Int).Sub(final, r.base), final
			if err := l.conn.write(clientMsg{Voucher: v, VoucherSig: sig}); err != nil {
				return toks, errBroken{fmt.Errorf("request %d: voucher not sent: %w", seq, err)}
			}
			var ack providerMsg
			if err := l.conn.read(&ack, 30*time.Second); err != nil {
				return toks, errBroken{fmt.Errorf("request %d: no acknowledgement of the voucher: %w", seq, err)}
			}
			if ack.Ack == nil || ack.Ack.Seq != seq || !ack.Ack.Cumulative.Eq(final) {
				return toks, fmt.Errorf("request %d: the provider did not acknowledge the voucher for %s (%s)", seq, final.Dec(), ack.Error)
			}
			res.Receipt, res.ReceiptSig, res.Text = pm.Receipt, pm.ReceiptSig, text
			return toks, nil
		case pm.Refusal != nil:
			f := pm.Refusal
			if signer, err := session.Signer(f.Hash(), pm.RefusalSig); err != nil || signer != l.provider || f.Request != r.q.Hash() ||
				f.Seq != seq || f.Session != c.id || f.ChainID != c.chainID || f.Provider != l.provider {
				return toks, fmt.Errorf("request %d: a refusal that is not the lane provider's answer to it: %q", seq, f.Reason)
			}
			rerr := &RefusedError{Refusal: f, Sig: pm.RefusalSig}
			if !f.Charged || f.NIn != r.nIn || len(toks) > 0 {
				// Uncharged, the provider did not take the voucher this
				// client signed: the lane is out of step for good.
				res.Charged, res.Cumulative = new(uint256.Int), r.base
				return toks, fmt.Errorf("%w (the lane is out of step: this client signed %s)", rerr, r.prepaid.Dec())
			}
			return toks, rerr
		case pm.Error != "":
			return toks, fmt.Errorf("request %d: provider %s: %s", seq, l.provider, pm.Error)
		default:
			return toks, fmt.Errorf("request %d: an empty message from the provider", seq)
		}
	}
}

// verifyReceipt checks provider's receipt r for request q against what
// the client received and counted: text, nIn prompt tokens, nOut tokens.
func verifyReceipt(r *session.Receipt, sig []byte, q *session.Request, provider types.Address, text string, nIn, nOut uint64) error {
	signer, err := session.Signer(r.Hash(), sig)
	if err != nil {
		return fmt.Errorf("receipt signature: %w", err)
	}
	switch {
	case signer != provider:
		return fmt.Errorf("the receipt is signed by %s, not by the lane's provider %s", signer, provider)
	case r.ChainID != q.ChainID || r.Session != q.Session || r.Provider != provider || r.Seq != q.Seq:
		return fmt.Errorf("the receipt is for chain %q session %d provider %s seq %d, the request was chain %q session %d provider %s seq %d",
			r.ChainID, r.Session, r.Provider, r.Seq, q.ChainID, q.Session, q.Provider, q.Seq)
	case r.Request != q.Hash():
		return errors.New("the receipt binds another request")
	case r.Output != sha256.Sum256([]byte(text)):
		return errors.New("the receipt's output hash is not the sha256 of the text received")
	case r.NOut != nOut:
		return fmt.Errorf("the receipt claims %d output tokens, %d came", r.NOut, nOut)
	case r.NIn != nIn:
		return fmt.Errorf("the receipt claims %d prompt tokens, the prompt has %d", r.NIn, nIn)
	}
	return nil
}

// signVoucher records cumulative as lane provider's highest voucher after
// request seq, then signs it. It never signs below a voucher signed before.
func (c *SessionClient) signVoucher(provider types.Address, seq uint64, cumulative *uint256.Int) (*session.Voucher, []byte, error) {
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	ll := c.ledger.lane(provider)
	if cumulative.Lt(ll.Cumulative) {
		return nil, nil, fmt.Errorf("refusing to sign %s for lane %s: a voucher for %s was signed before", cumulative.Dec(), provider, ll.Cumulative.Dec())
	}
	v := &session.Voucher{ChainID: c.chainID, Session: c.id, Provider: provider, Cumulative: cumulative.Clone(), Seq: seq}
	prevSeq, prevCum, prevV := ll.Seq, ll.Cumulative, ll.Voucher
	ll.Seq, ll.Cumulative, ll.Voucher = max(ll.Seq, seq), v.Cumulative, v
	if err := c.ledger.save(); err != nil {
		ll.Seq, ll.Cumulative, ll.Voucher = prevSeq, prevCum, prevV
		return nil, nil, fmt.Errorf("the lane ledger cannot be written, so no voucher is signed: %w", err)
	}
	sig, err := session.Sign(c.cfg.Key, v.Hash())
	if err != nil {
		return nil, nil, err
	}
	return v, sig, nil
}

// dial opens a stream to l's provider and reads its account of the lane.
func (c *SessionClient) dial(ctx context.Context, l *clientLane) (*LaneStatus, error) {
	pid, err := connectProvider(ctx, c.cfg.Host, c.cfg.Chain, l.provider)
	if err != nil {
		return nil, err
	}
	s, err := c.cfg.Host.Host().NewStream(ctx, pid, SessionProtocol)
	if err != nil {
		return nil, fmt.Errorf("cannot open a session stream to %s: %w", l.provider, err)
	}
	conn := newLineConn(s)
	var pm providerMsg
	if err := conn.write(sessionHello{Session: c.id}); err == nil {
		err = conn.read(&pm, 30*time.Second)
	}
	switch {
	case err != nil:
		err = fmt.Errorf("session stream to %s: %w", l.provider, err)
	case pm.Error != "":
		err = fmt.Errorf("provider %s: %s", l.provider, pm.Error)
	case pm.Ready == nil || pm.Ready.Provider != l.provider || pm.Ready.Owed == nil || pm.Ready.Held == nil:
		err = fmt.Errorf("provider %s did not describe its lane", l.provider)
	case pm.Ready.Stopped != "":
		err = fmt.Errorf("provider %s serves this client no more: %s", l.provider, pm.Ready.Stopped)
	}
	if err != nil {
		_ = s.Reset()
		return nil, err
	}
	l.stream, l.conn, l.status = s, conn, pm.Ready
	return pm.Ready, nil
}

// connect opens l's stream and checks that the provider's account of the
// lane is the ledger's; a missing last voucher is sent again.
func (c *SessionClient) connect(ctx context.Context, l *clientLane) error {
	st, err := c.dial(ctx, l)
	if err != nil {
		return laneFail(l, err)
	}
	c.ledger.mu.Lock()
	ll := *c.ledger.lane(l.provider)
	c.ledger.mu.Unlock()
	switch {
	case st.Seq == ll.Seq && st.Owed.Eq(ll.Cumulative) && st.Held.Eq(ll.Cumulative):
	case st.Seq == ll.Seq && st.Held.Lt(ll.Cumulative) && (st.Owed.Eq(ll.Cumulative) || !st.Answered && st.Owed.Eq(st.Held)):
		// The last voucher did not arrive (the stream broke): send it
		// again.
		if err := c.resendLast(l); err != nil {
			return laneFail(l, err)
		}
	default:
		return laneFail(l, fmt.Errorf("lane %s is out of step: the provider is at seq %d, owed %s, holding %s; this client's ledger at seq %d, cumulative %s",
			l.provider, st.Seq, st.Owed.Dec(), st.Held.Dec(), ll.Seq, ll.Cumulative.Dec()))
	}
	return nil
}

// resendLast sends the lane's last signed voucher again and reads the ack.
func (c *SessionClient) resendLast(l *clientLane) error {
	c.ledger.mu.Lock()
	v := c.ledger.lane(l.provider).Voucher
	c.ledger.mu.Unlock()
	if v == nil {
		return fmt.Errorf("lane %s: no voucher to send again", l.provider)
	}
	sig, err := session.Sign(c.cfg.Key, v.Hash())
	if err != nil {
		return err
	}
	var ack providerMsg
	if err := l.conn.write(clientMsg{Voucher: v, VoucherSig: sig}); err == nil {
		err = l.conn.read(&ack, 30*time.Second)
	}
	if err != nil || ack.Ack == nil || !ack.Ack.Cumulative.Eq(v.Cumulative) {
		return fmt.Errorf("provider %s did not take the last voucher again (%v %s)", l.provider, err, ack.Error)
	}
	return nil
}

// Ledger returns the highest cumulative this client signed on each lane.
func (c *SessionClient) Ledger() map[types.Address]*uint256.Int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[types.Address]*uint256.Int{}
	for _, l := range c.lanes {
		_, out[l.provider] = c.ledger.get(l.provider)
	}
	return out
}

// LaneInfo is a lane as the client sees it.
type LaneInfo struct {
	Provider types.Address
	// Budget is the lane's; Signed the highest voucher the client signed
	// on it (what the provider can be paid).
	Budget, Signed *uint256.Int
	// Failed, if set, is why the client uses the lane no more.
	Failed error
}

// Lanes describes the session's lanes.
func (c *SessionClient) Lanes() []LaneInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]LaneInfo, len(c.lanes))
	for i, l := range c.lanes {
		_, signed := c.ledger.get(l.provider)
		out[i] = LaneInfo{Provider: l.provider, Budget: l.budget.Clone(), Signed: signed, Failed: l.failed}
	}
	return out
}

// Remaining is the least budget left on a lane still in use (zero if
// none is): a gateway opens the next session before it runs out.
func (c *SessionClient) Remaining() *uint256.Int {
	var least *uint256.Int
	for _, l := range c.Lanes() {
		if l.Failed != nil {
			continue
		}
		if left := new(uint256.Int).Sub(l.Budget, l.Signed); least == nil || left.Lt(least) {
			least = left
		}
	}
	if least == nil {
		return new(uint256.Int)
	}
	return least
}

// Disconnect closes the streams (the session stays open on chain).
func (c *SessionClient) Disconnect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lanes {
		if l.stream != nil {
			_ = l.stream.Close()
			l.stream, l.conn = nil, nil
		}
	}
}

// Close closes the streams and the session on chain: no request after
// this block; the providers redeem in the grace, then the chain refunds
// the rest to the client.
func (c *SessionClient) Close(ctx context.Context) error {
	c.Disconnect()
	if _, err := c.sender.Send(ctx, (&session.MsgCloseSession{Session: c.id}).Raw()); err != nil {
		return fmt.Errorf("close session %d: %w", c.id, err)
	}
	c.mu.Lock()
	c.viewAt = time.Time{}
	c.mu.Unlock()
	return nil
}
