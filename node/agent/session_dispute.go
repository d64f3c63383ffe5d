package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/internal/atomicfile"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// Session disputes off chain.
//
// The chain (session/dispute.go) holds a dispute's signed requests and
// receipts, never the prompt or the outputs: those stay private to the
// session's parties and, while a dispute is open, the validators that
// judge it (protocol-threats S12, S18). The accuser keeps them as
// Evidence and serves them over DisputeProtocol to active validators
// only, for open disputes only. A validator fetches them from the
// addresses the dispute names, checks every hash against the signed
// objects, re-generates the greedy answer in the session's determinism
// class and judges each receipt on its own (rule 7): exactly the
// re-generation, or passing the tolerant teacher-forced check, is valid
// (a tolerance may clear, never convict, S14); anything else is invalid.
// Data it cannot get, or that does not match, is a no-data vote, which
// dismisses the dispute and never counts against the accused.

// DisputeProtocol serves a session dispute's prompt and outputs to the
// validators judging it: one JSON request line {"session":N,"dispute":D},
// one JSON answer line (DisputeData or {"error":".."}).
const DisputeProtocol = "/ogpu/session-dispute/1"

// maxDisputeOutput bounds one output's text in dispute data.
const maxDisputeOutput = 1 << 20

// DisputeOutput is one disputed receipt's output: the tokens the client
// received (end-of-generation included) and their text.
type DisputeOutput struct {
	Tokens []int  `json:"tokens"`
	Text   string `json:"text"`
}

// DisputeData is what validators need beyond the chain: the prompt and
// each disputed receipt's output, in the dispute's receipt order.
type DisputeData struct {
	Prompt  string          `json:"prompt"`
	Outputs []DisputeOutput `json:"outputs"`
}

// disputeQuery is a validator's request for a dispute's data.
type disputeQuery struct {
	Session uint64 `json:"session"`
	Dispute uint64 `json:"dispute"`
}

// disputeAnswer is the accuser's answer.
type disputeAnswer struct {
	Data  *DisputeData `json:"data,omitempty"`
	Error string       `json:"error,omitempty"`
}

// Evidence is the prompts and outputs an accuser keeps for the disputes
// it opened, by the request's prompt hash and the receipt's output hash.
// It persists in Dir (if set) so that a restarted client still answers.
type Evidence struct {
	Dir string

	mu      sync.Mutex
	prompts map[types.Hash]string
	outputs map[types.Hash]DisputeOutput
}

// NewEvidence returns an evidence store kept in dir ("" keeps it in
// memory only); evidence written there before is read back.
func NewEvidence(dir string) (*Evidence, error) {
	e := &Evidence{Dir: dir, prompts: map[types.Hash]string{}, outputs: map[types.Hash]DisputeOutput{}}
	if dir == "" {
		return e, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		bz, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d DisputeData
		if err := json.Unmarshal(bz, &d); err != nil {
			return nil, fmt.Errorf("evidence %s is unreadable (remove it if the dispute is over): %w", f, err)
		}
		e.add(&d)
	}
	return e, nil
}

func (e *Evidence) add(d *DisputeData) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.prompts[sha256.Sum256([]byte(d.Prompt))] = d.Prompt
	for _, o := range d.Outputs {
		e.outputs[sha256.Sum256([]byte(o.Text))] = o
	}
}

// Keep stores d (written to Dir before it returns, so that a dispute is
// never sent whose data could be lost).
func (e *Evidence) Keep(d *DisputeData) error {
	if e.Dir != "" {
		bz, err := json.Marshal(d)
		if err != nil {
			return err
		}
		h := sha256.Sum256(bz)
		if err := atomicfile.Write(filepath.Join(e.Dir, fmt.Sprintf("%x.json", h[:12])), bz, 0o600); err != nil {
			return fmt.Errorf("cannot keep the dispute's evidence: %w", err)
		}
	}
	e.add(d)
	return nil
}

// lookup returns the data of dispute d from the store, or an error naming
// what is missing.
func (e *Evidence) lookup(d *chain.DisputeView) (*DisputeData, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(d.Requests) == 0 {
		return nil, errors.New("the dispute has no requests")
	}
	prompt, ok := e.prompts[d.Requests[0].Request.Prompt]
	if !ok {
		return nil, fmt.Errorf("no prompt %x kept here", d.Requests[0].Request.Prompt[:8])
	}
	out := &DisputeData{Prompt: prompt}
	for _, r := range d.Receipts {
		o, ok := e.outputs[r.Receipt.Output]
		if !ok {
			return nil, fmt.Errorf("no output %x kept here", r.Receipt.Output[:8])
		}
		out.Outputs = append(out.Outputs, o)
	}
	return out, nil
}

