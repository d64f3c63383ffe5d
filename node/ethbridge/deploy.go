package ethbridge

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/contracts"
	"github.com/ogpu-network/ogpu/types"
)

// Limits are the bridge's outflow and timelock parameters (constructor
// arguments, immutable once deployed); src/OGPUBridge.sol documents them.
type Limits struct {
	// OutflowCap is the outflow bucket, refilled at OutflowCap per 24 h.
	OutflowCap *uint256.Int
	// LargeWithdrawal: withdrawals of this amount or more always wait.
	LargeWithdrawal *uint256.Int
	// WithdrawalDelay is how long a queued withdrawal waits (whole
	// seconds, at least one).
	WithdrawalDelay time.Duration
	// ValsetDelay is how long a valset update moving more than 1/3 of the
	// power waits (whole seconds, at least one).
	ValsetDelay time.Duration
}

// Validate checks what the constructor checks.
func (l Limits) Validate() error {
	if l.OutflowCap == nil || l.OutflowCap.IsZero() || l.LargeWithdrawal == nil || l.LargeWithdrawal.IsZero() {
		return errors.New("bridge limits: the outflow cap and the large-withdrawal threshold must be positive")
	}
	if l.WithdrawalDelay < time.Second || l.ValsetDelay < time.Second {
		return errors.New("bridge limits: the withdrawal and valset delays must be at least one second")
	}
	return nil
}

// DeployToken deploys OGPUToken with key as its owner, the whole supply to
// holder and the trade tax to treasury, and waits for it to be mined.
func DeployToken(ctx context.Context, c Client, key *ecdsa.PrivateKey, holder, treasury common.Address) (common.Address, error) {
	if key == nil {
		return common.Address{}, errors.New("deploy token: no deployer key")
	}
	if holder == (common.Address{}) || treasury == (common.Address{}) {
		return common.Address{}, errors.New("deploy token: holder and treasury must be non-zero addresses")
	}
	s, err := newSender(ctx, c, 0, 0)
	if err != nil {
		return common.Address{}, err
	}
	owner := crypto.PubkeyToAddress(key.PublicKey)
	code := append(common.FromHex(contracts.OGPUTokenMetaData.Bin), tokenABI.PackConstructor(owner, holder, treasury)...)
	r, err := s.send(ctx, key, nil, "deploy OGPUToken", code)
	if err != nil {
		return common.Address{}, err
	}
	return r.ContractAddress, nil
}

// DeployBridge deploys OGPUBridge for token and the app chain appChainID,
// with the initial validator set, the guardian that may pause, and limits,
// then has the token exempt the bridge from its trade tax (so key must be
// the token's owner; it is checked before anything is sent). It returns the
// bridge's address and its deployment block (the watcher's StartBlock).
func DeployBridge(ctx context.Context, c Client, key *ecdsa.PrivateKey, token common.Address, appChainID string, initial bridge.Valset, guardian common.Address, limits Limits) (common.Address, uint64, error) {
	var zero common.Address
	if key == nil {
		return zero, 0, errors.New("deploy bridge: no deployer key")
	}
	if token == zero || guardian == zero {
		return zero, 0, errors.New("deploy bridge: token and guardian must be non-zero addresses")
	}
	if appChainID == "" {
		return zero, 0, errors.New("deploy bridge: the app chain id is empty")
	}
	if err := initial.Validate(); err != nil {
		return zero, 0, fmt.Errorf("deploy bridge: initial validator set: %w", err)
	}
	if err := limits.Validate(); err != nil {
		return zero, 0, fmt.Errorf("deploy bridge: %w", err)
	}
	s, err := newSender(ctx, c, 0, 0)
	if err != nil {
		return zero, 0, err
	}
	me := crypto.PubkeyToAddress(key.PublicKey)
	tc := tokenABI.Instance(c, token)
	owner, err := bind.Call(tc, &bind.CallOpts{Context: ctx}, tokenABI.PackOwner(), tokenABI.UnpackOwner)
	if err != nil {
		return zero, 0, fmt.Errorf("deploy bridge: cannot read the token's owner (is %s an OGPUToken?): %w", token, err)
	}
	if owner != me {
		return zero, 0, fmt.Errorf("deploy bridge: %s is not the owner of token %s (%s is), so it cannot exempt the bridge from the tax; deploy with the owner's key", me, token, owner)
	}
	code := append(common.FromHex(contracts.OGPUBridgeMetaData.Bin), bridgeABI.PackConstructor(token, bridge.AppChainIDHash(appChainID),
		contractValset(&initial), guardian, limits.OutflowCap.ToBig(), limits.LargeWithdrawal.ToBig(),
		uint64(limits.WithdrawalDelay/time.Second), uint64(limits.ValsetDelay/time.Second))...)
	r, err := s.send(ctx, key, nil, "deploy OGPUBridge", code)
	if err != nil {
		return zero, 0, err
	}
	addr := r.ContractAddress
	if _, err := s.send(ctx, key, &token, "setExempt", tokenABI.PackSetExempt(addr, true)); err != nil {
		return addr, r.BlockNumber.Uint64(), fmt.Errorf("bridge deployed at %s but not exempted from the tax: %w", addr, err)
	}
	return addr, r.BlockNumber.Uint64(), nil
}

