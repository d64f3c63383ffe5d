package chain

import (
	"crypto/sha256"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// The signature cache.
//
// CheckTx, the mempool's recheck after every block, PrepareProposal and
// FinalizeBlock each run every check of a transaction, and the costliest
// is the secp256k1 recovery of its signature (about half the CPU of a
// block of transfers, measured in issue 17). The App keeps the
// transactions whose signature verified, by the sha256 of their bytes, so
// that each is recovered once on a node.
//
// It is not state and cannot make nodes differ: a transaction's bytes
// hold its body (sender included) and its signature, so a hit answers
// exactly what verifying again would. It also keeps each transaction
// decoded (types.DecodeTx of those bytes, read only after), so that a
// transaction is decoded once on a node too. Only successes are kept (a bad
// signature is refused after the cheap checks every time, as before).
// It is bounded: a ring of sigCacheSize entries, the oldest forgotten
// first, about 2.5 MB.
//
// A block's signatures are verified in parallel before it runs (prewarm,
// from ProcessProposal, PrepareProposal and FinalizeBlock): a pure
// function of each transaction's bytes whose only effect is to fill the
// cache; the transactions still execute one after another, in order, and
// read nothing but "these exact bytes verified".
type sigCache struct {
	seen *ringMap[*types.Tx]
	// recoveries counts the signature recoveries decodeVerified made.
	recoveries atomic.Int64
}

// sigCacheSize bounds the cache: several blocks and a full mempool.
const sigCacheSize = 1 << 16

func newSigCache() *sigCache {
	return &sigCache{seen: newRingMap[*types.Tx](sigCacheSize)}
}

// keepDecoded bounds the transactions kept decoded (a transfer is about
// 150 bytes): larger ones are kept as verified only, so the cache stays
// within sigCacheSize × keepDecoded bytes of decoded transactions.
const keepDecoded = 2048

// verifiedOnly marks a verified transaction not kept decoded.
var verifiedOnly = new(types.Tx)

// get reports whether the bytes hashing to k verified and returns them
// decoded when kept (nil otherwise). The transaction is shared: callers
// only read it.
func (c *sigCache) get(k [32]byte) (tx *types.Tx, ok bool) {
	tx, ok = c.seen.get(k)
	if tx == verifiedOnly {
		tx = nil
	}
	return tx, ok
}

func (c *sigCache) has(k [32]byte) bool { _, ok := c.get(k); return ok }

// add keeps tx, decoded from the size bytes hashing to k, as verified.
func (c *sigCache) add(k [32]byte, size int, tx *types.Tx) {
	if size > keepDecoded {
		tx = verifiedOnly
	}
	c.seen.put(k, tx, false)
}

// decodeVerified decodes bz and verifies its signature into the cache;
// nothing is kept for bytes that do not decode or do not verify.
func (c *sigCache) decodeVerified(k [32]byte, bz []byte) {
	if tx, err := types.DecodeTx(bz); err == nil {
		c.verifyDecoded(k, len(bz), tx)
	}
}

// verifyDecoded verifies tx, decoded from the size bytes hashing to k,
// into the cache.
func (c *sigCache) verifyDecoded(k [32]byte, size int, tx *types.Tx) {
	c.recoveries.Add(1)
	if tx.VerifySignature() == nil {
		c.add(k, size, tx)
	}
}

// prewarm verifies the signatures of txs not yet in the cache on all
// CPUs and keeps those that verify. Bytes that do not decode are left to
// runTx, which refuses them with its own message.
func (c *sigCache) prewarm(txs [][]byte) {
	todo := make(chan []byte, len(txs))
	for _, bz := range txs {
		if !c.has(sha256.Sum256(bz)) {
			todo <- bz
		}
	}
	close(todo)
	workers := min(runtime.GOMAXPROCS(0), len(todo))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for bz := range todo {
				c.decodeVerified(sha256.Sum256(bz), bz)
			}
		})
	}
	wg.Wait()
}

// PreverifyTx verifies the signature of the transaction encoded as bz into
// the signature cache, if it decodes and is not cached yet. It may run
// concurrently with every ABCI call (node.NewClientCreator runs it before
// CheckTx takes its mutex), so that CheckTx finds the costly recovery
// done. It changes no answer: a transaction whose signature does not
// verify is not cached, and CheckTx refuses it as before. The mempool has
// refused bytes over its max_tx_bytes before this runs.
//
// The cheap checks still come first, as in runTx: a transaction whose
// sender cannot pay its fee, or whose nonce was used, in the last
// committed state gets no recovery here (CheckTx then refuses it before
// its own), so a stranger's unfunded or replayed transactions cost the
// node a decode and two reads, not a secp256k1 recovery.
//
// Those reads take no checkMu: they read the last saved version through
// the tree's reader (a.committed), not the mempool's view, which CheckTx
// holds checkMu to change for every transaction; only the short writes
// into the IAVL tree (treeMu) exclude them. Reading it under checkMu made
// every submitting goroutine queue behind the CheckTx of others before
// its recovery could start, and left a core idle (issue 17: the mempool
// took 14,000 transfers a second on 2 cores with 0.8 of a core unused).
// The filter is as strong against a stranger: the view differs from the
// saved version only by the mempool's own transactions, whose exact bytes
// CometBFT's cache refuses before this runs, and a forged transaction
// passes either filter by naming the next nonce of a funded sender, then
// fails CheckTx's recovery. The saved version is not pruned under it:
// Commit takes treeMu, and CometBFT holds its mempool lock (the one
// CheckTx, and so this, runs under) through Commit anyway.
func (a *App) PreverifyTx(bz []byte) {
	k := sha256.Sum256(bz)
	if a.sigs.has(k) {
		return
	}
	tx, err := types.DecodeTx(bz)
	if err != nil || tx.Body.Fee == nil {
		return
	}
	var used, poor bool
	// The read lock before the pointer: Commit replaces it (and prunes the
	// version it pointed to) under treeMu, so the version read here is the
	// one saved last, not one being pruned.
	a.treeMu.RLock()
	snap := a.committed.Load()
	if snap != nil {
		used, poor = cheapRefusal(snap, tx)
	}
	a.treeMu.RUnlock()
	if snap == nil {
		a.checkMu.Lock()
		used, poor = cheapRefusal(a.check, tx)
		a.checkMu.Unlock()
	}
	if used || poor {
		return
	}
	a.sigs.verifyDecoded(k, len(bz), tx)
}

// cheapRefusal says whether kv refuses tx before its signature: its nonce
// was used, or its sender cannot pay its fee.
func cheapRefusal(kv store.KV, tx *types.Tx) (used, poor bool) {
	used = tx.Body.Nonce < getNonce(kv, tx.Body.From)
	poor = escrow.NewKeeper(kv).Balance(tx.Body.From).Lt(tx.Body.Fee)
	return used, poor
}
