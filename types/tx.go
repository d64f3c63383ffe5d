package types

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"
)

// SignDomain separates oGPU transaction signatures from every other use of a
// key (Ethereum transactions, personal_sign messages, bridge attestations).
const SignDomain = "ogpu/tx/v1"

// MsgType identifies a message's handler. Values are literals, append-only.
type MsgType uint16

// Address is a 20-byte Ethereum-style account address.
type Address = common.Address

// RawMsg is one message in a transaction: its type and its RLP payload. The
// chain routes it to the module that owns the type, which decodes the payload.
type RawMsg struct {
	Type MsgType
	Data []byte
}

// TxBody is what the sender signs. The chain id and the nonce make every
// signature valid on one chain, once.
type TxBody struct {
	ChainID string
	From    Address
	Nonce   uint64
	Fee     *uint256.Int
	Msgs    []RawMsg
	Memo    string
}

// Tx is a signed transaction. Sig is the 65-byte [R || S || V] secp256k1
// signature over SignHash(body), V in {0, 1}, S in the lower half order.
type Tx struct {
	Body TxBody
	Sig  []byte
}

// SignHash is keccak256(SignDomain | rlp(body)).
func (b *TxBody) SignHash() (common.Hash, error) {
	enc, err := rlp.EncodeToBytes(b)
	if err != nil {
		return common.Hash{}, err
	}
	return crypto.Keccak256Hash([]byte(SignDomain), enc), nil
}

// Sign fills in From and Sig using key.
func (tx *Tx) Sign(key *ecdsa.PrivateKey) error {
	tx.Body.From = crypto.PubkeyToAddress(key.PublicKey)
	h, err := tx.Body.SignHash()
	if err != nil {
		return err
	}
	sig, err := crypto.Sign(h[:], key)
	if err != nil {
		return err
	}
	tx.Sig = sig
	return nil
}

// VerifySignature checks that Sig is a canonical signature of the body by
// Body.From.
func (tx *Tx) VerifySignature() error {
	if len(tx.Sig) != crypto.SignatureLength {
		return ErrBadSignature.Wrapf("signature is %d bytes, want %d", len(tx.Sig), crypto.SignatureLength)
	}
	r := new(uint256.Int).SetBytes(tx.Sig[:32])
	s := new(uint256.Int).SetBytes(tx.Sig[32:64])
	if !crypto.ValidateSignatureValues(tx.Sig[64], r.ToBig(), s.ToBig(), true) {
		return ErrBadSignature.Wrapf("signature values out of range (non-canonical or high S)")
	}
	h, err := tx.Body.SignHash()
	if err != nil {
		return ErrMalformedTx.Wrapf("cannot encode body: %v", err)
	}
	pub, err := crypto.SigToPub(h[:], tx.Sig)
	if err != nil {
		return ErrBadSignature.Wrapf("cannot recover signer: %v", err)
	}
	if signer := crypto.PubkeyToAddress(*pub); signer != tx.Body.From {
		return ErrBadSignature.Wrapf("signed by %s, not by sender %s", signer, tx.Body.From)
	}
	return nil
}

// Encode returns the canonical RLP bytes of tx.
func (tx *Tx) Encode() ([]byte, error) {
	return rlp.EncodeToBytes(tx)
}

// DecodeTx parses bz strictly: bz must be exactly the canonical encoding of
// the transaction it decodes to, so a transaction has one byte form and one
// hash. It does not check the signature.
func DecodeTx(bz []byte) (*Tx, error) {
	var tx Tx
	if err := rlp.DecodeBytes(bz, &tx); err != nil {
		return nil, ErrMalformedTx.Wrapf("%v", err)
	}
	// The RLP decoder always allocates the fee; this guard keeps runTx from
	// ever dereferencing nil should that change.
	if tx.Body.Fee == nil {
		return nil, ErrMalformedTx.Wrapf("missing fee")
	}
	again, err := tx.Encode()
	if err != nil || !bytes.Equal(again, bz) {
		return nil, ErrMalformedTx.Wrapf("non-canonical encoding")
	}
	return &tx, nil
}

// TxHash is the hash CometBFT indexes a transaction by: sha256 of its bytes.
func TxHash(bz []byte) []byte {
	h := sha256.Sum256(bz)
	return h[:]
}

