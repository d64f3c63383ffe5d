package e2e

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// The perturbations. Each leaves the net as it found it (every process
// running, no partition) and waits for the perturbed node to catch up.

// KillRestartValidator kills node i with SIGKILL, lets the others make
// blocks without it, and restarts it on the same home.
func (n *Net) KillRestartValidator(i int) {
	n.T.Helper()
	defer n.perturb(i)()
	n.recordOn("kill -9 and restart validator", i)
	n.Vals[i].Kill()
	n.Advance(3, time.Minute, n.others(i)...)
	if err := n.Vals[i].Start(); err != nil {
		n.T.Fatal(err)
	}
	n.CatchUp(i, 2*time.Minute)
}

// PartitionValidator cuts node i off from the others, lets them make
// blocks, and heals it.
func (n *Net) PartitionValidator(i int) {
	n.T.Helper()
	defer n.perturb(i)()
	n.recordOn("partition and heal validator", i)
	n.Proxy.Partition(i)
	before := n.Height(i)
	n.Advance(4, time.Minute, n.others(i)...)
	if h := n.Height(i); h > before+1 {
		n.T.Fatalf("node%d made progress while partitioned: %d -> %d (its P2P traffic bypasses the proxy)", i, before, h)
	}
	n.Proxy.Heal(i)
	n.CatchUp(i, 2*time.Minute)
}

// PauseValidator stops node i (SIGSTOP) while the others make blocks
// (past its commit deadlines: it misses their votes and proposals), then
// resumes it (SIGCONT).
func (n *Net) PauseValidator(i int) {
	n.T.Helper()
	defer n.perturb(i)()
	n.recordOn("SIGSTOP/SIGCONT validator", i)
	if err := n.Vals[i].Pause(); err != nil {
		n.T.Fatal(err)
	}
	n.Advance(4, time.Minute, n.others(i)...)
	if err := n.Vals[i].Resume(); err != nil {
		n.T.Fatal(err)
	}
	n.CatchUp(i, 2*time.Minute)
}

// others are the validators other than i.
func (n *Net) others(i int) []int {
	var o []int
	for j := range n.Vals {
		if j != i {
			o = append(o, j)
		}
	}
	return o
}

