package chain

import (
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
)

// QueryStats is the path of StatsView: what a metrics follower reads at
// every block, so it must stay cheap whatever the chain's age.
const QueryStats = "/stats"

// MaxCounted bounds each count of StatsView: counting walks a state index
// key by key, and a follower asks at every block.
const MaxCounted = 100_000

// StatsView is the answer to /stats: the open jobs by state and the
// running totals of stake and escrow. The job counts walk the by-state
// index of the open states only (keys, never records), each up to
// MaxCounted; the amounts are the running totals the stake invariant
// checks, read in one lookup each. Jobs that ended (completed, expired,
// cancelled) are not counted: they only grow, and a follower counts
// their endings from the events instead.
type StatsView struct {
	// Height is the committed height the answer is from.
	Height uint64 `json:"height"`
	// Jobs counts the open jobs by state name: bidding, revealing,
	// running. A count of MaxCounted means "at least".
	Jobs map[string]uint64 `json:"jobs"`
	// Locked is job and session escrow (supply's "locked" term).
	Locked *uint256.Int `json:"locked"`
	// Bonded and Unbonding are provider and validator stake.
	Bonded    *uint256.Int `json:"bonded"`
	Unbonding *uint256.Int `json:"unbonding"`
}

// OpenJobStates are the states StatsView counts.
var OpenJobStates = []market.JobState{market.JobBidding, market.JobRevealing, market.JobRunning}

// statsQuery answers /stats; ok is false for other paths.
func statsQuery(snap *store.Snapshot, path string) (any, bool, error) {
	if path != QueryStats {
		return nil, false, nil
	}
	k := escrow.NewKeeper(snap)
	v := StatsView{Height: uint64(snap.Version()), Jobs: map[string]uint64{},
		Locked: k.TotalLocked(), Bonded: k.TotalBonded(), Unbonding: k.TotalUnbonding()}
	for _, s := range OpenJobStates {
		var n uint64
		store.IteratePrefix(snap, market.ByStatePrefix(s), func(_, _ []byte) bool {
			n++
			return n >= MaxCounted
		})
		v.Jobs[s.String()] = n
	}
	return v, true, nil
}
