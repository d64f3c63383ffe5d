package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// SessionConfig are the terms of the sessions SessionBackend opens, and
// when it renews them.
type SessionConfig struct {
	// Redundancy is r, the lanes of a session: every request goes to
	// each lane's provider, and two lanes' outputs are compared.
	Redundancy uint16
	// Budget is each lane's budget (what one provider can be paid at
	// most); opening locks Redundancy × Budget plus the validator fee,
	// and what the lanes did not earn comes back after the close.
	Budget *uint256.Int
	// MaxPrice caps the price of one output token; InputPriceBps prices
	// a prompt token as a share of it (1/10000; 0: DefaultSessionInputBps).
	MaxPrice      *uint256.Int
	InputPriceBps uint64
	// Blocks is how long a session serves from its award; Grace the
	// blocks after it open to the providers' last redemptions.
	Blocks, Grace uint64
	// Req are the providers' requirements (MinStake nil: none extra).
	Req market.Requirements
	// Windows of the session's auction: Bid and Reveal only.
	Windows market.Windows
	// The next session is opened while the current one still serves:
	// when its least lane budget left would pay fewer than RenewRequests
	// requests like the last one, when it expires within RenewBlocks
	// blocks, or when one of its lanes died.
	RenewRequests uint64
	RenewBlocks   uint64
	// OpenTimeout bounds one opening (post, auction, award).
	OpenTimeout time.Duration
	// RetryOpenAfter: after a failed opening, requests go to the
	// fallback (or are refused) this long before another is tried.
	RetryOpenAfter time.Duration
	// Watch is how often an idle gateway looks at its sessions' expiry:
	// a session that served requests is renewed before it expires even
	// if no request comes (one that served none is left to expire).
	Watch time.Duration
	// AuditBps of the answers (per 10,000) are asked again as a job and a
	// lane that answered otherwise is disputed (audit.go, S13); 0: none.
	// Audits run on the fallback job backend.
	AuditBps uint64
	// LedgerDir keeps the lane ledgers (every voucher signed, written
	// before it is signed); "" keeps them in memory only.
	LedgerDir string
	Logger    *slog.Logger
}

// Defaults of a zero SessionConfig.
var (
	// DefaultSessionBudget pays about a dozen 40-token answers at the
	// default cap, and stays small against a provider's stake: a
	// provider's lanes in open sessions are capped at
	// session_lane_cap_bps of its bond (S22, half by default: 100 oGPU
	// for the README's 200 oGPU bond), and the next session opens while
	// the current one still holds its lane, so two must fit.
	DefaultSessionBudget = types.OGPU(25)
	// DefaultSessionMaxPrice is the provider agent's default ask per
	// token (`ogpud provider run --price-per-token`): with as many
	// bidders as lanes the uniform price is the cap, so a cap far above
	// the asks is what every answer would cost.
	DefaultSessionMaxPrice = new(uint256.Int).Div(types.OGPU(5), uint256.NewInt(100)) // 0.05 oGPU per output token
	DefaultSessionWindows  = market.Windows{Bid: 5, Reveal: 5}
)

// Defaults of a zero SessionConfig.
const (
	DefaultSessionBlocks         = 600
	DefaultSessionGrace          = 20
	DefaultSessionInputBps       = 2500
	DefaultSessionRenewRequests  = 4
	DefaultSessionRenewBlocks    = 20
	DefaultSessionOpenTimeout    = time.Minute
	DefaultSessionRetryOpenAfter = 30 * time.Second
	DefaultSessionWatch          = 2 * time.Second
)

