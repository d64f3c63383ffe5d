package ethbridge

import (
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/ethereum/go-ethereum/common"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/chain"
)

// AppChain is what a relay reads from the app-chain (node.Client does).
type AppChain interface {
	Bridge(ctx context.Context) (*chain.BridgeView, error)
	BridgePending(ctx context.Context) ([]chain.WithdrawalView, error)
	BridgeValset(ctx context.Context, n uint64) (*chain.ValsetView, error)
}

// Relay carries what the validators signed on the app-chain to Ethereum:
// valset updates first, in nonce order (a withdrawal is checked against
// the contract's set), then every signed withdrawal not yet paid, then
// queued ones whose delay has passed. It trusts nothing it reads: the
// Relayer checks every signature and the power locally before it pays gas,
// and the contract checks them again. Anyone can run one (`ogpud bridge
// relay`); several relays racing only waste gas on a lost race.
type Relay struct {
	App     AppChain
	Eth     Client
	Watcher *Watcher
	Relayer *Relayer
	// Key pays the gas.
	Key      *ecdsa.PrivateKey
	Interval time.Duration
	Logger   log.Logger
}

// RelayReport is what one Step did.
type RelayReport struct {
	Valsets     []uint64 // valset nonces applied (or queued)
	Withdrawals []uint64 // withdrawal nonces paid (or queued)
	Executed    []uint64 // queued withdrawals paid
}

// Empty reports whether the step relayed nothing.
func (r *RelayReport) Empty() bool {
	return len(r.Valsets) == 0 && len(r.Withdrawals) == 0 && len(r.Executed) == 0
}

func parseSigs(views []chain.SigView) (map[common.Address]bridge.Sig, error) {
	out := make(map[common.Address]bridge.Sig, len(views))
	for _, v := range views {
		bz, err := hex.DecodeString(v.Sig)
		if err != nil || len(bz) != len(bridge.Sig{}) {
			return nil, fmt.Errorf("signature of %s from the app-chain is malformed", v.Signer)
		}
		out[v.Signer] = bridge.Sig(bz)
	}
	return out, nil
}

func (r *Relay) log() log.Logger {
	if r.Logger == nil {
		return log.NewNopLogger()
	}
	return r.Logger
}

// Step relays whatever is ready now.
func (r *Relay) Step(ctx context.Context) (*RelayReport, error) {
	rep := &RelayReport{}
	cur, err := r.Watcher.CurrentValset(ctx)
	if err != nil {
		return rep, fmt.Errorf("cannot read the contract's valset: %w", err)
	}
	b, err := r.App.Bridge(ctx)
	if err != nil {
		return rep, err
	}
	now := uint64(0)
	if h, err := r.Eth.HeaderByNumber(ctx, nil); err == nil {
		now = h.Time
	}
	// Valset updates, in order, while adopted on the app-chain.
	for b.Valset != nil && cur.Nonce < b.Valset.Nonce {
		next, err := r.App.BridgeValset(ctx, cur.Nonce+1)
		if err != nil {
			return rep, err
		}
		if !next.Adopted {
			break
		}
		sigs, err := parseSigs(next.Signatures)
		if err != nil {
			return rep, err
		}
		res, err := r.Relayer.UpdateValset(ctx, r.Key, cur, next.Valset, sigs)
		if err != nil {
			return rep, fmt.Errorf("valset %d: %w", next.Nonce, err)
		}
		if res.Outcome == ValsetQueued || res.Outcome == ValsetAlreadyQueued {
			if now < res.ReadyAt {
				r.log().Info("valset update queued by the contract's timelock", "nonce", next.Nonce, "ready_at", res.ReadyAt)
				break
			}
			if res, err = r.Relayer.ApplyQueuedValset(ctx, r.Key, next.Valset); err != nil {
				return rep, fmt.Errorf("valset %d: %w", next.Nonce, err)
			}
		}
		if res.Sent() {
			rep.Valsets = append(rep.Valsets, next.Nonce)
			r.log().Info("relayed valset update", "nonce", next.Nonce, "outcome", res.Outcome, "tx", res.Tx, "gas", res.GasUsed)
		}
		cur = next.Valset
	}
	pending, err := r.App.BridgePending(ctx)
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, w := range pending {
		if !w.Signed {
			continue
		}
		sigs, err := parseSigs(w.Signatures)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res, err := r.Relayer.Withdraw(ctx, r.Key, cur, w.Nonce, w.To, w.Amount, sigs)
		if err != nil {
			errs = append(errs, fmt.Errorf("withdrawal %d: %w", w.Nonce, err))
			continue
		}
		if res.Sent() {
			rep.Withdrawals = append(rep.Withdrawals, w.Nonce)
			r.log().Info("relayed withdrawal", "nonce", w.Nonce, "to", w.To, "outcome", res.Outcome, "tx", res.Tx, "gas", res.GasUsed)
		}
		if (res.Outcome == Queued || res.Outcome == AlreadyQueued) && now >= res.ReadyAt && res.ReadyAt > 0 {
			res, err := r.Relayer.ExecuteQueued(ctx, r.Key, w.Nonce)
			if err != nil {
				errs = append(errs, fmt.Errorf("queued withdrawal %d: %w", w.Nonce, err))
				continue
			}
			if res.Sent() {
				rep.Executed = append(rep.Executed, w.Nonce)
				r.log().Info("paid queued withdrawal", "nonce", w.Nonce, "tx", res.Tx)
			}
		}
	}
	return rep, errors.Join(errs...)
}

// Run steps every Interval until ctx ends, logging failures (an Ethereum
// or app-chain node that is down is retried, never fatal).
func (r *Relay) Run(ctx context.Context) error {
	every := r.Interval
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := r.Step(ctx); err != nil && ctx.Err() == nil {
			r.log().Error("relay step failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
