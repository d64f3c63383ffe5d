package chain

import (
	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// QueryBeacon is the randomness beacon's state (BeaconView).
const QueryBeacon = "/beacon"

// BeaconView is the answer to /beacon: the last final height and value,
// and each validator's registered hash chain.
type BeaconView struct {
	// Final is the last height whose value is final (0: none yet), Value
	// that value.
	Final uint64     `json:"final"`
	Value types.Hash `json:"value"`
	// Validators are the registered chains in operator order.
	Validators []BeaconRecordView `json:"validators"`
	// Predictable is set when no validator contributes (no registered
	// chain): every value is then computable in advance, and so is every
	// audit draw.
	Predictable bool `json:"predictable"`
}

// BeaconRecordView is one validator's registered hash chain.
type BeaconRecordView struct {
	Operator types.Address `json:"operator"`
	Name     string        `json:"name,omitempty"`
	Start    uint64        `json:"start"`
	End      uint64        `json:"end"`
	// Last is the height of the latest value it revealed.
	Last uint64 `json:"last"`
}

func beaconQuery(snap store.KV, path string) (any, bool, error) {
	if path != QueryBeacon {
		return nil, false, nil
	}
	v := BeaconView{Validators: []BeaconRecordView{}}
	if n := beacon.Next(snap); n > 1 {
		v.Final = n - 1
		v.Value, _ = beacon.Value(snap, v.Final)
	}
	ek := escrow.NewKeeper(snap)
	beacon.IterateRecords(snap, func(op types.Address, rec *beacon.Record) bool {
		rv := BeaconRecordView{Operator: op, Start: rec.Start, End: rec.End, Last: rec.Last}
		if val, ok := ek.GetValidator(op); ok {
			rv.Name = val.Name
		}
		v.Validators = append(v.Validators, rv)
		return false
	})
	v.Predictable = len(v.Validators) == 0
	return v, true, nil
}
