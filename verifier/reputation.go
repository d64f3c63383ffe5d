package verifier

import (
	"fmt"

	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ogpu-network/ogpu/types"
)

// Reputation is a provider's record: integer counters only.
type Reputation struct {
	// Done counts results revealed in time.
	Done uint64
	// Agreed counts results that matched the verified answer.
	Agreed uint64
	// Lost counts disputes and canaries lost (fraud).
	Lost uint64
	// NoShows counts missed commit or reveal deadlines.
	NoShows uint64
}

// MaxScore is the best possible score.
const MaxScore = 1000

// Score is a deterministic integer in [0, 1000]:
//
//	1000 × (agreed + 1) / (done + no_shows + 2 + 4 × lost + 2 × no_shows)
//
// A new provider scores 500; agreed results move it towards 1000, a lost
// dispute weighs like four missing agreements and a no-show like three.
func (r Reputation) Score() uint64 {
	num := (r.Agreed + 1) * MaxScore
	den := r.Done + 3*r.NoShows + 2 + 4*r.Lost
	if num/den > MaxScore { // cannot happen while Agreed <= Done
		return MaxScore
	}
	return num / den
}

// GetReputation returns a provider's reputation (zero if it has none).
func (k Keeper) GetReputation(provider types.Address) Reputation {
	var r Reputation
	bz := k.kv.Get(ReputationKey(provider))
	if bz == nil {
		return r
	}
	if err := rlp.DecodeBytes(bz, &r); err != nil {
		panic(fmt.Errorf("verifier: stored reputation unreadable: %w", err))
	}
	return r
}

// UpdateReputation applies fn to provider's reputation and stores it.
func (k Keeper) UpdateReputation(provider types.Address, fn func(*Reputation)) Reputation {
	r := k.GetReputation(provider)
	fn(&r)
	bz, err := rlp.EncodeToBytes(&r)
	if err != nil {
		panic(err)
	}
	k.kv.Set(ReputationKey(provider), bz)
	return r
}
