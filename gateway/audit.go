package gateway

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ogpu-network/ogpu/node/agent"
)

// Audits (protocol-threats S13).
//
// Inside a session, r = 2 lanes that agree are trusted; a cartel holding
// both lanes, or a session of one lane, is checked only by audits: a
// random share of the answers (SessionConfig.AuditBps per 10,000) is asked
// again as an ordinary job (the job backend: sealed bids, r replicas,
// validators on a disagreement), in the session providers' determinism
// class so that an honest lane's answer is the job's to the byte. The job
// is posted after the answer was delivered, by the same account, for the
// same prompt as every other job: a provider cannot tell an audit from a
// request. Where the job's verified text differs from a lane's, that
// lane's receipt is disputed alone (SessionClient.DisputeLane); the
// validators judge it against their own re-generation, so a wrong audit
// job costs the bond, never an honest lane's stake. With audit rate a, a
// liar gaining g per wrong answer is caught after about 1/a of them, so
// lying loses money while a > g / (f·S) (docs/economics.md, sessions).
// The job is paid like any other and counted in the day's ledger.
//
// Not done: the audit job cannot exclude the session's own providers
// (market requirements have no exclusion list), so a cartel that also wins
// the audit job agrees with itself; a larger provider pool makes that
// less likely, it does not rule it out.

// DefaultGatewayAuditBps is the audit rate `ogpu gateway` uses unless told
// otherwise: 2% of session answers.
const DefaultGatewayAuditBps = 200

// auditPicked draws whether to audit one answer: true with probability
// bps/10,000 (crypto/rand: a provider must not predict it).
func auditPicked(bps uint64) bool {
	if bps == 0 {
		return false
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false
	}
	return binary.BigEndian.Uint64(b[:])%10_000 < bps
}

// Audit is one audit's outcome (for tests and logs).
type Audit struct {
	Session uint64
	// Job is the audit job; Text its verified answer.
	Job  uint64
	Text string
	// Disputed are the lanes whose answers differed, each disputed.
	Disputed []agent.DisputeSent
	Err      error
}

// audit asks req again as a job and disputes every lane of comp whose
// answer differs from the job's verified one. It runs in the background.
func (b *SessionBackend) audit(w *warmSession, req *Request, comp *agent.Completion) {
	jb, ok := b.fallback.(*JobBackend)
	if !ok {
		b.log.Warn("an audit was drawn but the gateway has no job backend to run it (audits need --mode auto)", "session", w.id)
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		a := b.runAudit(jb, w, req, comp)
		if a.Err != nil {
			b.log.Warn("audit not completed", "session", w.id, "err", a.Err)
		}
		if b.OnAudit != nil {
			b.OnAudit(a)
		}
	}()
}

func (b *SessionBackend) runAudit(jb *JobBackend, w *warmSession, req *Request, comp *agent.Completion) *Audit {
	a := &Audit{Session: w.id}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Minute)
	defer cancel()
	q := &Request{Model: req.Model, ModelSize: req.ModelSize, Prompt: req.Prompt, PromptTokens: req.PromptTokens, MaxTokens: req.MaxTokens, ModelFile: req.ModelFile}
	for _, l := range comp.Lanes {
		if pv, err := b.client.Chain.Provider(ctx, l.Provider); err == nil && pv.Class != "" {
			q.Class = pv.Class
			break
		}
	}
	if _, err := jb.Quote(ctx, q); err != nil {
		a.Err = fmt.Errorf("audit job: %w", err)
		return a
	}
	res, err := jb.Generate(ctx, q, Events{Dispatched: func(d Dispatch) { a.Job = d.Job }})
	if res != nil && res.Receipt.Charged != nil {
		b.spent(res.Receipt.Charged, fmt.Sprintf("audit job %d of session %d", a.Job, w.id))
	}
	if err != nil {
		a.Err = fmt.Errorf("audit job %d: %w", a.Job, err)
		return a
	}
	if !res.Verified {
		a.Err = fmt.Errorf("audit job %d ended unverified: nothing to compare with", a.Job)
		return a
	}
	a.Text = res.Text
	for _, l := range comp.Lanes {
		if l.Err != nil || l.Receipt == nil || l.Text == res.Text {
			continue
		}
		sent, err := w.sc.DisputeLane(ctx, comp, l.Provider)
		if err != nil {
			a.Err = fmt.Errorf("audit job %d differs from lane %s, and its dispute failed: %w", a.Job, l.Provider, err)
			continue
		}
		b.spent(sent.Fee, fmt.Sprintf("audit dispute %d of session %d", sent.Index, w.id))
		b.log.Warn("an audit found a lane's answer wrong: disputed on chain", "session", w.id, "provider", l.Provider, "audit_job", a.Job, "dispute", sent.Index)
		a.Disputed = append(a.Disputed, *sent)
	}
	return a
}
