package verifier

import (
	"fmt"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

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

// CreditAgreed records an agreed result that paid its provider paid. A
// result paid less than minPayment (nil: no minimum) is not counted at all,
// neither done nor agreed: jobs too cheap to cost anything cannot build a
// reputation (M3), and they do not lower an honest provider's either.
// Each counted agreement is worth the same, so one counted job adds at most
// 1000 × (a+2)/(d+3) − 1000 × (a+1)/(d+2) points.
func (r *Reputation) CreditAgreed(paid, minPayment *uint256.Int) {
	if minPayment != nil && paid.Lt(minPayment) {
		return
	}
	r.Done++
	r.Agreed++
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
