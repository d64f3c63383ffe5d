package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/internal/atomicfile"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// Session leases on the provider.
//
// The agent bids on session jobs it can serve (a price per output token
// from its strategy), and at the award opens its lane: it keeps the model
// loaded (models stay loaded for the agent's life) and serves the
// session's client, and only it, over SessionProtocol until the session's
// expiry. Before any work on a request it checks, cheap checks first: the
// request is the client's, for this lane, with the next seq (the same seq
// and request again replays the answer uncharged; another request on a
// used seq is refused: S16), the session is open, and the voucher that
// comes with it prepays exactly the prompt, counted with the model's own
// tokenizer. Once that voucher is stored the prompt is paid: a prompt
// beyond the context (S10) or a max_tokens the lane's budget cannot pay
// (S4) is then refused with a signed refusal that says the prompt was
// charged. It generates greedily with llama.cpp, at most credit tokens
// ahead of the vouchers paying them (rule 3, S5), signs a receipt, and
// takes the next request only after the voucher whose cumulative is
// exactly what it computes it is owed. Every voucher is on disk before it
// is acknowledged. It redeems the latest voucher when the unredeemed
// amount passes a threshold, near the expiry, and in the grace window.

// Session redemption defaults.
const (
	// defaultRedeemMargin is how many blocks before a session's expiry a
	// provider redeems everything it holds.
	defaultRedeemMargin = 5
	// defaultRedeemShare: a lane's vouchers are redeemed once a quarter
	// of its budget is unredeemed.
	defaultRedeemShare = 4
)

// sessionLane is a provider's lane of one session. The exported fields
// are its persisted state (StateDir/sessions/ID.json), written before any
// voucher is acknowledged.
type sessionLane struct {
	ChainID string
	Session uint64
	Model   types.Hash
	Client  types.Address
	// PriceIn and PriceOut are per token; Budget the lane's.
	PriceIn, PriceOut, Budget *uint256.Int
	Expiry, Due               uint64
	Closed                    bool
	// Seq is the last request taken (0: none) and Request its hash;
	// Prepaid what the lane was owed once its prompt was paid, Owed what
	// it is owed now. Voucher is the highest voucher held.
	Seq        uint64
	Request    types.Hash
	Prepaid    *uint256.Int
	Owed       *uint256.Int
	Voucher    *session.Voucher `json:",omitempty"`
	VoucherSig []byte           `json:",omitempty"`
	// Redeemed is what the chain paid this lane, as far as the agent knows.
	Redeemed *uint256.Int
	// Tokens, Receipt: the answer to Seq, replayed for the same request.
	Tokens     []int            `json:",omitempty"`
	Receipt    *session.Receipt `json:",omitempty"`
	ReceiptSig []byte           `json:",omitempty"`
	// CutOwed, after a request cut off while generating, is the most a
	// late voucher for it may say: its tokens that were sent (a voucher
	// the client signed as the stream broke is still taken).
	CutOwed *uint256.Int `json:",omitempty"`
	// Stopped says why the provider serves this client no more.
	Stopped string `json:",omitempty"`

	mu        sync.Mutex     // guards the fields
	saveMu    sync.Mutex     // one save at a time, each of the state then
	slot      chan struct{}  // held by the stream that serves the lane
	stream    network.Stream // that stream
	redeeming bool
}

func newSessionLane() *sessionLane { return &sessionLane{slot: make(chan struct{}, 1)} }

// held is the highest voucher's cumulative (zero without one).
func (l *sessionLane) held() *uint256.Int {
	if l.Voucher == nil {
		return new(uint256.Int)
	}
	return l.Voucher.Cumulative
}

// status is the lane as the provider tells its client.
func (l *sessionLane) status(provider types.Address, context, credit uint64) *LaneStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &LaneStatus{Provider: provider, Seq: l.Seq, Request: l.Request, Owed: l.Owed.Clone(), Held: l.held().Clone(),
		Answered: l.Receipt != nil, Context: context, Credit: credit, Stopped: l.Stopped}
}

// take makes s the lane's stream: a stream already serving it is reset
// (its client reconnected), and s waits for it to end.
func (l *sessionLane) take(s network.Stream) bool {
	l.mu.Lock()
	old := l.stream
	l.mu.Unlock()
	if old != nil {
		_ = old.Reset()
	}
	select {
	case l.slot <- struct{}{}:
	case <-time.After(10 * time.Second):
		return false
	}
	l.mu.Lock()
	l.stream = s
	l.mu.Unlock()
	return true
}

func (l *sessionLane) release(s network.Stream) {
	l.mu.Lock()
	if l.stream == s {
		l.stream = nil
	}
	l.mu.Unlock()
	<-l.slot
}

