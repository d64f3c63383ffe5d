package bridge

import (
	"slices"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Vote is one validator's entry in the last commit, as the chain resolved
// it: its voting power at that height, its operator (when the chain knows
// its consensus key) and its decoded extension (empty when it sent none,
// did not vote, or sent one that does not decode).
type Vote struct {
	Operator types.Address
	Known    bool
	Power    int64
	Ext      *Extension
}

// ApplyVotes acts on the extensions of the last commit, carried into this
// block by its proposer and checked by the chain against the real commit
// (chain/voteext.go). total is the commit's whole voting power, voters or
// not: every threshold is strictly more than 2/3 of it, as CometBFT's own.
//
// Deposits are credited in nonce order from the next one while validators
// holding more than 2/3 of the power report the identical tuple for it
// (deposit.go). Withdrawn events are acted on the same way. Signatures are
// checked one by one and stored once per signer; a bad one is dropped.
// Work is bounded: per vote at most MaxDeposits + MaxExecuted tuple
// comparisons and 2 × MaxSigs signature recoveries (types.go).
func (k *Keeper) ApplyVotes(votes []Vote, total int64) {
	if !k.Enabled() || total <= 0 {
		return
	}
	k.creditDeposits(votes, total)
	k.applyExecuted(votes, total)
	domain := k.Domain()
	view := NewView(k.ctx.KV)
	latest, _ := view.LatestValset()
	var signedW, signedV []uint64
	for _, v := range votes {
		if !v.Known || v.Ext == nil {
			continue
		}
		signer, ok := view.KeyOf(v.Operator)
		if !ok {
			continue
		}
		for _, ns := range v.Ext.Withdrawals {
			if k.addWithdrawalSig(domain, signer, ns) {
				signedW = append(signedW, ns.Nonce)
			}
		}
		for _, ns := range v.Ext.Valsets {
			if k.addValsetSig(domain, signer, ns) {
				signedV = append(signedV, ns.Nonce)
			}
		}
	}
	// Say once, when it happens, that an item crossed the threshold.
	slices.Sort(signedW)
	for _, n := range slices.Compact(signedW) {
		if latest == nil {
			break
		}
		sigs := view.WithdrawalSigs(n)
		signed := SignedPower(latest, sigs)
		if Enough(signed, latest.Total()) {
			k.emit(EventWithdrawalSigned{Nonce: n, Signers: uint64(len(sigs))})
		}
	}
	slices.Sort(signedV)
	for _, n := range slices.Compact(signedV) {
		if prev, ok := view.Valset(n - 1); ok && Enough(SignedPower(prev, view.ValsetSigs(n)), prev.Total()) {
			k.emit(EventValsetSigned{Nonce: n})
		}
	}
}

// tally accumulates voting power behind identical items.
type tally[T any] struct {
	item  T
	power int64
}

func addTally[T any](ts []tally[T], item T, power int64, eq func(a, b T) bool) []tally[T] {
	for i := range ts {
		if eq(ts[i].item, item) {
			ts[i].power += power
			return ts
		}
	}
	return append(ts, tally[T]{item, power})
}

// winner returns the item holding strictly more than 2/3 of total.
func winner[T any](ts []tally[T], total int64) (T, int64, bool) {
	for _, t := range ts {
		if t.power*3 > total*2 {
			return t.item, t.power, true
		}
	}
	var zero T
	return zero, 0, false
}

func bps(power, total int64) uint64 {
	x := new(uint256.Int).Mul(uint256.NewInt(uint64(power)), uint256.NewInt(10_000))
	return x.Div(x, uint256.NewInt(uint64(total))).Uint64()
}

// applyExecuted closes the withdrawals whose Withdrawn event validators
// holding more than 2/3 of the power reported identically.
func (k *Keeper) applyExecuted(votes []Vote, total int64) {
	var nonces []uint64
	for _, v := range votes {
		if v.Ext != nil {
			for _, x := range v.Ext.Executed {
				nonces = append(nonces, x.Nonce)
			}
		}
	}
	slices.Sort(nonces)
	eq := func(a, b Executed) bool { return a.Nonce == b.Nonce && a.To == b.To && a.Amount.Eq(b.Amount) }
	for _, n := range slices.Compact(nonces) {
		var ts []tally[Executed]
		for _, v := range votes {
			if v.Ext == nil {
				continue
			}
			for _, x := range v.Ext.Executed {
				if x.Nonce == n {
					ts = addTally(ts, x, v.Power, eq)
				}
			}
		}
		if x, _, ok := winner(ts, total); ok {
			k.executed(x)
		}
	}
}