// Deposit locks amount oGPU of key's account in the bridge for recipient on
// the app chain: it approves the bridge when the allowance is short, then
// deposits, and returns the deposit nonce from the Deposited event.
func Deposit(ctx context.Context, c Client, key *ecdsa.PrivateKey, bridgeAddr common.Address, recipient types.Address, amount *uint256.Int) (uint64, error) {
	if key == nil {
		return 0, errors.New("deposit: no key")
	}
	if recipient == (types.Address{}) {
		return 0, errors.New("deposit: the app-chain recipient must not be the zero address")
	}
	if amount == nil || amount.IsZero() {
		return 0, errors.New("deposit: the amount must be positive")
	}
	s, err := newSender(ctx, c, 0, 0)
	if err != nil {
		return 0, err
	}
	at := &bind.CallOpts{Context: ctx}
	token, err := bind.Call(bridgeABI.Instance(c, bridgeAddr), at, bridgeABI.PackToken(), bridgeABI.UnpackToken)
	if err != nil {
		return 0, fmt.Errorf("deposit: cannot read the bridge's token (is %s an OGPUBridge?): %w", bridgeAddr, err)
	}
	me := crypto.PubkeyToAddress(key.PublicKey)
	tc := tokenABI.Instance(c, token)
	held, err := bind.Call(tc, at, tokenABI.PackBalanceOf(me), tokenABI.UnpackBalanceOf)
	if err != nil {
		return 0, fmt.Errorf("deposit: cannot read the balance: %w", err)
	}
	if held.Cmp(amount.ToBig()) < 0 {
		return 0, fmt.Errorf("deposit: %s holds %s of the oGPU token on Ethereum, %s needed; nothing sent (send it more oGPU there, or deposit less)",
			me, types.FormatAmount(uint256.MustFromBig(held)), types.FormatAmount(amount))
	}
	allowed, err := bind.Call(tc, at, tokenABI.PackAllowance(me, bridgeAddr), tokenABI.UnpackAllowance)
	if err != nil {
		return 0, fmt.Errorf("deposit: cannot read the allowance: %w", err)
	}
	if allowed.Cmp(amount.ToBig()) < 0 {
		if _, err := s.send(ctx, key, &token, "approve", tokenABI.PackApprove(bridgeAddr, amount.ToBig())); err != nil {
			return 0, fmt.Errorf("deposit: %w", err)
		}
	}
	r, err := s.send(ctx, key, &bridgeAddr, "deposit", bridgeABI.PackDeposit(recipient, amount.ToBig()))
	if err != nil {
		return 0, err
	}
	for _, l := range r.Logs {
		if l.Address != bridgeAddr {
			continue
		}
		if ev, err := bridgeABI.UnpackDepositedEvent(l); err == nil {
			return ev.Nonce, nil
		}
	}
	return 0, fmt.Errorf("deposit transaction %s emitted no Deposited event", r.TxHash)
}