// cannotServeSession says why this provider cannot serve session job j,
// or "".
func (p *Provider) cannotServeSession(j *chain.JobView) string {
	p.mu.Lock()
	class := p.class
	_, haveModel := p.models[j.Model]
	p.mu.Unlock()
	switch {
	case j.Session == nil:
		return "the session job has no terms"
	case j.Mode != market.ModeAuction:
		return "sessions are sold by auction"
	case j.Req.Runtime != "" && j.Req.Runtime != Runtime:
		return "runtime " + j.Req.Runtime + " is not offered"
	case j.Req.Class != "" && j.Req.Class != class:
		return "determinism class " + j.Req.Class + " is not this provider's"
	case !haveModel:
		return fmt.Sprintf("model %x is not served here", j.Model)
	}
	if r := market.MatchAll(j.Req.Attributes, p.cfg.Attributes); r != "" {
		return "requirement " + r + " is not met"
	}
	return ""
}

// openSessionLane opens this provider's lane of session job j at its
// award: the lane's terms from the chain, the model loaded.
func (p *Provider) openSessionLane(ctx context.Context, j *chain.JobView) error {
	sv, err := p.cfg.Chain.Session(ctx, j.ID)
	if err != nil {
		return fmt.Errorf("session %d: %w", j.ID, err)
	}
	lane, ok := sv.Lane(p.addr)
	if !ok {
		return fmt.Errorf("awarded session %d holds no lane of this provider", j.ID)
	}
	id, err := p.cfg.Chain.ChainID(ctx)
	if err != nil {
		return err
	}
	if _, err := p.model(j.Model); err != nil {
		return err
	}
	l := newSessionLane()
	l.ChainID, l.Session, l.Model, l.Client = id, sv.ID, j.Model, sv.Client
	l.PriceIn, l.PriceOut, l.Budget = sv.PriceIn, sv.PriceOut, lane.Budget
	l.Expiry, l.Due, l.Closed = sv.Expiry, sv.Due, sv.Closed
	l.Prepaid, l.Owed, l.Redeemed = new(uint256.Int), new(uint256.Int), lane.Paid.Clone()
	p.sessMu.Lock()
	if p.lanes == nil {
		p.lanes = make(map[uint64]*sessionLane)
	}
	if _, ok := p.lanes[sv.ID]; ok { // restored from disk
		p.sessMu.Unlock()
		return nil
	}
	p.lanes[sv.ID] = l
	p.sessMu.Unlock()
	if err := p.saveLane(l); err != nil {
		return err
	}
	p.log.Info("session open: serving its client", "session", sv.ID, "client", sv.Client.Hex(), "until", sv.Expiry,
		"price_out", types.FormatAmount(sv.PriceOut), "price_in", types.FormatAmount(sv.PriceIn), "budget", types.FormatAmount(lane.Budget))
	return nil
}

// openLaneFor opens this provider's lane of session id for remote, the
// session's client (checked first, against the chain), before the agent
// saw the award.
func (p *Provider) openLaneFor(id uint64, remote peer.ID) (*sessionLane, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	none := fmt.Errorf("this provider holds no open lane of session %d", id)
	sv, err := p.cfg.Chain.Session(ctx, id)
	if err != nil {
		return nil, none
	}
	if who, err := p2p.AddressOf(remote); err != nil || who != sv.Client {
		p.log.Warn("session stream from a stranger refused", "session", id, "peer", remote)
		return nil, fmt.Errorf("peer %s is not session %d's client %s: only the client may use its lanes", remote, id, sv.Client)
	}
	if _, ok := sv.Lane(p.addr); !ok || sv.Settled {
		return nil, none
	}
	j, err := p.cfg.Chain.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := p.openSessionLane(ctx, j); err != nil {
		return nil, err
	}
	if l := p.lane(id); l != nil {
		return l, nil
	}
	return nil, none
}

func (p *Provider) lane(id uint64) *sessionLane {
	p.sessMu.Lock()
	defer p.sessMu.Unlock()
	return p.lanes[id]
}

func (p *Provider) sessionLanes() []*sessionLane {
	p.sessMu.Lock()
	defer p.sessMu.Unlock()
	out := make([]*sessionLane, 0, len(p.lanes))
	for _, l := range p.lanes {
		out = append(out, l)
	}
	return out
}

func (p *Provider) sessionsDir() string { return filepath.Join(p.cfg.StateDir, "sessions") }

