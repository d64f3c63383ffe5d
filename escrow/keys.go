// Package escrow is the money of the chain: account balances, the fee pool,
// burned tokens and the bridge reserve (later: locked job funds, stake,
// unbonding and slashing). Every movement of oGPU goes through the Keeper,
// which keeps the supply invariant:
//
//	sum(balances) + fee pool + bridge reserve == MaxSupply - burned
//
// It is a pure state machine: it reads and writes a store.KV and nothing else.
package escrow

import (
	"fmt"

	"github.com/ogpu-network/ogpu/types"
)

// Store key prefixes owned by this package. One byte each, never reused.
const (
	prefixBalance    byte = 0x10 // 0x10 | addr(20) -> uint256 big-endian (32 bytes)
	keyFeePool       byte = 0x11 // 0x11 -> uint256
	keyBurned        byte = 0x12 // 0x12 -> uint256
	keyBridgeReserve byte = 0x13 // 0x13 -> uint256
)

// BalanceKey is the store key of addr's balance.
func BalanceKey(addr types.Address) []byte {
	return append([]byte{prefixBalance}, addr.Bytes()...)
}

// ParseBalanceKey is the inverse of BalanceKey.
func ParseBalanceKey(key []byte) (types.Address, error) {
	if len(key) != 1+types.AddressLength || key[0] != prefixBalance {
		return types.Address{}, fmt.Errorf("not a balance key: %x", key)
	}
	return types.BytesToAddress(key[1:]), nil
}

// FeePoolKey, BurnedKey and BridgeReserveKey are the singleton keys.
func FeePoolKey() []byte       { return []byte{keyFeePool} }
func BurnedKey() []byte        { return []byte{keyBurned} }
func BridgeReserveKey() []byte { return []byte{keyBridgeReserve} }
