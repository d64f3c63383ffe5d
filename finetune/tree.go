package finetune

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"

	"github.com/ogpu-network/ogpu/types"
)

// The checkpoint tree (protocol-threats §3, rule 1).
//
// A provider that ran N optimizer steps commits to N+1 checkpoint hashes:
// h_0 is the hash of the base model's trained tensors, h_k the hash after
// step k, h_N the final hash. Leaf k is sha256(0x00 | k as 8 bytes BE |
// h_k), an inner node sha256(0x01 | left | right): the prefixes keep an
// inner node from being opened as a leaf, and the index in the leaf keeps
// h_k from being opened at another step. For a leaf count n that is not a
// power of two the tree is RFC 6962's: the left subtree holds the largest
// power of two below n leaves. So the shape, and every proof's length, is
// fixed by n alone: a proof of the wrong length for (n, k) is refused
// before any hashing. The committed root is sha256(0x02 | n(8, big-endian)
// | the RFC 6962 root), so that it commits to its leaf count too: the same
// path would otherwise verify leaf 0 in trees of 7 and 8 leaves alike.

// Domain prefixes of the tree's hashes.
const (
	leafPrefix byte = 0x00
	nodePrefix byte = 0x01
	rootPrefix byte = 0x02
)

// MaxProofLen bounds a proof's length: a tree of up to 2^40 leaves.
// Params.MaxSteps stays far below it.
const MaxProofLen = 40

// LeafHash is sha256(0x00 | k(8, big-endian) | h).
func LeafHash(k uint64, h types.Hash) types.Hash {
	var buf [1 + 8 + 32]byte
	buf[0] = leafPrefix
	binary.BigEndian.PutUint64(buf[1:9], k)
	copy(buf[9:], h[:])
	return sha256.Sum256(buf[:])
}

// nodeHash is sha256(0x01 | left | right).
func nodeHash(left, right types.Hash) types.Hash {
	var buf [1 + 32 + 32]byte
	buf[0] = nodePrefix
	copy(buf[1:33], left[:])
	copy(buf[33:], right[:])
	return sha256.Sum256(buf[:])
}

// split is the size of the left subtree of a tree of n > 1 leaves: the
// largest power of two below n.
func split(n uint64) uint64 {
	return uint64(1) << (bits.Len64(n-1) - 1)
}

// rootHash is sha256(0x02 | n(8) | tree), the committed root of a tree of
// n leaves whose RFC 6962 root is tree.
func rootHash(n uint64, tree types.Hash) types.Hash {
	var buf [1 + 8 + 32]byte
	buf[0] = rootPrefix
	binary.BigEndian.PutUint64(buf[1:9], n)
	copy(buf[9:], tree[:])
	return sha256.Sum256(buf[:])
}

// Root is the committed root of the tree over hashes (hashes[k] is h_k,
// leaf k). It panics on an empty list: a job has at least one step, so
// at least two leaves.
func Root(hashes []types.Hash) types.Hash {
	if len(hashes) == 0 {
		panic("finetune: the root of an empty checkpoint list")
	}
	return rootHash(uint64(len(hashes)), subRoot(hashes, 0))
}

// RootOf is Root over any list of 32-byte hashes (the training runtime's
// checkpoint hashes, as a provider computes them).
func RootOf[H ~[32]byte](hashes []H) types.Hash {
	hs := make([]types.Hash, len(hashes))
	for i, h := range hashes {
		hs[i] = types.Hash(h)
	}
	return Root(hs)
}

// subRoot is the root of the subtree over hashes, whose first leaf is
// leaf off.
func subRoot(hashes []types.Hash, off uint64) types.Hash {
	n := uint64(len(hashes))
	if n == 1 {
		return LeafHash(off, hashes[0])
	}
	p := split(n)
	return nodeHash(subRoot(hashes[:p], off), subRoot(hashes[p:], off+p))
}

// Prove is the audit path of leaf k in the tree over hashes, from the
// leaf's sibling up to the root's child (RFC 6962 PATH). It panics when k
// is out of range.
func Prove(hashes []types.Hash, k uint64) []types.Hash {
	if k >= uint64(len(hashes)) {
		panic("finetune: proving a leaf outside the tree")
	}
	return path(hashes, 0, k)
}

func path(hashes []types.Hash, off, k uint64) []types.Hash {
	n := uint64(len(hashes))
	if n == 1 {
		return nil
	}
	p := split(n)
	if k < p {
		return append(path(hashes[:p], off, k), subRoot(hashes[p:], off+p))
	}
	return append(path(hashes[p:], off+p, k-p), subRoot(hashes[:p], off))
}

// ProofLen is the length of every proof of leaf k in a tree of n leaves
// (0 when k is outside the tree, which no proof opens).
func ProofLen(n, k uint64) int {
	if k >= n {
		return 0
	}
	d := 0
	for n > 1 {
		p := split(n)
		if k < p {
			n = p
		} else {
			n, k = n-p, k-p
		}
		d++
	}
	return d
}

// Verify reports whether proof opens h as leaf k of the tree of n leaves
// with the given root. A proof whose length is not the one (n, k) fixes,
// an index outside the tree, or an empty tree is refused without hashing
// the proof.
func Verify(root types.Hash, n, k uint64, h types.Hash, proof []types.Hash) bool {
	if n == 0 || k >= n || len(proof) != ProofLen(n, k) {
		return false
	}
	return rootHash(n, climb(n, k, LeafHash(k, h), proof)) == root
}

// climb recomputes the root of a tree of n leaves from leaf k's hash and
// its audit path (the path's last element is the root's other child).
func climb(n, k uint64, leaf types.Hash, proof []types.Hash) types.Hash {
	if n == 1 {
		return leaf
	}
	p := split(n)
	last, rest := proof[len(proof)-1], proof[:len(proof)-1]
	if k < p {
		return nodeHash(climb(p, k, leaf, rest), last)
	}
	return nodeHash(last, climb(n-p, k-p, leaf, rest))
}
