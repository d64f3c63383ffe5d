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
