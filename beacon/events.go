package beacon

import "github.com/ogpu-network/ogpu/types"

// EventRegistered: Validator registered a hash chain giving values for
// heights Start to End.
type EventRegistered struct {
	Validator types.Address `event:"validator,index"`
	Start     uint64        `event:"start"`
	End       uint64        `event:"end"`
}

func (EventRegistered) EventType() string { return "beacon_registered" }

// EventFinalized: the value of Height is final without Missing validators'
// values (emitted only then). A chain none of whose validators registered
// a chain has values every node can compute in advance (ogpu query
// beacon says so).
type EventFinalized struct {
	Height       uint64     `event:"height,index"`
	Value        types.Hash `event:"value"`
	Contributors uint64     `event:"contributors"`
	Missing      uint64     `event:"missing"`
}

func (EventFinalized) EventType() string { return "beacon_incomplete" }
