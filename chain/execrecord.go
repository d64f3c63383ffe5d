package chain

import (
	"crypto/sha256"
	"sync"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Execution records.
//
// A transaction runs in CheckTx (and each recheck), again in the
// proposer's PrepareProposal and again in FinalizeBlock: for a transfer
// that was most of the app's time on the consensus path (issue 17). A run
// of a transaction is a function of its bytes, the block it runs in and
// the state it reads. For transactions whose messages do not look at the
// block (reusable: today transfers), it is a function of the bytes and
// of the values it reads, nothing else. So the App keeps, by the sha256
// of its bytes, what a successful run read and wrote
// (store.Recorder, under the transaction's own write buffers: the reads
// are of the state it started from), and its result. A later run of the
// same bytes over a state that holds the same value at every key read
// makes the same writes and has the same result: it makes the recorded
// writes, in order, and returns the recorded result, without running.
// Any other state runs it, as before.
//
// It cannot make nodes differ: the answer is what running would give,
// and a node without the record runs it. Only successes are kept
// (stageOK: in CheckTx's all-or-nothing mode and in a block's mode they
// write and answer the same), and nothing that iterated (a range read is
// not recorded). Bounded: a ring of execRecordSize entries, each for a
// transaction of at most keepDecoded bytes. Checked by
// TestExecRecordsMatchRunning (random blocks, with and without records:
// the same app hashes and results) and the tests where a read value
// changed.
type execRecords struct {
	mu   sync.Mutex
	recs map[[32]byte]*execRecord
	ring [][32]byte
	next int
}

type execRecord struct {
	reads, writes []store.Access
	res           txResult
}

// execRecordSize bounds the records: a full block and the mempool behind
// it, at a few hundred bytes each.
const execRecordSize = 1 << 14

func newExecRecords() *execRecords {
	return &execRecords{recs: make(map[[32]byte]*execRecord, execRecordSize)}
}

func (e *execRecords) get(k [32]byte) *execRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recs[k]
}

func (e *execRecords) put(k [32]byte, r *execRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.recs[k]; ok {
		e.recs[k] = r
		return
	}
	if len(e.ring) < execRecordSize {
		e.ring = append(e.ring, k)
	} else {
		delete(e.recs, e.ring[e.next])
		e.ring[e.next] = k
		e.next = (e.next + 1) % execRecordSize
	}
	e.recs[k] = r
}

// reusable reports whether a run of tx depends on nothing but its bytes
// and the values it reads: every message is one whose handler does not
// look at the block (blockEnv). Transfers only, for now.
func reusable(tx *types.Tx) bool {
	for _, m := range tx.Body.Msgs {
		if m.Type != types.MsgTypeSend {
			return false
		}
	}
	return len(tx.Body.Msgs) > 0
}

// runTxRecorded is runTx, answered from an execution record when kv holds
// what the recorded run read, and recording a successful run of a
// reusable transaction.
func (a *App) runTxRecorded(kv store.KV, env blockEnv, bz []byte, atomic bool) txResult {
	if a.execs == nil || len(bz) > keepDecoded {
		return a.runTx(kv, env, bz, atomic)
	}
	k := sha256.Sum256(bz)
	if r := a.execs.get(k); r != nil && store.ReadsMatch(kv, r.reads) {
		store.Apply(kv, r.writes)
		return r.res
	}
	tx, _ := a.sigs.get(k)
	if tx == nil || !reusable(tx) {
		return a.runTx(kv, env, bz, atomic)
	}
	rec := store.NewRecorder(kv)
	res := a.runTx(rec, env, bz, atomic)
	if res.stage == stageOK && !rec.Iterated() {
		a.execs.put(k, &execRecord{reads: rec.Reads(), writes: rec.Writes(), res: res})
	}
	return res
}
