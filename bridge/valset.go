package bridge

import (
	"bytes"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/types"
)

// Valsets: the validator set the contract should hold.
//
// The contract checks withdrawals against a stored set of bridge addresses
// with uint32 powers. The chain derives that set from its validators: every
// validator with voting power and a bridge key, its power normalized so the
// set's powers sum to at most 2^32 - 1, members sorted by address. Nonce 0
// is the first such set: the contract is deployed with it and needs no
// signature. Afterwards, when a member joins or leaves, or more than
// params.bridge.valset_change_bps of the normalized power moves, the chain
// stores set n+1 and the members of set n sign its checkpoint in their vote
// extensions; once they hold more than 2/3 of set n's power anyone relays
// the update (the contract checks the same rule). A new set is produced
// only once the one before it is signed, so sets go to Ethereum in order
// and none is skipped; if validators holding a third of set n's power
// leave before signing set n+1, the bridge's outbound side stops until
// governance intervenes: it never lets a minority sign.

// maxNormalized is the largest normalized power total.
const maxNormalized = 1<<32 - 1

// Weighted is a validator's bridge address and voting power, the input of
// NewValset.
type Weighted struct {
	Addr  common.Address
	Power uint64
}

// NewValset normalizes voting powers into a contract valset: each power
// scaled to power × (2^32 − 1) / total, zeros dropped, sorted by address.
// Launch tooling uses it to deploy the contract with the set the chain
// computes at genesis.
func NewValset(nonce uint64, ws []Weighted) (*Valset, bool) {
	var total uint64
	for _, w := range ws {
		total += w.Power
	}
	if total == 0 {
		return nil, false
	}
	vs := &Valset{Nonce: nonce}
	for _, w := range ws {
		n := new(uint256.Int).Mul(uint256.NewInt(w.Power), uint256.NewInt(maxNormalized))
		n.Div(n, uint256.NewInt(total))
		if n.IsZero() {
			continue
		}
		vs.Members = append(vs.Members, Member{Addr: w.Addr, Power: uint32(n.Uint64())})
	}
	slices.SortFunc(vs.Members, func(a, b Member) int { return bytes.Compare(a.Addr[:], b.Addr[:]) })
	return vs, len(vs.Members) > 0
}

// DesiredValset is the set the chain's validators make now (nonce unset):
// every validator with voting power and a bridge key; false when there is
// none.
func (k *Keeper) DesiredValset() (*Valset, bool) {
	var ws []Weighted
	view := NewView(k.ctx.KV)
	k.escrow.IterateValidators(func(op types.Address, v *escrow.Validator) bool {
		power := k.escrow.Power(k.ctx.Params.Staking, op, v)
		if power <= 0 {
			return false
		}
		if addr, ok := view.KeyOf(op); ok {
			ws = append(ws, Weighted{addr, uint64(power)})
		}
		return false
	})
	return NewValset(0, ws)
}

// moved is the normalized power that differs between a and b, in basis
// points of 2^32, and whether their members differ.
func moved(a, b *Valset) (uint64, bool) {
	var diff uint64
	changed := len(a.Members) != len(b.Members)
	for _, m := range a.Members {
		p := b.Power(m.Addr)
		if p == 0 {
			changed = true
		}
		if p > uint64(m.Power) {
			diff += p - uint64(m.Power)
		} else {
			diff += uint64(m.Power) - p
		}
	}
	for _, m := range b.Members {
		if a.Power(m.Addr) == 0 {
			changed = true
			diff += uint64(m.Power)
		}
	}
	return diff * 10_000 >> 32, changed
}

// Adopted reports whether valset n can reach the contract: nonce 0 (the
// deployment's), a set a genesis carried over (or one before it), or
// signed by more than 2/3 of set n-1.
func (v View) Adopted(n uint64) bool {
	if n == 0 || n < getU64(v.r, []byte{keyGenesisValset}) {
		return true
	}
	prev, ok := v.Valset(n - 1)
	return ok && Enough(SignedPower(prev, v.ValsetSigs(n)), prev.Total())
}

// EndBlock stores a new valset when the validators changed enough and the
// latest one is adopted. It runs at the end of every block (and of
// genesis) while the bridge is on.
func (k *Keeper) EndBlock() {
	if !k.Enabled() {
		return
	}
	want, ok := k.DesiredValset()
	if !ok {
		return
	}
	view := NewView(k.ctx.KV)
	latest, ok := view.LatestValset()
	if ok {
		diff, changed := moved(latest, want)
		if !changed && diff <= k.ctx.Params.Bridge.ValsetChangeBps {
			return
		}
		if !view.Adopted(latest.Nonce) {
			return
		}
		// Every set's signatures stay: a relayer needs each update in order.
		want.Nonce = latest.Nonce + 1
	}
	setRLP(k.ctx.KV, valsetKey(want.Nonce), want)
	setU64(k.ctx.KV, []byte{keyValsetNonce}, want.Nonce+1)
	k.emit(EventValset{Nonce: want.Nonce, Members: uint64(len(want.Members))})
}

// addValsetSig stores signer's signature of valset n's checkpoint if signer
// is a member of set n-1, the signature is valid and new. It reports
// whether it stored it.
func (k *Keeper) addValsetSig(domain [32]byte, signer common.Address, ns NonceSig) bool {
	view := NewView(k.ctx.KV)
	if ns.Nonce == 0 || view.HasValsetSig(ns.Nonce, signer) {
		return false
	}
	vs, ok := view.Valset(ns.Nonce)
	if !ok {
		return false
	}
	prev, ok := view.Valset(ns.Nonce - 1)
	if !ok || prev.Power(signer) == 0 {
		return false
	}
	if got, err := ns.Sig.Signer(Checkpoint(domain, vs)); err != nil || got != signer {
		return false
	}
	k.ctx.KV.Set(sigKey(prefixVSig, ns.Nonce, signer), ns.Sig[:])
	return true
}
