package agent

import (
	"bytes"
	"context"
	"slices"
	"strings"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node"
)

// MaxChainBootstrap bounds the providers an agent bootstraps through.
const MaxChainBootstrap = 8

// ChainBootstrap lists the addresses of registered providers that have
// something at stake: the chain is the network's bootstrap list. Only
// providers with at least the minimum provider stake bonded, not jailed
// and not tombstoned count (registering costs nothing, so records without
// stake could fill every new agent's view of the network), the
// MaxChainBootstrap with the most stake bonded (ties: the lower address).
func ChainBootstrap(ctx context.Context, c *node.Client, self string) []string {
	provs, err := c.Providers(ctx)
	if err != nil {
		return nil
	}
	params, err := c.Params(ctx)
	if err != nil || params.Staking.MinProviderStake == nil {
		return nil
	}
	var staked []chain.ProviderView
	for _, p := range provs {
		if p.Provider == nil || p.PeerID == self || p.Tombstoned || p.Jailed || p.Bonded == nil || p.Bonded.Lt(params.Staking.MinProviderStake) {
			continue
		}
		staked = append(staked, p)
	}
	slices.SortFunc(staked, func(a, b chain.ProviderView) int {
		if c := b.Bonded.Cmp(a.Bonded); c != 0 {
			return c
		}
		return bytes.Compare(a.Address[:], b.Address[:])
	})
	var out []string
	for _, p := range staked[:min(len(staked), MaxChainBootstrap)] {
		for _, a := range p.Addrs {
			if strings.Contains(a, "/p2p/") {
				out = append(out, a)
			}
		}
	}
	return out
}
