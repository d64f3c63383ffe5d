package finetune

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/ogpu-network/ogpu/types"
)

// checkpoints are n made-up checkpoint hashes drawn from seed.
func checkpoints(n int, seed uint64) []types.Hash {
	out := make([]types.Hash, n)
	for i := range out {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], seed)
		binary.BigEndian.PutUint64(b[8:], uint64(i))
		out[i] = sha256.Sum256(b[:])
	}
	return out
}

// naiveRoot is RFC 6962's MTH written from the RFC's recursion, with the
// leaf-count tag, to check Root against a second reading of the spec.
func naiveRoot(hs []types.Hash) types.Hash {
	var mth func(lo, hi int) types.Hash
	mth = func(lo, hi int) types.Hash {
		if hi-lo == 1 {
			return LeafHash(uint64(lo), hs[lo])
		}
		k := 1
		for k*2 < hi-lo {
			k *= 2
		}
		return nodeHash(mth(lo, lo+k), mth(lo+k, hi))
	}
	return rootHash(uint64(len(hs)), mth(0, len(hs)))
}

// TestTreeEveryLeafVerifies: for every leaf count up to 70 and every
// leaf, Prove's path verifies against Root, has the length ProofLen
// fixes (at most ⌈log2 n⌉), and Root agrees with the RFC's recursion.
func TestTreeEveryLeafVerifies(t *testing.T) {
	for n := 1; n <= 70; n++ {
		hs := checkpoints(n, uint64(n))
		root := Root(hs)
		if root != naiveRoot(hs) {
			t.Fatalf("n=%d: Root differs from the RFC 6962 recursion", n)
		}
		depth := 0
		for 1<<depth < n {
			depth++
		}
		for k := range n {
			p := Prove(hs, uint64(k))
			if len(p) != ProofLen(uint64(n), uint64(k)) || len(p) > depth {
				t.Fatalf("n=%d k=%d: proof of %d hashes, ProofLen %d, depth %d", n, k, len(p), ProofLen(uint64(n), uint64(k)), depth)
			}
			if !Verify(root, uint64(n), uint64(k), hs[k], p) {
				t.Fatalf("n=%d k=%d: a true opening does not verify", n, k)
			}
		}
	}
}

// TestTreeForgeriesFail: a flipped bit anywhere (the hash, a proof
// element, the root), a wrong index, a wrong leaf count, a proof too long
// or too short, and an inner node opened as a leaf are all refused.
func TestTreeForgeriesFail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		n := 2 + rng.IntN(200)
		hs := checkpoints(n, rng.Uint64())
		root := Root(hs)
		k := uint64(rng.IntN(n))
		h, p := hs[k], Prove(hs, k)
		un := uint64(n)

		bad := h
		bad[rng.IntN(32)] ^= 1 << rng.IntN(8)
		if Verify(root, un, k, bad, p) {
			t.Fatalf("n=%d k=%d: a flipped bit in the hash verifies", n, k)
		}
		if len(p) > 0 {
			q := append([]types.Hash(nil), p...)
			i := rng.IntN(len(q))
			q[i][rng.IntN(32)] ^= 1 << rng.IntN(8)
			if Verify(root, un, k, h, q) {
				t.Fatalf("n=%d k=%d: a flipped bit in proof element %d verifies", n, k, i)
			}
		}
		r2 := root
		r2[rng.IntN(32)] ^= 1 << rng.IntN(8)
		if Verify(r2, un, k, h, p) {
			t.Fatalf("n=%d k=%d: a flipped bit in the root verifies", n, k)
		}
		for _, k2 := range []uint64{k + 1, k - 1, k ^ 1, un, un + 5} {
			if k2 != k && Verify(root, un, k2, h, p) {
				t.Fatalf("n=%d: leaf %d's opening verifies as leaf %d", n, k, k2)
			}
		}
		for _, n2 := range []uint64{un - 1, un + 1, 2 * un, 0} {
			if Verify(root, n2, k, h, p) {
				t.Fatalf("n=%d k=%d: the opening verifies in a tree of %d leaves", n, k, n2)
			}
		}
		if Verify(root, un, k, h, append(append([]types.Hash(nil), p...), types.Hash{})) {
			t.Fatalf("n=%d k=%d: a proof with an extra element verifies", n, k)
		}
		if len(p) > 0 && Verify(root, un, k, h, p[:len(p)-1]) {
			t.Fatalf("n=%d k=%d: a truncated proof verifies", n, k)
		}
	}
}

// TestTreeNodeIsNotALeaf: the inner node over leaves 0 and 1 of an
// 8-leaf tree, opened as leaf 0 with the path above it (as if the tree had
// 4 leaves, or padded to the right length), does not verify: leaves and
// nodes hash under different prefixes, and the root commits to n.
func TestTreeNodeIsNotALeaf(t *testing.T) {
	hs := checkpoints(8, 9)
	root := Root(hs)
	p := Prove(hs, 0)
	inner := nodeHash(LeafHash(0, hs[0]), LeafHash(1, hs[1]))
	if p[0] != LeafHash(1, hs[1]) {
		t.Fatal("test setup: the first path element is not leaf 1")
	}
	for _, n := range []uint64{4, 8} {
		if Verify(root, n, 0, inner, p[1:]) {
			t.Fatalf("an inner node opens as leaf 0 of %d leaves", n)
		}
	}
	if Verify(root, 8, 0, inner, append([]types.Hash{{}}, p[1:]...)) {
		t.Fatal("an inner node opens as leaf 0 with a padded proof")
	}
	// The node's own preimage under the leaf prefix is not the node.
	if LeafHash(0, inner) == inner {
		t.Fatal("leaf and node hashes collide")
	}
}

// FuzzVerify: for any leaf count, index and leaves, the true opening
// verifies and the opening of any other index with the same proof fails.
func FuzzVerify(f *testing.F) {
	f.Add(uint16(2), uint16(0), uint64(1))
	f.Add(uint16(7), uint16(6), uint64(2))
	f.Add(uint16(1000), uint16(513), uint64(3))
	f.Fuzz(func(t *testing.T, n16, k16 uint16, seed uint64) {
		n := uint64(n16%2048) + 1
		k := uint64(k16) % n
		hs := checkpoints(int(n), seed)
		root, p := Root(hs), Prove(hs, k)
		if !Verify(root, n, k, hs[k], p) {
			t.Fatalf("n=%d k=%d: true opening refused", n, k)
		}
		if k2 := (k + 1) % n; k2 != k && Verify(root, n, k2, hs[k], p) {
			t.Fatalf("n=%d: leaf %d opens as %d", n, k, k2)
		}
		if Verify(root, n+1, k, hs[k], p) {
			t.Fatalf("n=%d k=%d: opens in n+1", n, k)
		}
	})
}

// TestRootOf: the generic root of a named 32-byte hash type is Root's.
func TestRootOf(t *testing.T) {
	type other [32]byte
	hs := []types.Hash{{1}, {2}, {3}}
	os := []other{{1}, {2}, {3}}
	if RootOf(os) != Root(hs) {
		t.Fatal("RootOf differs from Root over the same bytes")
	}
	if RootOf(os[:2]) == Root(hs) {
		t.Fatal("RootOf ignores the leaf count")
	}
}
