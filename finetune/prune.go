package finetune

import (
	"bytes"

	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ogpu-network/ogpu/store"
)

// PruneJob deletes every record this package keeps for job: its games,
// their sealed and opened verdict votes, its brackets, and the queued
// deadline of a game not yet decided (the market prunes only final jobs,
// whose games are all decided, so there is none; deleting it keeps the
// queue consistent all the same). The market calls it when it prunes a
// final job (market prune.go). Keys are fixed-width, so job 1's prefix is
// no prefix of job 10's or 256's.
func PruneJob(kv store.KV, job uint64) {
	var keys [][]byte
	store.IteratePrefix(kv, append([]byte{prefixGame}, be64(job)...), func(key, value []byte) bool {
		keys = append(keys, bytes.Clone(key))
		var g Game
		if err := rlp.DecodeBytes(value, &g); err == nil && g.Status != StatusDecided {
			keys = append(keys, DueKey(g.Deadline, g.Job, g.Stage, g.Match))
		}
		return false
	})
	for _, p := range []byte{prefixSealed, prefixOpened, prefixBracket} {
		store.IteratePrefix(kv, append([]byte{p}, be64(job)...), func(key, _ []byte) bool {
			keys = append(keys, bytes.Clone(key))
			return false
		})
	}
	for _, key := range keys {
		kv.Delete(key)
	}
}
