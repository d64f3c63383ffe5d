// Package escrow is the money of the chain: account balances, the fee pool,
// burned tokens and the bridge reserve (later: locked job funds, stake,
// unbonding and slashing). Every movement of oGPU goes through the Keeper,
// which keeps the supply invariant:
//
//	sum(balances) + job escrow + stakes + fee pool + bridge reserve
//	  + bridge outbound == MaxSupply - burned
//
// It is a pure state machine: it reads and writes a store.KV and nothing else.
package escrow

import (
	"encoding/binary"
	"fmt"

	"github.com/ogpu-network/ogpu/types"
)

// Store key prefixes owned by this package. One byte each, never reused.
const (
	prefixBalance    byte = 0x10 // 0x10 | addr(20) -> uint256 big-endian (32 bytes)
	keyFeePool       byte = 0x11 // 0x11 -> uint256
	keyBurned        byte = 0x12 // 0x12 -> uint256
	keyBridgeReserve byte = 0x13 // 0x13 -> uint256
	prefixLocked     byte = 0x14 // 0x14 | job(8) -> uint256: funds locked for a job
	prefixBonded     byte = 0x15 // 0x15 | addr(20) -> uint256: bonded stake
	prefixUnbonding  byte = 0x16 // 0x16 | addr(20) | matures(8) -> uint256
	prefixUnbondQ    byte = 0x17 // 0x17 | matures(8) | addr(20) -> {}: the maturity queue
	keyTotals        byte = 0x18 // 0x18 | kind(1) -> uint256: running totals
	prefixValidator  byte = 0x19 // 0x19 | operator(20) -> rlp(Validator)
	prefixConsKey    byte = 0x1a // 0x1a | ed25519 pubkey(32) -> operator(20)
	prefixPower      byte = 0x1b // 0x1b | ed25519 pubkey(32) -> uint64: power last sent to CometBFT
	keyBridgeOut     byte = 0x1c // 0x1c -> uint256: withdrawals to Ethereum not yet paid there
)

// Kinds of running totals under keyTotals.
const (
	totalBonded    byte = 0x01
	totalUnbonding byte = 0x02
	totalLocked    byte = 0x03
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

// BridgeOutboundKey is the singleton key of the outbound bridge escrow.
func BridgeOutboundKey() []byte { return []byte{keyBridgeOut} }

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// LockedKey is the store key of the funds locked for a job.
func LockedKey(job uint64) []byte { return append([]byte{prefixLocked}, be64(job)...) }

// BondedKey is the store key of addr's bonded stake.
func BondedKey(addr types.Address) []byte { return append([]byte{prefixBonded}, addr.Bytes()...) }

// UnbondingKey is the store key of the stake addr unbonds at height matures.
func UnbondingKey(addr types.Address, matures uint64) []byte {
	return append(append([]byte{prefixUnbonding}, addr.Bytes()...), be64(matures)...)
}

func unbondQueueKey(matures uint64, addr types.Address) []byte {
	return append(append([]byte{prefixUnbondQ}, be64(matures)...), addr.Bytes()...)
}

func totalKey(kind byte) []byte { return []byte{keyTotals, kind} }

// ValidatorKey is the store key of the validator run by operator.
func ValidatorKey(operator types.Address) []byte {
	return append([]byte{prefixValidator}, operator.Bytes()...)
}

// ConsKeyKey maps a consensus key to its operator; a key is used once, ever.
func ConsKeyKey(pubKey []byte) []byte { return append([]byte{prefixConsKey}, pubKey...) }

func powerKey(pubKey []byte) []byte { return append([]byte{prefixPower}, pubKey...) }

// present is the value of index entries (the store refuses empty values).
var present = []byte{1}
