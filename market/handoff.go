package market

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Hand-offs of split inference (KindSplit). Every message that crosses a
// stage boundary of a split job is signed by its sender over the running
// hash of everything it has sent on that link:
//
//	Hrun_0 = zero hash
//	Hrun_t = sha256("ogpu/act/run/v1" | Hrun_{t-1} | sha256(frame t))
//
// (the frame encoding is package split's). One signature over the latest
// running hash proves the whole transcript sent so far, so a receiver that
// keeps the last signature can prove what it received: the chain accepts it
// as evidence (MsgProveHandoff) when a stage's committed input differs from
// its upstream's committed output. The client signs what it feeds stage 0;
// the last stage signs the tokens it sends the client.

// HandoffDomain tags hand-off signatures.
const HandoffDomain = "ogpu/act/v1"

// HandoffDigest is what the sender of a hand-off transcript signs:
// sha256(HandoffDomain | len(chainID) | chainID | job | chain | stage |
// steps | hrun), integers big-endian (u16 chain index and stage, u32 steps,
// u64 job and length). stage is the sending stage (the client signs with
// stage = ClientStage), chain the replica chain of the link, steps the
// number of frames hrun covers.
func HandoffDigest(chainID string, job uint64, chain, stage uint16, steps uint32, hrun types.Hash) types.Hash {
	h := sha256.New()
	h.Write([]byte(HandoffDomain))
	h.Write(be64(uint64(len(chainID))))
	h.Write([]byte(chainID))
	h.Write(be64(job))
	h.Write(be16(chain))
	h.Write(be16(stage))
	h.Write(binary.BigEndian.AppendUint32(nil, steps))
	h.Write(hrun[:])
	return types.Hash(h.Sum(nil))
}

// ClientStage is the stage number the client signs its stage-0 input with.
const ClientStage = 0xFFFF

// ErrBadHandoffSig is a hand-off signature that is malformed, non-canonical
// or not by the expected sender.
var ErrBadHandoffSig = errors.New("bad hand-off signature")

// HandoffSigner recovers the account that signed digest with sig, a 65-byte
// [R || S || V] secp256k1 signature with V in {0, 1} and S in the lower half
// of the order (one byte form per signature).
func HandoffSigner(digest types.Hash, sig []byte) (types.Address, error) {
	if len(sig) != crypto.SignatureLength {
		return types.Address{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadHandoffSig, len(sig), crypto.SignatureLength)
	}
	r := new(uint256.Int).SetBytes(sig[:32])
	s := new(uint256.Int).SetBytes(sig[32:64])
	if !crypto.ValidateSignatureValues(sig[64], r.ToBig(), s.ToBig(), true) {
		return types.Address{}, fmt.Errorf("%w: values out of range (non-canonical or high S)", ErrBadHandoffSig)
	}
	pub, err := crypto.SigToPub(digest[:], sig)
	if err != nil {
		return types.Address{}, fmt.Errorf("%w: cannot recover the signer: %v", ErrBadHandoffSig, err)
	}
	return crypto.PubkeyToAddress(*pub), nil
}
