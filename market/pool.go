package market

import (
	"crypto/sha256"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/types"
)

// Pool draws (AppVersion 8, issue 30, review 2's M-M4). A pool job takes
// claims for its whole claim window (bid + reveal blocks, until
// RevealEnd). Its close then gives each task to r of its eligible
// claimants drawn from the beacon value of RevealEnd: claimant a ranks by
// PoolDraw(value, job, task, a), lowest first, and the next ones are the
// task's backups. No claimant knew that value when it claimed (it is made
// after RevealEnd's block is decided, package beacon), so neither
// claiming first nor proposing the block that orders the claims wins a
// slot; a cartel wins the r slots of a task only as often as its share of
// the claimants draws them. Before AppVersion 8 the r-th claim awarded a
// task at once to the first r in block order.
//
// The close waits for the value: it is final at most beacon.Timeout
// blocks after RevealEnd (PoolDrawWait, which a pool job's life
// includes), a block after it when every validator reveals on time.

// PoolDrawWait is the most a pool job's close can wait for its beacon
// value, added to its life.
const PoolDrawWait = beacon.Timeout + 1

// PoolDraw is claimant's draw for task stage of job: sha256("ogpu/pool/v1"
// | value | job | stage | claimant). The r lowest win.
func PoolDraw(value types.Hash, job uint64, stage uint16, claimant types.Address) types.Hash {
	h := sha256.New()
	h.Write([]byte("ogpu/pool/v1"))
	h.Write(value[:])
	h.Write(be64(job))
	h.Write(be16(stage))
	h.Write(claimant[:])
	return types.Hash(h.Sum(nil))
}

// poolDrawReady reports whether j's close can run now: an auction always;
// a pool job once the beacon value of its last claim height is final,
// else its close moves to the next block.
func (k *Keeper) poolDrawReady(j *Job) bool {
	if j.Mode != ModePool {
		return true
	}
	if _, ok := beacon.Value(k.kv, j.RevealEnd); ok {
		return true
	}
	k.schedule(k.ctx.Height+1, j.ID, stageNone, deadlineClose)
	return false
}