func (c SessionConfig) withDefaults() SessionConfig {
	if c.Redundancy == 0 {
		c.Redundancy = 2
	}
	if c.Budget == nil {
		c.Budget = DefaultSessionBudget
	}
	if c.MaxPrice == nil {
		c.MaxPrice = DefaultSessionMaxPrice
	}
	if c.InputPriceBps == 0 {
		c.InputPriceBps = DefaultSessionInputBps
	}
	if c.Blocks == 0 {
		c.Blocks = DefaultSessionBlocks
	}
	if c.Grace == 0 {
		c.Grace = DefaultSessionGrace
	}
	if c.Req.MinStake == nil {
		c.Req.MinStake = new(uint256.Int)
	}
	if c.Windows.Bid == 0 && c.Windows.Reveal == 0 {
		c.Windows = DefaultSessionWindows
	}
	if c.RenewRequests == 0 {
		c.RenewRequests = DefaultSessionRenewRequests
	}
	if c.RenewBlocks == 0 {
		c.RenewBlocks = DefaultSessionRenewBlocks
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = DefaultSessionOpenTimeout
	}
	if c.RetryOpenAfter == 0 {
		c.RetryOpenAfter = DefaultSessionRetryOpenAfter
	}
	if c.Watch == 0 {
		c.Watch = DefaultSessionWatch
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks c with defaults applied; each error names the setting.
func (c SessionConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Redundancy > 16 {
		errs = append(errs, fmt.Errorf("session redundancy %d: want 1..16", c.Redundancy))
	}
	if c.MaxPrice.IsZero() {
		errs = append(errs, errors.New("session max price: must be more than 0 per output token, or no provider bids"))
	}
	if c.Budget.IsZero() || c.Budget.Lt(c.MaxPrice) {
		errs = append(errs, fmt.Errorf("session budget %s per lane: must pay at least one output token at the max price %s", types.FormatAmount(c.Budget), types.FormatAmount(c.MaxPrice)))
	}
	if c.AuditBps > 10_000 {
		errs = append(errs, fmt.Errorf("session audit bps %d: at most 10000 (every answer)", c.AuditBps))
	}
	if c.InputPriceBps > 10_000 {
		errs = append(errs, fmt.Errorf("session input price bps %d: at most 10000 (a prompt token costs at most an output token)", c.InputPriceBps))
	}
	if c.Blocks > market.MaxSessionBlocks {
		errs = append(errs, fmt.Errorf("session blocks %d: at most %d", c.Blocks, market.MaxSessionBlocks))
	}
	if c.Grace < market.MinSessionGrace || c.Grace > market.MaxSessionGrace {
		errs = append(errs, fmt.Errorf("session grace %d: want %d..%d blocks (the providers' last redemptions land in it)", c.Grace, market.MinSessionGrace, market.MaxSessionGrace))
	}
	if c.RenewBlocks >= c.Blocks {
		errs = append(errs, fmt.Errorf("session renew blocks %d: want fewer than the session's %d blocks, or every session is renewed at once", c.RenewBlocks, c.Blocks))
	}
	if c.Windows.Bid == 0 {
		errs = append(errs, fmt.Errorf("session windows %+v: the bid window needs at least one block", c.Windows))
	}
	for _, a := range c.Req.Attributes {
		if _, err := market.ParseRequirement(a); err != nil {
			errs = append(errs, err)
		}
	}
	if c.OpenTimeout < 0 || c.RetryOpenAfter < 0 || c.Watch < 0 {
		errs = append(errs, errors.New("session open timeout, retry and watch: want durations of 0 or more"))
	}
	return errors.Join(errs...)
}

// SessionBackend serves requests over session leases (session mode): one
// auction opens a session of r lanes per model, then every request goes
// straight to the lanes' providers over libp2p, paid by vouchers
// (agent.SessionClient), with no transaction per request. It keeps one
// warm session per model and opens the next before the current runs low
// (budget, expiry, a dead lane), so that requests never wait on an
// auction once warm; a replaced session is closed when its last request
// ends (the unspent budget returns after the grace).
//
// What a request costs is counted from the client's own tokens (the
// model's tokenizer for the prompt, the tokens received), never from a
// provider's receipt: the vouchers it added, plus the validator fee the
// chain takes on them at redemption. The fees of the transactions that
// open and close sessions are counted against the day's budget apart.
//
// When no session can be opened (no local model file to count tokens
// with, too few providers, the account cannot lock the budget) requests
// go to the fallback backend, if any (job mode), and say why
// (ogpu.fallback); else they are refused with 503.
type SessionBackend struct {
	client   *agent.Client
	cfg      SessionConfig
	fallback Backend
	log      *slog.Logger
	// OnMismatch, if set, receives each completion whose lanes returned
	// different outputs (Completion.Mismatch holds both signed
	// receipts); the backend disputes them on chain itself (dispute).
	// The answer says verified: false. Set it before serving.
	OnMismatch func(*agent.Completion)
	// OnDispute, if set, sees each dispute the backend sent (or the error).
	OnDispute func(session, dispute uint64, err error)
	// OnAudit, if set, sees each audit's outcome; auditPick, if set
	// (tests), draws instead of auditPicked.
	OnAudit   func(*Audit)
	auditPick func() bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	stopWatch chan struct{}

	mu     sync.Mutex
	models map[types.Hash]*modelSessions
	spend  func(amount *uint256.Int, why string)
	closed bool
}

// modelSessions are one model's sessions.
type modelSessions struct {
	hash types.Hash
	size uint64
	file string

	loadOnce sync.Once
	model    *llm.Model
	loadErr  error

	// Under SessionBackend.mu.
	cur, next    *warmSession
	opening      chan struct{} // open while an opening runs
	openErr      error
	openFailedAt time.Time
}

// warmSession is one open session.
type warmSession struct {
	sc        *agent.SessionClient
	id        uint64
	pin, pout *uint256.Int
	feeBps    uint64
	expiry    uint64

	// run serializes the session's requests (a SessionClient serves one
	// at a time) and the read of its lanes after each.
	run sync.Mutex

	// Under SessionBackend.mu.
	height   uint64
	heightAt time.Time
	lanes    []agent.LaneInfo
	born     int          // lanes at the award (fewer than r if fewer providers bid)
	reserved *uint256.Int // per-lane worst cases of requests admitted, not ended
	used     bool         // it served a request
	inflight int
	last     *uint256.Int // the per-lane worst case of the last request
	broken   error        // set: it takes no more requests
	retired  bool
	closing  bool
}

// sessionTicket is Quote's choice for a request.
type sessionTicket struct {
	w       *warmSession
	perLane *uint256.Int // reserved on each lane
	// job: the request goes to the fallback; why says why.
	job bool
	why string
}

// NewSessionBackend opens sessions from client's account on cfg's terms;
// fallback (nil: none) serves the requests no session can.
func NewSessionBackend(client *agent.Client, cfg SessionConfig, fallback Backend) (*SessionBackend, error) {
	if client == nil {
		return nil, errors.New("session backend: a client agent is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("session backend: %w", err)
	}
	cfg = cfg.withDefaults()
	b := &SessionBackend{client: client, cfg: cfg, fallback: fallback, log: cfg.Logger, models: map[types.Hash]*modelSessions{}}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.stopWatch = make(chan struct{})
	b.wg.Add(1)
	go b.watch()
	return b, nil
}

// watch renews, while no request comes, the sessions that served
// requests before they expire, and drops those that ended.
func (b *SessionBackend) watch() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.Watch)
	defer t.Stop()
	for {
		select {
		case <-b.stopWatch:
			return
		case <-t.C:
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return
		}
		type due struct {
			ms *modelSessions
			w  *warmSession
		}
		var look []due
		for _, ms := range b.models {
			if w := ms.cur; w != nil && w.broken == nil && time.Since(w.heightAt) >= b.cfg.Watch {
				look = append(look, due{ms, w})
			}
		}
		b.mu.Unlock()
		for _, d := range look {
			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
			b.observe(ctx, d.w)
			cancel()
			b.mu.Lock()
			if d.ms.cur == d.w && !b.closed {
				switch {
				case d.w.broken != nil || d.w.height >= d.w.expiry:
					// Ended: the next one (if any) takes over.
					b.retireLocked(d.w)
					d.ms.cur, d.ms.next = d.ms.next, nil
				case d.w.used:
					b.renewLocked(d.ms)
				}
			}
			b.mu.Unlock()
		}
	}
}

// Mode is "session" (a request that fell back says "job" in its receipt).
func (b *SessionBackend) Mode() string { return "session" }

// setSpend is how the server counts the sessions' own transaction fees.
func (b *SessionBackend) setSpend(f func(*uint256.Int, string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spend = f
}

func (b *SessionBackend) spent(fee *uint256.Int, why string) {
	b.mu.Lock()
	f := b.spend
	b.mu.Unlock()
	if f != nil && fee != nil && !fee.IsZero() {
		f(fee, why)
	}
}

// laneCharge is what a request of nIn prompt tokens and nOut output
// tokens adds to one lane's voucher.
func laneCharge(nIn, nOut uint64, pin, pout *uint256.Int) *uint256.Int {
	c := new(uint256.Int).Mul(uint256.NewInt(nIn), pin)
	return c.Add(c, new(uint256.Int).Mul(uint256.NewInt(nOut), pout))
}

// feeOn is the validator fee the chain takes on paid at redemption,
// rounded up: redemptions round down, so the sum over requests is never
// below what the chain takes.
func feeOn(paid *uint256.Int, bps uint64) *uint256.Int {
	f := new(uint256.Int).Mul(paid, uint256.NewInt(bps))
	f.Add(f, uint256.NewInt(9_999))
	return f.Div(f, uint256.NewInt(10_000))
}

func (b *SessionBackend) modelFor(req *Request) *modelSessions {
	b.mu.Lock()
	defer b.mu.Unlock()
	ms := b.models[req.Model]
	if ms == nil {
		ms = &modelSessions{hash: req.Model, size: req.ModelSize, file: req.ModelFile}
		b.models[req.Model] = ms
	}
	return ms
}

// load loads the model for its tokenizer and vocabulary (mapped, with a
// tiny context: the session client never generates).
func (ms *modelSessions) load() (*llm.Model, error) {
	ms.loadOnce.Do(func() {
		if ms.file == "" {
			ms.loadErr = fmt.Errorf("the gateway has no local file of model %s, so it cannot count tokens to pay a session by (name the file with --model NAME=FILE.gguf)", modelID(ms.hash))
			return
		}
		ms.model, ms.loadErr = llm.Load(ms.file, llm.Options{Threads: 1, BatchSize: 16, ContextSize: 16})
	})
	return ms.model, ms.loadErr
}

// Quote picks the session that serves req (opening one if none is warm,
// and waiting for it), reserves the request's worst case on its lanes and
// returns it: every live lane paid the prompt and max_tokens at the
// session's prices, plus the validator fee on that. Without a session it
// falls back to job mode, or refuses with 503.
func (b *SessionBackend) Quote(ctx context.Context, req *Request) (*uint256.Int, error) {
	req.ticket = nil
	w, perLane, err := b.pick(ctx, req)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, err // the request itself cannot be served
		}
		if b.fallback == nil {
			return nil, &Error{Status: http.StatusServiceUnavailable, Type: TypeAPI, Code: CodeNoProviders, NoRetry: true,
				Message: fmt.Sprintf("no session of model %s can serve this request: %v", modelID(req.Model), err)}
		}
		b.log.Info("no session: the request runs as a job", "model", modelID(req.Model), "why", err)
		req.ticket = &sessionTicket{job: true, why: err.Error()}
		return b.fallback.Quote(ctx, req)
	}
	req.ticket = &sessionTicket{w: w, perLane: perLane}
	b.mu.Lock()
	live := 0
	for _, l := range w.lanes {
		if l.Failed == nil {
			live++
		}
	}
	b.mu.Unlock()
	q := new(uint256.Int).Mul(perLane, uint256.NewInt(uint64(max(live, 1))))
	return q.Add(q, feeOn(q, w.feeBps)), nil
}

