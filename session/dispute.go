package session

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Disputes over receipts (protocol-threats S11–S15, S18; rules 6–8).
//
// A receipt is a provider's signed account of one response (signed.go). The
// session's client, or a provider holding a lane of the session, may claim
// that receipts are wrong, with MsgDisputeSession: each receipt with the
// client-signed request it answers. One receipt is an audit (validators
// judge the output itself, S13); two receipts from two providers for the
// same request content with different outputs are a comparison (S11); two
// receipts from one provider for the same seq that differ are an
// equivocation (S15), fraud without re-execution, decided in the
// transaction. The prompt and outputs never go on chain: the accuser names
// where validators fetch them (Addrs), and missing data never counts
// against the accused (S12).
//
// The accuser locks a bond (params.market.session_dispute_bond) in the
// session's escrow. Validators active at the opening (minus the parties:
// the accused providers and the accuser, S18) seal a verdict until SealBy
// and open it until Deadline: a bit mask, bit i set when receipt i is
// wrong, or VerdictNoData. More than half of the voter set's power
// decides:
//
//   - a mask with bits set: each wrong receipt's provider is slashed
//     fraud_slash_bps and tombstoned; the client is compensated from the
//     slash, at most compensation_bps of it and at most the receipt's
//     charge (NIn·PriceIn + NOut·PriceOut, rule 8), the rest is burned; the
//     bond returns to the accuser;
//   - mask 0 (every receipt valid, S14's near-ties): nobody is slashed, the
//     bond goes to the fee pool (it paid the validators' work);
//   - VerdictNoData: dismissed, the bond goes to the fee pool (S12);
//   - no majority: nobody is at fault, the bond returns.
//
// Voters that sealed nothing, did not open, or opened against a decided
// verdict lose vote_slash_bps (burned).

// Dispute bounds.
const (
	// MaxOpenDisputes bounds the disputes open at once per session.
	MaxOpenDisputes = 8
	// MaxDisputeAddrs bounds the accuser's multiaddrs, MaxDisputeAddrLen
	// each one's length.
	MaxDisputeAddrs   = 8
	MaxDisputeAddrLen = 256
	// MaxDisputesPerBlock bounds the dispute deadlines one end-block works;
	// the rest wait for the next block.
	MaxDisputesPerBlock = 16
)

// VerdictNoData is the verdict of a validator that could not fetch the
// dispute's data or found it not matching the hashes on chain.
const VerdictNoData uint8 = 0xFF

// SessionVoteTag starts every session vote commitment.
const SessionVoteTag = "ogpu/svote/v1"

// SignedRequest is a request with the session client's signature over
// Request.Hash().
type SignedRequest struct {
	Request Request
	Sig     []byte
}

// SignedReceipt is a receipt with its provider's signature over
// Receipt.Hash().
type SignedReceipt struct {
	Receipt Receipt
	Sig     []byte
}

// Charge is what the request of r costs at the session's prices:
// NIn·PriceIn + NOut·PriceOut.
func (s *Session) Charge(r *Receipt) *uint256.Int {
	in := new(uint256.Int).Mul(uint256.NewInt(r.NIn), s.PriceIn)
	out := new(uint256.Int).Mul(uint256.NewInt(r.NOut), s.PriceOut)
	return in.Add(in, out)
}

// MsgDisputeSession claims that receipts of a session are wrong.
// Receipts[i] answers Requests[i]. Addrs are the accuser's libp2p
// multiaddrs where validators fetch the prompts and outputs.
type MsgDisputeSession struct {
	Session  uint64
	Requests []SignedRequest
	Receipts []SignedReceipt
	Addrs    []string
}

// Raw encodes the message.
func (m *MsgDisputeSession) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeDisputeSession, m)
}

// DecodeMsgDisputeSession parses a MsgDisputeSession payload and checks
// its shape (the state checks are the keeper's).
func DecodeMsgDisputeSession(data []byte) (*MsgDisputeSession, error) {
	var m MsgDisputeSession
	if err := types.DecodeMsgPayload("dispute session", data, &m); err != nil {
		return nil, err
	}
	n := len(m.Receipts)
	switch {
	case n < 1 || n > 2:
		return nil, types.ErrInvalidMsg.Wrapf("dispute session: %d receipts: dispute one receipt (an audit) or two (a comparison or an equivocation)", n)
	case len(m.Requests) != n:
		return nil, types.ErrInvalidMsg.Wrapf("dispute session: %d requests for %d receipts: give each receipt's signed request, in the same order", len(m.Requests), n)
	case len(m.Addrs) == 0 || len(m.Addrs) > MaxDisputeAddrs:
		return nil, types.ErrInvalidMsg.Wrapf("dispute session: %d addresses: give 1 to %d multiaddrs where validators fetch the data", len(m.Addrs), MaxDisputeAddrs)
	}
	for i := range n {
		if len(m.Requests[i].Sig) != 65 || len(m.Receipts[i].Sig) != 65 {
			return nil, types.ErrInvalidMsg.Wrapf("dispute session: request and receipt %d: signatures are 65 bytes", i)
		}
	}
	for i, a := range m.Addrs {
		if a == "" || len(a) > MaxDisputeAddrLen || !types.Printable(a) {
			return nil, types.ErrInvalidMsg.Wrapf("dispute session: address %d: want a printable multiaddr of 1 to %d bytes", i, MaxDisputeAddrLen)
		}
	}
	return &m, nil
}

// MsgSealSessionVote seals a validator's verdict on a session dispute:
// Commitment = SessionVoteCommitment(session, dispute, verdict, salt,
// validator).
type MsgSealSessionVote struct {
	Session    uint64
	Dispute    uint64
	Commitment types.Hash
}

