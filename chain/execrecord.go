package chain

import (
	"crypto/sha256"

	"github.com/ogpu-network/ogpu/escrow"
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
type execRecord struct {
	reads, writes []store.Access
	res           txResult
}

// execRecordSize bounds the records: a full block and the mempool behind
// it, at a few hundred bytes each.
const execRecordSize = 1 << 14

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
	res := a.execTxRecorded(kv, env, bz, atomic)
	escrow.NewKeeper(kv).AddFee(res.fee)
	return res
}

// execTxRecorded is runTxRecorded but for the fee pool (execTx): the
// records leave it out.
func (a *App) execTxRecorded(kv store.KV, env blockEnv, bz []byte, atomic bool) txResult {
	if a.execs == nil || len(bz) > keepDecoded {
		return a.execTx(kv, env, bz, atomic)
	}
	k := sha256.Sum256(bz)
	if r, ok := a.execs.get(k); ok && store.ReadsMatch(kv, r.reads) {
		store.Apply(kv, r.writes)
		return r.res
	}
	tx, _ := a.sigs.get(k)
	if tx == nil || !reusable(tx) {
		return a.execTx(kv, env, bz, atomic)
	}
	rec := store.NewRecorder(kv)
	res := a.execTx(rec, env, bz, atomic)
	if res.stage == stageOK && !rec.Iterated() {
		a.execs.put(k, &execRecord{reads: rec.Reads(), writes: rec.Writes(), res: res}, true)
	}
	return res
}