// abandon releases what Quote reserved for a request the server did not
// run (it broke a spending cap).
func (b *SessionBackend) abandon(req *Request) {
	if t := req.ticket; t != nil && t.w != nil {
		b.release(t.w, t.perLane)
		req.ticket = nil
	}
}

// pick finds or opens a session for req and reserves its worst case.
func (b *SessionBackend) pick(ctx context.Context, req *Request) (*warmSession, *uint256.Int, error) {
	ms := b.modelFor(req)
	m, err := ms.load()
	if err != nil {
		return nil, nil, err
	}
	toks, err := m.Tokenize(req.Prompt)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot tokenize the prompt: %w", err)
	}
	nIn := uint64(len(toks))
	waited := false
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, nil, errors.New("the gateway is shutting down")
		}
		w := ms.cur
		stale := w != nil && w.broken == nil && time.Since(w.heightAt) > 2*time.Second
		b.mu.Unlock()
		if stale {
			b.observe(ctx, w)
		}
		b.mu.Lock()
		if ms.cur != nil && ms.next != nil && b.lowLocked(ms.cur) != "" {
			// The next session is ready and the current one runs low:
			// switch now; the old one closes when its requests end.
			b.retireLocked(ms.cur)
			ms.cur, ms.next = ms.next, nil
		}
		if w = ms.cur; w != nil {
			need := laneCharge(nIn, req.MaxTokens, w.pin, w.pout)
			switch why := b.unusableLocked(w, need); {
			case why == "":
				w.reserved.Add(w.reserved, need)
				w.inflight++
				w.last = need
				b.renewLocked(ms)
				b.mu.Unlock()
				return w, need, nil
			case waited && ms.next == nil:
				b.mu.Unlock()
				if w.broken == nil && w.inflight == 0 && w.budgetShort(need) {
					return nil, nil, &Error{Status: http.StatusPaymentRequired, Type: TypeBilling, Code: CodeBudgetExceeded, NoRetry: true,
						Message: fmt.Sprintf("this request may cost %s per lane, more than a fresh session's budget per lane of %s: lower max_tokens, or raise the gateway's session budget",
							types.FormatAmount(need), types.FormatAmount(b.cfg.Budget))}
				}
				return nil, nil, fmt.Errorf("session %d cannot take the request: %s", w.id, why)
			default:
				b.log.Debug("the warm session cannot take the request", "session", w.id, "why", why)
			}
		}
		if ms.next != nil {
			if ms.cur != nil {
				b.retireLocked(ms.cur)
			}
			ms.cur, ms.next = ms.next, nil
			b.mu.Unlock()
			continue
		}
		if ms.opening == nil && ms.openErr != nil && time.Since(ms.openFailedAt) < b.cfg.RetryOpenAfter {
			err := ms.openErr
			b.mu.Unlock()
			return nil, nil, fmt.Errorf("the last session opening failed %s ago: %w", time.Since(ms.openFailedAt).Round(time.Second), err)
		}
		if waited && ms.openErr != nil {
			err := ms.openErr
			b.mu.Unlock()
			return nil, nil, err
		}
		ch := b.openLocked(ms)
		b.mu.Unlock()
		select {
		case <-ch:
			waited = true
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for a session to open: %w", ctx.Err())
		}
	}
}

