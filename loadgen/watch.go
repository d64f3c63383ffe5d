package loadgen

import (
	"context"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// watcher reads every block after the start from the first endpoint: it
// counts the run's transactions in them (committed), block times and
// sizes, and moves the jobs on.
func (r *run) watcher(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var prev time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		top, err := r.watch.CommittedHeight(ctx)
		if err != nil {
			continue
		}
		r.mu.Lock()
		next := r.height + 1
		r.mu.Unlock()
		for h := next; h <= top; h++ {
			blk, err := r.watch.RPC.Block(ctx, &h)
			if err != nil {
				break
			}
			res, err := r.watch.RPC.BlockResults(ctx, &h)
			if err != nil {
				break
			}
			if prev.IsZero() && h > 1 {
				hp := h - 1
				if b0, err := r.watch.RPC.Block(ctx, &hp); err == nil {
					prev = b0.Block.Time
				}
			}
			t := blk.Block.Time
			r.mu.Lock()
			r.height = h
			txs := len(blk.Block.Txs)
			if txs > 0 && chain.IsInjected(blk.Block.Txs[0]) {
				txs-- // the validators' vote extensions
			}
			r.st.blocks = append(r.st.blocks, blockStat{height: h, time: t, interval: t.Sub(prev), txs: txs})
			prev = t
			for i, tx := range blk.Block.Txs {
				if i >= len(res.TxResults) {
					break
				}
				r.seen(types.TxHash(tx), res.TxResults[i], h)
			}
			r.tidy(h)
			for j := range r.jobs {
				r.advance(j)
			}
			r.mu.Unlock()
		}
	}
}

// seen handles one transaction of block h. Called with mu held.
func (r *run) seen(hash []byte, res *abci.ExecTxResult, h int64) {
	var ev *market.EventJobPosted
	if res.Code == 0 {
		for _, e := range res.Events {
			if e.Type == (market.EventJobPosted{}).EventType() {
				var p market.EventJobPosted
				if types.DecodeEvent(e, &p) == nil {
					ev = &p
				}
				break
			}
		}
	}
	s, ok := r.pending[string(hash)]
	if !ok {
		// Not (yet) known: another sender's, or one of the run's whose
		// Submit has not returned yet (worker looks here).
		r.early[string(hash)] = earlyTx{code: res.Code, height: h, jobEv: ev}
		return
	}
	delete(r.pending, string(hash))
	r.committed(s.in, res.Code, h, ev)
}

// tidy forgets early entries no Submit claimed, and counts accepted
// transactions that no block holds lostAfter blocks later as dropped (the
// mempool evicted them on recheck, or they are stuck). Called with mu held.
func (r *run) tidy(h int64) {
	for k, e := range r.early {
		if h-e.height > lostAfter {
			r.st.foreign++
			delete(r.early, k)
		}
	}
	for k, s := range r.pending {
		if h-s.height > lostAfter {
			delete(r.pending, k)
			r.st.dropped++
			r.st.errors[s.in.kind+" accepted, then in no block "+itoa(lostAfter)+" blocks later (a recheck dropped it: its window passed, or an earlier nonce of its sender was dropped)"]++
			r.resolve(s.in, false, nil)
		}
	}
}
