package agent

import (
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/market"
)

// TestSamePromptTwoClients: two clients with the same prompt get the same
// greedy output blob from the same providers. The second, an honest client
// (mal2 is only a funded name here), proves it holds its prompt and gets
// its verified result, the same text; before, the output was bound to the
// first client's job only and the second client's `ogpu job run` failed
// fetching its own paid result (found by the e2e perturbation suite).
//
// The attack the ownership rule is for stays refused: a client that names
// the first client's input hash (public on chain) without holding the
// prompt gets nothing generated from it, neither streamed tokens nor the
// output blob.
func TestSamePromptTwoClients(t *testing.T) {
	n := newTestNet(t)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	first, err := n.client().RunLLM(n.ctx, n.job(24), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fj, err := n.c.Job(n.ctx, first.Job)
	if err != nil {
		t.Fatal(err)
	}
	if first.Outcome != "agreed" || first.Text == "" {
		t.Fatalf("first job: %+v", first)
	}

	second := n.clientOf("mal2")
	res, err := second.RunLLM(n.ctx, n.job(24), nil, nil)
	if err != nil {
		t.Fatalf("a second client with the same prompt: %v", err)
	}
	if res.Outcome != "agreed" || res.Text != first.Text || res.Result != first.Result {
		t.Fatalf("second client: outcome %s text %q result %x; want agreed, the first job's text %q and result %x", res.Outcome, res.Text, res.Result, first.Text, first.Result)
	}

	// The attacker posts a job naming the first job's input hash.
	att := n.clientOf("mal1")
	j := n.job(24)
	msg := &market.MsgPostJob{Kind: market.KindInference, Mode: market.ModeAuction, Model: j.Model, ModelSize: j.ModelSize,
		Stages: 1, Redundancy: 2, MaxPrice: j.MaxPrice, Req: j.Req, Input: fj.Input, Windows: j.Windows, MaxTokens: j.MaxTokens, PromptTokens: 10}
	height, posted, err := att.postJob(n.ctx, msg, Runtime)
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	out, err := att.follow(n.ctx, posted.Job, height, fj.Input, func(f string, a ...any) { t.Logf("attacker: "+f, a...) }, func(s string) { streamed.WriteString(s) })
	if streamed.Len() > 0 || (out != nil && out.Text != "") {
		t.Fatalf("a client naming another's input hash got text generated from that prompt: streamed %q, result %+v", streamed.String(), out)
	}
	t.Logf("the attacker's job %d: %v, err %v", posted.Job, out, err)
}

// clientOf is a client agent for the funded account name.
func (n *testNet) clientOf(name string) *Client {
	k := n.keys[name]
	h, store := n.host(name, k)
	return NewClient(n.c, k, h, store, NewAccess(n.c))
}
