package loadgen

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// Model is the model hash the load's providers serve and its jobs name.
var Model = types.Hash(sha256.Sum256([]byte("ogpu-loadgen/model")))

var (
	// ClientFunds is what Setup gives each client account: fees and job
	// escrow (a load job locks 2 × maxPrice plus the validator fee, and
	// gets it back at the cancel).
	ClientFunds = types.OGPU(100)
	// ProviderSpare is what Setup gives each provider account on top of
	// min_provider_stake: fees and bid deposits (a bid locks
	// params.market.bid_deposit until its job is cancelled).
	ProviderSpare = types.OGPU(500)
)

// Accounts are the keys of a run's clients and providers.
type Accounts struct {
	Clients, Providers []*ecdsa.PrivateKey
}

// AccountsFor derives the accounts of c (Keys with c.Seed).
func AccountsFor(c *Config) Accounts {
	a := Accounts{Clients: Keys(c.Seed, "client", c.Clients)}
	if c.Mode == ModeMarket {
		a.Providers = Keys(c.Seed, "provider", c.Providers)
	}
	return a
}

// SetupResult says what Setup had to do.
type SetupResult struct {
	Funded, Registered int
}

// Setup makes the accounts ready for a run against the node at c: every
// account below its funds gets them from faucet (transfers of up to
// max_msgs sends each), and every provider not yet registered bonds
// min_provider_stake and registers, serving Model. It waits for each
// transaction's block. A nil faucet funds nobody (the genesis did).
func Setup(ctx context.Context, c *node.Client, accts Accounts, faucet *ecdsa.PrivateKey) (SetupResult, error) {
	var res SetupResult
	params, err := c.Params(ctx)
	if err != nil {
		return res, err
	}
	providerFunds := new(uint256.Int).Add(params.Staking.MinProviderStake, ProviderSpare)
	var sends []types.RawMsg
	// An account is topped up to funds once it holds less than low
	// (bonded stake counted): what a run spends is not refilled each time.
	want := func(k *ecdsa.PrivateKey, funds, low *uint256.Int, stakeCounts bool) error {
		addr := crypto.PubkeyToAddress(k.PublicKey)
		acct, err := c.Account(ctx, addr)
		if err != nil {
			return err
		}
		have := acct.Balance.Clone()
		if stakeCounts {
			st, err := c.Stake(ctx, addr)
			if err != nil {
				return err
			}
			have.Add(have, st.Bonded)
		}
		if have.Lt(low) {
			sends = append(sends, (&escrow.MsgSend{To: addr, Amount: new(uint256.Int).Sub(funds, have)}).Raw())
		}
		return nil
	}
	for _, k := range accts.Clients {
		if err := want(k, ClientFunds, new(uint256.Int).Rsh(ClientFunds, 1), false); err != nil {
			return res, err
		}
	}
	for _, k := range accts.Providers {
		if err := want(k, providerFunds, new(uint256.Int).Sub(providerFunds, new(uint256.Int).Rsh(ProviderSpare, 1)), true); err != nil {
			return res, err
		}
	}
	if len(sends) > 0 {
		if faucet == nil {
			return res, fmt.Errorf("%d load accounts need funds and no faucet key was given: pass a funded key (--faucet-key) or fund them in the genesis", len(sends))
		}
		s := node.NewSender(c, faucet)
		batch := int(params.MaxMsgs)
		var hashes [][]byte
		for i := 0; i < len(sends); i += batch {
			h, err := s.Submit(ctx, sends[i:min(i+batch, len(sends))]...)
			if err != nil {
				return res, fmt.Errorf("cannot fund the load accounts from the faucet %s: %w", s.Address(), err)
			}
			hashes = append(hashes, h)
		}
		if err := waitAll(ctx, c, hashes); err != nil {
			return res, fmt.Errorf("funding the load accounts: %w", err)
		}
		res.Funded = len(sends)
	}
	var hashes [][]byte
	for i, k := range accts.Providers {
		addr := crypto.PubkeyToAddress(k.PublicKey)
		msgs, err := providerMsgs(ctx, c, params, addr, i)
		if err != nil {
			return res, err
		}
		if len(msgs) == 0 {
			continue
		}
		h, err := node.NewSender(c, k).Submit(ctx, msgs...)
		if err != nil {
			return res, fmt.Errorf("cannot register load provider %s: %w", addr, err)
		}
		hashes = append(hashes, h)
	}
	if err := waitAll(ctx, c, hashes); err != nil {
		return res, fmt.Errorf("registering the load providers: %w", err)
	}
	res.Registered = len(hashes)
	return res, nil
}

// providerMsgs is what provider i still needs: a bond up to
// min_provider_stake and its registration serving Model.
func providerMsgs(ctx context.Context, c *node.Client, params *genesis.Params, addr types.Address, i int) ([]types.RawMsg, error) {
	var msgs []types.RawMsg
	st, err := c.Stake(ctx, addr)
	if err != nil {
		return nil, err
	}
	if need := params.Staking.MinProviderStake; st.Bonded.Lt(need) {
		msgs = append(msgs, (&escrow.MsgBond{Amount: new(uint256.Int).Sub(need, st.Bonded)}).Raw())
	}
	p, err := c.Provider(ctx, addr)
	var qe *node.QueryError
	switch {
	case errors.As(err, &qe):
		msgs = append(msgs, (&market.MsgRegisterProvider{Info: market.ProviderInfo{
			PeerID:  fmt.Sprintf("loadgen-provider-%d", i),
			Models:  []types.Hash{Model},
			Moniker: fmt.Sprintf("loadgen %d", i),
		}}).Raw())
	case err != nil:
		return nil, err
	case p.Provider != nil && p.Jailed:
		return nil, fmt.Errorf("load provider %s is jailed until height %d (a job of an earlier run was awarded to it): use another --seed", addr, p.JailedUntil)
	}
	return msgs, nil
}

// waitAll waits for every transaction's block; any failure is an error.
func waitAll(ctx context.Context, c *node.Client, hashes [][]byte) error {
	for _, h := range hashes {
		if _, err := c.WaitTx(ctx, h); err != nil {
			return err
		}
	}
	return nil
}
