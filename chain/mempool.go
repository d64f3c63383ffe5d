package chain

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// Block space (S1). CometBFT v1.0.1's mempool is one FIFO list with no
// priority and no lanes: a proposal reaps its head up to the block's byte
// (and, if set, gas) limit. Left alone, minimum-fee spam queued ahead of a
// result commitment delays it by (spam in the mempool) / (block) blocks, and
// a full mempool refuses it. Two local policies bound that:
//
//   - admission (CheckTx, WithMempool): ordinary transactions may fill only
//     part of the mempool, a larger part the more they pay per gas; the rest
//     is reserved for deadline transactions (deadlineMsg), which are admitted
//     up to CometBFT's own limit. A deadline message succeeds in CheckTx only
//     for a sender with the role (an assigned slot, a sealed bid, a bonded
//     validator's vote), once: they cannot be spammed.
//   - ordering (PrepareProposal): the proposer sees the whole reaped
//     mempool (consensus block.max_gas is -1, node.DefaultConsensusParams;
//     the app enforces the block gas limit itself, WithMaxBlockGas) and takes
//     deadline transactions first, then the highest fee per gas, keeping each
//     sender's transactions in nonce order.
//
// Neither changes what a block may contain beyond the gas limit, so
// ProcessProposal accepts any order, and neither reaches state.

// deadlineMsg lists the messages that meet a protocol deadline, whose
// absence the protocol punishes (a no-show slash, a forfeited deposit, a
// missed vote), and a split job's replacement order: it must land before
// the commit deadline or the job loses a replica chain, only the job's
// client may send it and at most market.MaxSplitReplacements succeed.
func deadlineMsg(t types.MsgType) bool {
	switch t {
	case types.MsgTypeCommitResult, types.MsgTypeRevealResult, types.MsgTypeReportInput,
		types.MsgTypeCommitVote, types.MsgTypeVoteDispute, types.MsgTypeRevealCanary, types.MsgTypeRevealBid,
		types.MsgTypeRevealTranscript, types.MsgTypeProveHandoff, types.MsgTypeReplaceStage:
		return true
	}
	return false
}

// txClass is what admission and ordering know of a transaction, from its
// bytes alone.
type txClass struct {
	from     types.Address
	nonce    uint64
	deadline bool         // every message is a deadline message
	gas      uint64       // params.Gas: what the block limit counts
	fee      *uint256.Int // the fee it offers
	multiple uint64       // fee / required fee, 0 when below it
}

// classify decodes bz; ok is false for bytes that are not a transaction
// with valid messages (runTx refuses them).
func classify(params genesis.Params, bz []byte) (c txClass, ok bool) {
	tx, err := types.DecodeTx(bz)
	if err != nil || len(tx.Body.Msgs) == 0 {
		return c, false
	}
	work := make([]genesis.MsgWork, len(tx.Body.Msgs))
	c.deadline = true
	for i, m := range tx.Body.Msgs {
		if _, work[i], err = decodeMsg(m); err != nil {
			return c, false
		}
		c.deadline = c.deadline && deadlineMsg(m.Type)
	}
	c.from, c.nonce, c.fee = tx.Body.From, tx.Body.Nonce, tx.Body.Fee
	if c.fee.BitLen() > 128 { // more than the supply: runTx refuses it
		c.fee = new(uint256.Int).Lsh(uint256.NewInt(1), 128)
	}
	c.gas = params.Gas(len(bz), work)
	if req := params.RequiredFee(len(bz), work); !req.IsZero() {
		m := new(uint256.Int).Div(c.fee, req)
		if m.IsUint64() {
			c.multiple = m.Uint64()
		} else {
			c.multiple = ^uint64(0)
		}
	}
	return c, true
}

// MempoolLimits are what the node's mempool and proposals hold: CometBFT's
// mempool.size, and the bytes a proposal reaps (the smaller of
// mempool.max_txs_bytes and the block's max bytes).
type MempoolLimits struct {
	Txs   int
	Bytes int64
}

// WithMempool turns on the admission policy for a mempool of these limits.
// Without it CheckTx admits every valid transaction (CometBFT's own limits
// still apply).
func WithMempool(l MempoolLimits) Option { return func(a *App) { a.pool = l } }

// WithMaxBlockGas makes proposals hold at most gas gas (params.Gas of each
// transaction): PrepareProposal stops there and ProcessProposal rejects a
// proposal above it. 0: no limit.
func WithMaxBlockGas(gas uint64) Option { return func(a *App) { a.maxBlockGas = gas } }

// WithProposalBudget bounds the time PrepareProposal spends running the
// reaped transactions to budget, measured with now: past it, the proposal
// holds what was taken and the rest stays in the mempool for the next
// block. A proposal that comes later than the consensus timeout_propose
// costs the height a round (about a second here; issue 17 measured it
// with 2,000 transfers in one proposal and 200 ms blocks). The chain
// itself reads no clock: the node passes now, and a proposal's contents
// are the proposer's choice, which ProcessProposal checks on every node.
func WithProposalBudget(budget time.Duration, now func() time.Time) Option {
	return func(a *App) { a.proposalBudget, a.now = budget, now }
}

