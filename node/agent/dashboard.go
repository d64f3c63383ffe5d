package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/types"
)

// What a provider agent keeps for its operator's dashboard (the console of
// `ogpud provider run --console`): its latest auction decisions and
// measured generations, how peers reach it, its price, and the stake
// actions it signs. None of it reaches the chain except Bond and Unbond,
// which are ordinary signed transactions.

// DecisionsKept and SpeedsKept bound what the agent remembers.
const (
	DecisionsKept = 200
	SpeedsKept    = 200
)

// Decision is one auction decision of the agent about one job stage: a
// sealed bid (or a pool claim) at Price, or the reason it did not bid.
type Decision struct {
	Time  time.Time
	Job   uint64
	Stage uint16
	Bid   bool
	// Price is the bid's price (nil when the agent did not bid).
	Price *uint256.Int
	// Reason says why not, or what kind of bid it was (sealed bid, pool
	// claim).
	Reason string
}

// SpeedSample is one measured generation of a task.
type SpeedSample struct {
	Time   time.Time
	Tokens int
	Took   time.Duration
}

// Reachability is how peers reach the agent's libp2p host.
type Reachability struct {
	PeerID string
	// Addrs are the host's addresses (listen and observed), each ending in
	// /p2p/<id>.
	Addrs []string
	// Status is libp2p AutoNAT's verdict: "public", "private" or
	// "unknown" (until enough peers dialled back).
	Status string
	// Peers is the number of connected peers.
	Peers int
}

// Pricing is the agent's current price. With the built-in strategy, Base
// per job plus PerToken per token of the job's budget (PerStage per
// encrypted pipeline stage); otherwise Script names what prices (a
// pricing script's path) and the rest is nil.
type Pricing struct {
	Base, PerToken, PerStage *uint256.Int
	Script                   string
}

// MaxPriceSetting bounds the prices SetPricing takes: no job can pay more
// than every oGPU that will ever exist.
var MaxPriceSetting = types.MaxSupply

// ring is a bounded list that drops its oldest entry when full.
type ring[T any] struct {
	mu   sync.Mutex
	buf  []T
	next int
	full bool
}

func newRing[T any](n int) *ring[T] { return &ring[T]{buf: make([]T, n)} }

func (r *ring[T]) push(v T) {
	r.mu.Lock()
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
	r.mu.Unlock()
}