// budgetShort: even an idle w cannot pay need on some live lane.
func (w *warmSession) budgetShort(need *uint256.Int) bool {
	for _, l := range w.lanes {
		if l.Failed == nil && new(uint256.Int).Sub(l.Budget, l.Signed).Lt(need) {
			return true
		}
	}
	return false
}

// leftLocked is the least budget left on a live lane, less what requests
// in flight may still take; ok is false when no lane lives.
func (w *warmSession) leftLocked() (left *uint256.Int, live int) {
	for _, l := range w.lanes {
		if l.Failed != nil {
			continue
		}
		live++
		if x := new(uint256.Int).Sub(l.Budget, l.Signed); left == nil || x.Lt(left) {
			left = x
		}
	}
	if left == nil || left.Lt(w.reserved) {
		return new(uint256.Int), live
	}
	return left.Sub(left, w.reserved), live
}

// unusableLocked says why w cannot take a request whose worst case per
// lane is need ("" if it can).
func (b *SessionBackend) unusableLocked(w *warmSession, need *uint256.Int) string {
	left, live := w.leftLocked()
	switch {
	case w.broken != nil:
		return w.broken.Error()
	case w.retired:
		return "replaced"
	case live == 0:
		return "no lane lives"
	case w.height+1 >= w.expiry:
		return fmt.Sprintf("it expires at height %d (the chain is at %d)", w.expiry, w.height)
	case left.Lt(need):
		return fmt.Sprintf("its lanes have %s left beyond the requests in flight, this one may cost %s per lane", types.FormatAmount(left), types.FormatAmount(need))
	}
	return ""
}

