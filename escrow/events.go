package escrow

import (
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Typed staking events; decode with types.DecodeEvent.

type EventBonded struct {
	Account types.Address `event:"account,index"`
	Amount  *uint256.Int  `event:"amount"`
	Bonded  *uint256.Int  `event:"bonded"`
}

func (EventBonded) EventType() string { return "bonded" }

type EventUnbonding struct {
	Account types.Address `event:"account,index"`
	Amount  *uint256.Int  `event:"amount"`
	Matures uint64        `event:"matures"`
}

func (EventUnbonding) EventType() string { return "unbonding" }

type EventUnbonded struct {
	Account types.Address `event:"account,index"`
	Amount  *uint256.Int  `event:"amount"`
}

func (EventUnbonded) EventType() string { return "unbonded" }

type EventValidatorCreated struct {
	Operator types.Address `event:"operator,index"`
	Name     string        `event:"name"`
	PubKey   string        `event:"pub_key"`
	SelfBond *uint256.Int  `event:"self_bond"`
}

func (EventValidatorCreated) EventType() string { return "validator_created" }

type EventValidatorJailed struct {
	Operator   types.Address `event:"operator,index"`
	Until      uint64        `event:"until"`
	Tombstoned bool          `event:"tombstoned"`
	Reason     string        `event:"reason"`
	Slashed    *uint256.Int  `event:"slashed"`
}

func (EventValidatorJailed) EventType() string { return "validator_jailed" }

type EventValidatorUnjailed struct {
	Operator types.Address `event:"operator,index"`
}

func (EventValidatorUnjailed) EventType() string { return "validator_unjailed" }

type EventPowerChanged struct {
	Operator types.Address `event:"operator,index"`
	Name     string        `event:"name"`
	Power    uint64        `event:"power"`
}

func (EventPowerChanged) EventType() string { return "power_changed" }

// EventValidatorRemoved: a validator record below the minimum stake and
// without power for unbonding_blocks was deleted; its consensus key is free.
type EventValidatorRemoved struct {
	Operator types.Address `event:"operator,index"`
	Name     string        `event:"name"`
}

func (EventValidatorRemoved) EventType() string { return "validator_removed" }

type EventFeesDistributed struct {
	Amount *uint256.Int `event:"amount"`
}

func (EventFeesDistributed) EventType() string { return "fees_distributed" }
