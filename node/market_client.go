package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	ctypes "github.com/cometbft/cometbft/rpc/core/types"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// Job returns a job with its tasks and escrow.
func (c *Client) Job(ctx context.Context, id uint64) (*chain.JobView, error) {
	var v chain.JobView
	return &v, c.queryJSON(ctx, chain.QueryJob+strconv.FormatUint(id, 10), &v)
}

// Jobs lists jobs under a /jobs path suffix ("", "/state/running", "/client/0x..").
func (c *Client) Jobs(ctx context.Context, suffix string) ([]chain.JobView, error) {
	var v []chain.JobView
	return v, c.queryJSON(ctx, chain.QueryJobs+suffix, &v)
}

// Bids lists a job's bids.
func (c *Client) Bids(ctx context.Context, job uint64) ([]chain.BidView, error) {
	var v []chain.BidView
	return v, c.queryJSON(ctx, chain.QueryBids+strconv.FormatUint(job, 10), &v)
}

// Provider returns a provider's record, stake and reputation.
func (c *Client) Provider(ctx context.Context, addr types.Address) (*chain.ProviderView, error) {
	var v chain.ProviderView
	return &v, c.queryJSON(ctx, chain.QueryProvider+addr.Hex(), &v)
}

// Providers lists registered providers.
func (c *Client) Providers(ctx context.Context) ([]chain.ProviderView, error) {
	var v []chain.ProviderView
	return v, c.queryJSON(ctx, chain.QueryProviders, &v)
}

// MatchProviders lists the providers eligible under req.
func (c *Client) MatchProviders(ctx context.Context, req market.Requirements) ([]chain.ProviderView, error) {
	bz, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var v []chain.ProviderView
	_, err = c.QueryJSON(ctx, chain.QueryMatch, bz, &v)
	return v, err
}

// WhyNoBids explains, provider by provider, who can bid on a job.
func (c *Client) WhyNoBids(ctx context.Context, job uint64) (*chain.WhyNoBidsView, error) {
	var v chain.WhyNoBidsView
	return &v, c.queryJSON(ctx, chain.QueryWhyNoBids+strconv.FormatUint(job, 10), &v)
}

// Escrow returns a job's escrow account.
func (c *Client) Escrow(ctx context.Context, job uint64) (*chain.EscrowView, error) {
	var v chain.EscrowView
	return &v, c.queryJSON(ctx, chain.QueryEscrow+strconv.FormatUint(job, 10), &v)
}

// Stake returns an account's bonded and unbonding stake.
func (c *Client) Stake(ctx context.Context, addr types.Address) (*chain.StakeView, error) {
	var v chain.StakeView
	return &v, c.queryJSON(ctx, chain.QueryStake+addr.Hex(), &v)
}

// Reputation returns a provider's counters and score.
func (c *Client) Reputation(ctx context.Context, addr types.Address) (*chain.ReputationView, error) {
	var v chain.ReputationView
	return &v, c.queryJSON(ctx, chain.QueryReputation+addr.Hex(), &v)
}

// Validators lists the validators.
func (c *Client) Validators(ctx context.Context) ([]chain.ValidatorView, error) {
	var v []chain.ValidatorView
	return v, c.queryJSON(ctx, chain.QueryValidators, &v)
}

// FindEvent decodes the first event of out's type in a transaction result.
func FindEvent(res *ctypes.ResultTx, out types.Event) error {
	for _, ev := range res.TxResult.Events {
		if ev.Type == out.EventType() {
			return types.DecodeEvent(ev, out)
		}
	}
	return fmt.Errorf("the transaction has no %s event", out.EventType())
}

// Session returns session id (/session/ID): its client, prices, lanes,
// expiry, and the chain height the answer is from.
func (c *Client) Session(ctx context.Context, id uint64) (*chain.SessionView, error) {
	var v chain.SessionView
	return &v, c.queryJSON(ctx, chain.QuerySession+strconv.FormatUint(id, 10), &v)
}

// SessionDispute returns dispute n of session id.
func (c *Client) SessionDispute(ctx context.Context, id, n uint64) (*chain.DisputeView, error) {
	var v chain.DisputeView
	if err := c.queryJSON(ctx, fmt.Sprintf("%s%d%s%d", chain.QuerySession, id, chain.QuerySessionDispute, n), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// PopularModel is the model served by the most registered providers (ties:
// the lowest hash), for a job run without --model.
func (c *Client) PopularModel(ctx context.Context) (types.Hash, error) {
	provs, err := c.Providers(ctx)
	if err != nil {
		return types.Hash{}, err
	}
	count := map[types.Hash]int{}
	var best types.Hash
	for _, p := range provs {
		if p.Tombstoned {
			continue
		}
		for _, m := range p.Models {
			count[m]++
			if n := count[m]; n > count[best] || n == count[best] && bytes.Compare(m[:], best[:]) < 0 {
				best = m
			}
		}
	}
	if count[best] == 0 {
		return types.Hash{}, fmt.Errorf("no registered provider serves a model: pass --model HASH|FILE")
	}
	return best, nil
}