// lowLocked says why w should be replaced soon ("" if not).
func (b *SessionBackend) lowLocked(w *warmSession) string {
	left, live := w.leftLocked()
	want := new(uint256.Int)
	if w.last != nil {
		want.Mul(w.last, uint256.NewInt(b.cfg.RenewRequests))
	}
	switch {
	case live < w.born:
		return fmt.Sprintf("%d of its %d lanes live", live, w.born)
	case left.Lt(want):
		return fmt.Sprintf("%s left per lane, less than %d requests like the last", types.FormatAmount(left), b.cfg.RenewRequests)
	case w.height+b.cfg.RenewBlocks >= w.expiry:
		return fmt.Sprintf("it expires at height %d (the chain is at %d)", w.expiry, w.height)
	}
	return ""
}

// renewLocked opens the next session in the background when the current
// one runs low.
func (b *SessionBackend) renewLocked(ms *modelSessions) {
	w := ms.cur
	if w == nil || ms.next != nil || ms.opening != nil || b.closed {
		return
	}
	if ms.openErr != nil && time.Since(ms.openFailedAt) < b.cfg.RetryOpenAfter {
		return
	}
	if why := b.lowLocked(w); why != "" {
		b.log.Info("opening the next session before the current one runs out", "session", w.id, "why", why)
		b.openLocked(ms)
	}
}

// openLocked starts an opening (unless one runs) and returns a channel
// closed when it ends: the new session is then ms.next (or ms.openErr).
func (b *SessionBackend) openLocked(ms *modelSessions) chan struct{} {
	if ms.opening != nil {
		return ms.opening
	}
	ch := make(chan struct{})
	ms.opening = ch
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		w, err := b.open(ms)
		b.mu.Lock()
		defer b.mu.Unlock()
		ms.opening = nil
		close(ch)
		if err != nil {
			ms.openErr, ms.openFailedAt = err, time.Now()
			b.log.Warn("cannot open a session", "model", modelID(ms.hash), "err", err)
			return
		}
		ms.openErr = nil
		if b.closed {
			w.retired = true
			b.closeLocked(w)
			return
		}
		ms.next = w
	}()
	return ch
}

