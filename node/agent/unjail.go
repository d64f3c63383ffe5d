package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
)

// jailState is what a provider agent knows of its own jail: the chain
// jails a provider for a no-show until a height (market.Provider
// JailedUntil, ProviderJailBlocks after the miss) and refuses its bids
// until it sends MsgUnjailProvider at or after that height. A tombstoned
// provider (fraud) can never unjail.
type jailState struct {
	mu         sync.Mutex
	jailed     bool
	until      uint64
	tombstoned bool
	// sending: an unjail is in flight (one at a time).
	sending bool
}

// readJail learns the provider's jail from its record on chain (at start:
// a provider jailed while it was down unjails too).
func (p *Provider) readJail(ctx context.Context) {
	pv, err := p.cfg.Chain.Provider(ctx, p.addr)
	if err != nil || pv.Provider == nil {
		return
	}
	if pv.Jailed {
		p.jailed(pv.JailedUntil, pv.Tombstoned, "jailed before this agent started")
	}
}

// jailed records that the chain jailed this provider until height until.
func (p *Provider) jailed(until uint64, tombstoned bool, reason string) {
	p.jail.mu.Lock()
	p.jail.jailed, p.jail.until, p.jail.tombstoned = true, max(p.jail.until, until), tombstoned
	until = p.jail.until
	p.jail.mu.Unlock()
	switch {
	case tombstoned:
		p.log.Error("jailed for good (tombstoned): the chain refuses this provider's bids; it cannot unjail", "reason", reason)
	case p.cfg.NoAutoUnjail:
		p.log.Warn("jailed: the chain refuses this provider's bids until it unjails (auto-unjail is off: ogpu tx provider unjail once the term is over)",
			"until", until, "reason", reason)
	default:
		p.log.Warn("jailed: the chain refuses this provider's bids until it unjails; unjailing automatically at the end of the term",
			"until", until, "reason", reason)
	}
}

// unjailed records that this provider may bid again.
func (p *Provider) unjailed(height uint64) {
	p.jail.mu.Lock()
	was := p.jail.jailed
	p.jail.jailed = false
	p.jail.mu.Unlock()
	if was {
		p.log.Info("unjailed: bidding again", "height", height)
	}
}

// unjailIfDue sends MsgUnjailProvider once the jail term is over at
// height (the block just committed: the transaction lands in a later
// one), unless auto-unjail is off or the provider is tombstoned. A refused
// unjail is logged and the record read again; the next block retries.
func (p *Provider) unjailIfDue(ctx context.Context, height uint64) {
	if p.cfg.NoAutoUnjail {
		return
	}
	p.jail.mu.Lock()
	due := p.jail.jailed && !p.jail.tombstoned && !p.jail.sending && height >= p.jail.until
	if due {
		p.jail.sending = true
	}
	until := p.jail.until
	p.jail.mu.Unlock()
	if !due {
		return
	}
	p.spawn(func() {
		defer func() {
			p.jail.mu.Lock()
			p.jail.sending = false
			p.jail.mu.Unlock()
		}()
		p.log.Info("the jail term is over: unjailing", "until", until, "height", height)
		if _, err := p.sender.Send(ctx, (&market.MsgUnjailProvider{}).Raw()); err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("unjail refused (retried at the next block)", "err", err)
			var te *node.TxError
			if errors.As(err, &te) {
				// The chain's record is the truth: not jailed any more,
				// a longer term, or tombstoned meanwhile.
				p.jail.mu.Lock()
				p.jail.jailed = false
				p.jail.mu.Unlock()
				p.readJail(ctx)
			}
			return
		}
		p.unjailed(height)
	})
}

// jailedWhy says why a jailed provider does not bid (the chain would
// refuse it), or "".
func (p *Provider) jailedWhy() string {
	p.jail.mu.Lock()
	defer p.jail.mu.Unlock()
	switch {
	case !p.jail.jailed:
		return ""
	case p.jail.tombstoned:
		return "this provider is tombstoned: it can never bid again"
	}
	return fmt.Sprintf("this provider is jailed until height %d (then it unjails: ogpu tx provider unjail, or automatically unless --auto-unjail=false)", p.jail.until)
}