// oldestFirst copies the entries, oldest first.
func (r *ring[T]) oldestFirst() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]T(nil), r.buf[:r.next]...)
	}
	return append(append([]T(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}

// dashboard is what the agent records for its operator.
type dashboard struct {
	decisions *ring[Decision]
	speeds    *ring[SpeedSample]

	reachMu sync.Mutex
	reach   network.Reachability
	sub     event.Subscription
	done    chan struct{}
}

func newDashboard() *dashboard {
	return &dashboard{decisions: newRing[Decision](DecisionsKept), speeds: newRing[SpeedSample](SpeedsKept)}
}

// watchReachability follows the host's AutoNAT verdict (a stateful event:
// the last one is delivered on subscription) until stopReachability.
func (p *Provider) watchReachability() error {
	sub, err := p.cfg.Host.Host().EventBus().Subscribe(new(event.EvtLocalReachabilityChanged))
	if err != nil {
		return fmt.Errorf("provider: cannot follow the host's reachability: %w", err)
	}
	d := p.dash
	d.sub, d.done = sub, make(chan struct{})
	go func() {
		defer close(d.done)
		for e := range sub.Out() {
			if ev, ok := e.(event.EvtLocalReachabilityChanged); ok {
				d.reachMu.Lock()
				d.reach = ev.Reachability
				d.reachMu.Unlock()
			}
		}
	}()
	return nil
}

func (p *Provider) stopReachability() {
	if d := p.dash; d.sub != nil {
		_ = d.sub.Close()
		<-d.done
		d.sub = nil
	}
}

// decided records an auction decision (bid: price is set; else reason).
func (p *Provider) decided(job uint64, stage uint16, price *uint256.Int, reason string) {
	d := Decision{Time: time.Now(), Job: job, Stage: stage, Bid: price != nil, Reason: reason}
	if price != nil {
		d.Price = new(uint256.Int).Set(price)
	}
	p.dash.decisions.push(d)
}

// Decisions are the agent's latest auction decisions (at most
// DecisionsKept), newest first.
func (p *Provider) Decisions() []Decision {
	out := p.dash.decisions.oldestFirst()
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	for i := range out {
		if out[i].Price != nil {
			out[i].Price = new(uint256.Int).Set(out[i].Price)
		}
	}
	return out
}

// Speeds are the agent's latest measured generations (at most
// SpeedsKept), oldest first.
func (p *Provider) Speeds() []SpeedSample { return p.dash.speeds.oldestFirst() }

// Reachability is how peers reach the agent now.
func (p *Provider) Reachability() Reachability {
	h := p.cfg.Host
	p.dash.reachMu.Lock()
	st := p.dash.reach
	p.dash.reachMu.Unlock()
	return Reachability{
		PeerID: h.ID().String(),
		Addrs:  h.Addrs(),
		Status: strings.ToLower(st.String()),
		Peers:  len(h.Host().Network().Peers()),
	}
}

// strategy is the pricing strategy the next bid uses.
func (p *Provider) strategy() pricing.Strategy {
	p.priceMu.Lock()
	defer p.priceMu.Unlock()
	return p.cfg.Strategy
}

// Pricing is the agent's current price.
func (p *Provider) Pricing() Pricing {
	switch s := p.strategy().(type) {
	case pricing.PerToken:
		return Pricing{Base: cloneAmount(s.Base), PerToken: cloneAmount(s.PerToken), PerStage: cloneAmount(s.PerStage)}
	case *pricing.Script:
		return Pricing{Script: s.Path}
	default:
		return Pricing{Script: fmt.Sprintf("%T", s)}
	}
}

func cloneAmount(a *uint256.Int) *uint256.Int {
	if a == nil {
		return nil
	}
	return new(uint256.Int).Set(a)
}

// SetPricing changes the built-in price to base per job plus perToken
// per token of the job's budget (the price per pipeline stage stays): the
// next bids use it; bids already sealed keep their price. base may be 0,
// perToken must be positive, both at most MaxPriceSetting. An agent that
// prices with a script refuses (edit the script instead).
func (p *Provider) SetPricing(base, perToken *uint256.Int) error {
	switch {
	case base == nil || perToken == nil:
		return errors.New("pricing: give both a base price per job (0 or more) and a price per token (more than 0)")
	case perToken.IsZero():
		return errors.New("pricing: the price per token must be more than 0 (a zero price would bid on every job for nothing but the base)")
	case base.Gt(MaxPriceSetting) || perToken.Gt(MaxPriceSetting):
		return fmt.Errorf("pricing: a price above %s (all oGPU there will ever be) can never be paid: give a smaller one", types.FormatAmount(MaxPriceSetting))
	}
	p.priceMu.Lock()
	defer p.priceMu.Unlock()
	switch s := p.cfg.Strategy.(type) {
	case pricing.PerToken:
		p.cfg.Strategy = pricing.PerToken{Base: cloneAmount(base), PerToken: cloneAmount(perToken), PerStage: s.PerStage}
	case *pricing.Script:
		return fmt.Errorf("pricing: this agent prices with the script %s: edit the script to change its prices (they apply to the next job), or restart the agent without --pricing-script", s.Path)
	default:
		return fmt.Errorf("pricing: this agent prices with %T, not the built-in per-token price: it cannot be changed here", s)
	}
	p.log.Info("pricing changed", "base", types.FormatAmount(base), "per_token", types.FormatAmount(perToken))
	return nil
}

// Bond bonds amount of the provider's balance as stake (a signed
// transaction; the chain's refusal is returned as it is).
func (p *Provider) Bond(ctx context.Context, amount *uint256.Int) error {
	if amount == nil || amount.IsZero() {
		return errors.New("bond: give an amount more than 0")
	}
	if _, err := p.sender.Send(ctx, (&escrow.MsgBond{Amount: amount}).Raw()); err != nil {
		return fmt.Errorf("bond %s: %w", types.FormatAmount(amount), err)
	}
	p.log.Info("bonded", "amount", types.FormatAmount(amount))
	return nil
}

// Unbond starts unbonding amount of the provider's stake (a signed
// transaction; the chain's refusal, e.g. below the stake its active
// tasks need, is returned as it is).
func (p *Provider) Unbond(ctx context.Context, amount *uint256.Int) error {
	if amount == nil || amount.IsZero() {
		return errors.New("unbond: give an amount more than 0")
	}
	if _, err := p.sender.Send(ctx, (&escrow.MsgUnbond{Amount: amount}).Raw()); err != nil {
		return fmt.Errorf("unbond %s: %w", types.FormatAmount(amount), err)
	}
	p.log.Info("unbonding", "amount", types.FormatAmount(amount))
	return nil
}
