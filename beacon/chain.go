package beacon

import "github.com/ogpu-network/ogpu/types"

// Chain is a validator's own hash chain, computed from its secret seed:
// At(0) = H^N(seed) is the tip it registers, At(i) = H^(N−i)(seed) its
// value i heights after the registration. It keeps every stride-th value
// (sqrt(N) of them), so At costs at most stride hashes. Off-chain code
// (the node's vote extensions) uses it; the state machine never does.
type Chain struct {
	n, stride uint64
	marks     []types.Hash // marks[j] = H^(j·stride)(seed)
}

// NewChain computes the chain of length n over seed (n hashes, once).
func NewChain(seed types.Hash, n uint64) *Chain {
	stride := uint64(1)
	for stride*stride < n {
		stride++
	}
	c := &Chain{n: n, stride: stride}
	x := seed
	for i := uint64(0); i <= n; i++ {
		if i%stride == 0 {
			c.marks = append(c.marks, x)
		}
		if i < n {
			x = Hash(x)
		}
	}
	return c
}

// Len is N.
func (c *Chain) Len() uint64 { return c.n }

// At is the value i heights after the registration (0 ≤ i ≤ N), H^(N−i)(seed).
func (c *Chain) At(i uint64) types.Hash {
	k := c.n - i // hashes from the seed
	x := c.marks[k/c.stride]
	for j := uint64(0); j < k%c.stride; j++ {
		x = Hash(x)
	}
	return x
}

// Tip is At(0), what a registration publishes.
func (c *Chain) Tip() types.Hash { return c.At(0) }