// String describes the body in one line for logs.
func (b *TxBody) String() string {
	return fmt.Sprintf("tx{chain=%s from=%s nonce=%d fee=%s msgs=%d}", b.ChainID, b.From, b.Nonce, FormatAmount(b.Fee), len(b.Msgs))
}

// Message types. Literal values, append-only: a number once used is never
// given to another message.
const (
	MsgTypeSend MsgType = 1

	// Staking and validators (escrow).
	MsgTypeCreateValidator MsgType = 2
	MsgTypeUnjailValidator MsgType = 3
	MsgTypeBond            MsgType = 4
	MsgTypeUnbond          MsgType = 5

	// Providers (market).
	MsgTypeRegisterProvider MsgType = 6
	MsgTypeUpdateProvider   MsgType = 7
	MsgTypeUnjailProvider   MsgType = 8

	// Jobs and auctions (market).
	MsgTypePostJob   MsgType = 9
	MsgTypeCancelJob MsgType = 10
	MsgTypeCommitBid MsgType = 11
	MsgTypeRevealBid MsgType = 12
	MsgTypeClaimTask MsgType = 13

	// Results, disputes and canaries (verifier).
	MsgTypeCommitResult MsgType = 14
	MsgTypeRevealResult MsgType = 15
	MsgTypeVoteDispute  MsgType = 16
	MsgTypeRevealCanary MsgType = 17
	MsgTypeCommitVote   MsgType = 18
	MsgTypeReportInput  MsgType = 19

	// Split inference (market).
	MsgTypeRevealTranscript MsgType = 20
	MsgTypeProveHandoff     MsgType = 21
	MsgTypeReplaceStage     MsgType = 22

	// Bridge to Ethereum (bridge).
	MsgTypeSetBridgeKey   MsgType = 23
	MsgTypeBridgeWithdraw MsgType = 24

	// Session leases (session).
	MsgTypeRedeemVoucher MsgType = 25
	MsgTypeCloseSession  MsgType = 26
	// Session disputes (session).
	MsgTypeDisputeSession  MsgType = 27
	MsgTypeSealSessionVote MsgType = 28
	MsgTypeOpenSessionVote MsgType = 29

	// Fine-tune step-bisection games (finetune).
	MsgTypeOpenCheckpoints MsgType = 30
	MsgTypeSealGameVote    MsgType = 31
	MsgTypeOpenGameVote    MsgType = 32
	// Fine-tune results (market).
	MsgTypeRevealFinetune MsgType = 33

	// MaxMsgType is the highest message type: a new type raises it, and
	// the tests that walk every type (names, fuzzing) follow.
	MaxMsgType = MsgTypeRevealFinetune
)

// AddressLength is the length of an address in bytes.
const AddressLength = common.AddressLength

// BytesToAddress returns the address whose last 20 bytes are b.
func BytesToAddress(b []byte) Address { return common.BytesToAddress(b) }

// ParseAddress reads a 0x-prefixed hex address.
func ParseAddress(s string) (Address, error) {
	if !common.IsHexAddress(s) {
		return Address{}, fmt.Errorf("invalid address %q: want 0x followed by 40 hex digits", s)
	}
	return common.HexToAddress(s), nil
}

// NewRawMsg encodes a message payload for a transaction.
func NewRawMsg(t MsgType, payload any) RawMsg {
	bz, err := rlp.EncodeToBytes(payload)
	if err != nil {
		panic(fmt.Sprintf("types: message %d does not encode: %v", t, err)) // fixed-shape structs always do
	}
	return RawMsg{Type: t, Data: bz}
}

// DecodeMsgPayload decodes an RLP message payload into v, refusing
// trailing bytes and non-canonical encodings (rlp.DecodeBytes does both).
func DecodeMsgPayload(name string, data []byte, v any) error {
	if err := rlp.DecodeBytes(data, v); err != nil {
		return ErrInvalidMsg.Wrapf("%s: %v", name, err)
	}
	return nil
}

// Printable reports whether s is printable ASCII (no control bytes): the
// rule for names, peer ids and other strings stored on chain.
func Printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
