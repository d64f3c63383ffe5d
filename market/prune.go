package market

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Pruning settled jobs (issue 17, "State growth").
//
// A job that reached a final state (completed, expired, cancelled) can no
// longer be acted on: every transaction naming it is refused by its phase
// check, every deadline left in the schedule passes over it. From then on
// its records only serve readers. setState queues it under
// prune(final height + params.market.retain_blocks, job), and the end
// block at that height deletes the job, its bids, order-book and leaders
// leftovers,
// fine-tune claims, index entries (by state, client, provider), its tasks
// with their votes (package verifier) and its fine-tune games (package
// finetune). The queue is worked in key order, at most MaxPruneWork units
// a block (a job costs 1 + its stages + its sealed bids, about the
// records it deletes); the rest carries over to the next block.
//
// A session job is pruned the same way, with its session's records
// (session.PruneSession), but not before its session can take no more
// dispute (expiry + grace + dispute_blocks) and has none open: until then
// it is queued again.
//
// No tombstone is kept: job ids are never reused (NextJobKey only grows)
// and nothing but pruning deletes a job, so an id below the next id with no
// record is a pruned job (Pruned), and a transaction or query naming it
// gets an error that says so. The job_pruned event records the height.

// prefixPrune is the prune queue: 0x2b | height(8) | job(8) -> {}: a final
// job is pruned at height (keys.go lists the package's prefixes).
const prefixPrune byte = 0x2b

// MaxPruneWork bounds the pruning work of one block, in units of 1 + the
// job's stages + its sealed bids (the records one job's pruning deletes,
// roughly). The first job of a block is always pruned, whatever its cost
// (at most 1 + max_stages × (1 + max_bids_per_stage)).
const MaxPruneWork = 4096

// PruneKey is the queue key of job's pruning at height.
func PruneKey(height, job uint64) []byte {
	return cat([]byte{prefixPrune}, be64(height), be64(job))
}

// ParsePruneKey is PruneKey's inverse.
func ParsePruneKey(key []byte) (height, job uint64, err error) {
	if len(key) != 17 || key[0] != prefixPrune {
		return 0, 0, fmt.Errorf("not a prune queue key: %x", key)
	}
	return binary.BigEndian.Uint64(key[1:9]), binary.BigEndian.Uint64(key[9:17]), nil
}

// PruneQueuePrefix is the prefix of the prune queue.
func PruneQueuePrefix() []byte { return []byte{prefixPrune} }

// Pruned reports whether job id existed and was pruned: ids are never
// reused and only pruning deletes a job record.
func Pruned(r store.Reader, id uint64) bool {
	return id != 0 && id < decodeU64(r.Get(NextJobKey())) && r.Get(JobKey(id)) == nil
}

// PrunedError is the error about pruned job id, for transactions
// (ErrUnknownJob) and queries alike.
func PrunedError(id uint64, retain uint64) string {
	return fmt.Sprintf("job %d ended and was pruned from the state %d blocks later (params.market.retain_blocks): its history, the height of its end and of its pruning (job_pruned), is in the block events and the indexer", id, retain)
}

// queuePrune queues j's pruning, retain_blocks after this block. j has
// just reached a final state.
func (k *Keeper) queuePrune(j *Job) {
	if k.p.RetainBlocks == 0 || j.State.Open() {
		return
	}
	k.kv.Set(PruneKey(k.ctx.Height+k.p.RetainBlocks, j.ID), present)
}

// pruneCost is the work units of pruning j.
func pruneCost(j *Job) uint64 { return 1 + uint64(j.Stages) + j.SealedBids() }

// PruneEndBlock prunes the jobs due at or before this height, earliest
// first, within MaxPruneWork units.
func (k *Keeper) PruneEndBlock() {
	type due struct {
		key    []byte
		height uint64
		job    uint64
	}
	var list []due
	var spent uint64
	end := cat([]byte{prefixPrune}, be64(k.ctx.Height+1))
	k.kv.Iterate([]byte{prefixPrune}, end, func(key, _ []byte) bool {
		h, id, err := ParsePruneKey(key)
		if err != nil {
			panic(err) // only queue keys live under the prefix
		}
		cost := uint64(1)
		if j, ok := GetJob(k.kv, id); ok {
			cost = pruneCost(j)
		}
		if spent > 0 && spent+cost > MaxPruneWork {
			return true
		}
		spent += cost
		list = append(list, due{bytes.Clone(key), h, id})
		return false
	})
	for _, d := range list {
		k.kv.Delete(d.key)
		j, ok := GetJob(k.kv, d.job)
		if !ok || j.State.Open() {
			continue // not reached: only final jobs are queued, once (PruneInvariant)
		}
		if later := k.sessionHold(j); later != 0 {
			k.kv.Set(PruneKey(later, j.ID), present)
			continue
		}
		k.prune(j)
	}
}

