package bridge

import (
	"bytes"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
)

func addr(b byte) common.Address { return common.BytesToAddress([]byte{b}) }

// TestNewValsetNormalizes: powers are scaled to sum at most 2^32 − 1 (the
// contract stores uint32s and sums in uint256), members sorted by address,
// a power that rounds to zero dropped (the contract refuses zero powers).
func TestNewValsetNormalizes(t *testing.T) {
	vs, ok := NewValset(0, []Weighted{{addr(3), 1}})
	if !ok || vs.Total() != maxNormalized {
		t.Fatalf("one validator: %+v", vs)
	}
	huge := uint64(1) << 62
	vs, ok = NewValset(7, []Weighted{{addr(9), huge}, {addr(2), huge}, {addr(5), 1}})
	if !ok || vs.Nonce != 7 || len(vs.Members) != 2 || vs.Members[0].Addr != addr(2) || vs.Total() > maxNormalized {
		t.Fatalf("normalized: %+v", vs)
	}
	if err := vs.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, ok := NewValset(0, nil); ok {
		t.Fatal("an empty set")
	}
}

// TestMoved: a member joining or leaving is a change whatever the power; a
// power shift is measured in basis points of 2^32.
func TestMoved(t *testing.T) {
	a, _ := NewValset(0, []Weighted{{addr(1), 50}, {addr(2), 50}})
	b, _ := NewValset(0, []Weighted{{addr(1), 51}, {addr(2), 49}})
	if diff, changed := moved(a, b); changed || diff < 190 || diff > 210 {
		t.Fatalf("1%% of power each way: diff %d bps, changed %v; want ~200 bps, unchanged", diff, changed)
	}
	c, _ := NewValset(0, []Weighted{{addr(1), 50}, {addr(3), 50}})
	if _, changed := moved(a, c); !changed {
		t.Fatal("a member replaced is not a change")
	}
}

// TestKeyDigestIsNotAWithdrawal: a proof of possession can never be
// replayed as a withdrawal or checkpoint signature (different digests).
func TestKeyDigestIsNotAWithdrawal(t *testing.T) {
	k, _ := crypto.GenerateKey()
	op := addr(1)
	d := Domain(1, addr(2), "c")
	if KeyDigest("c", op) == WithdrawDigest(d, 1, op, uint256.NewInt(1)) {
		t.Fatal("digests collide")
	}
	s, _ := ProveKey(k, "c", op)
	if got, _ := s.Signer(KeyDigest("c", op)); got != crypto.PubkeyToAddress(k.PublicKey) {
		t.Fatal("proof does not recover")
	}
	if got, _ := s.Signer(KeyDigest("other-chain", op)); got == crypto.PubkeyToAddress(k.PublicKey) {
		t.Fatal("a proof for one chain recovers on another")
	}
	// High s is refused, as the contract refuses it.
	var high Sig
	copy(high[:], s[:])
	n := crypto.S256().Params().N
	sv := new(uint256.Int).SetBytes(s[32:64])
	hs := new(uint256.Int).Sub(uint256.MustFromBig(n), sv)
	b := hs.Bytes32()
	copy(high[32:64], b[:])
	high[64] ^= 1
	if _, err := high.Signer(KeyDigest("c", op)); err == nil {
		t.Fatal("a high-s signature was accepted")
	}
}

func FuzzDecodeExtension(f *testing.F) {
	f.Add((&Extension{Deposits: []Deposit{{Nonce: 1, From: addr(1), Recipient: addr(2), Amount: uint256.NewInt(5)}}}).Encode())
	f.Add((&Extension{Withdrawals: []NonceSig{{Nonce: 3}}, Executed: []Executed{{Nonce: 2, To: addr(4), Amount: uint256.NewInt(1)}}}).Encode())
	f.Add([]byte{1, 0xc0})
	f.Fuzz(func(t *testing.T, bz []byte) {
		e, err := DecodeExtension(bz)
		if err != nil {
			return
		}
		// What decodes is within the limits and re-encodes to the same bytes
		// (empty: no bytes), so every node reads one extension one way.
		if len(e.Deposits) > MaxDeposits || len(e.Withdrawals) > MaxSigs {
			t.Fatal("limits not enforced")
		}
		if re := e.Encode(); !bytes.Equal(re, bz) && !(e.Empty() && len(re) == 0) {
			t.Fatalf("re-encoding differs: %x vs %x", re, bz)
		}
	})
}