// poolCount is what the mempool holds, as CheckTx saw it admitted since the
// last Commit (CometBFT rechecks what stays after each block, in order, so
// the counts are rebuilt each block).
type poolCount struct {
	txs   int
	bytes int64
}

// Ordinary transactions get at most ordinaryShare of the limits; the rest
// is the deadline reserve.
const (
	ordinaryShareNum, ordinaryShareDen = 3, 4
	// maxMultiple caps the fee multiple admission looks at: paying more
	// than this many times the minimum buys no more of the mempool.
	maxMultiple = 1 << 20
)

// ordinaryCap is the share of limit an ordinary transaction paying m
// times the minimum fee may fill: (3/4) * m/(m+1). At the minimum fee that
// is 3/8, at twice it 1/2, and it tends to 3/4.
func ordinaryCap(limit int64, m uint64) int64 {
	m = min(m, maxMultiple)
	share := limit / ordinaryShareDen * ordinaryShareNum
	return share / int64(m+1) * int64(m)
}

// admit reports whether the mempool has room for an ordinary transaction
// of size bytes paying m times the minimum fee, and if not, the smallest
// multiple that would get it in (0: none; wait for a block).
func (a *App) admit(size int64, m uint64) (ok bool, need uint64) {
	fits := func(m uint64) bool {
		return int64(a.ordinary.txs+1) <= ordinaryCap(int64(a.pool.Txs), m) &&
			a.ordinary.bytes+size <= ordinaryCap(a.pool.Bytes, m)
	}
	if fits(m) {
		return true, 0
	}
	for _, n := range []uint64{2, 3, 4, 8, 16, 64, 256, 1024, maxMultiple} {
		if n > m && fits(n) {
			return false, n
		}
	}
	return false, 0
}

// proposalOrder returns the indices of txs in the order a proposal takes
// them: a deadline transaction before any other, then by fee per gas
// (highest first), then by mempool order; each sender's transactions run
// in nonce order, as a sender's queue is merged by its head. Bytes that do
// not decode come last (runTx refuses them).
//
// The mempool's order is not always the nonce order: CometBFT adds a
// checked transaction in the order its callers return, and two of one
// sender's transactions checked back to back (arriving from two peers, or
// from the sender and from another node it handed them to) can be added
// the other way round. Taken in mempool order, the later nonce would be
// refused and the sender's queue would stop there for this block.
func proposalOrder(params genesis.Params, txs [][]byte) (order []int, classes []txClass) {
	classes = make([]txClass, len(txs))
	queues := make(map[types.Address]*senderQueue) // lookups only
	var heads prioHeap
	var bad []int
	for i, bz := range txs {
		c, ok := classify(params, bz)
		if !ok {
			bad = append(bad, i)
			continue
		}
		classes[i] = c
		q := queues[c.from]
		if q == nil {
			q = &senderQueue{}
			queues[c.from] = q
			heads.qs = append(heads.qs, q)
		}
		q.txs = append(q.txs, i)
	}
	for _, q := range heads.qs {
		slices.SortStableFunc(q.txs, func(a, b int) int { return cmp.Compare(classes[a].nonce, classes[b].nonce) })
	}
	heads.classes = classes
	heap.Init(&heads)
	for heads.Len() > 0 {
		q := heads.qs[0]
		order = append(order, q.txs[q.next])
		q.next++
		if q.next == len(q.txs) {
			heap.Pop(&heads)
		} else {
			heap.Fix(&heads, 0)
		}
	}
	return append(order, bad...), classes
}

type senderQueue struct {
	txs  []int // indices into the proposal's txs, in nonce order
	next int
}

// prioHeap orders sender queues by their next transaction.
type prioHeap struct {
	qs      []*senderQueue
	classes []txClass
}

func (h *prioHeap) Len() int { return len(h.qs) }
func (h *prioHeap) Less(i, j int) bool {
	a, b := h.qs[i].txs[h.qs[i].next], h.qs[j].txs[h.qs[j].next]
	ca, cb := &h.classes[a], &h.classes[b]
	if ca.deadline != cb.deadline {
		return ca.deadline
	}
	// fee_a / gas_a > fee_b / gas_b, exactly: fees are at most 2^128
	// (classify), gas below 2^63, so neither product overflows.
	x := new(uint256.Int).Mul(ca.fee, uint256.NewInt(cb.gas))
	y := new(uint256.Int).Mul(cb.fee, uint256.NewInt(ca.gas))
	if c := x.Cmp(y); c != 0 {
		return c > 0
	}
	return a < b
}
func (h *prioHeap) Swap(i, j int) { h.qs[i], h.qs[j] = h.qs[j], h.qs[i] }
func (h *prioHeap) Push(x any)    { h.qs = append(h.qs, x.(*senderQueue)) }
func (h *prioHeap) Pop() any {
	q := h.qs[len(h.qs)-1]
	h.qs = h.qs[:len(h.qs)-1]
	return q
}
