package market

import (
	"bytes"
	"crypto/sha256"
	"slices"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// The leaders list (AppVersion 7): an auction ranks its bids as they are
// revealed, not at the close. Each stage keeps its best revealed bids, at
// most leaderCap of them, in rank order under LeadersKey. A reveal checks
// its provider's eligibility, inserts the bid at its rank and, when the
// list is over its cap, pushes out the last: a definite loser, whose
// deposit goes back in that reveal. The close then checks the leaders
// only (L1), awards the first r still eligible and returns the rest's
// deposits: its work is per leader, not per bid. See docs/design-notes.md,
// "Auction ranking at the reveal".

// Leader is one revealed bid in its stage's leaders list.
type Leader struct {
	Provider types.Address
	Price    *uint256.Int
	// Score is the provider's reputation when it revealed.
	Score uint64
	// Tie is TieHash of the bid: the last key of the ranking.
	Tie     types.Hash
	Seq     uint64
	Deposit *uint256.Int
}

// Leaders is an auction stage's ranking of revealed bids, best first.
type Leaders struct {
	List []Leader
	// Evicted counts the revealed bids pushed out of List (their deposits
	// returned); EvictedMin is the lowest price among them (meaningful only
	// when Evicted > 0). The close prices a stage left without a backup
	// by it: see stagePrice.
	Evicted    uint32
	EvictedMin *uint256.Int
}

// leaderCap is how many revealed bids an auction stage of j keeps: 3r +
// 1. The close needs r + 1 eligible ones (r winners, and the first backup,
// whose price is the uniform clearing price); the other 2r are a margin
// for leaders no longer eligible at the close (L1) and backups for
// no-shows (2r + 1 backups in all when every leader is eligible: each
// slot can be reassigned twice, a pipeline's more often while its life
// allows, until the backups run out). A split job's stage keeps r more
// per other stage, for the accounts that win another stage and may not
// win this one (splitSelect). Never more than max_bids_per_stage: a stage
// has no more bids.
func leaderCap(j *Job, maxBids uint64) int {
	r := uint64(j.Redundancy)
	c := 3*r + 1
	if j.Kind == KindSplit {
		c += uint64(j.Stages-1) * r
	}
	return int(min(c, maxBids))
}

// TieHash is the last key of an auction's ranking: sha256(seed | job |
// stage | provider), where seed is Job.TieSeed, the hash of the block that
// carried the job's first reveal. Every bid was sealed (and its
// provider's address fixed) before that block was decided. (Before
// AppVersion 7 the seed was the hash of the close's block; when the
// first reveal is in the close's block the two are the same.)
func TieHash(seed []byte, job uint64, stage uint16, provider types.Address) types.Hash {
	h := sha256.New()
	h.Write(seed)
	h.Write(be64(job))
	h.Write(be16(stage))
	h.Write(provider[:])
	return types.Hash(h.Sum(nil))
}

// cmpLeader is the auction ranking: price (lower first), then reputation
// at the reveal (higher first), then the tie hash. A total order: the tie
// hash differs per provider.
func cmpLeader(a, b *Leader) int {
	if c := a.Price.Cmp(b.Price); c != 0 {
		return c
	}
	if a.Score != b.Score {
		return -cmpU64(a.Score, b.Score)
	}
	return bytes.Compare(a.Tie[:], b.Tie[:])
}

// GetLeaders reads an auction stage's leaders list (empty when no bid was
// revealed, or after the close).
func GetLeaders(r store.Reader, job uint64, stage uint16) *Leaders {
	bz := r.Get(LeadersKey(job, stage))
	if bz == nil {
		return &Leaders{EvictedMin: new(uint256.Int)}
	}
	var l Leaders
	decode(bz, &l, "leaders")
	return &l
}

func (k *Keeper) setLeaders(job uint64, stage uint16, l *Leaders) {
	k.kv.Set(LeadersKey(job, stage), encode(l))
}

// insert puts b at its rank and, if the list is then longer than cap,
// removes and returns the last entry (possibly b itself).
func (l *Leaders) insert(b Leader, cap int) *Leader {
	i, _ := slices.BinarySearchFunc(l.List, &b, func(e Leader, t *Leader) int { return cmpLeader(&e, t) })
	l.List = slices.Insert(l.List, i, b)
	if len(l.List) <= cap {
		return nil
	}
	out := l.List[len(l.List)-1]
	l.List = l.List[:len(l.List)-1]
	if l.Evicted == 0 || out.Price.Lt(l.EvictedMin) {
		l.EvictedMin = out.Price.Clone()
	}
	l.Evicted++
	return &out
}

// has reports whether provider is in the list.
func (l *Leaders) has(provider types.Address) bool {
	return slices.ContainsFunc(l.List, func(e Leader) bool { return e.Provider == provider })
}

// rankLeaders is the close of an auction stage: its leaders in rank
// order, each checked for eligibility (L1). The first r eligible win, the
// other eligible ones are the backups; the ineligible ones are dropped,
// with the reason, and forfeit their deposits.
func (k *Keeper) rankLeaders(j *Job, stage uint16, l *Leaders) (winners, backups []ranked, dropped []droppedBid) {
	n := int(j.Redundancy)
	for _, e := range l.List {
		if _, err := eligibleStage(k.kv, k.ctx.Params, k.ctx.Height, j, stage, e.Provider); err != nil {
			dropped = append(dropped, droppedBid{e, "ineligible at the close: " + err.Error()})
			continue
		}
		c := ranked{provider: e.Provider, price: e.Price, seq: e.Seq, deposit: e.Deposit}
		if len(winners) < n {
			winners = append(winners, c)
		} else {
			backups = append(backups, c)
		}
	}
	return winners, backups, dropped
}

// droppedBid is a leader found ineligible at the close.
type droppedBid struct {
	Leader
	reason string
}

// stagePrice is the uniform clearing price of an auction stage: the price
// of its best backup (the (r+1)-th best eligible bid); without one, the
// lowest price pushed out of the leaders list, which every evicted bid's
// provider accepted and which is at least every leader's; without that
// either (no more eligible bidders than slots), the highest winning bid
// (AppVersion 8, review 2's M-M2: it was the client's cap, so a provider
// alone on a job was paid the cap whatever it bid). Every winner is paid
// at least its own bid; docs/design-notes.md, "The price when bidders are
// no more than slots", argues the incentive.
func stagePrice(j *Job, winners, backups []ranked, l *Leaders) *uint256.Int {
	switch {
	case len(backups) > 0:
		return backups[0].price.Clone()
	case l != nil && l.Evicted > 0:
		return l.EvictedMin.Clone()
	case len(winners) > 0:
		return winners[len(winners)-1].price.Clone()
	}
	return j.MaxPrice.Clone()
}