// ServeDisputes answers DisputeProtocol on h from ev: only to active
// validators, only for open disputes this store holds the data of.
func ServeDisputes(h *p2p.Host, c *node.Client, ev *Evidence, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	acc := NewAccess(c)
	h.Host().SetStreamHandler(DisputeProtocol, func(s network.Stream) {
		defer s.Close()
		conn := newLineConn(s)
		var q disputeQuery
		if err := conn.read(&q, 30*time.Second); err != nil {
			_ = conn.write(disputeAnswer{Error: err.Error()})
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		data, err := answerDispute(ctx, c, acc, ev, s.Conn().RemotePeer(), q)
		if err != nil {
			log.Info("dispute data refused", "peer", s.Conn().RemotePeer(), "session", q.Session, "dispute", q.Dispute, "err", err)
			_ = conn.write(disputeAnswer{Error: err.Error()})
			return
		}
		_ = conn.write(disputeAnswer{Data: data})
	})
}

func answerDispute(ctx context.Context, c *node.Client, acc *Access, ev *Evidence, remote peer.ID, q disputeQuery) (*DisputeData, error) {
	addr, err := p2p.AddressOf(remote)
	if err != nil {
		return nil, err
	}
	if err := acc.activeValidator(ctx, addr); err != nil {
		return nil, fmt.Errorf("dispute data goes to active validators only: %w", err)
	}
	d, err := c.SessionDispute(ctx, q.Session, q.Dispute)
	if err != nil {
		return nil, err
	}
	if d.Status != session.DisputeOpen {
		return nil, fmt.Errorf("session %d dispute %d is %s: its data is served only while it is open", q.Session, q.Dispute, d.Status)
	}
	return ev.lookup(d)
}

// FetchDispute asks the accuser of dispute d (at the addresses the
// dispute names) for its data and checks it against the signed objects:
// the prompt's hash is every request's, each output's text hashes to its
// receipt's output.
func FetchDispute(ctx context.Context, host *p2p.Host, d *chain.DisputeView) (*DisputeData, error) {
	h0 := d.Requests[0].Request.Hash()
	if _, err := session.Signer(h0, d.Requests[0].Sig); err != nil {
		return nil, fmt.Errorf("the dispute's request signature: %w", err)
	}
	pub, err := ethcrypto.SigToPub(h0[:], d.Requests[0].Sig)
	if err != nil {
		return nil, err
	}
	pid, err := p2p.PeerIDOf(pub)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := host.ConnectPeer(ctx, pid, d.Addrs); err != nil {
		return nil, fmt.Errorf("cannot reach the accuser at %v: %w", d.Addrs, err)
	}
	s, err := host.Host().NewStream(ctx, pid, DisputeProtocol)
	if err != nil {
		return nil, fmt.Errorf("the accuser does not serve dispute data: %w", err)
	}
	defer s.Close()
	conn := newLineConn(s)
	var a disputeAnswer
	if err := conn.write(disputeQuery{Session: d.Session, Dispute: d.Index}); err == nil {
		err = conn.read(&a, time.Minute)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("dispute data: %w", err)
	case a.Error != "":
		return nil, fmt.Errorf("the accuser refused the data: %s", a.Error)
	case a.Data == nil:
		return nil, errors.New("the accuser sent no data")
	}
	return a.Data, checkDisputeData(d, a.Data)
}

// checkDisputeData checks data against dispute d's signed objects.
func checkDisputeData(d *chain.DisputeView, data *DisputeData) error {
	if len(data.Prompt) == 0 || len(data.Prompt) > MaxPromptBytes {
		return fmt.Errorf("the prompt is %d bytes: want 1..%d", len(data.Prompt), MaxPromptBytes)
	}
	ph := sha256.Sum256([]byte(data.Prompt))
	for _, q := range d.Requests {
		if q.Request.Prompt != ph {
			return fmt.Errorf("the prompt sent does not hash to request %d's prompt hash", q.Request.Seq)
		}
	}
	if len(data.Outputs) != len(d.Receipts) {
		return fmt.Errorf("%d outputs for %d receipts", len(data.Outputs), len(d.Receipts))
	}
	for i, o := range data.Outputs {
		if len(o.Text) > maxDisputeOutput || uint64(len(o.Tokens)) > d.Requests[i].Request.MaxTokens {
			return fmt.Errorf("output %d is larger than its request allows", i)
		}
		if sha256.Sum256([]byte(o.Text)) != d.Receipts[i].Receipt.Output {
			return fmt.Errorf("output %d does not hash to its receipt's output hash", i)
		}
	}
	return nil
}

// JudgeSession is a validator's verdict on session dispute d: bit i set
// when receipt i is invalid, session.VerdictNoData when the data could
// not be had or did not match; why says what it found.
func (v *Validator) JudgeSession(ctx context.Context, d *chain.DisputeView) (verdict uint8, why string, err error) {
	data, ferr := FetchDispute(ctx, v.Host, d)
	if ferr != nil {
		if ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
		return session.VerdictNoData, ferr.Error(), nil
	}
	j, err := v.Chain.Job(ctx, d.Session)
	if err != nil {
		return 0, "", err
	}
	var peers []peer.ID
	var classes []string
	for _, l := range d.Providers() {
		if pid, err := connectProvider(ctx, v.Host, v.Chain, l); err == nil {
			peers = append(peers, pid)
		}
		if p, err := v.Chain.Provider(ctx, l); err == nil {
			classes = append(classes, p.Class)
		}
	}
	m, release, err := v.model(ctx, j, targetClass(j.Req.Class, classes), peers)
	if err != nil {
		return 0, "", err
	}
	defer release()
	maxTokens := d.Requests[0].Request.MaxTokens
	gen, err := m.Generate(ctx, llm.Request{Prompt: data.Prompt, MaxTokens: int(maxTokens)}, nil)
	if err != nil {
		return 0, "", fmt.Errorf("re-generate session %d dispute %d: %w", d.Session, d.Index, err)
	}
	mine := m.Detokenize(withoutEOG(m, gen.Tokens))
	prompt, err := m.Tokenize(data.Prompt)
	if err != nil {
		return 0, "", err
	}
	for i, o := range data.Outputs {
		provider := d.Receipts[i].Receipt.Provider
		if o.Text == mine {
			why += fmt.Sprintf("receipt %d (%s): the re-generation; ", i, provider)
			continue
		}
		// The tokens sent must be the text received, and a near tie
		// the tolerant check clears is no fraud (S14).
		if m.Detokenize(withoutEOG(m, o.Tokens)) == o.Text {
			mm, err := m.Verify(ctx, prompt, o.Tokens, int(maxTokens))
			if err != nil {
				return 0, "", err
			}
			if mm == nil {
				why += fmt.Sprintf("receipt %d (%s): passes the tolerant check; ", i, provider)
				continue
			}
			why += fmt.Sprintf("receipt %d (%s): invalid at %s; ", i, provider, mm)
		} else {
			why += fmt.Sprintf("receipt %d (%s): invalid, not the re-generation; ", i, provider)
		}
		verdict |= 1 << i
	}
	return verdict, why, nil
}

// handleSessionDispute judges session dispute d and votes.
func (v *Validator) handleSessionDispute(ctx context.Context, d dispute) {
	work, cancel := untilHeight(ctx, v.Chain, inputCheckBy(d.SealBy, d.Deadline))
	err := func() error {
		defer cancel()
		view, err := v.Chain.SessionDispute(work, d.Job, d.Dispute)
		if err != nil {
			return err
		}
		verdict, why, err := v.JudgeSession(work, view)
		if err != nil {
			return err
		}
		v.Logger.Info("session dispute judged", "session", d.Job, "dispute", d.Dispute, "verdict", verdict, "why", why)
		vctx, vcancel := untilHeight(ctx, v.Chain, d.Deadline)
		defer vcancel()
		return v.castSessionVote(vctx, d.Job, d.Dispute, verdict)
	}()
	if err != nil && ctx.Err() == nil {
		v.Logger.Error("session dispute check failed", "session", d.Job, "dispute", d.Dispute, "err", err)
	}
	if v.checked != nil {
		v.checked(d.Job, uint16(d.Dispute), err)
	}
}

// castSessionVote seals, then opens, the validator's verdict on a
// session dispute.
func (v *Validator) castSessionVote(ctx context.Context, id, n uint64, verdict uint8) error {
	salt := voteSalt(v.Key, "session", []byte{verdict}, id, n)
	seal := &session.MsgSealSessionVote{Session: id, Dispute: n, Commitment: session.SessionVoteCommitment(id, n, verdict, salt, v.sender.Address())}
	open := &session.MsgOpenSessionVote{Session: id, Dispute: n, Verdict: verdict, Salt: salt}
	return v.sealAndOpen(ctx, id, 0, seal.Raw(), open.Raw(), fmt.Sprintf("session %d dispute %d", id, n))
}

// Dispute takes comp's mismatch to the chain: the first two lanes whose
// verified receipts differ, with the requests they answer. The prompt and
// both outputs are kept as evidence (on disk before the transaction
// leaves) and served to the validators while the dispute is open.
func (c *SessionClient) Dispute(ctx context.Context, comp *Completion) (*DisputeSent, error) {
	if comp == nil || comp.Mismatch == nil {
		return nil, errors.New("nothing to dispute: the lanes agreed")
	}
	var picked []LaneCompletion
	for _, l := range comp.Lanes {
		if l.Err != nil || l.Receipt == nil || l.Request == nil {
			continue
		}
		if len(picked) == 1 && picked[0].Receipt.Output == l.Receipt.Output {
			continue
		}
		picked = append(picked, l)
		if len(picked) == 2 {
			break
		}
	}
	if len(picked) < 2 {
		return nil, errors.New("no two lanes with verified receipts that differ")
	}
	return c.dispute(ctx, comp.Prompt, picked)
}

// DisputeSent is a dispute on chain: its number, the height it opened
// at, and the transaction's fee (the bond is locked besides).
type DisputeSent struct {
	Session, Index uint64
	Height         int64
	Fee            *uint256.Int
}

// dispute sends a dispute over lanes' receipts (one: an audit; two: a
// comparison).
func (c *SessionClient) dispute(ctx context.Context, prompt string, lanes []LaneCompletion) (*DisputeSent, error) {
	ev, err := c.evidence()
	if err != nil {
		return nil, err
	}
	data := &DisputeData{Prompt: prompt}
	msg := &session.MsgDisputeSession{Session: c.id}
	for _, l := range lanes {
		data.Outputs = append(data.Outputs, DisputeOutput{Tokens: l.Tokens, Text: l.Text})
		msg.Requests = append(msg.Requests, session.SignedRequest{Request: *l.Request, Sig: l.RequestSig})
		msg.Receipts = append(msg.Receipts, session.SignedReceipt{Receipt: *l.Receipt, Sig: l.ReceiptSig})
	}
	if err := ev.Keep(data); err != nil {
		return nil, err
	}
	for _, a := range c.cfg.Host.Addrs() {
		if len(msg.Addrs) < 8 {
			msg.Addrs = append(msg.Addrs, a)
		}
	}
	res, err := c.sender.Send(ctx, msg.Raw())
	if err != nil {
		return nil, fmt.Errorf("dispute session %d: %w", c.id, err)
	}
	var opened session.EventDisputeOpened
	if err := node.FindEvent(res, &opened); err != nil {
		return nil, err
	}
	out := &DisputeSent{Session: c.id, Index: opened.Dispute, Height: res.Height, Fee: new(uint256.Int)}
	for _, e := range res.TxResult.Events {
		if e.Type == chain.EventTypeTx {
			if tx, err := chain.ParseEventTx(e); err == nil {
				out.Fee = tx.Fee
			}
		}
	}
	c.log.Warn("session dispute opened", "session", c.id, "dispute", opened.Dispute, "kind", opened.Kind, "deadline", opened.Deadline)
	return out, nil
}

// evidence returns the client's evidence store, served on its host: the
// config's, else one per host (every session client of a host shares it:
// one protocol handler per host), kept in LedgerDir/evidence.
func (c *SessionClient) evidence() (*Evidence, error) {
	c.evOnce.Do(func() {
		if c.cfg.Evidence != nil {
			c.ev = c.cfg.Evidence
			return
		}
		hostEvidenceMu.Lock()
		defer hostEvidenceMu.Unlock()
		if ev, ok := hostEvidence[c.cfg.Host]; ok {
			c.ev = ev
			return
		}
		dir := ""
		if c.cfg.LedgerDir != "" {
			dir = filepath.Join(c.cfg.LedgerDir, "evidence")
		}
		c.ev, c.evErr = NewEvidence(dir)
		if c.evErr == nil {
			hostEvidence[c.cfg.Host] = c.ev
			ServeDisputes(c.cfg.Host, c.cfg.Chain, c.ev, c.log)
		}
	})
	return c.ev, c.evErr
}

// hostEvidence is the evidence store served on each host whose session
// clients were given none.
var (
	hostEvidenceMu sync.Mutex
	hostEvidence   = map[*p2p.Host]*Evidence{}
)

// DisputeLane disputes one lane's receipt alone (an audit, S13: the
// client had the request answered outside the session and the answers
// differ, or r = 1 and it doubts the only lane): the validators judge
// the output itself. comp is the Completion the lane belongs to.
func (c *SessionClient) DisputeLane(ctx context.Context, comp *Completion, provider types.Address) (*DisputeSent, error) {
	for _, l := range comp.Lanes {
		if l.Provider == provider && l.Err == nil && l.Receipt != nil && l.Request != nil {
			return c.dispute(ctx, comp.Prompt, []LaneCompletion{l})
		}
	}
	return nil, fmt.Errorf("lane %s returned no verified receipt in this completion: nothing to dispute", provider)
}
