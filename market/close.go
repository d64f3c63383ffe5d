package market

// The close of an auction or a pool: ranking, the award, the start of a
// job (moved out of keeper.go; the rules are in the function comments).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// ---- the close ----

type ranked struct {
	provider types.Address
	price    *uint256.Int
	seq      uint64
	deposit  *uint256.Int // the auction close (rankLeaders)
	draw     types.Hash   // a pool claim's draw (PoolDraw)
}

// rank orders the eligible claims of a pool job's stage by their draw
// from the beacon value v of the job's last claim height (PoolDraw; an
// auction ranks its bids at the reveal, leaders.go).
// Claims whose provider is no longer eligible are returned in dropped with
// the reason: their deposits are forfeited (L1), or claiming and then
// making oneself ineligible would be a free way out of the task.
//
// book is the job's order book and bids its claims, both as the close read
// them (jobBook, Bids): each claim is read once per close, and each
// claimant's provider record, stake and reputation once per claim.
func (k *Keeper) rank(j *Job, stage uint16, book []bookEntry, bids []StageBid, v types.Hash) (winners, backups []ranked, dropped map[types.Address]string) {
	var all []ranked
	for _, e := range book {
		if e.stage != stage {
			continue
		}
		addr := e.provider
		b := findBid(bids, stage, addr)
		if _, err := eligibleStage(k.kv, k.ctx.Params, k.ctx.Height, j, stage, addr); err != nil {
			if dropped == nil {
				dropped = map[types.Address]string{} // looked up only, never ranged over
			}
			dropped[addr] = "ineligible at the close: " + err.Error()
			continue
		}
		all = append(all, ranked{provider: addr, price: b.Price, seq: b.Seq, draw: PoolDraw(v, j.ID, stage, addr)})
	}
	// The draw differs per provider, so the order does not depend on the
	// sort algorithm.
	slices.SortFunc(all, func(a, b ranked) int { return bytes.Compare(a.draw[:], b.draw[:]) })
	n := int(j.Redundancy)
	if len(all) < n {
		return all, nil, dropped
	}
	return all[:n], all[n:], dropped
}

// bookEntry is one key of a job's order book: a revealed bid (or claim)
// still holding its deposit.
type bookEntry struct {
	key      []byte
	stage    uint16
	provider types.Address
}

// jobBook reads job's order book in key order (stage, price, provider):
// one iteration instead of a point read per bid.
func (k *Keeper) jobBook(job uint64) []bookEntry {
	var out []bookEntry
	store.IteratePrefix(k.kv, cat([]byte{prefixBook}, be64(job)), func(key, _ []byte) bool {
		out = append(out, bookEntry{
			key:      bytes.Clone(key),
			stage:    binary.BigEndian.Uint16(key[9:11]),
			provider: types.BytesToAddress(key[len(key)-types.AddressLength:]),
		})
		return false
	})
	return out
}

// inBook reports whether key is in book (sorted by key, as jobBook
// returns it): depositHeld without a store read.
func inBook(book []bookEntry, key []byte) bool {
	_, found := slices.BinarySearchFunc(book, key, func(e bookEntry, key []byte) int { return bytes.Compare(e.key, key) })
	return found
}

