package chain

import (
	"encoding/binary"
	"fmt"

	"github.com/ogpu-network/ogpu/types"
)

// Store key layout owned by the chain package (auth and metadata). One-byte
// prefixes, never reused; escrow owns 0x10-0x1f,
// market 0x20-0x2f, verifier 0x30-0x3f.
const (
	keyParams   = 0x00 // 0x00 0x01 -> rlp(genesis.Params); 0x00 0x02 -> chain id
	prefixNonce = 0x01 // 0x01 | addr(20) -> uint64 big-endian: the next nonce
	// 0x02 held validator records in app version 1; validators now live in
	// escrow (0x19-0x1b). Never reuse it.
)

// ParamsKey is the store key of the transaction parameters.
func ParamsKey() []byte { return []byte{keyParams, 0x01} }

// ChainIDKey is the store key of the chain id.
func ChainIDKey() []byte { return []byte{keyParams, 0x02} }

// NonceKey is the store key of addr's next nonce.
func NonceKey(addr types.Address) []byte {
	return append([]byte{prefixNonce}, addr.Bytes()...)
}

// ParseNonceKey is the inverse of NonceKey.
func ParseNonceKey(key []byte) (types.Address, error) {
	if len(key) != 1+types.AddressLength || key[0] != prefixNonce {
		return types.Address{}, fmt.Errorf("not a nonce key: %x", key)
	}
	return types.BytesToAddress(key[1:]), nil
}

func encodeUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint64(bz []byte) uint64 {
	if len(bz) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(bz)
}