// KillProviderMidJob waits (up to within) until one of the providers holds
// a slot of a running job and has not committed its result yet, and kills
// it with SIGKILL. It returns the provider killed, or nil if no job
// reached that point in time (then nothing was done).
func (n *Net) KillProviderMidJob(within time.Duration) *Provider {
	n.T.Helper()
	deadline := time.Now().Add(within)
	byAddr := map[types.Address]*Provider{}
	for _, p := range n.Provs {
		byAddr[p.Addr] = p
	}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		jobs, err := n.Clients[n.Ref()].Jobs(ctx, "/state/running")
		cancel()
		if err == nil {
			for _, j := range jobs {
				for _, t := range j.Tasks {
					if t.Status != "executing" {
						continue
					}
					for _, s := range t.Slots {
						p := byAddr[s.Provider]
						if p == nil || s.Committed || !p.Running() {
							continue
						}
						h := n.Height(n.Ref())
						n.mu.Lock()
						n.perturbed[p.Addr] = true
						n.down[p.Addr] = append(n.down[p.Addr], span{from: h})
						n.mu.Unlock()
						n.record("kill -9 provider mid-job")
						n.T.Logf("killing %s holding job %d stage %d (uncommitted)", p.Name, j.ID, t.Stage)
						p.Kill()
						return p
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// RestartProvider starts p again from its state dir: the same account,
// the same libp2p key, its stored models; it must come back registered
// under the same peer id.
func (n *Net) RestartProvider(p *Provider) {
	n.T.Helper()
	n.record("restart provider from its state dir")
	if err := p.Start(); err != nil {
		n.T.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pv, err := n.Clients[n.Ref()].Provider(ctx, p.Addr)
		cancel()
		if err == nil && pv.PeerID != p.PeerID {
			n.T.Fatalf("%s came back with peer id %s, not its own %s: its state dir was not reused", p.Name, pv.PeerID, p.PeerID)
		}
		if err == nil && pv.Bonded != nil && !pv.Bonded.IsZero() && countLines(p.Log, "provider running") >= countLines(p.Log, "==== e2e: start") && p.Running() {
			h := n.Height(n.Ref())
			n.mu.Lock()
			if d := n.down[p.Addr]; len(d) > 0 {
				d[len(d)-1].to = h
			}
			n.mu.Unlock()
			n.T.Logf("%s serving again at height %d", p.Name, h)
			return
		}
		if !p.Running() {
			n.T.Fatalf("%s exited after its restart:\n%s", p.Name, p.Tail(3000))
		}
		if time.Now().After(deadline) {
			n.T.Fatalf("%s not bonded 2 minutes after its restart (%v)", p.Name, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// SpamResult is what a spam round sent and what the chain took.
type SpamResult struct {
	Sent     int
	Fee      *uint256.Int
	Included int // transactions the chain committed (nonces advanced)
	MaxTxs   int // most transactions in one block during the round
}

// Spam sends count transfers (of 1 wei each, to fresh addresses) at the
// minimum fee the genesis params allow, spread over the spam accounts and
// node0 and node1, and waits until every one is committed: a
// full mempool may delay spam, it must not lose or reorder an account's
// transactions.
func (n *Net) Spam(count int, within time.Duration) SpamResult {
	n.T.Helper()
	n.record("spam at the minimum fee")
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	c := n.Clients[n.Ref()]
	params, err := c.Params(ctx)
	if err != nil {
		n.T.Fatal(err)
	}
	start := n.Height(n.Ref())
	per := (count + len(n.spam) - 1) / len(n.spam)
	sink := crypto.PubkeyToAddress(n.spam[0].PublicKey) // overwritten per tx below
	probe := &types.Tx{Body: types.TxBody{ChainID: n.ChainID, Msgs: []types.RawMsg{(&escrow.MsgSend{To: sink, Amount: uint256.NewInt(1)}).Raw()}}}
	fee := node.RequiredFee(params, probe)
	nonces := make([]uint64, len(n.spam))
	var wg sync.WaitGroup
	errs := make(chan error, len(n.spam))
	for k, key := range n.spam {
		from := crypto.PubkeyToAddress(key.PublicKey)
		acct, err := c.Account(ctx, from)
		if err != nil {
			n.T.Fatal(err)
		}
		nonces[k] = acct.Nonce
		wg.Add(1)
		go func(k int, key *ecdsa.PrivateKey, nonce uint64) {
			defer wg.Done()
			via := n.Clients[k%2]
			for m := 0; m < per; m++ {
				to := types.Address{byte(k), byte(m >> 8), byte(m), 0xe2}
				nn := nonce + uint64(m)
				bz, _, err := via.SignTx(ctx, key, []types.RawMsg{(&escrow.MsgSend{To: to, Amount: uint256.NewInt(1)}).Raw()},
					node.BuildOptions{ChainID: n.ChainID, Nonce: &nn, Fee: fee})
				if err != nil {
					errs <- err
					return
				}
				for {
					_, err := via.Broadcast(ctx, bz)
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						errs <- fmt.Errorf("spam account %d nonce %d: %w", k, nn, err)
						return
					}
					// A full mempool refuses; wait for a block and retry.
					time.Sleep(100 * time.Millisecond)
				}
			}
		}(k, key, acct.Nonce)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		n.T.Fatalf("spam: %v", err)
	}
	// Every account's nonce must reach what it sent.
	for k, key := range n.spam {
		from := crypto.PubkeyToAddress(key.PublicKey)
		want := nonces[k] + uint64(per)
		for {
			acct, err := c.Account(ctx, from)
			if err == nil && acct.Nonce >= want {
				break
			}
			if ctx.Err() != nil {
				n.T.Fatalf("spam account %d: nonce %v of %d after %s: transactions lost (%v)", k, acct, want, within, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	res := SpamResult{Sent: per * len(n.spam), Fee: fee, Included: per * len(n.spam)}
	end := n.Height(n.Ref())
	for h := start + 1; h <= end; h++ {
		b, err := c.BlockEventsAt(ctx, h)
		if err == nil {
			res.MaxTxs = max(res.MaxTxs, b.Txs)
		}
	}
	n.T.Logf("spam: %d transfers at the minimum fee %s committed in blocks %d..%d (at most %d txs in a block)", res.Sent, types.FormatAmount(fee), start+1, end, res.MaxTxs)
	return res
}
