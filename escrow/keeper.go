package escrow

import (
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Keeper moves oGPU. Its methods either succeed completely or return an error
// having written nothing.
type Keeper struct {
	kv store.KV
}

// NewKeeper returns a keeper over kv.
func NewKeeper(kv store.KV) Keeper { return Keeper{kv: kv} }

func getAmount(r store.Reader, key []byte) *uint256.Int {
	bz := r.Get(key)
	return new(uint256.Int).SetBytes(bz)
}

func setAmount(kv store.KV, key []byte, a *uint256.Int) {
	if a.IsZero() {
		kv.Delete(key)
		return
	}
	b := a.Bytes32()
	kv.Set(key, b[:])
}

// Balance returns addr's spendable balance.
func (k Keeper) Balance(addr types.Address) *uint256.Int {
	return getAmount(k.kv, BalanceKey(addr))
}

// FeePool returns the fees collected and not yet paid out.
func (k Keeper) FeePool() *uint256.Int { return getAmount(k.kv, FeePoolKey()) }

// Burned returns the total oGPU destroyed.
func (k Keeper) Burned() *uint256.Int { return getAmount(k.kv, BurnedKey()) }

// BridgeReserve returns the oGPU held for the Ethereum side of the bridge.
func (k Keeper) BridgeReserve() *uint256.Int { return getAmount(k.kv, BridgeReserveKey()) }

// BridgeOutbound returns the oGPU withdrawn to Ethereum and not yet paid
// out there: debited from accounts, held until the validators attest the
// contract's Withdrawn event.
func (k Keeper) BridgeOutbound() *uint256.Int { return getAmount(k.kv, BridgeOutboundKey()) }

// CreditFromReserve pays an attested deposit: amt moves from the bridge
// reserve to addr. It fails, changing nothing, if the reserve is short
// (the Ethereum side then holds more than the cap: the bridge is broken).
func (k Keeper) CreditFromReserve(addr types.Address, amt *uint256.Int) error {
	reserve := k.BridgeReserve()
	if reserve.Lt(amt) {
		return fmt.Errorf("bridge reserve holds %s, the deposit is %s", types.FormatAmount(reserve), types.FormatAmount(amt))
	}
	setAmount(k.kv, BridgeReserveKey(), new(uint256.Int).Sub(reserve, amt))
	k.add(addr, amt)
	return nil
}

// DebitToOutbound moves a withdrawal of amt from addr into the outbound
// bridge escrow.
func (k Keeper) DebitToOutbound(addr types.Address, amt *uint256.Int) error {
	if err := k.sub(addr, amt); err != nil {
		return err
	}
	setAmount(k.kv, BridgeOutboundKey(), new(uint256.Int).Add(k.BridgeOutbound(), amt))
	return nil
}

// OutboundToReserve closes a withdrawal paid on Ethereum: amt moves from
// the outbound escrow back to the reserve (the tokens left the contract).
func (k Keeper) OutboundToReserve(amt *uint256.Int) error {
	out := k.BridgeOutbound()
	if out.Lt(amt) {
		return fmt.Errorf("outbound bridge escrow holds %s, the withdrawal is %s", types.FormatAmount(out), types.FormatAmount(amt))
	}
	setAmount(k.kv, BridgeOutboundKey(), new(uint256.Int).Sub(out, amt))
	setAmount(k.kv, BridgeReserveKey(), new(uint256.Int).Add(k.BridgeReserve(), amt))
	return nil
}

// sub debits amt from addr's balance.
func (k Keeper) sub(addr types.Address, amt *uint256.Int) error {
	bal := k.Balance(addr)
	if bal.Lt(amt) {
		return types.ErrInsufficientFunds.Wrapf("%s has %s, needs %s", addr, types.FormatAmount(bal), types.FormatAmount(amt))
	}
	setAmount(k.kv, BalanceKey(addr), new(uint256.Int).Sub(bal, amt))
	return nil
}

// add credits amt to addr's balance. Balances cannot overflow: every amount is
// part of a supply below 2^256.
func (k Keeper) add(addr types.Address, amt *uint256.Int) {
	bal := k.Balance(addr)
	setAmount(k.kv, BalanceKey(addr), new(uint256.Int).Add(bal, amt))
}

// Send moves amt from one account to another.
func (k Keeper) Send(from, to types.Address, amt *uint256.Int) error {
	if err := k.sub(from, amt); err != nil {
		return err
	}
	k.add(to, amt)
	return nil
}

// ChargeFee takes a transaction's fee from its sender. The fee pool is
// credited apart, by AddFee once the transaction has run (chain.runTx):
// so the run of a transfer reads and writes its own accounts only, and
// an execution record of it (chain/execrecord.go) still holds in a block
// that orders the mempool's transactions differently. Nothing a message
// does may depend on the fee pool's value mid-block; DistributeFees, which
// reads it, runs at the end of the block.
func (k Keeper) ChargeFee(from types.Address, fee *uint256.Int) error {
	if fee.IsZero() {
		return nil
	}
	return k.sub(from, fee)
}

// AddFee credits a fee ChargeFee took (nil or zero: none) to the fee pool.
func (k Keeper) AddFee(fee *uint256.Int) {
	if fee == nil || fee.IsZero() {
		return
	}
	setAmount(k.kv, FeePoolKey(), new(uint256.Int).Add(k.FeePool(), fee))
}

// SetGenesisBalance writes an account's balance at genesis.
func (k Keeper) SetGenesisBalance(addr types.Address, bal *uint256.Int) {
	setAmount(k.kv, BalanceKey(addr), bal)
}

// SetGenesisTotals writes the fee pool, burned total and bridge reserve at
// genesis. The caller has checked that everything sums to MaxSupply.
func (k Keeper) SetGenesisTotals(feePool, burned, reserve *uint256.Int) {
	setAmount(k.kv, FeePoolKey(), feePool)
	setAmount(k.kv, BurnedKey(), burned)
	setAmount(k.kv, BridgeReserveKey(), reserve)
}

// IterateBalances calls fn for every non-zero balance in address order.
func (k Keeper) IterateBalances(fn func(addr types.Address, bal *uint256.Int) (stop bool)) {
	store.IteratePrefix(k.kv, []byte{prefixBalance}, func(key, value []byte) bool {
		addr, err := ParseBalanceKey(key)
		if err != nil {
			panic(err) // only balance keys live under this prefix
		}
		return fn(addr, new(uint256.Int).SetBytes(value))
	})
}

// SupplyInvariant checks that every oGPU is somewhere:
//
//	sum(balances) + sum(job escrow) + sum(bonded) + sum(unbonding)
//	  + fee pool + bridge reserve + bridge outbound + burned == MaxSupply
//
// summing the stored entries themselves, not the running totals.
func SupplyInvariant(r store.KV) error {
	k := NewKeeper(r)
	total := new(uint256.Int)
	var overflow bool
	add := func(a *uint256.Int) {
		_, o := total.AddOverflow(total, a)
		overflow = overflow || o
	}
	k.IterateBalances(func(_ types.Address, bal *uint256.Int) bool { add(bal); return false })
	k.IterateLocked(func(_ uint64, amt *uint256.Int) bool { add(amt); return false })
	k.IterateBonded(func(_ types.Address, amt *uint256.Int) bool { add(amt); return false })
	k.IterateUnbonding(func(_ types.Address, u Unbonding) bool { add(u.Amount); return false })
	for _, a := range []*uint256.Int{k.FeePool(), k.BridgeReserve(), k.BridgeOutbound(), k.Burned()} {
		add(a)
	}
	if overflow || !total.Eq(types.MaxSupply) {
		return fmt.Errorf("supply invariant broken: holdings + burned = %s, want %s", total.Dec(), types.MaxSupply.Dec())
	}
	return nil
}

// StakeInvariant checks that the running totals of bonded stake, unbonding
// stake and job escrow equal the sums of their entries, that every
// unbonding entry is in the maturity queue, and that every validator's
// power as last reported to CometBFT is the power its stake gives.
func StakeInvariant(r store.KV, p genesis.StakingParams) error {
	k := NewKeeper(r)
	sum := func(iter func(func(*uint256.Int))) *uint256.Int {
		t := new(uint256.Int)
		iter(func(a *uint256.Int) { t.Add(t, a) })
		return t
	}
	bonded := sum(func(f func(*uint256.Int)) {
		k.IterateBonded(func(_ types.Address, a *uint256.Int) bool { f(a); return false })
	})
	if !bonded.Eq(k.TotalBonded()) {
		return fmt.Errorf("stake invariant broken: bonded stakes sum to %s, the total says %s", bonded.Dec(), k.TotalBonded().Dec())
	}
	var missing error
	unbonding := sum(func(f func(*uint256.Int)) {
		k.IterateUnbonding(func(addr types.Address, u Unbonding) bool {
			f(u.Amount)
			if r.Get(unbondQueueKey(u.Matures, addr)) == nil {
				missing = fmt.Errorf("stake invariant broken: unbonding of %s at %d is not queued", addr, u.Matures)
			}
			return false
		})
	})
	if missing != nil {
		return missing
	}
	if !unbonding.Eq(k.TotalUnbonding()) {
		return fmt.Errorf("stake invariant broken: unbonding entries sum to %s, the total says %s", unbonding.Dec(), k.TotalUnbonding().Dec())
	}
	locked := sum(func(f func(*uint256.Int)) {
		k.IterateLocked(func(_ uint64, a *uint256.Int) bool { f(a); return false })
	})
	if !locked.Eq(k.TotalLocked()) {
		return fmt.Errorf("escrow invariant broken: job escrows sum to %s, the total says %s", locked.Dec(), k.TotalLocked().Dec())
	}
	// When no validator's stake gives power, EndBlockPower keeps the last
	// set CometBFT has rather than empty it: then the reported set must
	// not be empty, and is not compared with the stakes.
	var computed, reported, records int64
	k.IterateValidators(func(op types.Address, v *Validator) bool {
		computed += k.Power(p, op, v)
		reported += k.ReportedPower(v.PubKey)
		records++
		return false
	})
	if computed == 0 {
		if reported == 0 && records > 0 {
			return fmt.Errorf("power invariant broken: no validator has power in CometBFT")
		}
		return nil
	}
	var bad error
	k.IterateValidators(func(op types.Address, v *Validator) bool {
		if want, got := k.Power(p, op, v), k.ReportedPower(v.PubKey); want != got {
			bad = fmt.Errorf("power invariant broken: validator %s (%s) has power %d in CometBFT, its stake gives %d", v.Name, op, got, want)
			return true
		}
		return false
	})
	return bad
}