// open buys a session for ms by auction and waits for its award.
func (b *SessionBackend) open(ms *modelSessions) (*warmSession, error) {
	m, err := ms.load()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.OpenTimeout)
	defer cancel()
	c := b.client
	cfg := agent.SessionClientConfig{Chain: c.Chain, Key: c.Key, Host: c.Host, Sender: c.Sender(), Model: m, LedgerDir: b.cfg.LedgerDir, Logger: b.log}
	order := agent.SessionOrder{Model: ms.hash, ModelSize: ms.size, Lanes: b.cfg.Redundancy, MaxPrice: b.cfg.MaxPrice, InputPriceBps: b.cfg.InputPriceBps,
		Budget: b.cfg.Budget, Blocks: b.cfg.Blocks, Grace: b.cfg.Grace, Req: b.cfg.Req, Windows: b.cfg.Windows}
	order.Req.Attributes = append([]string(nil), b.cfg.Req.Attributes...)
	order.OnPosted = func(id uint64, height int64) {
		// The posting's transaction fee is spent for good, awarded or not.
		if fee, err := postFee(ctx, c.Chain, height, id); err == nil {
			b.spent(fee, fmt.Sprintf("open session %d", id))
		} else {
			b.log.Warn("cannot read the fee of a session's posting: the day's ledger misses it", "session", id, "err", err)
		}
	}
	started := time.Now()
	sc, err := agent.OpenSession(ctx, cfg, order, func(format string, a ...any) {
		b.log.Debug("session: " + fmt.Sprintf(format, a...))
	})
	if err != nil {
		return nil, err
	}
	v := sc.Session()
	w := &warmSession{sc: sc, id: sc.ID(), pin: v.PriceIn.Clone(), pout: v.PriceOut.Clone(), feeBps: v.FeeBps, expiry: v.Expiry,
		height: v.Height, heightAt: time.Now(), reserved: new(uint256.Int), lanes: sc.Lanes(), born: len(v.Lanes)}
	b.log.Info("session open", "session", w.id, "lanes", len(w.lanes), "price_out", types.FormatAmount(w.pout), "price_in", types.FormatAmount(w.pin),
		"expiry", w.expiry, "took", time.Since(started).Round(time.Millisecond))
	return w, nil
}

// observe reads w's session from the chain: the height, and whether it
// ended.
func (b *SessionBackend) observe(ctx context.Context, w *warmSession) {
	v, err := b.client.Chain.Session(ctx, w.id)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		return
	}
	w.height, w.heightAt = v.Height, time.Now()
	if v.Closed || v.Settled {
		if w.broken == nil {
			w.broken = fmt.Errorf("session %d was closed", w.id)
		}
	}
}

// release ends a request's reservation on w.
func (b *SessionBackend) release(w *warmSession, perLane *uint256.Int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.reserved.Lt(perLane) {
		w.reserved.Clear()
	} else {
		w.reserved.Sub(w.reserved, perLane)
	}
	w.inflight--
	if w.retired && w.inflight == 0 {
		b.closeLocked(w)
	}
}

// retireLocked takes w out of use; it is closed once its last request
// ends.
func (b *SessionBackend) retireLocked(w *warmSession) {
	w.retired = true
	if w.inflight == 0 {
		b.closeLocked(w)
	}
}

// closeLocked closes w on chain in the background: no request after
// this block, the providers redeem in the grace, then the chain refunds
// the rest.
func (b *SessionBackend) closeLocked(w *warmSession) {
	if w.closing {
		return
	}
	w.closing = true
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w.run.Lock()
		w.sc.Disconnect()
		w.run.Unlock()
		res, err := b.client.Sender().Send(ctx, (&session.MsgCloseSession{Session: w.id}).Raw())
		if err != nil {
			b.log.Info("session not closed (it may have ended already)", "session", w.id, "err", err)
			return
		}
		for _, ev := range res.TxResult.Events {
			if ev.Type == chain.EventTypeTx {
				if e, err := chain.ParseEventTx(ev); err == nil {
					b.spent(e.Fee, fmt.Sprintf("close session %d", w.id))
				}
			}
		}
		b.log.Info("session closed: the providers redeem in the grace, then the rest is refunded", "session", w.id, "height", res.Height)
	}()
}

// maintain reads the chain's height for w after a request and opens the
// next session if w runs low.
func (b *SessionBackend) maintain(ms *modelSessions, w *warmSession) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		b.observe(ctx, w)
		b.mu.Lock()
		defer b.mu.Unlock()
		if ms.cur == w {
			if w.broken != nil {
				b.retireLocked(w)
				ms.cur = nil
				if ms.next != nil {
					ms.cur, ms.next = ms.next, nil
				}
			}
			b.renewLocked(ms)
		}
	}()
}

