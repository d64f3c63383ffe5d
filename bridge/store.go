package bridge

import (
	"encoding/binary"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Store key prefixes owned by this package. One byte each, never reused.
const (
	prefixKey        byte = 0x40 // 0x40 | operator(20) -> bridge address(20)
	prefixKeyOwner   byte = 0x41 // 0x41 | bridge address(20) -> operator(20)
	keyDepositNonce  byte = 0x42 // 0x42 -> uint64: last deposit nonce credited
	prefixWithdrawal byte = 0x43 // 0x43 | nonce(8) -> rlp(Withdrawal)
	keyWithdrawNonce byte = 0x44 // 0x44 -> uint64: last withdrawal nonce assigned
	prefixPending    byte = 0x45 // 0x45 | nonce(8) -> 0x01: withdrawals not yet paid on Ethereum
	prefixWSig       byte = 0x46 // 0x46 | nonce(8) | signer(20) -> sig(65)
	prefixValset     byte = 0x47 // 0x47 | nonce(8) -> rlp(Valset)
	keyValsetNonce   byte = 0x48 // 0x48 -> uint64: latest valset nonce + 1 (0: none yet)
	prefixVSig       byte = 0x49 // 0x49 | nonce(8) | signer(20) -> sig(65)
)

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func keyOf(op types.Address) []byte     { return append([]byte{prefixKey}, op[:]...) }
func ownerOf(a common.Address) []byte   { return append([]byte{prefixKeyOwner}, a[:]...) }
func withdrawalKey(n uint64) []byte     { return append([]byte{prefixWithdrawal}, be64(n)...) }
func pendingKey(n uint64) []byte        { return append([]byte{prefixPending}, be64(n)...) }
func valsetKey(n uint64) []byte         { return append([]byte{prefixValset}, be64(n)...) }
func sigPrefix(p byte, n uint64) []byte { return append([]byte{p}, be64(n)...) }
func sigKey(p byte, n uint64, a common.Address) []byte {
	return append(sigPrefix(p, n), a[:]...)
}

func beU64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

func getU64(r store.Reader, key []byte) uint64 {
	bz := r.Get(key)
	if len(bz) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(bz)
}

func setU64(kv store.KV, key []byte, v uint64) { kv.Set(key, be64(v)) }

func getRLP(r store.Reader, key []byte, v any) bool {
	bz := r.Get(key)
	if bz == nil {
		return false
	}
	if err := rlp.DecodeBytes(bz, v); err != nil {
		panic(fmt.Errorf("bridge: stored %x unreadable: %w", key, err))
	}
	return true
}

func setRLP(kv store.KV, key []byte, v any) {
	bz, err := rlp.EncodeToBytes(v)
	if err != nil {
		panic(err)
	}
	kv.Set(key, bz)
}

// Signatures lists the signatures stored for item n (a withdrawal when
// valset is false, else a valset checkpoint), in signer address order.
func signatures(r store.Reader, p byte, n uint64) map[common.Address]Sig {
	out := map[common.Address]Sig{}
	store.IteratePrefix(r, sigPrefix(p, n), func(key, value []byte) bool {
		var s Sig
		copy(s[:], value)
		out[common.BytesToAddress(key[9:])] = s
		return false
	})
	return out
}

// deleteSigs removes item n's signatures (once they can no longer be used).
func deleteSigs(kv store.KV, p byte, n uint64) {
	var keys [][]byte
	store.IteratePrefix(kv, sigPrefix(p, n), func(key, _ []byte) bool {
		keys = append(keys, append([]byte(nil), key...))
		return false
	})
	for _, k := range keys {
		kv.Delete(k)
	}
}

func invariantErr(format string, args ...any) error {
	return fmt.Errorf("bridge invariant broken: "+format, args...)
}
