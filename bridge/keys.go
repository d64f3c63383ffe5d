package bridge

import (
	"crypto/ecdsa"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/types"
)

// Validator bridge keys.
//
// Every validator signs for the bridge with a secp256k1 key of its own: not
// its operator key (which holds its stake) and not its ed25519 consensus key
// (which Ethereum cannot check cheaply). MsgSetBridgeKey binds the key's
// address to the operator, with a proof of possession: a signature by the
// bridge key over KeyDigest(chain id, operator). Without it an operator
// could claim another validator's address, making the set's addresses
// collide (the contract refuses duplicates) or taking credit for its
// signatures. An address belongs to one operator at a time; an operator may
// rotate to a new key (a compromised one), which produces a new valset.

// KeyDigest is what a bridge key signs (EIP-191 form) to prove it belongs to
// operator on chain chainID: keccak256("ogpu/bridge-key/v1" | chainID |
// operator). It can never be a withdrawal or checkpoint digest (those are
// keccak256 of ABI words starting with the domain).
func KeyDigest(chainID string, operator types.Address) [32]byte {
	return crypto.Keccak256Hash([]byte("ogpu/bridge-key/v1"), []byte(chainID), []byte{0}, operator[:])
}

// ProveKey signs the proof of possession of key for operator.
func ProveKey(key *ecdsa.PrivateKey, chainID string, operator types.Address) (Sig, error) {
	return Sign(key, KeyDigest(chainID, operator))
}

// SetKey binds bridge address addr to validator operator.
func (k *Keeper) SetKey(operator types.Address, addr common.Address, proof Sig) error {
	if !k.Enabled() {
		return types.ErrInvalidMsg.Wrapf("the bridge is off on this chain (params.bridge is absent)")
	}
	v, ok := k.escrow.GetValidator(operator)
	if !ok {
		return types.ErrUnauthorized.Wrapf("%s is not a validator: only validators hold bridge keys", operator)
	}
	if v.Tombstoned {
		return types.ErrUnauthorized.Wrapf("validator %s is tombstoned", v.Name)
	}
	if addr == operator {
		return types.ErrInvalidMsg.Wrapf("the bridge key must not be the operator key (which holds the stake): generate a separate key")
	}
	signer, err := proof.Signer(KeyDigest(k.ctx.ChainID, operator))
	if err != nil || signer != addr {
		return types.ErrUnauthorized.Wrapf("the proof of possession is not signed by %s over this chain and operator (sign bridge.KeyDigest with the bridge key)", addr)
	}
	view := NewView(k.ctx.KV)
	if owner, ok := view.OwnerOf(addr); ok {
		if owner == operator {
			return types.ErrInvalidMsg.Wrapf("%s is already this validator's bridge key", addr)
		}
		return types.ErrInvalidMsg.Wrapf("%s is the bridge key of validator %s: generate a new key", addr, owner)
	}
	if old, ok := view.KeyOf(operator); ok {
		k.ctx.KV.Delete(ownerOf(old))
	}
	k.ctx.KV.Set(keyOf(operator), addr[:])
	k.ctx.KV.Set(ownerOf(addr), operator[:])
	k.emit(EventKeySet{Operator: operator, Key: addr})
	return nil
}
