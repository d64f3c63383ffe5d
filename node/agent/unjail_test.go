package agent

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// TestProviderUnjailsItself: a provider killed after revealing its bid is
// a no-show, slashed and jailed (the soak: one missed deadline took a
// provider out for good, for no agent ever unjailed). Restarted while
// jailed, its agent reads its jail from its record, sends the unjail once
// the jail term is over (not before: the chain would refuse it), and bids
// on the next job.
func TestProviderUnjailsItself(t *testing.T) {
	const jailBlocks = 25
	n := newTestNet(t, func(d *genesis.Doc) { d.Params.Market.ProviderJailBlocks = jailBlocks })
	n.provider("prov1", 40, false)
	doomed := n.provider("prov2", 50, false)
	n.provider("prov3", 60, false)
	addr2 := ethcrypto.PubkeyToAddress(n.keys["prov2"].PublicKey)
	cl := n.client()
	blocks, err := n.c.Subscribe(n.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	j := n.job(16)
	j.Windows.Execute = 15
	done := make(chan error, 2)
	go func() { _, err := cl.RunLLM(n.ctx, j, func(string, ...any) {}, nil); done <- err }()

	var until, second uint64
	step, jobs, posted := 0, 0, false
	deadline := time.After(120 * time.Second)
	for step < 4 {
		var b node.BlockEvents
		var ok bool
		select {
		case b, ok = <-blocks:
			if !ok {
				t.Fatalf("the subscription ended at step %d", step)
			}
		case err := <-done:
			if err != nil {
				t.Fatalf("job %d: %v", jobs+1, err)
			}
			jobs++ // the first: prov3 took prov2's slot
			continue
		case <-deadline:
			t.Fatalf("still at step %d after 120 s (0: kill, 1: jail, 2: unjail, 3: bid)", step)
		}
		h := uint64(b.Height)
		if step == 3 && jobs == 1 && !posted { // unjailed, the first job done: the next
			posted = true
			go func() { _, err := cl.RunLLM(n.ctx, j, func(string, ...any) {}, nil); done <- err }()
		}
		for _, e := range node.EventsOf[market.EventBidRevealed](b.Events) {
			if step == 0 && e.Provider == addr2 {
				doomed.kill()
				t.Logf("height %d: prov2 revealed its bid on job %d and was killed", h, e.Job)
				step++
			}
		}
		for _, e := range node.EventsOf[market.EventProviderJailed](b.Events) {
			if step == 1 && e.Provider == addr2 {
				until = e.Until
				n.provider("prov2", 50, false)
				t.Logf("height %d: prov2 jailed until %d (%s); restarted", h, until, e.Reason)
				step++
			}
		}
		for _, e := range node.EventsOf[market.EventProviderUnjailed](b.Events) {
			if e.Provider == addr2 {
				if step != 2 {
					t.Fatalf("height %d: prov2 unjailed at step %d", h, step)
				}
				if h < until {
					t.Fatalf("height %d: prov2 unjailed before the end of its term at %d", h, until)
				}
				t.Logf("height %d: prov2 unjailed itself", h)
				step++
			}
		}
		for _, e := range node.EventsOf[market.EventJobPosted](b.Events) {
			if posted && second == 0 {
				second = e.Job
			}
		}
		for _, e := range node.EventsOf[market.EventBidCommitted](b.Events) {
			if e.Provider == addr2 && e.Job == second && second != 0 {
				if step != 3 {
					t.Fatalf("height %d: prov2 bid on job %d while jailed", h, e.Job)
				}
				t.Logf("height %d: prov2 bid on job %d", h, e.Job)
				step++
			}
		}
	}
	pv, err := n.c.Provider(n.ctx, addr2)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Jailed || pv.Reputation.NoShows != 1 {
		t.Fatalf("prov2 jailed %v, no-shows %d: want free with one no-show", pv.Jailed, pv.Reputation.NoShows)
	}
}

// TestJailEvents: a running provider learns its jail from the chain's
// events: jailed, it does not bid (the chain would refuse it) and waits
// for the term, whose end sends the unjail; tombstoned, it never tries
// (a provider with no sender panics here if it did); unjailed, it bids
// again. With auto-unjail off it never sends either.
func TestJailEvents(t *testing.T) {
	me := types.Address{7}
	newProv := func(off bool) *Provider {
		return &Provider{cfg: ProviderConfig{NoAutoUnjail: off}, addr: me, log: slog.New(slog.NewTextHandler(testWriter{t, "prov"}, nil))}
	}
	ctx := context.Background()
	ev := func(p *Provider, h int64, e types.Event) { p.onEvent(ctx, h, types.EncodeEvent(e)) }
	sending := func(p *Provider) bool {
		p.jail.mu.Lock()
		defer p.jail.mu.Unlock()
		return p.jail.sending
	}

	p := newProv(false)
	ev(p, 10, market.EventProviderJailed{Provider: types.Address{8}, Until: 30})
	if why := p.jailedWhy(); why != "" {
		t.Fatalf("another provider's jail: %q", why)
	}
	ev(p, 10, market.EventProviderJailed{Provider: me, Until: 30, Reason: "missed the commit deadline of job 1"})
	if why := p.jailedWhy(); !strings.Contains(why, "jailed until height 30") {
		t.Fatalf("jailed: not bidding because %q", why)
	}
	ev(p, 31, market.EventProviderUnjailed{Provider: me})
	if why := p.jailedWhy(); why != "" {
		t.Fatalf("unjailed, still not bidding: %q", why)
	}

	p = newProv(false)
	ev(p, 10, market.EventProviderJailed{Provider: me, Until: 30, Tombstoned: true})
	p.unjailIfDue(ctx, 40) // must not send: p has no sender
	if why := p.jailedWhy(); !strings.Contains(why, "tombstoned") || sending(p) {
		t.Fatalf("tombstoned: %q, sending %v", why, sending(p))
	}

	p = newProv(true)
	ev(p, 10, market.EventProviderJailed{Provider: me, Until: 30})
	p.unjailIfDue(ctx, 40)
	if sending(p) {
		t.Fatal("auto-unjail off: the agent sent an unjail")
	}

	p = newProv(false)
	ev(p, 10, market.EventProviderJailed{Provider: me, Until: 30})
	p.unjailIfDue(ctx, 29)
	if sending(p) {
		t.Fatal("an unjail sent before the end of the term")
	}
}
