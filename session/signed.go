package session

import (
	"crypto/ecdsa"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Domain tags: every signed object starts with its own, so that none can be
// replayed as another, as a transaction (types.SignDomain) or as a bridge
// signature.
const (
	RequestTag = "ogpu/sreq/v1"
	ReceiptTag = "ogpu/receipt/v1"
	VoucherTag = "ogpu/voucher/v1"
	RefusalTag = "ogpu/refusal/v1"
)

// Request is what the client asks a session provider for: signed by the
// client, so that a receipt binds exactly what was asked (H(Q)).
type Request struct {
	ChainID   string
	Session   uint64
	Provider  types.Address
	Seq       uint64
	Prompt    types.Hash // sha256 of the prompt's bytes
	MaxTokens uint64
	// Params hashes the decoding parameters (greedy today: empty).
	Params types.Hash
}

// Receipt is the provider's signed account of one response.
type Receipt struct {
	ChainID  string
	Session  uint64
	Provider types.Address
	Seq      uint64
	Request  types.Hash // Request.Hash()
	Output   types.Hash // sha256 of the output text
	NIn      uint64
	NOut     uint64
}

// Refusal is the provider's signed account of a request it did not serve
// (a prompt beyond its context, a budget too small for max_tokens, a
// session that ended, a bad voucher): it binds the request (H(Q)) and
// says whether the request's prompt was charged (Charged: the provider
// accepted the voucher prepaying it, so Seq is used up, and NIn is the
// prompt's length it counted) or nothing was (Seq stays free). Off chain
// only; no state machine reads it.
type Refusal struct {
	ChainID  string
	Session  uint64
	Provider types.Address
	Seq      uint64
	Request  types.Hash
	Charged  bool
	NIn      uint64
	Reason   string
}

// Voucher is the client's signed promise that a lane's provider has earned
// Cumulative in total, after request Seq. Only the latest matters: the
// chain pays cumulative − paid.
type Voucher struct {
	ChainID    string
	Session    uint64
	Provider   types.Address
	Cumulative *uint256.Int
	Seq        uint64
}

func digest(tag string, v any) types.Hash {
	bz, err := rlp.EncodeToBytes(v)
	if err != nil {
		panic(fmt.Errorf("session: %s does not encode: %w", tag, err)) // fixed shapes
	}
	return crypto.Keccak256Hash([]byte(tag), bz)
}

// Hash is keccak256(RequestTag | rlp(q)).
func (q *Request) Hash() types.Hash { return digest(RequestTag, q) }

// Hash is keccak256(ReceiptTag | rlp(r)).
func (r *Receipt) Hash() types.Hash { return digest(ReceiptTag, r) }

// Hash is keccak256(RefusalTag | rlp(r)).
func (r *Refusal) Hash() types.Hash { return digest(RefusalTag, r) }

// Hash is keccak256(VoucherTag | rlp(v)).
func (v *Voucher) Hash() types.Hash { return digest(VoucherTag, v) }

// Sign signs h with key: [R || S || V], V in {0, 1}, low S.
func Sign(key *ecdsa.PrivateKey, h types.Hash) ([]byte, error) {
	return crypto.Sign(h[:], key)
}

// Signer recovers who signed h, refusing anything but the exact 65-byte
// low-S form (so a signature has no malleable twin; no state is keyed by
// signature bytes anyway).
func Signer(h types.Hash, sig []byte) (types.Address, error) {
	if len(sig) != crypto.SignatureLength {
		return types.Address{}, fmt.Errorf("signature is %d bytes, want %d", len(sig), crypto.SignatureLength)
	}
	r, s, v := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64]), sig[64]
	if v > 1 || !crypto.ValidateSignatureValues(v, r, s, true) {
		return types.Address{}, fmt.Errorf("malformed signature (r, s or v out of range, or high s)")
	}
	pub, err := crypto.SigToPub(h[:], sig)
	if err != nil {
		return types.Address{}, fmt.Errorf("signature does not recover: %w", err)
	}
	return crypto.PubkeyToAddress(*pub), nil
}
