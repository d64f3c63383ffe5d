package bridge

import (
	"github.com/ethereum/go-ethereum/common"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Context is what the keeper knows of the block it runs in.
type Context struct {
	KV      store.KV
	Params  genesis.Params
	ChainID string
	Height  uint64
	Events  *types.Events
}

// Keeper runs the bridge's rules over one block's state. Its methods either
// succeed completely or return an error having written nothing.
type Keeper struct {
	ctx    Context
	escrow escrow.Keeper
}

// NewKeeper returns a keeper for ctx.
func NewKeeper(ctx Context) *Keeper {
	if ctx.Events == nil {
		ctx.Events = &types.Events{}
	}
	return &Keeper{ctx: ctx, escrow: escrow.NewKeeper(ctx.KV)}
}

// Enabled reports whether the chain's params switch the bridge on.
func (k *Keeper) Enabled() bool { return k.ctx.Params.Bridge != nil }

// Domain is the contract's domain for this chain's params (zero when off).
func (k *Keeper) Domain() [32]byte {
	p := k.ctx.Params.Bridge
	if p == nil {
		return [32]byte{}
	}
	return Domain(p.EthChainID, p.Contract, k.ctx.ChainID)
}

func (k *Keeper) emit(e types.Event) { k.ctx.Events.Emit(e) }

// View reads the bridge state; queries and the validator's sidecar use it.
type View struct{ r store.Reader }

// NewView returns a read-only view over r.
func NewView(r store.Reader) View { return View{r: r} }

// KeyOf returns operator's bridge address.
func (v View) KeyOf(op types.Address) (common.Address, bool) {
	bz := v.r.Get(keyOf(op))
	if len(bz) != common.AddressLength {
		return common.Address{}, false
	}
	return common.BytesToAddress(bz), true
}

// OwnerOf returns the operator whose bridge address is a.
func (v View) OwnerOf(a common.Address) (types.Address, bool) {
	bz := v.r.Get(ownerOf(a))
	if len(bz) != types.AddressLength {
		return types.Address{}, false
	}
	return types.BytesToAddress(bz), true
}

// LastDeposit is the last deposit nonce credited (0: none); the next one
// credited is LastDeposit()+1.
func (v View) LastDeposit() uint64 { return getU64(v.r, []byte{keyDepositNonce}) }

// LastWithdrawal is the last withdrawal nonce assigned (0: none).
func (v View) LastWithdrawal() uint64 { return getU64(v.r, []byte{keyWithdrawNonce}) }

// Withdrawal returns withdrawal n.
func (v View) Withdrawal(n uint64) (*Withdrawal, bool) {
	var w Withdrawal
	if !getRLP(v.r, withdrawalKey(n), &w) {
		return nil, false
	}
	return &w, true
}

// Pending lists the withdrawals not yet paid on Ethereum, in nonce order.
func (v View) Pending() []uint64 {
	var out []uint64
	store.IteratePrefix(v.r, []byte{prefixPending}, func(key, _ []byte) bool {
		out = append(out, beU64(key[1:]))
		return false
	})
	return out
}

// Valset returns valset n.
func (v View) Valset(n uint64) (*Valset, bool) {
	var vs Valset
	if !getRLP(v.r, valsetKey(n), &vs) {
		return nil, false
	}
	return &vs, true
}

// LatestValset returns the newest valset the chain produced (false: none
// yet, no validator has a bridge key).
func (v View) LatestValset() (*Valset, bool) {
	n := getU64(v.r, []byte{keyValsetNonce})
	if n == 0 {
		return nil, false
	}
	return v.Valset(n - 1)
}

// WithdrawalSigs returns the signatures stored for withdrawal n.
func (v View) WithdrawalSigs(n uint64) map[common.Address]Sig { return signatures(v.r, prefixWSig, n) }

// ValsetSigs returns the signatures stored for valset n's checkpoint.
func (v View) ValsetSigs(n uint64) map[common.Address]Sig { return signatures(v.r, prefixVSig, n) }

// HasWithdrawalSig reports whether signer's signature of withdrawal n is stored.
func (v View) HasWithdrawalSig(n uint64, signer common.Address) bool {
	return v.r.Get(sigKey(prefixWSig, n, signer)) != nil
}

// HasValsetSig reports whether signer's signature of valset n is stored.
func (v View) HasValsetSig(n uint64, signer common.Address) bool {
	return v.r.Get(sigKey(prefixVSig, n, signer)) != nil
}

// SignedPower sums the power, in vs, of the members in signed.
func SignedPower(vs *Valset, signed map[common.Address]Sig) uint64 {
	var p uint64
	for _, m := range vs.Members {
		if _, ok := signed[m.Addr]; ok {
			p += uint64(m.Power)
		}
	}
	return p
}

// Enough reports whether signed power is strictly more than 2/3 of total:
// the contract's rule, signed*3 > total*2.
func Enough(signed, total uint64) bool { return signed*3 > total*2 }
