package bridge

import (
	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Withdrawals (app-chain → Ethereum).
//
//  1. MsgBridgeWithdraw debits the sender at once into the outbound escrow
//     (escrow.BridgeOutbound, counted by the supply invariant) and assigns
//     the next withdrawal nonce. There is no cancel and no expiry: once the
//     validators sign, the withdrawal is claimable on Ethereum forever, so
//     the app-chain must never give the tokens back (Gravity #272).
//  2. Every validator whose bridge key is a member of the latest valset
//     signs WithdrawDigest(domain, nonce, to, amount) in its next vote
//     extensions; ApplyVotes stores each valid signature once. The digest
//     names no valset, so signatures stay good across valset updates for
//     as long as their signers remain in the contract's set.
//  3. Anyone relays: the contract pays when the signatures hold more than
//     2/3 of its stored set's power, each nonce once, in any order.
//  4. Once validators holding more than 2/3 of the voting power report the
//     contract's Withdrawn event (finalized) with the same nonce, recipient
//     and amount, the amount moves from the outbound escrow back to the
//     reserve: the tokens have left the contract.

// Withdrawal is one withdrawal to Ethereum.
type Withdrawal struct {
	Nonce  uint64         `json:"nonce"`
	From   types.Address  `json:"from"`
	To     common.Address `json:"to"`
	Amount *uint256.Int   `json:"amount"`
	// Height is the block that debited it.
	Height uint64 `json:"height"`
	// Executed is the block that saw its Withdrawn event attested (0:
	// still in the outbound escrow).
	Executed uint64 `json:"executed,omitempty"`
}

// Withdraw debits amount from from and queues it for Ethereum address to.
func (k *Keeper) Withdraw(from types.Address, to common.Address, amount *uint256.Int) (uint64, error) {
	p := k.ctx.Params.Bridge
	if p == nil {
		return 0, types.ErrInvalidMsg.Wrapf("the bridge is off on this chain (params.bridge is absent)")
	}
	if to == (common.Address{}) {
		return 0, types.ErrInvalidMsg.Wrapf("withdrawal to the zero address")
	}
	if amount.Lt(p.MinWithdrawal) {
		return 0, types.ErrInvalidMsg.Wrapf("withdrawal of %s is below params.bridge.min_withdrawal (%s)", types.FormatAmount(amount), types.FormatAmount(p.MinWithdrawal))
	}
	view := NewView(k.ctx.KV)
	if _, ok := view.LatestValset(); !ok {
		return 0, types.ErrInvalidMsg.Wrapf("no validator has a bridge key yet: nobody could sign this withdrawal")
	}
	if n := uint64(len(view.Pending())); n >= p.MaxPendingWithdrawals {
		return 0, types.ErrInvalidMsg.Wrapf("%d withdrawals are waiting to be paid on Ethereum (params.bridge.max_pending_withdrawals): retry once some are relayed", n)
	}
	if err := k.escrow.DebitToOutbound(from, amount); err != nil {
		return 0, err
	}
	nonce := view.LastWithdrawal() + 1
	setU64(k.ctx.KV, []byte{keyWithdrawNonce}, nonce)
	setRLP(k.ctx.KV, withdrawalKey(nonce), &Withdrawal{Nonce: nonce, From: from, To: to, Amount: amount.Clone(), Height: k.ctx.Height})
	k.ctx.KV.Set(pendingKey(nonce), []byte{1})
	k.emit(EventWithdrawal{Nonce: nonce, From: from, To: to, Amount: amount})
	return nonce, nil
}

// addWithdrawalSig stores signer's signature of pending withdrawal n if it
// is valid and new. It reports whether it stored it.
func (k *Keeper) addWithdrawalSig(domain [32]byte, signer common.Address, ns NonceSig) bool {
	view := NewView(k.ctx.KV)
	if view.HasWithdrawalSig(ns.Nonce, signer) || k.ctx.KV.Get(pendingKey(ns.Nonce)) == nil {
		return false
	}
	w, ok := view.Withdrawal(ns.Nonce)
	if !ok {
		return false
	}
	if got, err := ns.Sig.Signer(WithdrawDigest(domain, w.Nonce, w.To, w.Amount)); err != nil || got != signer {
		return false
	}
	k.ctx.KV.Set(sigKey(prefixWSig, ns.Nonce, signer), ns.Sig[:])
	return true
}

// executed closes withdrawal x once its Withdrawn event is attested: the
// amount goes back to the reserve and its signatures are dropped.
func (k *Keeper) executed(x Executed) bool {
	view := NewView(k.ctx.KV)
	w, ok := view.Withdrawal(x.Nonce)
	if !ok || w.Executed != 0 || w.To != x.To || !w.Amount.Eq(x.Amount) {
		return false
	}
	if err := k.escrow.OutboundToReserve(w.Amount); err != nil {
		k.emit(EventHalted{Reason: "withdrawal " + err.Error()})
		return false
	}
	w.Executed = k.ctx.Height
	setRLP(k.ctx.KV, withdrawalKey(w.Nonce), w)
	k.ctx.KV.Delete(pendingKey(w.Nonce))
	deleteSigs(k.ctx.KV, prefixWSig, w.Nonce)
	k.emit(EventWithdrawalExecuted{Nonce: w.Nonce, To: w.To, Amount: w.Amount})
	return true
}