// sessionHold is the height a session job's pruning must wait for (0: none):
// its session takes disputes until expiry + grace + dispute_blocks, and an
// open dispute holds bonds in the job's escrow until its vote ends.
func (k *Keeper) sessionHold(j *Job) uint64 {
	if j.Kind != KindSession {
		return 0
	}
	s, ok := session.Get(k.kv, j.ID)
	if !ok {
		return 0
	}
	last := s.Expiry + s.Grace + k.p.DisputeBlocks
	switch {
	case k.ctx.Height <= last:
		return last + 1
	case s.OpenDisputes > 0:
		return k.ctx.Height + k.p.DisputeBlocks
	}
	return 0
}

// prune deletes final job j and every record kept for it.
func (k *Keeper) prune(j *Job) {
	id := j.ID
	// Every provider indexed under the job bid on it first (an award,
	// reassignment, replacement or session lane goes to a bidder), and its
	// bid records stay until now; the tasks' slots are read as well.
	for _, b := range Bids(k.kv, id) {
		k.kv.Delete(byProviderKey(b.Provider, id))
	}
	for s := uint16(0); s < j.Stages; s++ {
		if t, ok := k.ver.GetTask(id, s); ok {
			for _, sl := range t.Slots {
				k.kv.Delete(byProviderKey(sl.Provider, id))
				for _, old := range sl.Replaced {
					k.kv.Delete(byProviderKey(old, id))
				}
			}
		}
		k.ver.DeleteTask(id, s)
	}
	// Fine-tune claims and games exist for fine-tune jobs only
	// (RevealFinetune, openGames; StageInvariant): other jobs skip their
	// tables' iterators.
	tables := []byte{prefixBid, prefixBook, prefixLeaders}
	if j.Kind == KindFinetune {
		tables = append(tables, prefixFinetuneClaim)
		finetune.PruneJob(k.kv, id)
	}
	var keys [][]byte
	for _, p := range tables {
		store.IteratePrefix(k.kv, cat([]byte{p}, be64(id)), func(key, _ []byte) bool {
			keys = append(keys, bytes.Clone(key))
			return false
		})
	}
	for _, key := range keys {
		k.kv.Delete(key)
	}
	if j.Kind == KindSession {
		session.PruneSession(k.kv, id) // settled, no dispute open: sessionHold
	}
	k.kv.Delete(byStateKey(j.State, id))
	k.kv.Delete(byClientKey(j.Client, id))
	k.kv.Delete(JobKey(id))
	k.emit(EventJobPruned{Job: id, State: j.State.String(), Height: k.ctx.Height})
}

// PruneInvariant checks the prune queue and what pruning leaves: every
// queued job exists, is final and is queued once; no escrow is held for a
// job that is not in the state, except a session's (its dispute bonds,
// package session); no bid, book, leaders, claim or index entry names a
// job that is not in the state.
func PruneInvariant(r store.KV) error {
	var bad error
	seen := map[uint64]bool{} // membership only: never iterated
	store.IteratePrefix(r, []byte{prefixPrune}, func(key, _ []byte) bool {
		_, id, err := ParsePruneKey(key)
		j, ok := GetJob(r, id)
		switch {
		case err != nil:
			bad = err
		case !ok:
			bad = fmt.Errorf("prune invariant broken: job %d is queued for pruning but not in the state", id)
		case j.State.Open():
			bad = fmt.Errorf("prune invariant broken: job %d is queued for pruning while %s", id, j.State)
		case seen[id]:
			bad = fmt.Errorf("prune invariant broken: job %d is queued for pruning twice", id)
		}
		seen[id] = true
		return bad != nil
	})
	if bad != nil {
		return bad
	}
	known := map[uint64]bool{} // job ids found in the state (lookups only, never iterated)
	missing := func(what string, id uint64) bool {
		if known[id] {
			return false
		}
		if r.Get(JobKey(id)) != nil {
			known[id] = true
			return false
		}
		bad = fmt.Errorf("prune invariant broken: %s of job %d, which is not in the state", what, id)
		return true
	}
	escrow.NewKeeper(r).IterateLocked(func(id uint64, _ *uint256.Int) bool {
		if _, ok := session.Get(r, id); ok {
			return false
		}
		return missing("escrow held", id)
	})
	if bad != nil {
		return bad
	}
	for _, p := range []byte{prefixBid, prefixBook, prefixFinetuneClaim, prefixLeaders} {
		store.IteratePrefix(r, []byte{p}, func(key, _ []byte) bool {
			return missing(fmt.Sprintf("a record under prefix %#x", p), binary.BigEndian.Uint64(key[1:9]))
		})
		if bad != nil {
			return bad
		}
	}
	store.IteratePrefix(r, []byte{prefixByClient}, func(key, _ []byte) bool {
		return missing("a client index entry", binary.BigEndian.Uint64(key[1+types.AddressLength:]))
	})
	if bad != nil {
		return bad
	}
	store.IteratePrefix(r, []byte{prefixByProv}, func(key, _ []byte) bool {
		return missing("a provider index entry", binary.BigEndian.Uint64(key[1+types.AddressLength:]))
	})
	if bad != nil {
		return bad
	}
	store.IteratePrefix(r, []byte{prefixByState}, func(key, _ []byte) bool {
		return missing("a state index entry", binary.BigEndian.Uint64(key[2:]))
	})
	return bad
}
