package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// TestGatewaySessionAudit: a session of one lane (r = 1) leased to a liar
// (it bids lowest): nothing inside the session can disagree with it, so
// the gateway audits the answer (here every answer: the draw is forced)
// by asking the same prompt as a job in the session's determinism class;
// the job's verified answer differs from the lane's, the gateway disputes
// the lane's receipt alone, and the validators slash the liar. An honest
// lane audited the same way is not disputed.
func TestGatewaySessionAudit(t *testing.T) {
	n := newTestNet(t, true)
	honest := n.provider("prov1", 40, false)
	liar := n.provider("prov2", 30, true)
	n.provider("prov3", 50, false)
	dir := t.TempDir()
	sc := n.sessionConfig(dir)
	sc.Redundancy = 1
	g, _ := n.sessionGateway(n.config(dir), sc, true)
	g.b.auditPick = func() bool { return true }
	audits := make(chan *Audit, 4)
	g.b.OnAudit = func(a *Audit) { audits <- a }

	var a sessionAnswer
	decode(t, g.call(t, "POST", "/v1/chat/completions", storyChat, nil), 200, &a)
	if a.Ogpu == nil || a.Ogpu.Mode != "session" || len(a.Ogpu.Providers) != 1 || !strings.EqualFold(a.Ogpu.Providers[0], liar.agent.Address().Hex()) {
		t.Fatalf("want a one-lane session leased to the liar: %+v", a.Ogpu)
	}
	var au *Audit
	select {
	case au = <-audits:
	case <-time.After(3 * time.Minute):
		t.Fatal("no audit")
	}
	if au.Err != nil || au.Job == 0 || len(au.Disputed) != 1 {
		t.Fatalf("audit: %+v", au)
	}
	var d *chain.DisputeView
	for d == nil || d.Status == session.DisputeOpen {
		if err := n.c.WaitHeight(n.ctx, n.height()+1); err != nil {
			t.Fatal(err)
		}
		var err error
		if d, err = n.c.SessionDispute(n.ctx, au.Disputed[0].Session, au.Disputed[0].Index); err != nil {
			t.Fatal(err)
		}
	}
	if d.Kind != session.KindAudit || d.Status != session.DisputeDecided || d.Verdict != 1 || d.Receipts[0].Receipt.Provider != liar.agent.Address() {
		t.Fatalf("the audit dispute: kind %s, %s, verdict %b, receipt by %s", d.Kind, d.Status, d.Verdict, d.Receipts[0].Receipt.Provider)
	}
	pv, err := n.c.Provider(n.ctx, liar.agent.Address())
	if err != nil || !pv.Tombstoned {
		t.Fatalf("the audited liar: %+v %v", pv, err)
	}
	st, err := n.c.Stake(n.ctx, honest.agent.Address())
	if err != nil || st.Bonded.Lt(types.OGPU(200)) {
		t.Fatalf("the honest provider lost stake: %+v %v", st, err)
	}
	t.Logf("audit job %d answered %q; dispute %d of session %d: slashed %s, compensated %s", au.Job, au.Text, d.Index, d.Session, d.Slashed, d.Compensated)
}

// TestGatewaySessionAuditHonest: an honest lane audited (the job in its
// class answers the same text) is not disputed, and the audit job's cost
// is in the day's ledger.
func TestGatewaySessionAuditHonest(t *testing.T) {
	n := newTestNet(t, true)
	n.provider("prov1", 30, false)
	n.provider("prov2", 40, false)
	n.provider("prov3", 50, false)
	dir := t.TempDir()
	sc := n.sessionConfig(dir)
	sc.Redundancy = 1
	g, _ := n.sessionGateway(n.config(dir), sc, true)
	g.b.auditPick = func() bool { return true }
	audits := make(chan *Audit, 4)
	g.b.OnAudit = func(a *Audit) { audits <- a }
	var a sessionAnswer
	decode(t, g.call(t, "POST", "/v1/chat/completions", storyChat, nil), 200, &a)
	var au *Audit
	select {
	case au = <-audits:
	case <-time.After(3 * time.Minute):
		t.Fatal("no audit")
	}
	if au.Err != nil || au.Job == 0 || len(au.Disputed) != 0 || au.Text != a.Choices[0].Message.Content {
		t.Fatalf("audit of an honest lane: %+v; the answer was %q", au, a.Choices[0].Message.Content)
	}
	_, spent := g.ledger.spent()
	if charged, err := uint256.FromDecimal(a.Ogpu.Charged); err != nil || !spent.Gt(charged) {
		t.Fatalf("the day's ledger %s does not count the audit job beyond the answer's %s", spent, a.Ogpu.Charged)
	}
}