// saveLane writes l's state (temporary file, then rename).
func (p *Provider) saveLane(l *sessionLane) error {
	if p.cfg.StateDir == "" {
		return nil
	}
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	l.mu.Lock()
	bz, err := json.Marshal(l)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.sessionsDir(), 0o700); err != nil {
		return err
	}
	path := filepath.Join(p.sessionsDir(), strconv.FormatUint(l.Session, 10)+".json")
	return atomicfile.Write(path, bz, 0o600)
}

// loadLanes restores the lanes saved in StateDir.
func (p *Provider) loadLanes() {
	files, _ := filepath.Glob(filepath.Join(p.sessionsDir(), "*.json"))
	for _, f := range files {
		bz, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		l := newSessionLane()
		if err := json.Unmarshal(bz, l); err != nil || l.Owed == nil || l.Prepaid == nil || l.Redeemed == nil || l.Budget == nil {
			p.log.Error("a session lane file is corrupt; its vouchers are not redeemed", "file", f, "err", err)
			continue
		}
		if p.lanes == nil {
			p.lanes = make(map[uint64]*sessionLane)
		}
		p.lanes[l.Session] = l
	}
}

// dropLane forgets session id (settled: nothing more to redeem).
func (p *Provider) dropLane(id uint64) {
	p.sessMu.Lock()
	_, ok := p.lanes[id]
	delete(p.lanes, id)
	p.sessMu.Unlock()
	if ok && p.cfg.StateDir != "" {
		_ = os.Remove(filepath.Join(p.sessionsDir(), strconv.FormatUint(id, 10)+".json"))
	}
}

// sessionClosed notes that session id's client closed it at height.
func (p *Provider) sessionClosed(id, height, due uint64) {
	l := p.lane(id)
	if l == nil {
		return
	}
	l.mu.Lock()
	l.Closed, l.Expiry, l.Due = true, height, due
	l.mu.Unlock()
	if err := p.saveLane(l); err != nil {
		p.log.Error("cannot save the session lane", "session", id, "err", err)
	}
	p.log.Info("session closed by its client: redeeming in the grace", "session", id, "refund_at", due)
}

func (p *Provider) sessionCredit() uint64 {
	if p.cfg.SessionCredit > 0 {
		return p.cfg.SessionCredit
	}
	return DefaultSessionCredit
}

// serveSession serves one client stream of SessionProtocol.
func (p *Provider) serveSession(s network.Stream) {
	defer s.Close()
	c := newLineConn(s)
	var hello sessionHello
	if err := c.read(&hello, 10*time.Second); err != nil {
		_ = s.Reset()
		return
	}
	remote := s.Conn().RemotePeer()
	l := p.lane(hello.Session)
	if l == nil {
		// The client may come before this agent saw the award.
		var err error
		if l, err = p.openLaneFor(hello.Session, remote); err != nil {
			_ = c.write(providerMsg{Error: err.Error()})
			return
		}
	}
	// S17: only the session's client, before any work.
	if who, err := p2p.AddressOf(remote); err != nil || who != l.Client {
		p.log.Warn("session stream from a stranger refused", "session", hello.Session, "peer", remote)
		_ = c.write(providerMsg{Error: fmt.Sprintf("peer %s is not session %d's client %s: only the client may use its lanes", remote, hello.Session, l.Client)})
		return
	}
	if !l.take(s) {
		_ = c.write(providerMsg{Error: "another stream of this client holds the lane: close it first"})
		return
	}
	defer l.release(s)
	m, err := p.model(l.Model)
	if err != nil {
		_ = c.write(providerMsg{Error: err.Error()})
		return
	}
	if err := c.write(providerMsg{Ready: l.status(p.addr, uint64(m.Options().ContextSize), p.sessionCredit())}); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := make(chan clientMsg)
	go func() {
		defer cancel()
		defer close(in)
		for {
			var msg clientMsg
			if err := c.read(&msg, sessionIdle); err != nil {
				return
			}
			select {
			case in <- msg:
			case <-ctx.Done():
				return
			}
		}
	}()
	ss := &sessionStream{p: p, l: l, c: c, m: m, in: in}
	for msg := range in {
		var err error
		switch {
		case msg.Request != nil:
			err = ss.request(ctx, msg)
		case msg.Voucher != nil:
			err = ss.lateVoucher(msg)
		default:
			err = errors.New("a message is a request or a voucher")
		}
		if err != nil {
			if ctx.Err() == nil {
				_ = c.write(providerMsg{Error: err.Error()})
			}
			p.log.Info("session stream ended", "session", l.Session, "err", err)
			return
		}
	}
}

// sessionStream is one stream serving a lane.
type sessionStream struct {
	p  *Provider
	l  *sessionLane
	c  *lineConn
	m  *llm.Model
	in <-chan clientMsg
}