// findBid returns the bid of provider on stage in bids (sorted by stage,
// then provider, as Bids returns them). Every order-book entry has its
// bid: a missing one is a broken store and panics, as reading it did.
func findBid(bids []StageBid, stage uint16, provider types.Address) *StageBid {
	i, found := slices.BinarySearchFunc(bids, stage, func(b StageBid, stage uint16) int {
		if c := cmpU64(uint64(b.Stage), uint64(stage)); c != 0 {
			return c
		}
		return bytes.Compare(b.Provider[:], provider[:])
	})
	if !found {
		panic(fmt.Sprintf("market: order book of stage %d holds %s without its bid", stage, provider))
	}
	return &bids[i]
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// stageAward is one stage's outcome at the close.
type stageAward struct {
	winners, backups []ranked
	price            *uint256.Int
	// evictedMin is the lowest price pushed out of an auction stage's
	// leaders list, nil if none was (stagePrice).
	evictedMin *uint256.Int
}

// close runs at the end of the reveal window: per stage, award the r best
// eligible bids at the uniform clearing price (an auction from its
// leaders lists, closeAuction; a pool from its order book, closePool),
// refund revealed deposits, burn unrevealed ones; expire the job if no stage was awarded (a
// pipeline: if any stage was not; a split job: if any stage has fewer
// than r winners, one slot per account, see splitSelect). A pool job's
// claimants are drawn from the beacon (pool.go). Every stage opens at once, except
// a pipeline's stages after the first: they wait (TaskWaiting, no
// deadlines) until the stage before them settles; see advance. A split
// stage's winners are put in replica-chain order (chainOrder): slot i of
// every stage is chain i.
func (k *Keeper) close(j *Job) {
	if k.rebid(j) { // short.go: a short stage takes one more window
		return
	}
	var awards []stageAward
	var filled []bool
	var awarded int
	if j.Mode == ModeAuction {
		awards, awarded = k.closeAuction(j)
		filled = make([]bool, j.Stages)
	} else {
		awards, filled, awarded = k.closePool(j)
	}
	// One provider winning several stages: its stake must back them all
	// (deterrence.go); then a stage with fewer than r winners: the
	// client's short-stage policy (short.go).
	k.capAwards(j, awards, filled)
	awarded = k.shortAtClose(j, awards, filled)
	// A pipeline's stages feed one another: one without a winner leaves the
	// others nothing to compute on (or nobody to pass their output to).
	pipelineGap, splitShort := -1, -1
	if j.Kind == KindPipeline && awarded > 0 {
		for s := range awards {
			if len(awards[s].winners) == 0 && !filled[s] {
				pipelineGap = s
				break
			}
		}
	}
	if j.Kind == KindSplit && awarded > 0 {
		splitShort = splitGap(j, awards)
	}
	if awarded == 0 || pipelineGap >= 0 || splitShort >= 0 {
		reason := k.noBidsReason(j)
		switch {
		case pipelineGap >= 0:
			reason = stageGapReason(j, uint16(pipelineGap))
		case splitShort >= 0:
			reason = splitGapReason(j, uint16(splitShort), len(awards[splitShort].winners))
		}
		refund := k.esc.Locked(j.ID)
		k.esc.Release(j.ID, j.Client, refund)
		j.Refunded.Add(j.Refunded, refund)
		k.setState(j, JobExpired)
		k.setJob(j)
		k.emit(EventJobExpired{Job: j.ID, Refund: refund, Reason: reason})
		return
	}
	if j.Kind == KindSession {
		k.openSession(j, awards[0])
		return
	}
	for s := uint16(0); s < j.Stages; s++ {
		if !filled[s] && len(awards[s].winners) > 0 {
			k.awardStage(j, s, awards[s])
		}
	}
	k.start(j)
}

// closeAuction ranks an auction's stages from their leaders lists (the
// ranking was done by the reveals, leaders.go): per stage the first r
// leaders still eligible win, the next eligible ones are backups, the
// ineligible ones forfeit their deposits (L1) and every eligible leader's
// deposit goes back. Sealed bids never revealed forfeit theirs: the bids
// are read only when there is one (Opened below the sealed bids). The
// leaders lists are deleted; the bid records stay, for queries.
func (k *Keeper) closeAuction(j *Job) (awards []stageAward, awarded int) {
	awards = make([]stageAward, j.Stages)
	for s := uint16(0); s < j.Stages; s++ {
		if j.Bids[s] == 0 {
			awards[s] = stageAward{price: j.MaxPrice.Clone()} // nothing to rank
			continue
		}
		l := GetLeaders(k.kv, j.ID, s)
		w, b, dropped := k.rankLeaders(j, s, l)
		for _, c := range slices.Concat(w, b) {
			k.esc.Release(j.ID, c.provider, c.deposit)
		}
		for _, d := range dropped {
			k.esc.BurnLocked(j.ID, d.Deposit)
			k.emit(EventBidForfeited{Job: j.ID, Stage: s, Provider: d.Provider, Deposit: d.Deposit, Reason: d.reason})
		}
		a := stageAward{winners: w, backups: b, price: stagePrice(j, w, b, l)}
		if l.Evicted > 0 {
			a.evictedMin = l.EvictedMin
		}
		awards[s] = a
		if len(w) > 0 {
			awarded++
		}
		if len(l.List) > 0 || l.Evicted > 0 {
			k.kv.Delete(LeadersKey(j.ID, s))
		}
	}
	if uint64(j.Opened) < j.SealedBids() {
		for _, b := range Bids(k.kv, j.ID) {
			if !b.Revealed {
				k.esc.BurnLocked(j.ID, b.Deposit)
				k.emit(EventBidForfeited{Job: j.ID, Stage: b.Stage, Provider: b.Provider, Deposit: b.Deposit, Reason: "not revealed"})
			}
		}
	}
	if j.Kind == KindSplit {
		splitSelect(j, awards)
	}
	return awards, awarded
}

// closePool ranks a pool job's stages from their order books: the claims
// in the order the beacon value of its last claim height draws them
// (pool.go; the close waits for that value).
func (k *Keeper) closePool(j *Job) (awards []stageAward, filled []bool, awarded int) {
	v, _ := beacon.Value(k.kv, j.RevealEnd)
	// The job's claims and its order book, read once: ranking, the deposits
	// and clearing the book use them, and nothing below writes either
	// before clearing the book.
	bids := Bids(k.kv, j.ID)
	book := k.jobBook(j.ID)
	awards = make([]stageAward, j.Stages)
	dropped := make([]map[types.Address]string, j.Stages)
	filled = make([]bool, j.Stages)
	for s := uint16(0); s < j.Stages; s++ {
		if _, ok := k.ver.GetTask(j.ID, s); ok {
			filled[s] = true // before AppVersion 8: a pool task awarded at its r-th claim (none since)
			awarded++
			continue
		}
		if j.Bids[s] == 0 {
			awards[s] = stageAward{price: j.MaxPrice.Clone()} // nothing to rank
			continue
		}
		w, b, out := k.rank(j, s, book, bids, v)
		dropped[s] = out
		awards[s] = stageAward{winners: w, backups: b, price: j.MaxPrice.Clone()}
		if len(w) > 0 {
			awarded++
		}
	}
	if j.Kind == KindSplit {
		splitSelect(j, awards)
	}
	// Deposits: claims of providers still eligible get theirs back, those
	// whose provider became ineligible before the close lose it.
	for _, b := range bids {
		if !inBook(book, BookKey(j.ID, b.Stage, b.Price, b.Provider)) {
			continue
		}
		if reason, out := dropped[b.Stage][b.Provider]; out {
			k.esc.BurnLocked(j.ID, b.Deposit)
			k.emit(EventBidForfeited{Job: j.ID, Stage: b.Stage, Provider: b.Provider, Deposit: b.Deposit, Reason: reason})
		} else {
			k.esc.Release(j.ID, b.Provider, b.Deposit)
		}
	}
	for _, e := range book { // clearBook
		k.kv.Delete(e.key)
	}
	return awards, filled, awarded
}

// awardStage gives stage s of j to a's winners (at least one) at a's
// price. The stage reserved r × cap at the post; it keeps n × price for
// its n winners and returns the rest to the client. The task is written
// waiting, without deadlines: start opens it.
func (k *Keeper) awardStage(j *Job, s uint16, a stageAward) {
	keep := new(uint256.Int).Mul(uint256.NewInt(uint64(len(a.winners))), a.price)
	reserved := new(uint256.Int).Mul(uint256.NewInt(uint64(j.Redundancy)), j.MaxPrice)
	refund := new(uint256.Int).Sub(reserved, keep)
	k.esc.Release(j.ID, j.Client, refund)
	j.Refunded.Add(j.Refunded, refund)
	j.Prices[s] = a.price
	if j.Kind == KindSplit {
		chainOrder(k.ctx.BlockHash, j.ID, s, a.winners)
	}
	t := &verifier.Task{Status: verifier.TaskWaiting}
	for _, w := range a.winners {
		t.Slots = append(t.Slots, verifier.Slot{Provider: w.provider})
		k.kv.Set(byProviderKey(w.provider, j.ID), present)
	}
	for _, b := range a.backups {
		t.Backups = append(t.Backups, b.provider)
	}
	k.setTask(j, s, t)
}

// start runs an awarded job from this height: every awarded task's
// execute window ends execute blocks from now and its verify window
// verify blocks after that (a pipeline's stages after the first stay
// waiting until the stage before them settles), and a stage nobody won
// settles at once, its r × cap refunded. The close calls it at the end of
// the reveal window; ClaimTask when a pool job's last task gets its r-th
// eligible claim. One function, so both paths set the same deadlines.
func (k *Keeper) start(j *Job) {
	k.setState(j, JobRunning)
	if j.Kind == KindFinetune {
		j.TrainSeed = FinetuneSeed(j.Seal, k.ctx.BlockHash) // T10: fixed now, by nobody's choice
	}
	commitBy := k.ctx.Height + j.Windows.Execute
	revealBy := commitBy + j.Windows.Verify
	for s := uint16(0); s < j.Stages; s++ {
		t, ok := k.ver.GetTask(j.ID, s)
		if !ok {
			refund := new(uint256.Int).Mul(uint256.NewInt(uint64(j.Redundancy)), j.MaxPrice)
			k.esc.Release(j.ID, j.Client, refund)
			j.Refunded.Add(j.Refunded, refund)
			j.Settled++
			k.emit(EventTaskSettled{Job: j.ID, Stage: s, Outcome: "no_bids", Paid: new(uint256.Int), Refund: refund})
			continue
		}
		if j.Kind != KindPipeline || s == 0 {
			// A pipeline's later stage takes stage s-1's settled result
			// as its input: it opens then (advance).
			t.Status, t.CommitDeadline, t.RevealDeadline = verifier.TaskExecuting, commitBy, revealBy
		}
		k.setTask(j, s, t)
		switch {
		case j.Kind == KindSplit:
			// The stages' reveals are judged together (deadlineSplit).
			k.schedule(t.CommitDeadline, j.ID, s, deadlineCommit)
		case t.Status == verifier.TaskExecuting:
			k.schedule(t.CommitDeadline, j.ID, s, deadlineCommit)
			k.schedule(t.RevealDeadline, j.ID, s, deadlineReveal)
		}
		names := make([]string, len(t.Slots))
		for i, sl := range t.Slots {
			names[i] = sl.Provider.Hex()
		}
		k.emit(EventJobAwarded{Job: j.ID, Stage: s, Providers: names, Price: j.Prices[s], CommitDeadline: t.CommitDeadline, RevealDeadline: t.RevealDeadline})
	}
	if j.Kind == KindSplit {
		k.schedule(revealBy, j.ID, stageNone, deadlineSplit)
	}
	k.setJob(j)
	if j.Settled == j.Stages {
		k.complete(j)
	}
}
