package agent

import (
	"testing"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
)

// TestVoteSaltDerived: a salt is the same for the same key and vote (a
// restarted agent opens its seal) and differs with any of them: another
// key (another validator cannot compute it), another question or answer,
// a later vote on the same question (its deadline).
func TestVoteSaltDerived(t *testing.T) {
	k1, _ := ethcrypto.GenerateKey()
	k2, _ := ethcrypto.GenerateKey()
	a, b := []byte("answer a"), []byte("answer b")
	base := voteSalt(k1, "dispute", a, 7, 0, 90)
	if voteSalt(k1, "dispute", a, 7, 0, 90) != base {
		t.Fatal("the same key and vote gave two salts")
	}
	for what, other := range map[string][32]byte{
		"another key":    voteSalt(k2, "dispute", a, 7, 0, 90),
		"another kind":   voteSalt(k1, "session", a, 7, 0, 90),
		"another answer": voteSalt(k1, "dispute", b, 7, 0, 90),
		"another job":    voteSalt(k1, "dispute", a, 8, 0, 90),
		"another stage":  voteSalt(k1, "dispute", a, 7, 1, 90),
		"another vote":   voteSalt(k1, "dispute", a, 7, 0, 91),
		"a field more":   voteSalt(k1, "dispute", a, 7, 0, 90, 0),
	} {
		if other == base {
			t.Errorf("%s gave the same salt", what)
		}
	}
}
