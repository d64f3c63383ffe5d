package console

import (
	"context"
	"errors"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// ProviderOf is the ProviderSide of a running provider agent: the console
// reads its decisions, speeds, reachability and price, and its actions go
// to the agent, which signs them with the key it holds.
func ProviderOf(p *agent.Provider) ProviderSide { return providerSide{p} }

type providerSide struct{ p *agent.Provider }

func (s providerSide) Address() types.Address { return s.p.Address() }

func (s providerSide) Decisions() []Decision      { return s.p.Decisions() }
func (s providerSide) Speeds() []SpeedSample      { return s.p.Speeds() }
func (s providerSide) Reachability() Reachability { return s.p.Reachability() }

func (s providerSide) Pricing() Pricing {
	p := s.p.Pricing()
	return Pricing{Base: p.Base, PerToken: p.PerToken, Script: p.Script}
}

// SetPricing changes the built-in price; a Pricing naming a script is
// refused (a script is chosen when the agent starts, not from a page).
func (s providerSide) SetPricing(_ context.Context, p Pricing) error {
	if p.Script != "" {
		return errors.New("pricing: a pricing script is chosen when the agent starts (--pricing-script), not from the console: give a base price and a price per token")
	}
	return s.p.SetPricing(p.Base, p.PerToken)
}

func (s providerSide) Bond(ctx context.Context, amount *uint256.Int) error {
	return s.p.Bond(ctx, amount)
}

func (s providerSide) Unbond(ctx context.Context, amount *uint256.Int) error {
	return s.p.Unbond(ctx, amount)
}
