package ethbridge

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/contracts"
)

// RelayerOptions configures a Relayer. Zero fields take the defaults.
type RelayerOptions struct {
	// GasMargin is added to each gas estimate. Default DefaultGasMargin.
	GasMargin uint64
	// PollInterval is how often a receipt is polled. Default
	// DefaultPollInterval.
	PollInterval time.Duration
}

// Relayer submits withdrawals and valset updates that the app-chain's
// validators signed to the bridge contract. Anyone may relay: the key
// passed to each call only pays the gas. Before sending, each call checks
// the signatures and the power locally and reads the contract's state, so
// a call it knows will fail (or that is already done) sends nothing. It is
// safe for concurrent use; sends are serialized so a key's nonces do not
// collide.
type Relayer struct {
	s      *sender
	addr   common.Address
	bc     *bind.BoundContract
	domain [32]byte
	mu     sync.Mutex
}

// NewRelayer binds a relayer to the bridge at addr on c's chain; it reads
// the chain id and the contract's domain once.
func NewRelayer(ctx context.Context, c Client, addr common.Address, opts RelayerOptions) (*Relayer, error) {
	if c == nil {
		return nil, errors.New("ethbridge: no Ethereum client")
	}
	s, err := newSender(ctx, c, opts.GasMargin, opts.PollInterval)
	if err != nil {
		return nil, err
	}
	r := &Relayer{s: s, addr: addr, bc: bridgeABI.Instance(c, addr)}
	if r.domain, err = bind.Call(r.bc, &bind.CallOpts{Context: ctx}, bridgeABI.PackDomain(), bridgeABI.UnpackDomain); err != nil {
		return nil, fmt.Errorf("cannot read the domain of the bridge at %s (is it an OGPUBridge on this chain?): %w", addr, err)
	}
	return r, nil
}

// Outcome is how a relay call ended.
type Outcome int

// The outcomes. Those named Already... sent nothing (or lost a race to
// another relayer, see Result.Tx).
const (
	// Paid: Withdrawn was emitted, the recipient has the tokens.
	Paid Outcome = iota + 1
	// Queued: the withdrawal is signed off but waits for the outflow limit;
	// ExecuteQueued pays it from Result.ReadyAt on.
	Queued
	// AlreadyExecuted: the withdrawal was paid before; nothing sent.
	AlreadyExecuted
	// AlreadyQueued: the withdrawal is queued already (Result.ReadyAt).
	AlreadyQueued
	// ValsetApplied: the contract now holds the new set.
	ValsetApplied
	// ValsetQueued: the update moves more than 1/3 of the power and waits
	// for the valset delay; ApplyQueuedValset applies it from
	// Result.ReadyAt on.
	ValsetQueued
	// ValsetAlreadyApplied: the contract holds the set already.
	ValsetAlreadyApplied
	// ValsetAlreadyQueued: the update is queued already (Result.ReadyAt).
	ValsetAlreadyQueued
)

var outcomeNames = map[Outcome]string{
	Paid: "paid", Queued: "queued", AlreadyExecuted: "already executed", AlreadyQueued: "already queued",
	ValsetApplied: "valset applied", ValsetQueued: "valset queued",
	ValsetAlreadyApplied: "valset already applied", ValsetAlreadyQueued: "valset already queued",
}

