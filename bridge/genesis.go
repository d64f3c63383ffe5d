package bridge

import (
	"fmt"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// keyGenesisValset (0x4a -> uint64) is the nonce of the valset a genesis
// document carried over: it and every set before it count as adopted
// (their signatures are not carried over).
const keyGenesisValset byte = 0x4a

// InitGenesis writes the bridge state of an exported chain. Keys must
// belong to genesis validators, and the valset must be well formed.
func InitGenesis(kv store.KV, st *genesis.BridgeState, isValidator func(types.Address) bool) error {
	if st == nil {
		return nil
	}
	seen := map[types.Address]bool{}
	for _, k := range st.Keys {
		if !isValidator(k.Operator) {
			return fmt.Errorf("bridge_state: key of %s, which is not a validator", k.Operator)
		}
		if seen[k.Key] || k.Key == (types.Address{}) || k.Key == k.Operator {
			return fmt.Errorf("bridge_state: key %s of %s is zero, the operator itself or used twice", k.Key, k.Operator)
		}
		seen[k.Key] = true
		kv.Set(keyOf(k.Operator), k.Key[:])
		kv.Set(ownerOf(k.Key), k.Operator[:])
	}
	setU64(kv, []byte{keyDepositNonce}, st.LastDeposit)
	setU64(kv, []byte{keyWithdrawNonce}, st.LastWithdrawal)
	if len(st.Valset) > 0 {
		vs := &Valset{Nonce: st.ValsetNonce}
		for _, m := range st.Valset {
			vs.Members = append(vs.Members, Member{Addr: m.Addr, Power: m.Power})
		}
		if err := vs.Validate(); err != nil {
			return fmt.Errorf("bridge_state: valset: %w", err)
		}
		setRLP(kv, valsetKey(vs.Nonce), vs)
		setU64(kv, []byte{keyValsetNonce}, vs.Nonce+1)
		setU64(kv, []byte{keyGenesisValset}, vs.Nonce+1)
	}
	return nil
}

// ExportGenesis reads the bridge state back for a genesis document. It
// refuses while withdrawals wait in the outbound escrow (a genesis cannot
// carry them) or the latest valset is not adopted.
func ExportGenesis(r store.KV, validators []types.Address) (*genesis.BridgeState, error) {
	v := NewView(r)
	if n := len(v.Pending()); n > 0 {
		return nil, fmt.Errorf("cannot export: %d bridge withdrawals wait in the outbound escrow; export once they are paid and attested", n)
	}
	st := &genesis.BridgeState{LastDeposit: v.LastDeposit(), LastWithdrawal: v.LastWithdrawal(), Keys: []genesis.BridgeKey{}}
	for _, op := range validators {
		if k, ok := v.KeyOf(op); ok {
			st.Keys = append(st.Keys, genesis.BridgeKey{Operator: op, Key: k})
		}
	}
	if vs, ok := v.LatestValset(); ok {
		if !v.Adopted(vs.Nonce) {
			return nil, fmt.Errorf("cannot export: valset %d is still being signed; export once it is adopted", vs.Nonce)
		}
		st.ValsetNonce = vs.Nonce
		for _, m := range vs.Members {
			st.Valset = append(st.Valset, genesis.BridgeMember{Addr: m.Addr, Power: m.Power})
		}
	}
	return st, nil
}
