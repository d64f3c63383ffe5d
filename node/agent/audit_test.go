package agent

import (
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/verifier"
)

// TestRandomAuditOnRealNodes: random audits on a real chain with real
// agents (market/audit.go). At audit_rate_bps 10,000 every agreed task is
// drawn: two honest provider agents agree, the validator agent sees the
// audit (a dispute over one result), re-generates the text with llama.cpp
// and votes its hash; the task settles "audited" and both providers are
// paid. Then two lying provider agents agree on the same wrong text: the
// audit rejects it and both are slashed, and the client's job run fails
// (no verified result).
func TestRandomAuditOnRealNodes(t *testing.T) {
	n := newTestNet(t, func(d *genesis.Doc) { d.Params.Market.AuditRateBps = 10_000 })
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	cl := n.client()
	var lines []string
	res, err := cl.RunLLM(n.ctx, n.job(24), func(f string, a ...any) { lines = append(lines, f) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != market.OutcomeAudited || !strings.Contains(res.Text, "Lily") {
		t.Fatalf("outcome %s text %q: want the audited greedy answer", res.Outcome, res.Text)
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	if tk := j.Tasks[0]; tk.Audit != verifier.AuditRandom || !tk.Verified || len(tk.Votes) == 0 {
		t.Fatalf("task %+v: want a random audit, decided by the validator's vote, verified", tk)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "re-execute it before it is paid") {
		t.Errorf("the client did not say its task was audited: %q", lines)
	}
	n.supplyIsCap()
}

// TestRandomAuditCatchesACartel: two provider agents that change the same
// token of every output hold both slots of a job and agree; the audit
// (every task at audit_rate_bps 10,000) has the validator agent
// re-generate the text, the verdict rejects theirs: both are slashed and
// tombstoned, nobody is paid, and the client's run fails without a
// verified result.
func TestRandomAuditCatchesACartel(t *testing.T) {
	n := newTestNet(t, func(d *genesis.Doc) { d.Params.Market.AuditRateBps = 10_000 })
	n.provider("mal1", 40, true)
	n.provider("mal2", 50, true)
	cl := n.client()
	res, err := cl.RunLLM(n.ctx, n.job(24), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "without a verified result") {
		t.Fatalf("the cartel's job: %v (outcome %v), want no verified result", err, res)
	}
	for _, name := range []string{"mal1", "mal2"} {
		pv, err := n.c.Provider(n.ctx, addrOf(n, name))
		if err != nil {
			t.Fatal(err)
		}
		if !pv.Tombstoned || pv.Reputation.Lost != 1 {
			t.Fatalf("%s after the audit: %+v", name, pv)
		}
	}
	n.supplyIsCap()
}