// String names the outcome in words.
func (o Outcome) String() string {
	if s, ok := outcomeNames[o]; ok {
		return s
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Result is what a relay call did.
type Result struct {
	Outcome Outcome
	// Tx is the transaction sent, zero when nothing was sent.
	Tx common.Hash
	// Block and GasUsed are from Tx's receipt.
	Block, GasUsed uint64
	// ReadyAt is when a queued withdrawal or valset update can be executed
	// (unix seconds), for the queued outcomes.
	ReadyAt uint64
	// Dropped lists the signatures left out because they did not verify
	// (the contract would revert the whole call on one of them); the rest
	// still held more than 2/3 of the power.
	Dropped []InvalidSig
}

// Sent reports whether a transaction was sent.
func (r *Result) Sent() bool { return r.Tx != (common.Hash{}) }

// ErrInsufficientPower is returned (inside a *PowerError) when the valid
// signatures do not hold more than 2/3 of the set's power.
var ErrInsufficientPower = errors.New("not enough signed power")

// InvalidSig is a signature that does not verify for its member.
type InvalidSig struct {
	Member common.Address
	Err    error
}

// PowerError says that the valid signatures hold Signed of Total power,
// not strictly more than 2/3, and which signatures were invalid. Nothing
// was sent. errors.Is(err, ErrInsufficientPower) holds.
type PowerError struct {
	Signed, Total uint64
	Invalid       []InvalidSig
}

// Error gives the power numbers and the invalid signatures.
func (e *PowerError) Error() string {
	msg := fmt.Sprintf("%v: the valid signatures hold %d of %d power, strictly more than 2/3 (more than %d) is needed; nothing sent",
		ErrInsufficientPower, e.Signed, e.Total, e.Total*2/3)
	if len(e.Invalid) > 0 {
		var parts []string
		for _, s := range e.Invalid {
			parts = append(parts, fmt.Sprintf("%s: %v", s.Member, s.Err))
		}
		msg += " (invalid signatures left out: " + strings.Join(parts, "; ") + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrInsufficientPower) true.
func (e *PowerError) Is(target error) bool { return target == ErrInsufficientPower }

// alignSigs lays sigs out as the contract wants them: one entry per member
// of vs in its order, V as 27/28, all zero where the member did not sign or
// its signature does not recover to it over digest (those are returned as
// invalid). Signatures of addresses outside vs are ignored. It fails with a
// *PowerError unless the valid ones hold more than 2/3 of the power.
func alignSigs(vs *bridge.Valset, digest [32]byte, sigs map[common.Address]bridge.Sig) ([]contracts.OGPUBridgeSig, []InvalidSig, error) {
	out := make([]contracts.OGPUBridgeSig, len(vs.Members))
	var invalid []InvalidSig
	var signed uint64
	for i, m := range vs.Members {
		s, ok := sigs[m.Addr]
		if !ok {
			continue
		}
		who, err := s.Signer(digest)
		if err == nil && who != m.Addr {
			err = fmt.Errorf("recovers to %s (forged, or signed over another digest)", who)
		}
		if err != nil {
			invalid = append(invalid, InvalidSig{Member: m.Addr, Err: err})
			continue
		}
		copy(out[i].R[:], s[:32])
		copy(out[i].S[:], s[32:64])
		out[i].V = s[64] + 27
		signed += uint64(m.Power)
	}
	if total := vs.Total(); signed*3 <= total*2 {
		return nil, invalid, &PowerError{Signed: signed, Total: total, Invalid: invalid}
	}
	return out, invalid, nil
}

func contractValset(vs *bridge.Valset) contracts.OGPUBridgeValset {
	addrs, powers := vs.Columns()
	return contracts.OGPUBridgeValset{Validators: addrs, Powers: powers, Nonce: vs.Nonce}
}

// checkCurrent refuses a set that is not the one the contract stores now.
func (r *Relayer) checkCurrent(ctx context.Context, current *bridge.Valset) error {
	if err := current.Validate(); err != nil {
		return fmt.Errorf("current validator set: %w", err)
	}
	at := &bind.CallOpts{Context: ctx}
	stored, err := bind.Call(r.bc, at, bridgeABI.PackValsetCheckpoint(), bridgeABI.UnpackValsetCheckpoint)
	if err != nil {
		return fmt.Errorf("cannot read the valset checkpoint: %w", err)
	}
	if bridge.Checkpoint(r.domain, current) == stored {
		return nil
	}
	n, err := bind.Call(r.bc, at, bridgeABI.PackValsetNonce(), bridgeABI.UnpackValsetNonce)
	if err != nil {
		return fmt.Errorf("cannot read the valset nonce: %w", err)
	}
	return fmt.Errorf("the validator set given (nonce %d) is not the set the contract holds (nonce %d): relay the pending valset updates first, or fetch the current set with Watcher.CurrentValset; nothing sent", current.Nonce, n)
}

// relay sends calldata and decodes the outcome from the receipt's logs. A
// refusal or mined revert with AlreadyExecuted becomes that outcome.
func (r *Relayer) relay(ctx context.Context, key *ecdsa.PrivateKey, method string, data []byte) (*Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc, err := r.s.send(ctx, key, &r.addr, method, data)
	res := &Result{}
	if rc != nil {
		res.Tx, res.Block, res.GasUsed = rc.TxHash, rc.BlockNumber.Uint64(), rc.GasUsed
	}
	var ce *ContractError
	if errors.As(err, &ce) {
		if _, ok := ce.Reason.(*contracts.OGPUBridgeAlreadyExecuted); ok {
			res.Outcome = AlreadyExecuted // another relayer was first
			return res, nil
		}
	}
	if err != nil {
		return res, err
	}
	for _, l := range rc.Logs {
		if l.Address != r.addr {
			continue
		}
		if _, err := bridgeABI.UnpackWithdrawnEvent(l); err == nil {
			res.Outcome = Paid
		} else if ev, err := bridgeABI.UnpackWithdrawalQueuedEvent(l); err == nil {
			res.Outcome, res.ReadyAt = Queued, ev.ReadyAt
		} else if _, err := bridgeABI.UnpackValsetUpdatedEvent(l); err == nil {
			res.Outcome = ValsetApplied
		} else if ev, err := bridgeABI.UnpackValsetQueuedEvent(l); err == nil {
			res.Outcome, res.ReadyAt = ValsetQueued, ev.ReadyAt
		}
	}
	if res.Outcome == 0 {
		return res, fmt.Errorf("%s transaction %s succeeded but emitted no bridge event", method, rc.TxHash)
	}
	return res, nil
}

// withdrawalState reports an already executed or queued withdrawal, or nil.
func (r *Relayer) withdrawalState(ctx context.Context, nonce uint64) (*Result, error) {
	at := &bind.CallOpts{Context: ctx}
	done, err := bind.Call(r.bc, at, bridgeABI.PackExecuted(nonce), bridgeABI.UnpackExecuted)
	if err != nil {
		return nil, fmt.Errorf("cannot read executed(%d): %w", nonce, err)
	}
	if !done {
		return nil, nil
	}
	q, err := bind.Call(r.bc, at, bridgeABI.PackQueued(nonce), bridgeABI.UnpackQueued)
	if err != nil {
		return nil, fmt.Errorf("cannot read queued(%d): %w", nonce, err)
	}
	if q.Amount != nil && q.Amount.Sign() > 0 {
		return &Result{Outcome: AlreadyQueued, ReadyAt: q.ReadyAt}, nil
	}
	return &Result{Outcome: AlreadyExecuted}, nil
}

// Withdraw relays withdrawal nonce (amount to `to`), signed by the members
// of current (the set the contract holds) in sigs, keyed by bridge address.
// It checks that current is the contract's set and that the signatures that
// verify hold more than 2/3 of its power (a *PowerError otherwise),
// dropping those that do not verify. A withdrawal already executed or
// queued comes back as that outcome with nothing sent. The result is Paid,
// or Queued when the outflow limit holds it back (ExecuteQueued pays it
// later). key only pays the gas.
func (r *Relayer) Withdraw(ctx context.Context, key *ecdsa.PrivateKey, current bridge.Valset, nonce uint64, to common.Address, amount *uint256.Int, sigs map[common.Address]bridge.Sig) (*Result, error) {
	if amount == nil || amount.IsZero() {
		return nil, errors.New("withdrawal amount must be positive")
	}
	if to == (common.Address{}) {
		return nil, errors.New("withdrawal recipient must not be the zero address")
	}
	if res, err := r.withdrawalState(ctx, nonce); res != nil || err != nil {
		return res, err
	}
	if err := r.checkCurrent(ctx, &current); err != nil {
		return nil, err
	}
	digest := bridge.WithdrawDigest(r.domain, nonce, to, amount)
	aligned, dropped, err := alignSigs(&current, digest, sigs)
	if err != nil {
		return nil, fmt.Errorf("withdrawal %d: %w", nonce, err)
	}
	res, err := r.relay(ctx, key, "withdraw", bridgeABI.PackWithdraw(contractValset(&current), nonce, to, amount.ToBig(), aligned))
	if res != nil {
		res.Dropped = dropped
	}
	return res, err
}

// ExecuteQueued pays queued withdrawal nonce once its delay has passed
// (Paid). A withdrawal already paid is AlreadyExecuted; one never queued,
// or not ready yet, is an error (a *ContractError with
// *contracts.OGPUBridgeNotReady for the latter). Nothing is sent on error.
func (r *Relayer) ExecuteQueued(ctx context.Context, key *ecdsa.PrivateKey, nonce uint64) (*Result, error) {
	at := &bind.CallOpts{Context: ctx}
	q, err := bind.Call(r.bc, at, bridgeABI.PackQueued(nonce), bridgeABI.UnpackQueued)
	if err != nil {
		return nil, fmt.Errorf("cannot read queued(%d): %w", nonce, err)
	}
	if q.Amount == nil || q.Amount.Sign() == 0 {
		done, err := bind.Call(r.bc, at, bridgeABI.PackExecuted(nonce), bridgeABI.UnpackExecuted)
		if err != nil {
			return nil, fmt.Errorf("cannot read executed(%d): %w", nonce, err)
		}
		if done {
			return &Result{Outcome: AlreadyExecuted}, nil
		}
		return nil, fmt.Errorf("withdrawal %d is not queued on Ethereum: relay it with Withdraw first; nothing sent", nonce)
	}
	return r.relay(ctx, key, "executeQueued", bridgeABI.PackExecuteQueued(nonce))
}

// UpdateValset relays the update of the contract's set from current to
// next (next.Nonce = current.Nonce + 1), signed over next's checkpoint by
// members of current. Signatures are checked as in Withdraw. A set the
// contract holds or has queued already comes back as that outcome with
// nothing sent. The result is ValsetApplied, or ValsetQueued when the
// update moves more than 1/3 of the power (ApplyQueuedValset applies it
// after the delay).
func (r *Relayer) UpdateValset(ctx context.Context, key *ecdsa.PrivateKey, current, next bridge.Valset, sigs map[common.Address]bridge.Sig) (*Result, error) {
	if err := next.Validate(); err != nil {
		return nil, fmt.Errorf("new validator set: %w", err)
	}
	if next.Nonce != current.Nonce+1 {
		return nil, fmt.Errorf("the new set has nonce %d, the current one %d: nonces go up by one", next.Nonce, current.Nonce)
	}
	cp := bridge.Checkpoint(r.domain, &next)
	if res, err := r.valsetState(ctx, cp); res != nil || err != nil {
		return res, err
	}
	if err := r.checkCurrent(ctx, &current); err != nil {
		return nil, err
	}
	aligned, dropped, err := alignSigs(&current, cp, sigs)
	if err != nil {
		return nil, fmt.Errorf("valset update to nonce %d: %w", next.Nonce, err)
	}
	res, err := r.relay(ctx, key, "updateValset", bridgeABI.PackUpdateValset(contractValset(&current), contractValset(&next), aligned))
	if res != nil {
		res.Dropped = dropped
	}
	return res, err
}

// valsetState reports a set with checkpoint cp that the contract holds or
// has queued, or nil.
func (r *Relayer) valsetState(ctx context.Context, cp [32]byte) (*Result, error) {
	at := &bind.CallOpts{Context: ctx}
	stored, err := bind.Call(r.bc, at, bridgeABI.PackValsetCheckpoint(), bridgeABI.UnpackValsetCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("cannot read the valset checkpoint: %w", err)
	}
	if stored == cp {
		return &Result{Outcome: ValsetAlreadyApplied}, nil
	}
	pending, err := bind.Call(r.bc, at, bridgeABI.PackPendingValsetCheckpoint(), bridgeABI.UnpackPendingValsetCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("cannot read the pending valset checkpoint: %w", err)
	}
	if pending != cp {
		return nil, nil
	}
	ready, err := bind.Call(r.bc, at, bridgeABI.PackPendingValsetReadyAt(), bridgeABI.UnpackPendingValsetReadyAt)
	if err != nil {
		return nil, fmt.Errorf("cannot read the pending valset's ready time: %w", err)
	}
	return &Result{Outcome: ValsetAlreadyQueued, ReadyAt: ready}, nil
}

// ApplyQueuedValset applies the queued valset update next once the valset
// delay has passed (ValsetApplied; ValsetAlreadyApplied with nothing sent
// when the contract holds it already). It is an error, with nothing sent,
// when next is not the queued update or is not ready yet.
func (r *Relayer) ApplyQueuedValset(ctx context.Context, key *ecdsa.PrivateKey, next bridge.Valset) (*Result, error) {
	if err := next.Validate(); err != nil {
		return nil, fmt.Errorf("queued validator set: %w", err)
	}
	cp := bridge.Checkpoint(r.domain, &next)
	res, err := r.valsetState(ctx, cp)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, fmt.Errorf("the set with nonce %d is not the queued valset update: relay it with UpdateValset first; nothing sent", next.Nonce)
	}
	if res.Outcome == ValsetAlreadyApplied {
		return res, nil
	}
	return r.relay(ctx, key, "applyQueuedValset", bridgeABI.PackApplyQueuedValset(contractValset(&next)))
}