// refuse sends a signed refusal of request q (charged: its prompt was
// paid and its seq is used up). The stream goes on.
func (ss *sessionStream) refuse(q *session.Request, charged bool, nIn uint64, format string, args ...any) error {
	f := &session.Refusal{ChainID: ss.l.ChainID, Session: ss.l.Session, Provider: ss.p.addr, Seq: q.Seq, Request: q.Hash(),
		Charged: charged, NIn: nIn, Reason: fmt.Sprintf(format, args...)}
	sig, err := session.Sign(ss.p.cfg.Key, f.Hash())
	if err != nil {
		return err
	}
	ss.p.log.Info("session request refused", "session", ss.l.Session, "seq", q.Seq, "charged", charged, "reason", f.Reason)
	return ss.c.write(providerMsg{Refusal: f, RefusalSig: sig})
}

// request serves one request.
func (ss *sessionStream) request(ctx context.Context, msg clientMsg) error {
	p, l, q := ss.p, ss.l, msg.Request
	h := q.Hash()
	l.mu.Lock()
	st := struct {
		chainID                     string
		id, seq, expiry             uint64
		client                      types.Address
		request                     types.Hash
		owed, held, pin, pout, budg *uint256.Int
		closed, answered            bool
		stopped                     string
	}{l.ChainID, l.Session, l.Seq, l.Expiry, l.Client, l.Request, l.Owed.Clone(), l.held().Clone(), l.PriceIn, l.PriceOut, l.Budget,
		l.Closed, l.Receipt != nil, l.Stopped}
	l.mu.Unlock()
	switch {
	case st.stopped != "":
		return ss.refuse(q, false, 0, "this provider serves session %d's client no more: %s", st.id, st.stopped)
	case q.ChainID != st.chainID || q.Session != st.id || q.Provider != p.addr:
		return ss.refuse(q, false, 0, "the request is for chain %q, session %d, provider %s; this lane is chain %q, session %d, provider %s",
			q.ChainID, q.Session, q.Provider, st.chainID, st.id, p.addr)
	}
	if signer, err := session.Signer(h, msg.RequestSig); err != nil || signer != st.client {
		return ss.refuse(q, false, 0, "the request is not signed by session %d's client %s", st.id, st.client)
	}
	switch {
	case types.Hash(sha256.Sum256([]byte(msg.Prompt))) != q.Prompt:
		return ss.refuse(q, false, 0, "the prompt's sha256 is not the one the request binds")
	case msg.Prompt == "" || len(msg.Prompt) > MaxPromptBytes:
		return ss.refuse(q, false, 0, "the prompt is %d bytes: want 1..%d", len(msg.Prompt), MaxPromptBytes)
	case q.MaxTokens == 0:
		return ss.refuse(q, false, 0, "max_tokens must be at least 1")
	case q.Params != (types.Hash{}):
		return ss.refuse(q, false, 0, "decoding is greedy: the request's params must be empty")
	}
	// S16: one request per seq; the same one again is answered again.
	if q.Seq == st.seq && st.seq > 0 {
		switch {
		case h == st.request && st.answered:
			return ss.replay(ctx)
		case h == st.request:
			return ss.refuse(q, false, 0, "request %d was refused or cut off, and nothing more is owed for it: send the next request as seq %d", q.Seq, st.seq+1)
		}
		return ss.refuse(q, false, 0, "seq %d already carried another request: a new request takes seq %d", q.Seq, st.seq+1)
	}
	if q.Seq != st.seq+1 {
		return ss.refuse(q, false, 0, "seq %d: the next request of this lane is seq %d", q.Seq, st.seq+1)
	}
	if st.held.Lt(st.owed) {
		return ss.refuse(q, false, 0, "the voucher for request %d (cumulative %s) has not come: send it before the next request", st.seq, st.owed.Dec())
	}
	if now := p.height.Load(); st.closed || now > st.expiry {
		return ss.refuse(q, false, 0, "session %d ended at height %d (the chain is at %d): it takes no more requests", st.id, st.expiry, now)
	}
	toks, err := ss.m.Tokenize(msg.Prompt)
	if err != nil {
		return ss.refuse(q, false, 0, "the prompt does not tokenize: %v", err)
	}
	nIn := uint64(len(toks))
	prepaid := addCharge(st.owed, nIn, 0, st.pin, st.pout)
	v := msg.Voucher
	if err := checkVoucher(v, msg.VoucherSig, st.chainID, st.id, p.addr, st.client, st.budg); err != nil {
		return ss.refuse(q, false, nIn, "voucher refused: %v", err)
	}
	if v.Seq != q.Seq {
		return ss.refuse(q, false, nIn, "voucher refused: it is for seq %d, the request is seq %d", v.Seq, q.Seq)
	}
	if !v.Cumulative.Eq(prepaid) {
		return ss.refuse(q, false, nIn, "voucher refused: its cumulative %s is not what the lane is owed with this prompt, %s (%s owed + %d prompt tokens × %s)",
			v.Cumulative.Dec(), prepaid.Dec(), st.owed.Dec(), nIn, st.pin.Dec())
	}
	// The prompt is paid: the seq is used up.
	l.mu.Lock()
	l.Seq, l.Request, l.Prepaid, l.Owed = q.Seq, h, prepaid, prepaid.Clone()
	l.Voucher, l.VoucherSig = v, msg.VoucherSig
	l.Tokens, l.Receipt, l.ReceiptSig, l.CutOwed = nil, nil, nil, nil
	l.mu.Unlock()
	if err := p.saveLane(l); err != nil {
		return fmt.Errorf("cannot store the voucher: %w", err)
	}
	if c := uint64(ss.m.Options().ContextSize); q.MaxTokens > c || nIn+q.MaxTokens > c {
		return ss.refuse(q, true, nIn, "the prompt (%d tokens) plus max_tokens (%d) exceed this provider's context of %d tokens (the prompt is charged)", nIn, q.MaxTokens, c)
	}
	if most := addCharge(prepaid, 0, q.MaxTokens, st.pin, st.pout); most.Gt(st.budg) {
		return ss.refuse(q, true, nIn, "the lane's budget %s cannot pay %d more tokens at %s after %s owed: lower max_tokens or open another session (the prompt is charged)",
			st.budg.Dec(), q.MaxTokens, st.pout.Dec(), prepaid.Dec())
	}
	return ss.generate(ctx, q, msg.Prompt, nIn, prepaid, st.pout)
}

