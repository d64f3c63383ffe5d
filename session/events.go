package session

import (
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Typed session events; decode with types.DecodeEvent.

type EventOpened struct {
	Session  uint64        `event:"session,index"`
	Client   types.Address `event:"client,index"`
	Lanes    uint64        `event:"lanes"`
	PriceIn  *uint256.Int  `event:"price_in"`
	PriceOut *uint256.Int  `event:"price_out"`
	Expiry   uint64        `event:"expiry"`
	// Reservation is what each lane's provider was paid at the award (S21).
	Reservation *uint256.Int `event:"reservation"`
}

func (EventOpened) EventType() string { return "session_opened" }

type EventRedeemed struct {
	Session  uint64        `event:"session,index"`
	Provider types.Address `event:"provider,index"`
	Seq      uint64        `event:"seq"`
	Paid     *uint256.Int  `event:"paid"`
	Total    *uint256.Int  `event:"total"`
}

func (EventRedeemed) EventType() string { return "session_redeemed" }

type EventClosed struct {
	Session uint64 `event:"session,index"`
	Refund  uint64 `event:"refund_at"`
}

func (EventClosed) EventType() string { return "session_closed" }

type EventSettled struct {
	Session  uint64       `event:"session,index"`
	Refunded *uint256.Int `event:"refunded"`
}

func (EventSettled) EventType() string { return "session_settled" }

// EventDisputeOpened: a dispute of session receipts. Providers are the
// accused (comma list), Seqs their receipts' seqs (comma list, receipt
// order); Kind is audit, comparison or equivocation.
type EventDisputeOpened struct {
	Session   uint64        `event:"session,index"`
	Dispute   uint64        `event:"dispute"`
	Accuser   types.Address `event:"accuser,index"`
	Providers []string      `event:"providers"`
	Seqs      string        `event:"seqs"`
	SealBy    uint64        `event:"seal_by"`
	Deadline  uint64        `event:"deadline"`
	Kind      string        `event:"kind"`
}

func (EventDisputeOpened) EventType() string { return "session_dispute_opened" }

type EventVoteSealed struct {
	Session   uint64        `event:"session,index"`
	Dispute   uint64        `event:"dispute"`
	Validator types.Address `event:"validator,index"`
}

func (EventVoteSealed) EventType() string { return "session_vote_sealed" }

type EventVoteOpened struct {
	Session   uint64        `event:"session,index"`
	Dispute   uint64        `event:"dispute"`
	Validator types.Address `event:"validator,index"`
	Verdict   uint64        `event:"verdict"`
	Power     uint64        `event:"power"`
}

func (EventVoteOpened) EventType() string { return "session_vote_opened" }

// EventDisputeDecided: how a dispute ended. Verdict is the mask (bit i:
// receipt i invalid) or 255 (no data); Outcome says it in words.
type EventDisputeDecided struct {
	Session     uint64       `event:"session,index"`
	Dispute     uint64       `event:"dispute"`
	Verdict     uint64       `event:"verdict"`
	Outcome     string       `event:"outcome"`
	Slashed     *uint256.Int `event:"slashed"`
	Compensated *uint256.Int `event:"compensated"`
}

func (EventDisputeDecided) EventType() string { return "session_dispute_decided" }

// EventSlashed: a provider slashed for a wrong or equivocal receipt, or a
// voter for a missed or contrary vote.
type EventSlashed struct {
	Session      uint64        `event:"session,index"`
	Dispute      uint64        `event:"dispute"`
	Account      types.Address `event:"account,index"`
	Amount       *uint256.Int  `event:"amount"`
	Compensation *uint256.Int  `event:"compensation"`
	Burned       *uint256.Int  `event:"burned"`
	Reason       string        `event:"reason"`
}

func (EventSlashed) EventType() string { return "session_slashed" }
