package chain

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// signedTx is a signed transfer's bytes and decoded form.
func signedTx(t *testing.T, nonce uint64) ([]byte, *types.Tx) {
	t.Helper()
	key, _ := ethcrypto.GenerateKey()
	tx := &types.Tx{Body: types.TxBody{ChainID: "sig-test", Nonce: nonce, Fee: uint256.NewInt(1),
		Msgs: []types.RawMsg{(&escrow.MsgSend{To: types.Address{1}, Amount: uint256.NewInt(1)}).Raw()}}}
	if err := tx.Sign(key); err != nil {
		t.Fatal(err)
	}
	bz, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return bz, tx
}

// The cache answers for exactly the bytes that verified: a transaction
// whose signature was swapped for a bad one, or whose body changed under
// a good signature, is verified afresh and refused, however often its
// honest twin was seen; refusals are never remembered.
func TestSigCacheAnswersOnlyForTheVerifiedBytes(t *testing.T) {
	c := newSigCache()
	bz, tx := signedTx(t, 0)
	for range 2 {
		if err := c.verify(bz, tx); err != nil {
			t.Fatal(err)
		}
	}
	if !c.has(sha256.Sum256(bz)) {
		t.Fatal("a verified transaction is not remembered")
	}
	// Same body, a signature by another key.
	forged := *tx
	other, _ := ethcrypto.GenerateKey()
	h, _ := tx.Body.SignHash()
	forged.Sig, _ = ethcrypto.Sign(h[:], other)
	fbz, _ := forged.Encode()
	for range 2 {
		if err := c.verify(fbz, &forged); !errors.Is(err, types.ErrBadSignature) {
			t.Fatalf("a forged signature over a cached body: %v", err)
		}
	}
	// Another body (another nonce) under the cached signature.
	replayed := *tx
	replayed.Body.Nonce = 7
	rbz, _ := replayed.Encode()
	if err := c.verify(rbz, &replayed); !errors.Is(err, types.ErrBadSignature) {
		t.Fatalf("a cached signature on another body: %v", err)
	}
	if c.has(sha256.Sum256(fbz)) || c.has(sha256.Sum256(rbz)) || c.seen.len() != 1 {
		t.Fatalf("refused transactions were remembered: %d entries", c.seen.len())
	}
}

// prewarm verifies a block's good signatures and skips garbage, bad
// signatures and what it already holds.
func TestSigCachePrewarm(t *testing.T) {
	c := newSigCache()
	var txs [][]byte
	for i := range 20 {
		bz, _ := signedTx(t, uint64(i))
		txs = append(txs, bz)
	}
	_, tx := signedTx(t, 99)
	tx.Sig[10] ^= 1
	badBz, _ := tx.Encode()
	block := append(append(txs[:10:10], []byte("not a transaction"), badBz), txs[10:]...)
	c.prewarm(block)
	for i, bz := range txs {
		if !c.has(sha256.Sum256(bz)) {
			t.Fatalf("tx %d was not prewarmed", i)
		}
	}
	if c.has(sha256.Sum256(badBz)) || c.seen.len() != 20 {
		t.Fatalf("%d entries; a bad signature was kept", c.seen.len())
	}
	c.prewarm(block) // all known: nothing to do
	if c.seen.len() != 20 {
		t.Fatalf("%d entries after a second prewarm", c.seen.len())
	}
}

// The cache is bounded: past sigCacheSize entries the oldest goes first.
func TestSigCacheIsBounded(t *testing.T) {
	c := newSigCache()
	key := func(i uint64) [32]byte {
		return sha256.Sum256(binary.BigEndian.AppendUint64(nil, i))
	}
	for i := range uint64(sigCacheSize + 10) {
		c.add(key(i), 100, &types.Tx{})
	}
	if c.seen.len() != sigCacheSize || len(c.seen.ring) != sigCacheSize {
		t.Fatalf("%d entries, %d in the ring; want %d", c.seen.len(), len(c.seen.ring), sigCacheSize)
	}
	if c.has(key(0)) || c.has(key(9)) || !c.has(key(10)) || !c.has(key(sigCacheSize+9)) {
		t.Fatal("the oldest entries were not the ones forgotten")
	}
}

// verify is tx.VerifySignature for the transaction encoded as bz,
// answered from the cache when these bytes verified before (the path
// runTx takes).
func (c *sigCache) verify(bz []byte, tx *types.Tx) error {
	k := sha256.Sum256(bz)
	if c.has(k) {
		return nil
	}
	if err := tx.VerifySignature(); err != nil {
		return err
	}
	c.add(k, len(bz), tx)
	return nil
}