// generate runs request q, streams its tokens at most credit ahead of
// the vouchers, sends the receipt and waits for the voucher.
func (ss *sessionStream) generate(ctx context.Context, q *session.Request, prompt string, nIn uint64, prepaid, pout *uint256.Int) error {
	p, l, m := ss.p, ss.l, ss.m
	credit := p.sessionCredit()
	var sent []int
	var stop error
	t0 := time.Now()
	// The interim vouchers are checked and stored by a goroutine of their
	// own and the token lines go out from another: the decode loop waits
	// on neither the disk nor the stream, only on the credit (it runs at
	// most credit tokens ahead of the vouchers).
	vt := ss.takeVouchers(q.Seq, prepaid, pout)
	pipe := newTokenPipe(ss.c, int(credit)+16)
	_, err := m.Generate(ctx, llm.Request{Prompt: prompt, MaxTokens: int(q.MaxTokens)}, func(tok int, piece string) error {
		if p.cfg.Lie && len(sent) == 2 && !m.IsEOG(tok) {
			for tok = (tok + 1) % m.NumVocab(); m.IsEOG(tok); tok = (tok + 1) % m.NumVocab() {
			}
			piece = m.Piece(tok)
		}
		sent = append(sent, tok)
		vt.generated.Store(uint64(len(sent))) // before the line: a voucher may answer it at once
		t := tok
		if err := pipe.send(providerMsg{Token: &t, Piece: piece}); err != nil {
			return err
		}
		if m.IsEOG(tok) || uint64(len(sent)) >= q.MaxTokens {
			return nil
		}
		covered, err := vt.state()
		if err != nil {
			return err
		}
		if uint64(len(sent)) < covered+credit {
			return nil
		}
		timer := time.NewTimer(sessionVoucherWait)
		defer timer.Stop()
		for uint64(len(sent)) >= covered+credit {
			select {
			case <-vt.paid:
				if covered, err = vt.state(); err != nil {
					return err
				}
			case <-timer.C:
				stop = fmt.Errorf("no voucher for %d output tokens of request %d in %s", len(sent)-int(covered), q.Seq, sessionVoucherWait)
				return stop
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	if verr := vt.halt(); err == nil && verr != nil {
		err = verr // a voucher refused after the last token
	}
	if werr := pipe.close(); err == nil && werr != nil {
		err = werr // a token line did not go out: the stream broke
	}
	if err != nil {
		// Cut off: the lane is owed what the vouchers held pay; the rest
		// (at most credit tokens) is lost.
		l.mu.Lock()
		l.Owed, l.CutOwed = l.held().Clone(), addCharge(prepaid, 0, uint64(len(sent)), nil, pout)
		if stop != nil {
			l.Stopped = stop.Error()
		}
		l.mu.Unlock()
		if serr := p.saveLane(l); serr != nil {
			p.log.Error("cannot save the session lane", "session", l.Session, "err", serr)
		}
		return fmt.Errorf("request %d stopped: %w", q.Seq, err)
	}
	text := m.Detokenize(withoutEOG(m, sent))
	owed := addCharge(prepaid, 0, uint64(len(sent)), nil, pout)
	r := &session.Receipt{ChainID: l.ChainID, Session: l.Session, Provider: p.addr, Seq: q.Seq, Request: q.Hash(),
		Output: sha256.Sum256([]byte(text)), NIn: nIn, NOut: uint64(len(sent))}
	sig, err := session.Sign(p.cfg.Key, r.Hash())
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.Owed, l.Tokens, l.Receipt, l.ReceiptSig = owed, sent, r, sig
	l.mu.Unlock()
	if err := p.saveLane(l); err != nil {
		return fmt.Errorf("cannot store the receipt: %w", err)
	}
	p.log.Debug("session request served", "session", l.Session, "seq", q.Seq, "n_in", nIn, "n_out", len(sent), "took", time.Since(t0).Round(time.Microsecond))
	if err := ss.c.write(providerMsg{Receipt: r, ReceiptSig: sig}); err != nil {
		return err
	}
	return ss.awaitVoucher(ctx)
}

// voucherTaker takes the interim vouchers of one request while it
// generates: each is checked and stored (a signature recovery and an
// fsync) away from the decode loop, which reads only what they pay.
type voucherTaker struct {
	// generated is the output tokens sent so far (set by the decode loop).
	generated atomic.Uint64
	// paid is signalled whenever covered or err changes.
	paid chan struct{}
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	covered uint64 // output tokens the vouchers held pay for
	err     error  // the first voucher refused, or the client gone
}

// takeVouchers starts taking request seq's interim vouchers from ss.in;
// halt stops it before anything else reads ss.in.
func (ss *sessionStream) takeVouchers(seq uint64, prepaid, pout *uint256.Int) *voucherTaker {
	vt := &voucherTaker{paid: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(vt.done)
		for {
			var err error
			select {
			case <-vt.stop:
				return
			case msg, ok := <-ss.in:
				switch {
				case !ok:
					err = errors.New("the client went away")
				case msg.Request != nil || msg.Voucher == nil:
					err = errors.New("while a request runs the client sends vouchers only")
				default:
					var cov uint64
					if cov, err = ss.interim(msg, seq, prepaid, pout, vt.generated.Load()); err == nil {
						vt.mu.Lock()
						vt.covered = max(vt.covered, cov)
						vt.mu.Unlock()
					}
				}
			}
			if err != nil {
				vt.mu.Lock()
				vt.err = err
				vt.mu.Unlock()
			}
			select {
			case vt.paid <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return vt
}

// state is what the vouchers taken so far pay for, or why they stopped.
func (vt *voucherTaker) state() (covered uint64, err error) {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	return vt.covered, vt.err
}

// halt stops taking vouchers and returns the first refused, if any.
func (vt *voucherTaker) halt() error {
	close(vt.stop)
	<-vt.done
	_, err := vt.state()
	return err
}

// interim takes a voucher sent while request seq runs, after generated
// tokens: it pays some of them (at most all). It returns how many output
// tokens the lane's vouchers now pay.
func (ss *sessionStream) interim(msg clientMsg, seq uint64, prepaid, pout *uint256.Int, generated uint64) (uint64, error) {
	l, v := ss.l, msg.Voucher
	if err := checkVoucher(v, msg.VoucherSig, l.ChainID, l.Session, ss.p.addr, l.Client, l.Budget); err != nil {
		return 0, fmt.Errorf("voucher refused: %w", err)
	}
	l.mu.Lock()
	held := l.held().Clone()
	l.mu.Unlock()
	most := addCharge(prepaid, 0, generated, nil, pout)
	switch {
	case v.Seq != seq:
		return 0, fmt.Errorf("voucher refused: it is for seq %d, request %d runs", v.Seq, seq)
	case v.Cumulative.Lt(held):
		return 0, fmt.Errorf("voucher refused: its cumulative %s is below one already given, %s", v.Cumulative.Dec(), held.Dec())
	case v.Cumulative.Gt(most):
		return 0, fmt.Errorf("voucher refused: its cumulative %s pays more than the %d tokens sent so far (%s)", v.Cumulative.Dec(), generated, most.Dec())
	}
	l.mu.Lock()
	l.Voucher, l.VoucherSig = v, msg.VoucherSig
	l.mu.Unlock()
	if err := ss.p.saveLane(l); err != nil {
		return 0, fmt.Errorf("cannot store the voucher: %w", err)
	}
	return new(uint256.Int).Div(new(uint256.Int).Sub(v.Cumulative, prepaid), pout).Uint64(), nil
}

// awaitVoucher waits for the voucher paying the lane's last answer in
// full (interim ones may still come first), stores it and acknowledges.
func (ss *sessionStream) awaitVoucher(ctx context.Context) error {
	timer := time.NewTimer(sessionVoucherWait)
	defer timer.Stop()
	for {
		select {
		case msg, ok := <-ss.in:
			if !ok {
				return errors.New("the client went away before paying")
			}
			if msg.Request != nil || msg.Voucher == nil {
				return fmt.Errorf("the voucher for request %d must come before anything else (S5)", ss.l.Seq)
			}
			done, err := ss.final(msg)
			if err != nil || done {
				return err
			}
		case <-timer.C:
			ss.l.mu.Lock()
			ss.l.Stopped = fmt.Sprintf("no voucher for request %d within %s", ss.l.Seq, sessionVoucherWait)
			stopped := ss.l.Stopped
			ss.l.mu.Unlock()
			_ = ss.p.saveLane(ss.l)
			return errors.New(stopped)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// final takes a voucher for the lane's last request: one below what is
// owed is an interim one (done false); one equal to it completes the
// request and is acknowledged once stored. After a cut-off request, any
// voucher up to what was sent completes it.
func (ss *sessionStream) final(msg clientMsg) (done bool, _ error) {
	l, v := ss.l, msg.Voucher
	if err := checkVoucher(v, msg.VoucherSig, l.ChainID, l.Session, ss.p.addr, l.Client, l.Budget); err != nil {
		return false, fmt.Errorf("voucher refused: %w", err)
	}
	l.mu.Lock()
	seq, held, owed := l.Seq, l.held().Clone(), l.Owed.Clone()
	cut := l.Receipt == nil && l.CutOwed != nil
	limit := owed
	if cut {
		limit = l.CutOwed.Clone()
	}
	l.mu.Unlock()
	switch {
	case v.Seq != seq:
		return false, fmt.Errorf("voucher refused: it is for seq %d, the lane's last request is %d", v.Seq, seq)
	case v.Cumulative.Lt(held):
		return false, fmt.Errorf("voucher refused: its cumulative %s is below one already given, %s", v.Cumulative.Dec(), held.Dec())
	case v.Cumulative.Gt(limit):
		return false, fmt.Errorf("voucher refused: its cumulative %s is above what the lane is owed, %s", v.Cumulative.Dec(), limit.Dec())
	}
	l.mu.Lock()
	l.Voucher, l.VoucherSig = v, msg.VoucherSig
	if cut {
		l.Owed = v.Cumulative.Clone()
		owed = l.Owed.Clone()
	}
	l.mu.Unlock()
	if err := ss.p.saveLane(l); err != nil {
		return false, fmt.Errorf("cannot store the voucher: %w", err)
	}
	if v.Cumulative.Lt(owed) {
		return false, nil
	}
	return true, ss.c.write(providerMsg{Ack: &sessionAck{Seq: seq, Cumulative: v.Cumulative}})
}

// lateVoucher takes the voucher for the lane's last request on a new
// stream (the last one broke before it came).
func (ss *sessionStream) lateVoucher(msg clientMsg) error {
	done, err := ss.final(msg)
	if err == nil && !done {
		err = errors.New("the voucher pays less than the lane's last request")
	}
	return err
}

// replay sends the answer to the lane's last request again, uncharged,
// and waits for the voucher paying it (the same one, if it was paid).
func (ss *sessionStream) replay(ctx context.Context) error {
	l := ss.l
	l.mu.Lock()
	toks, r, sig := l.Tokens, l.Receipt, l.ReceiptSig
	l.mu.Unlock()
	for _, tok := range toks {
		t, piece := tok, ""
		if !ss.m.IsEOG(tok) {
			piece = ss.m.Piece(tok)
		}
		if err := ss.c.write(providerMsg{Token: &t, Piece: piece}); err != nil {
			return err
		}
	}
	if err := ss.c.write(providerMsg{Receipt: r, ReceiptSig: sig}); err != nil {
		return err
	}
	ss.p.log.Info("session request repeated: its answer replayed, uncharged", "session", l.Session, "seq", r.Seq)
	return ss.awaitVoucher(ctx)
}

// redeemReason says why a lane holding held (budget budget, redeemed
// already) should be redeemed at height, or "": when the unredeemed
// amount reaches threshold, within margin blocks of the expiry, and in
// the grace window; never once a transaction could land no earlier than
// the refund (height + 1 ≥ due).
func redeemReason(held, redeemed, budget, threshold *uint256.Int, height, expiry, due, margin uint64, closed bool) string {
	claim := held
	if claim.Gt(budget) {
		claim = budget
	}
	if !claim.Gt(redeemed) || height+1 >= due {
		return ""
	}
	switch {
	case closed || height > expiry:
		return "grace"
	case height+margin >= expiry:
		return "near expiry"
	case threshold != nil && !new(uint256.Int).Sub(claim, redeemed).Lt(threshold):
		return "threshold"
	}
	return ""
}

// redeemSessions redeems, at height, the lanes whose policy says so.
func (p *Provider) redeemSessions(ctx context.Context, height uint64) {
	margin := p.cfg.SessionRedeemMargin
	if margin == 0 {
		margin = defaultRedeemMargin
	}
	for _, l := range p.sessionLanes() {
		l.mu.Lock()
		threshold := p.cfg.SessionRedeemAt
		if threshold == nil {
			threshold = new(uint256.Int).Div(l.Budget, uint256.NewInt(defaultRedeemShare))
		}
		why := redeemReason(l.held(), l.Redeemed, l.Budget, threshold, height, l.Expiry, l.Due, margin, l.Closed)
		start := why != "" && !l.redeeming
		if start {
			l.redeeming = true
		}
		l.mu.Unlock()
		if start {
			p.spawn(func() {
				if _, err := p.redeemLane(ctx, l, why); err != nil && ctx.Err() == nil {
					p.log.Warn("session redemption failed (retried next block)", "session", l.Session, "err", err)
				}
			})
		}
	}
}

// pruneLanes forgets the lanes restored from disk whose session settled
// while the agent was down.
func (p *Provider) pruneLanes(ctx context.Context) {
	for _, l := range p.sessionLanes() {
		sv, err := p.cfg.Chain.Session(ctx, l.Session)
		var qe *node.QueryError
		if errors.As(err, &qe) || (err == nil && sv.Settled) {
			p.log.Info("forgetting a settled session", "session", l.Session)
			p.dropLane(l.Session)
		}
	}
}

// RedeemSession redeems the latest voucher this provider holds for session
// id now, whatever the policy, and returns what the chain paid.
func (p *Provider) RedeemSession(ctx context.Context, id uint64) (*uint256.Int, error) {
	l := p.lane(id)
	if l == nil {
		return nil, fmt.Errorf("this provider holds no lane of session %d", id)
	}
	l.mu.Lock()
	busy := l.redeeming
	l.redeeming = true
	l.mu.Unlock()
	if busy {
		return nil, fmt.Errorf("a redemption of session %d is under way", id)
	}
	return p.redeemLane(ctx, l, "asked")
}

// redeemLane sends the lane's latest voucher to the chain (l.redeeming is
// set; it is cleared at the end).
func (p *Provider) redeemLane(ctx context.Context, l *sessionLane, why string) (*uint256.Int, error) {
	defer func() {
		l.mu.Lock()
		l.redeeming = false
		l.mu.Unlock()
	}()
	l.mu.Lock()
	v, sig, budget := l.Voucher, l.VoucherSig, l.Budget
	l.mu.Unlock()
	if v == nil {
		return nil, fmt.Errorf("no voucher of session %d to redeem", l.Session)
	}
	res, err := p.sender.Send(ctx, (&session.MsgRedeemVoucher{Voucher: *v, Sig: sig}).Raw())
	var te *node.TxError
	if errors.As(err, &te) && te.Code == types.ErrInvalidMsg.Code && strings.Contains(te.Log, "pays nothing more") {
		// Redeemed already (by a relayer, or before a restart): take
		// what the chain says.
		if sv, qerr := p.cfg.Chain.Session(ctx, l.Session); qerr == nil {
			if lane, ok := sv.Lane(p.addr); ok {
				l.mu.Lock()
				l.Redeemed = lane.Paid.Clone()
				l.mu.Unlock()
				_ = p.saveLane(l)
			}
		}
		return new(uint256.Int), nil
	}
	if err != nil {
		return nil, err
	}
	var e session.EventRedeemed
	paid := new(uint256.Int)
	if node.FindEvent(res, &e) == nil {
		paid = e.Paid
	}
	claim := v.Cumulative.Clone()
	if claim.Gt(budget) {
		claim = budget.Clone()
	}
	l.mu.Lock()
	if claim.Gt(l.Redeemed) {
		l.Redeemed = claim
	}
	l.mu.Unlock()
	if err := p.saveLane(l); err != nil {
		p.log.Error("cannot save the session lane", "session", l.Session, "err", err)
	}
	p.log.Info("redeemed session voucher", "session", l.Session, "seq", v.Seq, "paid", types.FormatAmount(paid), "total", types.FormatAmount(claim), "why", why)
	return paid, nil
}
