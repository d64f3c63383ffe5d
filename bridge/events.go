package bridge

import (
	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Typed bridge events; decode with types.DecodeEvent.

type EventKeySet struct {
	Operator types.Address  `event:"operator,index"`
	Key      common.Address `event:"key"`
}

func (EventKeySet) EventType() string { return "bridge_key_set" }

type EventDepositCredited struct {
	Nonce     uint64         `event:"nonce,index"`
	From      common.Address `event:"from"`
	Recipient types.Address  `event:"recipient,index"`
	Amount    *uint256.Int   `event:"amount"`
	// Power is the share of the voting power (bps) that attested it.
	PowerBps uint64 `event:"power_bps"`
}

func (EventDepositCredited) EventType() string { return "bridge_deposit_credited" }

type EventWithdrawal struct {
	Nonce  uint64         `event:"nonce,index"`
	From   types.Address  `event:"from,index"`
	To     common.Address `event:"to"`
	Amount *uint256.Int   `event:"amount"`
}

func (EventWithdrawal) EventType() string { return "bridge_withdrawal" }

type EventWithdrawalSigned struct {
	Nonce uint64 `event:"nonce,index"`
	// Signers is how many validators' signatures are stored.
	Signers uint64 `event:"signers"`
}

func (EventWithdrawalSigned) EventType() string { return "bridge_withdrawal_signed" }

type EventWithdrawalExecuted struct {
	Nonce  uint64         `event:"nonce,index"`
	To     common.Address `event:"to"`
	Amount *uint256.Int   `event:"amount"`
}

func (EventWithdrawalExecuted) EventType() string { return "bridge_withdrawal_executed" }

type EventValset struct {
	Nonce   uint64 `event:"nonce,index"`
	Members uint64 `event:"members"`
}

func (EventValset) EventType() string { return "bridge_valset" }

type EventValsetSigned struct {
	Nonce uint64 `event:"nonce,index"`
}

func (EventValsetSigned) EventType() string { return "bridge_valset_signed" }

// EventHalted says the bridge refused to act on what its validators
// reported because the chain's own books disagree (a reserve too small for
// an attested deposit): inbound stops, nothing is guessed.
type EventHalted struct {
	Reason string `event:"reason"`
}

func (EventHalted) EventType() string { return "bridge_halted" }