// dispute takes a mismatch to the chain in the background: the session
// client keeps the prompt and outputs as evidence and serves them to the
// validators; the liar is slashed and the client compensated when they
// find its receipt wrong (session/dispute.go). The answer does not wait.
func (b *SessionBackend) dispute(w *warmSession, comp *agent.Completion) {
	if b.OnMismatch != nil {
		b.OnMismatch(comp)
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
		defer cancel()
		var n uint64
		sent, err := w.sc.Dispute(ctx, comp)
		if err != nil {
			b.log.Error("cannot dispute the session's differing answers", "session", w.id, "err", err)
		} else {
			// The fee is spent; the bond returns when a receipt is
			// proven wrong (which a mismatch in one class means).
			n = sent.Index
			b.spent(sent.Fee, fmt.Sprintf("dispute %d of session %d", n, w.id))
			b.log.Warn("the session's lanes answered differently: disputed on chain", "session", w.id, "dispute", n)
		}
		if b.OnDispute != nil {
			b.OnDispute(w.id, n, err)
		}
	}()
}

// Generate runs req on the session Quote chose (or the fallback). It
// streams the tokens of whichever lane is ahead; if every lane dies the
// session is dropped, and a request that was not charged anything yet
// runs once more on another.
func (b *SessionBackend) Generate(ctx context.Context, req *Request, ev Events) (*Result, error) {
	t := req.ticket
	if t == nil {
		return nil, errors.New("session backend: Generate without a Quote")
	}
	if t.job {
		res, err := b.fallback.Generate(ctx, req, ev)
		if res != nil {
			res.Receipt.Fallback = "no session: " + t.why
		}
		return res, err
	}
	ms := b.modelFor(req)
	streamed := false
	token := func(piece string) {
		streamed = true
		if ev.Token != nil {
			ev.Token(piece)
		}
	}
	dispatched := false
	for try := 0; ; try++ {
		w := t.w
		b.mu.Lock()
		height, live := w.height, 0
		for _, l := range w.lanes {
			if l.Failed == nil {
				live++
			}
		}
		b.mu.Unlock()
		if !dispatched && ev.Dispatched != nil {
			// The first voucher (prepaying the prompt) is signed next.
			ev.Dispatched(Dispatch{Session: strconv.FormatUint(w.id, 10), Height: int64(height)})
			dispatched = true
		}
		if ev.Progress != nil {
			ev.Progress(fmt.Sprintf("session %d: %d lane(s) at %s per output token, %s per prompt token", w.id, live,
				types.FormatAmount(w.pout), types.FormatAmount(w.pin)))
		}
		w.run.Lock()
		comp, err := w.sc.Complete(ctx, req.Prompt, req.MaxTokens, token)
		lanes := w.sc.Lanes()
		w.run.Unlock()
		b.mu.Lock()
		w.lanes = lanes
		w.used = true
		switch {
		case errors.Is(err, agent.ErrSessionEnded):
			w.broken = err
		case comp != nil && err != nil:
			live := 0
			for _, l := range lanes {
				if l.Failed == nil {
					live++
				}
			}
			if live == 0 {
				w.broken = fmt.Errorf("every lane of session %d failed", w.id)
			}
		}
		b.mu.Unlock()
		b.release(w, t.perLane)
		b.maintain(ms, w)
		if comp != nil && comp.Mismatch != nil {
			b.dispute(w, comp)
		}
		var res *Result
		if comp != nil {
			res = &Result{Receipt: b.receipt(w, comp)}
		}
		if err == nil {
			res.Text, res.Tokens, res.EndOfText = comp.Text, int(comp.CompletionTokens), comp.StoppedOnEOG
			res.Verified = comp.Verified && comp.Mismatch == nil
			pick := b.auditPick
			if pick == nil {
				pick = func() bool { return auditPicked(b.cfg.AuditBps) }
			}
			if comp.Mismatch == nil && pick() {
				b.audit(w, req, comp)
			}
			return res, nil
		}
		charged := res != nil && !res.Receipt.Paid.IsZero()
		if try > 0 || streamed || charged || ctx.Err() != nil {
			return res, &Error{Status: http.StatusBadGateway, Type: TypeAPI, Code: CodeSessionFailed, NoRetry: true,
				Message: fmt.Sprintf("session %d could not answer: %v (what was generated is paid: ogpu.charged; the next request uses another session)", w.id, err)}
		}
		// Nothing was charged or streamed: try once more on another
		// session (the broken one is dropped).
		b.log.Info("the session failed before anything was paid: trying another", "session", w.id, "err", err)
		req.ticket = nil
		nw, perLane, perr := b.pick(ctx, req)
		if perr != nil {
			return res, &Error{Status: http.StatusServiceUnavailable, Type: TypeAPI, Code: CodeSessionFailed, NoRetry: true,
				Message: fmt.Sprintf("session %d could not answer (%v), nothing was charged, and no other session is open: %v", w.id, err, perr)}
		}
		t = &sessionTicket{w: nw, perLane: perLane}
		req.ticket = t
	}
}