// A spammer's transactions cost no recovery before the cheap checks: the
// mempool's CheckTx refuses a sender who cannot pay the fee, or a used
// nonce, before it verifies a signature, and PreverifyTx (which runs
// before CheckTx, on every RPC and peer goroutine) must not undo that by
// recovering first. An unfunded stranger's transfer and a replay of a
// spent nonce get none; a funded sender's next transaction gets one, once.
func TestPreverifySkipsWhatCheapChecksRefuse(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	h.block(h.tx("alice", send("bob", types.OGPU(1))))
	spent := signTx(t, testKey("alice"), 0, send("bob", types.OGPU(1)))
	h.app.sigs.recoveries.Store(0) // the block's own
	for i := range 20 {
		stranger := signTx(t, testKey(fmt.Sprint("stranger ", i)), 0, send("bob", types.OGPU(1)))
		h.app.PreverifyTx(stranger)
		h.app.PreverifyTx(spent)
		if r := h.checkTx(stranger); r.Code != types.CodeOf(types.ErrInsufficientFunds) {
			t.Fatalf("an unfunded sender's transfer: code %d: %s", r.Code, r.Log)
		}
	}
	if n := h.app.sigs.recoveries.Load(); n != 0 {
		t.Fatalf("%d signature recoveries for transactions the cheap checks refuse", n)
	}
	next := signTx(t, testKey("alice"), 1, send("bob", types.OGPU(1)))
	h.app.PreverifyTx(next)
	h.app.PreverifyTx(next)
	if n := h.app.sigs.recoveries.Load(); n != 1 {
		t.Fatalf("%d recoveries for a payable transaction preverified twice, want 1", n)
	}
	if r := h.checkTx(next); r.Code != 0 {
		t.Fatal(r.Log)
	}
}

// PreverifyTx's cheap checks read the last saved version, not the
// mempool's view, and so take no lock: a recovery starts while CheckTx
// holds checkMu (it does, for every transaction it admits). Under checkMu
// the submitting goroutines queued behind each other's CheckTx before
// their recoveries could start, and a core stayed idle (issue 17). The
// checks still refuse what the saved version refuses: an unfunded
// stranger and a nonce the chain has used get no recovery while checkMu
// is held either.
func TestPreverifyTakesNoLock(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	h.block(h.tx("alice", send("bob", types.OGPU(1))))
	spent := signTx(t, testKey("alice"), 0, send("bob", types.OGPU(1)))
	stranger := signTx(t, testKey("stranger"), 0, send("bob", types.OGPU(1)))
	next := signTx(t, testKey("alice"), 1, send("bob", types.OGPU(1)))
	h.app.sigs.recoveries.Store(0)

	h.app.checkMu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.app.PreverifyTx(spent)
		h.app.PreverifyTx(stranger)
		h.app.PreverifyTx(next)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		h.app.checkMu.Unlock()
		<-done
		t.Fatal("PreverifyTx waited for checkMu")
	}
	h.app.checkMu.Unlock()
	if n := h.app.sigs.recoveries.Load(); n != 1 {
		t.Fatalf("%d recoveries, want 1 (alice's next transfer; not her spent nonce, not the unfunded stranger)", n)
	}
	if _, verified := h.app.sigs.get(sha256.Sum256(next)); !verified {
		t.Fatal("alice's next transfer is not in the signature cache")
	}
	if r := h.checkTx(next); r.Code != 0 {
		t.Fatal(r.Log)
	}
}

// forge returns a transfer that names from as its sender at nonce but is
// signed by another key: what a stranger can make of anyone's account.
func forge(t *testing.T, from string, nonce uint64) []byte {
	t.Helper()
	tx := &types.Tx{Body: types.TxBody{ChainID: testChainID, Nonce: nonce, Fee: types.OGPU(1), Msgs: []types.RawMsg{send("mallory", types.OGPU(5))}}}
	if err := tx.Sign(testKey("mallory")); err != nil {
		t.Fatal(err)
	}
	tx.Body.From = addrOf(from)
	bz, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

// The attack the saved-version filter opens, and what it pays: a stranger
// copies the nonce of alice's transfer that waits in the mempool (the
// mempool's view would have refused it before the recovery; the saved
// version does not) and of her next one, signing with his own key. Each
// forgery costs the node one recovery, no more: it is not cached as
// verified, CheckTx refuses it (the pending nonce as used, the next one
// for its signature), alice's pending transfer and her next real one are
// untouched, and mallory gets nothing.
func TestForgedNonceCostsOneRecovery(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	h.block(h.tx("alice", send("bob", types.OGPU(1)))) // saved: alice's next nonce is 1
	pending := signTx(t, testKey("alice"), 1, send("bob", types.OGPU(1)))
	h.app.PreverifyTx(pending)
	if r := h.checkTx(pending); r.Code != 0 {
		t.Fatal(r.Log)
	}
	for _, c := range []struct {
		nonce uint64
		code  uint32
	}{{1, types.CodeOf(types.ErrNonceUsed)}, {2, types.CodeOf(types.ErrBadSignature)}} {
		forged := forge(t, "alice", c.nonce)
		h.app.sigs.recoveries.Store(0)
		h.app.PreverifyTx(forged)
		if n := h.app.sigs.recoveries.Load(); n != 1 {
			t.Fatalf("nonce %d: %d recoveries for a forgery, want 1", c.nonce, n)
		}
		if h.app.sigs.has(sha256.Sum256(forged)) {
			t.Fatalf("nonce %d: a forgery is cached as verified", c.nonce)
		}
		if r := h.checkTx(forged); r.Code != c.code {
			t.Fatalf("nonce %d: forgery answered code %d (%s), want %d", c.nonce, r.Code, r.Log, c.code)
		}
	}
	next := signTx(t, testKey("alice"), 2, send("bob", types.OGPU(1)))
	if r := h.checkTx(next); r.Code != 0 {
		t.Fatalf("alice's next transfer after the forgeries: %s", r.Log)
	}
	for i, r := range h.block(pending, next) {
		if r.Code != 0 {
			t.Fatalf("alice's transfer %d: %s", i, r.Log)
		}
	}
	if got := h.balance("mallory"); !got.IsZero() {
		t.Fatalf("mallory has %s", types.FormatAmount(got))
	}
}
