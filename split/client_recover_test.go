package split

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestRecoverDeadStage: the middle stage of chain 1 dies mid-generation
// (its host closes). The client's Recover puts a replacement in its place
// and restarts the chain's surviving stages; the client replays every
// frame, the replacement rebuilds its cache, and the generation ends with
// the whole model's tokens. Every stage's transcript of chain 1 ends equal
// to chain 0's: the chain compares them as if nothing had failed.
func TestRecoverDeadStage(t *testing.T) {
	const k, dead, maxTokens = 3, 1, 12
	var p *pipeline
	killed := make(chan struct{})
	p = newPipeline(t, k, 2, func(_ *pipeline, chain, stage int, c *StageConfig) {
		if chain == 1 && stage == dead {
			c.Forwarder.(*fakeStage).fail = func(pos int) error {
				if pos == 14 {
					select {
					case <-killed:
					default:
						close(killed)
						go p.nodes[1][dead].h.Close() // the provider's machine is gone
						time.Sleep(time.Second)
					}
				}
				return nil
			}
		}
	})
	recovered := 0
	cfg := p.clientConfig(maxTokens)
	cfg.StepTimeout = 5 * time.Second // only the timeout sees this death; long enough not to fire on a loaded machine
	cfg.Recover = func(ctx context.Context, j int, err error) (peer.ID, bool) {
		recovered++
		t.Logf("chain %d failed: %v", j, err)
		// The chain's surviving stages restart (their agents see the
		// replacement on chain); the replacement takes the dead one's place.
		for s := range k {
			p.stages[j][s].Close()
		}
		repl := newNode(t)
		p.mu.Lock()
		p.nodes[j][dead] = repl
		p.mu.Unlock()
		self := func(chain, from uint16) bool { return int(chain) == j && int(from) == dead-1 }
		srv := newServer(t, repl, p.authorize(self))
		p.srvs[j][dead] = srv
		connect(t, p.nodes[j][dead-1], repl)
		connect(t, repl, p.nodes[j][dead+1])
		for s := range k {
			down := p.client.id()
			if s < k-1 {
				down = p.nodes[j][s+1].id()
			}
			st, err := StartStage(p.srvs[j][s], StageConfig{Job: testJob, Chain: uint16(j), Stage: uint16(s), Stages: k,
				Key: p.nodes[j][s].key, Limits: splitLimits, Forwarder: newFakeStage(s, k), Downstream: down})
			if err != nil {
				t.Error(err)
				return "", false
			}
			t.Cleanup(st.Close)
			p.stages[j][s] = st
		}
		return p.nodes[j][0].id(), true
	}
	res, err := Generate(testCtx(t), p.csrv, cfg, testPrompt)
	if err != nil {
		t.Fatal(err)
	}
	if want := wholeModel(k, testPrompt, maxTokens, nil); !slices.Equal(res.Tokens, want) || res.Divergence != nil {
		t.Fatalf("tokens %v (divergence %v), want %v", res.Tokens, res.Divergence, want)
	}
	if recovered != 1 {
		t.Fatalf("recovered %d times", recovered)
	}
	waitStages(t, p)
	for s := range k {
		if a, b := p.stages[0][s].Commitment(), p.stages[1][s].Commitment(); a != b {
			t.Fatalf("stage %d: chain 0 committed %+v, the recovered chain 1 %+v", s, a, b)
		}
	}
	if a, b := res.Chains[0], res.Chains[1]; a.SentSteps != b.SentSteps || a.SentRun != b.SentRun {
		t.Fatalf("the client's records differ: %+v vs %+v", a, b)
	}
}
