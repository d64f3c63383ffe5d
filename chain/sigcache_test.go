package chain

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
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
	if c.has(sha256.Sum256(fbz)) || c.has(sha256.Sum256(rbz)) || len(c.seen) != 1 {
		t.Fatalf("refused transactions were remembered: %d entries", len(c.seen))
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
	if c.has(sha256.Sum256(badBz)) || len(c.seen) != 20 {
		t.Fatalf("%d entries; a bad signature was kept", len(c.seen))
	}
	c.prewarm(block) // all known: nothing to do
	if len(c.seen) != 20 {
		t.Fatalf("%d entries after a second prewarm", len(c.seen))
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
	if len(c.seen) != sigCacheSize || len(c.ring) != sigCacheSize {
		t.Fatalf("%d entries, %d in the ring; want %d", len(c.seen), len(c.ring), sigCacheSize)
	}
	if c.has(key(0)) || c.has(key(9)) || !c.has(key(10)) || !c.has(key(sigCacheSize+9)) {
		t.Fatal("the oldest entries were not the ones forgotten")
	}
}
