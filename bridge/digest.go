package bridge

import (
	"crypto/ecdsa"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
)

// Version is the domain's version string; the contract hard-codes it.
const Version = "ogpu-bridge-v1"

var (
	tBytes32, _ = abi.NewType("bytes32", "", nil)
	tString, _  = abi.NewType("string", "", nil)
	tUint64, _  = abi.NewType("uint64", "", nil)
	tUint256, _ = abi.NewType("uint256", "", nil)
	tAddress, _ = abi.NewType("address", "", nil)
	tAddrs, _   = abi.NewType("address[]", "", nil)
	tUint32s, _ = abi.NewType("uint32[]", "", nil)
)

func abiEncode(ts []abi.Type, vals ...any) []byte {
	args := make(abi.Arguments, len(ts))
	for i, t := range ts {
		args[i] = abi.Argument{Type: t}
	}
	b, err := args.Pack(vals...)
	if err != nil {
		panic(fmt.Errorf("bridge: abi encoding: %w", err)) // types are fixed above
	}
	return b
}

// AppChainIDHash is keccak256 of the app-chain's chain id: the contract's
// appChainIdHash.
func AppChainIDHash(chainID string) [32]byte { return crypto.Keccak256Hash([]byte(chainID)) }

// Domain is keccak256(abi.encode("ogpu-bridge-v1", ethChainID, contract,
// appChainIDHash)): the contract's domain, the first word of every digest.
func Domain(ethChainID uint64, contract common.Address, appChainID string) [32]byte {
	return crypto.Keccak256Hash(abiEncode([]abi.Type{tString, tUint256, tAddress, tBytes32},
		Version, new(big.Int).SetUint64(ethChainID), contract, AppChainIDHash(appChainID)))
}

// WithdrawDigest is keccak256(abi.encode(domain, "withdraw", nonce, to,
// amount)): what validators sign to release a withdrawal.
func WithdrawDigest(domain [32]byte, nonce uint64, to common.Address, amount *uint256.Int) [32]byte {
	return crypto.Keccak256Hash(abiEncode([]abi.Type{tBytes32, tString, tUint64, tAddress, tUint256},
		domain, "withdraw", nonce, to, amount.ToBig()))
}

// Checkpoint is keccak256(abi.encode(domain, "checkpoint", nonce,
// validators, powers)): what the current set signs to adopt vs.
func Checkpoint(domain [32]byte, vs *Valset) [32]byte {
	addrs, powers := vs.Columns()
	return crypto.Keccak256Hash(abiEncode([]abi.Type{tBytes32, tString, tUint64, tAddrs, tUint32s},
		domain, "checkpoint", vs.Nonce, addrs, powers))
}

// UnpauseDigest is keccak256(abi.encode(domain, "unpause", nonce)).
func UnpauseDigest(domain [32]byte, nonce uint64) [32]byte {
	return crypto.Keccak256Hash(abiEncode([]abi.Type{tBytes32, tString, tUint64}, domain, "unpause", nonce))
}

// ethSigned is the EIP-191 hash the contract recovers from.
func ethSigned(digest [32]byte) []byte {
	return crypto.Keccak256([]byte("\x19Ethereum Signed Message:\n32"), digest[:])
}

// Sign signs digest's EIP-191 form with a bridge key: [R || S || V], V in
// {0, 1}, low S (go-ethereum's crypto.Sign).
func Sign(key *ecdsa.PrivateKey, digest [32]byte) (Sig, error) {
	b, err := crypto.Sign(ethSigned(digest), key)
	if err != nil {
		return Sig{}, err
	}
	return Sig(b), nil
}

// Sig is a 65-byte [R || S || V] secp256k1 signature, V in {0, 1}.
type Sig [65]byte

// Signer recovers the address that signed digest's EIP-191 form, refusing
// what the contract refuses: V other than 0/1, high S, r or s zero.
func (s Sig) Signer(digest [32]byte) (common.Address, error) {
	r, ss, v := new(big.Int).SetBytes(s[:32]), new(big.Int).SetBytes(s[32:64]), s[64]
	if v > 1 || !crypto.ValidateSignatureValues(v, r, ss, true) {
		return common.Address{}, fmt.Errorf("malformed signature (r, s, v out of range or high s)")
	}
	pub, err := crypto.SigToPub(ethSigned(digest), s[:])
	if err != nil {
		return common.Address{}, fmt.Errorf("signature does not recover: %w", err)
	}
	return crypto.PubkeyToAddress(*pub), nil
}