// receipt is what comp paid: the vouchers it added (the client's own
// counts) and the validator fee on them.
func (b *SessionBackend) receipt(w *warmSession, comp *agent.Completion) Receipt {
	r := Receipt{Mode: "session", Session: strconv.FormatUint(w.id, 10), Providers: []types.Address{}, UnitPrice: comp.PriceOut.Clone(), PriceUnit: "token",
		PriceIn: comp.PriceIn.Clone(), PriceOut: comp.PriceOut.Clone(), Paid: comp.Cost.Clone(), TxFee: new(uint256.Int),
		Refunded: new(uint256.Int), Compensated: new(uint256.Int)}
	r.ValidatorFee = feeOn(r.Paid, w.feeBps)
	r.Charged = new(uint256.Int).Add(r.Paid, r.ValidatorFee)
	answered := 0
	for _, l := range comp.Lanes {
		lr := LaneReceipt{Provider: l.Provider, Seq: l.Seq, Charged: amountOr0(l.Charged), Cumulative: amountOr0(l.Cumulative)}
		if l.Err != nil {
			lr.Error = l.Err.Error()
		}
		if l.Receipt != nil && l.Err == nil {
			answered++
			r.Providers = append(r.Providers, l.Provider)
			if r.StreamedFrom == nil && l.Text == comp.Text {
				p := l.Provider
				r.StreamedFrom = &p
			}
		}
		r.Lanes = append(r.Lanes, lr)
	}
	switch {
	case comp.Mismatch != nil:
		r.Outcome = "mismatch"
	case comp.Verified:
		r.Outcome = "agreed"
	case answered == 1:
		r.Outcome = "one_lane"
	default:
		r.Outcome = "failed"
	}
	return r
}

// Close closes the warm sessions on chain (their budgets come back after
// the grace), and waits for the backend's work; the fallback is the
// caller's.
func (b *SessionBackend) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	close(b.stopWatch)
	for _, ms := range b.models {
		for _, w := range []*warmSession{ms.cur, ms.next} {
			if w != nil {
				b.retireLocked(w)
			}
		}
		ms.cur, ms.next = nil, nil
	}
	b.mu.Unlock()
	// An opening under way is let finish (within OpenTimeout): its
	// transaction may be in a block already, and the session it opens is
	// closed at once rather than left locking the budget until expiry.
	b.wg.Wait()
	b.cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ms := range b.models {
		if ms.model != nil {
			ms.model.Close()
		}
	}
}

// Sessions describes the warm sessions (for tests and status pages).
func (b *SessionBackend) Sessions() []SessionStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []SessionStatus
	for _, ms := range b.models {
		for _, w := range []*warmSession{ms.cur, ms.next} {
			if w == nil {
				continue
			}
			st := SessionStatus{Model: ms.hash, Session: w.id, Current: w == ms.cur, Expiry: w.expiry, InFlight: w.inflight}
			for _, l := range w.lanes {
				st.Lanes = append(st.Lanes, SessionLane{Provider: l.Provider, Budget: l.Budget.Clone(), Signed: l.Signed.Clone(), Live: l.Failed == nil})
			}
			out = append(out, st)
		}
	}
	return out
}

// SessionStatus is a warm session.
type SessionStatus struct {
	Model    types.Hash
	Session  uint64
	Current  bool // else the next one, opened ahead
	Expiry   uint64
	InFlight int
	Lanes    []SessionLane
}

// SessionLane is a lane of a warm session as the gateway last saw it.
type SessionLane struct {
	Provider       types.Address
	Budget, Signed *uint256.Int
	Live           bool
}

// LookupJob describes a job the fallback posted (GET /v1/ogpu/jobs/{id}).
func (b *SessionBackend) LookupJob(ctx context.Context, id uint64) (any, error) {
	if jl, ok := b.fallback.(JobLooker); ok {
		return jl.LookupJob(ctx, id)
	}
	return nil, &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: CodeUnknownURL, Message: "this gateway serves sessions only (no job mode): it has no jobs"}
}