// Raw encodes the message.
func (m *MsgSealSessionVote) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeSealSessionVote, m)
}

// DecodeMsgSealSessionVote parses a MsgSealSessionVote payload.
func DecodeMsgSealSessionVote(data []byte) (*MsgSealSessionVote, error) {
	var m MsgSealSessionVote
	if err := types.DecodeMsgPayload("seal session vote", data, &m); err != nil {
		return nil, err
	}
	if m.Commitment == (types.Hash{}) {
		return nil, types.ErrInvalidMsg.Wrapf("seal session vote: empty commitment")
	}
	return &m, nil
}

// MsgOpenSessionVote opens a sealed verdict.
type MsgOpenSessionVote struct {
	Session uint64
	Dispute uint64
	Verdict uint8
	Salt    types.Hash
}

// Raw encodes the message.
func (m *MsgOpenSessionVote) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeOpenSessionVote, m)
}

// DecodeMsgOpenSessionVote parses a MsgOpenSessionVote payload.
func DecodeMsgOpenSessionVote(data []byte) (*MsgOpenSessionVote, error) {
	var m MsgOpenSessionVote
	if err := types.DecodeMsgPayload("open session vote", data, &m); err != nil {
		return nil, err
	}
	if m.Verdict > 3 && m.Verdict != VerdictNoData {
		return nil, types.ErrInvalidMsg.Wrapf("open session vote: verdict %d: want a mask of the invalid receipts (0 to 3) or %d (no data)", m.Verdict, VerdictNoData)
	}
	return &m, nil
}

// SessionVoteCommitment is sha256("ogpu/svote/v1" | session(8) |
// dispute(8) | verdict(1) | salt(32) | validator(20)).
func SessionVoteCommitment(session, dispute uint64, verdict uint8, salt types.Hash, validator types.Address) types.Hash {
	h := sha256.New()
	h.Write([]byte(SessionVoteTag))
	h.Write(binary.BigEndian.AppendUint64(nil, session))
	h.Write(binary.BigEndian.AppendUint64(nil, dispute))
	h.Write([]byte{verdict})
	h.Write(salt[:])
	h.Write(validator[:])
	return types.Hash(h.Sum(nil))
}

// DisputeStatus is where a dispute is.
type DisputeStatus uint8

const (
	// DisputeOpen: validators vote.
	DisputeOpen DisputeStatus = 1
	// DisputeDecided: a verdict mask won (bits set: those receipts' providers
	// were slashed; 0: every receipt was valid).
	DisputeDecided DisputeStatus = 2
	// DisputeDismissed: the validators could not get the data (VerdictNoData).
	DisputeDismissed DisputeStatus = 3
	// DisputeEquivocation: two differing receipts of one provider for one
	// seq, decided in the transaction that showed them.
	DisputeEquivocation DisputeStatus = 4
	// DisputeUnresolved: no verdict had more than half of the voter set's
	// power at the deadline; nobody is at fault.
	DisputeUnresolved DisputeStatus = 5
)

func (s DisputeStatus) String() string {
	switch s {
	case DisputeOpen:
		return "open"
	case DisputeDecided:
		return "decided"
	case DisputeDismissed:
		return "dismissed"
	case DisputeEquivocation:
		return "equivocation"
	case DisputeUnresolved:
		return "unresolved"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// MarshalText prints the status by name in JSON.
func (s DisputeStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Dispute kinds.
const (
	KindAudit        = "audit"
	KindComparison   = "comparison"
	KindEquivocation = "equivocation"
)

// Voter is a member of a dispute's voter set, with its power at the opening.
type Voter struct {
	Validator types.Address `json:"validator"`
	Power     uint64        `json:"power"`
}

// Dispute is one dispute of a session, numbered from 0 per session.
type Dispute struct {
	Session  uint64          `json:"session"`
	Index    uint64          `json:"index"`
	Kind     string          `json:"kind"`
	Accuser  types.Address   `json:"accuser"`
	Requests []SignedRequest `json:"requests"`
	Receipts []SignedReceipt `json:"receipts"`
	Addrs    []string        `json:"addrs"`
	Bond     *uint256.Int    `json:"bond"`
	// Opened is the height of the dispute; sealed votes are taken until
	// SealBy, opened until Deadline.
	Opened   uint64        `json:"opened"`
	SealBy   uint64        `json:"seal_by"`
	Deadline uint64        `json:"deadline"`
	Status   DisputeStatus `json:"status"`
	// Verdict is the decided mask (bit i: receipt i invalid) or
	// VerdictNoData; meaningless while open or unresolved.
	Verdict uint8 `json:"verdict"`
	// Voters is the voter set, in address order.
	Voters []Voter `json:"voters"`
	// Slashed and Compensated: what the decision took from the accused
	// providers and paid the client.
	Slashed     *uint256.Int `json:"slashed"`
	Compensated *uint256.Int `json:"compensated"`
}

// Providers are the accused providers, in receipt order, without repeats.
func (d *Dispute) Providers() []types.Address {
	var out []types.Address
	for i := range d.Receipts {
		p := d.Receipts[i].Receipt.Provider
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// VoterPower is validator's power in the voter set (0: not in it).
func (d *Dispute) VoterPower(validator types.Address) uint64 {
	for _, v := range d.Voters {
		if v.Validator == validator {
			return v.Power
		}
	}
	return 0
}

// OpenVote is a voter's opened verdict.
type OpenVote struct {
	Validator types.Address `json:"validator"`
	Verdict   uint8         `json:"verdict"`
}
