package ethbridge

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Observer reads the bridge contract at the Ethereum node's finalized
// block (Watcher does, over JSON-RPC).
type Observer interface {
	Observe(ctx context.Context, nextDeposit uint64, maxDeposits int, pending []uint64) (*bridge.Observation, error)
}

// Signer is a validator's bridge sidecar: the chain.Extender that fills its
// vote extensions. At each precommit it reads the committed bridge state,
// asks its own Ethereum node (through Observer, finalized blocks only) for
// the deposits from the next nonce and for Withdrawn events of pending
// withdrawals, and signs, with its bridge key, the pending withdrawals and
// the valset update it has not signed yet.
//
// Before it signs anything it checks the cross-chain invariant:
//
//	locked on Ethereum + withdrawals paid there and not yet attested
//	  >= max supply − reserve on the app-chain
//
// (the outbound escrow is still locked on Ethereum; deposits not yet
// credited only make the left side larger). If Ethereum holds less, tokens
// left the contract without the app-chain's consent (a forged signature
// set, a bug): the signer stops signing and says so, loudly, at every
// height; deposits and Withdrawn events are still reported, since they
// only move tokens into the reserve's books, never out of the contract.
//
// Any failure to read Ethereum (node down, finality lagging) gives an empty
// extension: the chain goes on, the bridge waits for the other
// validators.
type Signer struct {
	obs     Observer
	key     *ecdsa.PrivateKey
	addr    common.Address
	logger  log.Logger
	timeout time.Duration

	mu      sync.Mutex
	halted  bool   // the invariant failed at the last observation
	lastErr string // the last error logged, to log changes only
}

// NewSigner returns the sidecar for bridge key key reading through obs.
func NewSigner(obs Observer, key *ecdsa.PrivateKey, logger log.Logger) *Signer {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	return &Signer{obs: obs, key: key, addr: crypto.PubkeyToAddress(key.PublicKey), logger: logger, timeout: 2 * time.Second}
}

// Address is the signer's bridge address.
func (s *Signer) Address() common.Address { return s.addr }

// Halted reports whether the cross-chain invariant failed at the last
// observation (the signer then signs nothing).
func (s *Signer) Halted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.halted
}

// note logs why the extension is empty, once per change of reason: at
// info level while Ethereum has simply not finalized the deployment or is
// catching up, at error level otherwise (the node is unreachable, the key
// is not registered).
func (s *Signer) note(msg string, err error, kv ...any) {
	var notYet *NotYetError
	expected := errors.As(err, &notYet) || errors.Is(err, ErrFinalityLag)
	key := msg
	switch {
	case expected:
		key += fmt.Sprintf("%T", errors.Unwrap(err)) + fmt.Sprintf("%T", err) // not each height's numbers
	case err != nil:
		key += err.Error()
	}
	s.mu.Lock()
	changed := s.lastErr != key
	s.lastErr = key
	s.mu.Unlock()
	if !changed || err == nil {
		return
	}
	kv = append(kv, "err", err)
	if expected {
		s.logger.Info(msg, kv...)
		return
	}
	s.logger.Error(msg, kv...)
}

// Extension implements chain.Extender.
func (s *Signer) Extension(ctx context.Context, height int64, committed store.Reader) []byte {
	ext, err := s.Build(ctx, committed)
	if err != nil {
		s.note("bridge: sending an empty vote extension", err, "height", height)
		return nil
	}
	s.note("", nil)
	return ext.Encode()
}

// Build makes the extension for the committed state.
func (s *Signer) Build(ctx context.Context, committed store.Reader) (*bridge.Extension, error) {
	kv, ok := committed.(store.KV)
	if !ok {
		return &bridge.Extension{}, nil
	}
	params := chain.ReadParams(kv)
	if params.Bridge == nil {
		return &bridge.Extension{}, nil
	}
	view := bridge.NewView(kv)
	if _, ok := view.OwnerOf(s.addr); !ok {
		return nil, errNotRegistered{s.addr}
	}
	pending := view.Pending()
	ask := pending[:min(len(pending), bridge.MaxExecuted)]
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	obs, err := s.obs.Observe(ctx, view.LastDeposit()+1, bridge.MaxDeposits, ask)
	if err != nil {
		return nil, err
	}
	ext := &bridge.Extension{}
	next := view.LastDeposit() + 1
	for i, d := range obs.Deposits {
		if d.Nonce != next+uint64(i) || len(ext.Deposits) == bridge.MaxDeposits {
			break
		}
		ext.Deposits = append(ext.Deposits, d)
	}
	paid := new(uint256.Int)
	executed := map[uint64]bool{}
	for _, x := range obs.Executed {
		if !slices.Contains(ask, x.Nonce) || len(ext.Executed) == bridge.MaxExecuted {
			continue
		}
		ext.Executed = append(ext.Executed, x)
		executed[x.Nonce] = true
		paid.Add(paid, x.Amount)
	}
	slices.SortFunc(ext.Executed, func(a, b bridge.Executed) int { return cmp.Compare(a.Nonce, b.Nonce) })

	// The cross-chain invariant, before any signature.
	reserve := escrow.NewKeeper(kv).BridgeReserve()
	want := new(uint256.Int).Sub(types.MaxSupply, reserve)
	have := new(uint256.Int).Add(obs.Locked, paid)
	halted := have.Lt(want)
	s.mu.Lock()
	s.halted = halted
	s.mu.Unlock()
	if halted {
		s.logger.Error("BRIDGE INVARIANT BROKEN: Ethereum holds less than the app-chain accounts for; not signing",
			"locked", types.FormatAmount(obs.Locked), "paid_unattested", types.FormatAmount(paid), "want", types.FormatAmount(want), "finalized", obs.Finalized)
		return ext, nil
	}

	domain := bridge.Domain(params.Bridge.EthChainID, params.Bridge.Contract, string(kv.Get(chain.ChainIDKey())))
	for _, n := range pending {
		if len(ext.Withdrawals) == bridge.MaxSigs {
			break
		}
		if executed[n] || view.HasWithdrawalSig(n, s.addr) {
			continue
		}
		w, ok := view.Withdrawal(n)
		if !ok {
			continue
		}
		sig, err := bridge.Sign(s.key, bridge.WithdrawDigest(domain, n, w.To, w.Amount))
		if err != nil {
			return nil, err
		}
		ext.Withdrawals = append(ext.Withdrawals, bridge.NonceSig{Nonce: n, Sig: sig})
	}
	if latest, ok := view.LatestValset(); ok && latest.Nonce > 0 && !view.Adopted(latest.Nonce) && !view.HasValsetSig(latest.Nonce, s.addr) {
		if prev, ok := view.Valset(latest.Nonce - 1); ok && prev.Power(s.addr) > 0 {
			sig, err := bridge.Sign(s.key, bridge.Checkpoint(domain, latest))
			if err != nil {
				return nil, err
			}
			ext.Valsets = append(ext.Valsets, bridge.NonceSig{Nonce: latest.Nonce, Sig: sig})
		}
	}
	return ext, nil
}

type errNotRegistered struct{ addr common.Address }

func (e errNotRegistered) Error() string {
	return "bridge key " + e.addr.Hex() + " is not registered on the chain: send MsgSetBridgeKey from the validator's operator (ogpud bridge register-key)"
}
