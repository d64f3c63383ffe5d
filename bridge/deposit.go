package bridge

// Deposits (Ethereum → app-chain).
//
// The contract gives every deposit a gap-free nonce (1, 2, ...) and emits
// Deposited(nonce, from, recipient, amount) with what it actually received.
// Each validator's watcher reads its own Ethereum node, only blocks at or
// below the node's finalized block, and reports the deposits from the
// chain's next nonce on in its vote extension. A deposit is credited from
// the bridge reserve when validators holding strictly more than 2/3 of the
// last commit's voting power reported the identical tuple (nonce, from,
// recipient, amount) for the next nonce; the contract and chain id are the
// params'. Deposits are keyed by nonce, never by transaction hash or log
// position: a reorg that moves a deposit to another block changes neither,
// and a nonce is credited once. A nonce nobody agrees on stops the ones
// after it: inbound stalls rather than guesses.

// creditDeposits credits, in order, every next deposit more than 2/3 of the
// power agrees on.
func (k *Keeper) creditDeposits(votes []Vote, total int64) {
	view := NewView(k.ctx.KV)
	last := view.LastDeposit()
	for range MaxDeposits {
		next := last + 1
		var ts []tally[Deposit]
		for _, v := range votes {
			if v.Ext == nil || len(v.Ext.Deposits) == 0 {
				continue
			}
			first := v.Ext.Deposits[0].Nonce
			if next < first || next-first >= uint64(len(v.Ext.Deposits)) {
				continue
			}
			ts = addTally(ts, v.Ext.Deposits[next-first], v.Power, Deposit.Equal)
		}
		d, power, ok := winner(ts, total)
		if !ok {
			return
		}
		if err := k.escrow.CreditFromReserve(d.Recipient, d.Amount); err != nil {
			k.emit(EventHalted{Reason: "deposit " + err.Error()})
			return
		}
		last = next
		setU64(k.ctx.KV, []byte{keyDepositNonce}, last)
		k.emit(EventDepositCredited{Nonce: d.Nonce, From: d.From, Recipient: d.Recipient, Amount: d.Amount, PowerBps: bps(power, total)})
	}
}
