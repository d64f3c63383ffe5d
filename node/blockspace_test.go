package node

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// S1 (security review 1): can a spammer paying the minimum fee keep a
// provider's result commitment out of blocks until its deadline passes?
//
// runS1 measures it on a real single-validator node in this process with
// the node's own configuration (LocalConfig: CometBFT's default mempool,
// 5,000 txs; InitHome: DefaultConsensusParams) and blocks every 200 ms, as
// the agent tests run. A client posts a pool job, two providers claim it
// and are awarded (commit window: s1ExecuteWindow blocks). Then s1Spammers
// accounts submit minimum-fee transfers as fast as the node takes them,
// each in its own goroutine, retrying whatever the mempool refuses. Once
// the spam has run for s1FillBlocks blocks, at committed height h:
//
//   - the provider submits its commit-result (retrying refusals every
//     100 ms, which is more than the agent does: it gives up at once);
//   - an honest account submits a transfer paying twice the minimum fee;
//   - another honest account submits a transfer at the minimum fee.
//
// Each one's delay is the block that includes it minus h (1 is the best
// possible). The spammer's cost is the fees of its transactions in the
// blocks h+1 .. the last inclusion.
type s1Result struct {
	Anchor         int64 // delay of a min-fee transfer with no spam
	Mempool        int   // txs in the mempool at h
	Commit         s1Delay
	Paid2x         s1Delay
	MinFee         s1Delay
	CommitDeadline uint64
	Blocks         int64 // blocks h+1 .. last inclusion
	SpamTxs        int   // spam txs in those blocks
	SpamFees       *uint256.Int
	SpamExhausted  bool  // the spammers ran out of pre-signed txs
	SpamRefused    int64 // refusals the spammers got (and retried)
}

type s1Delay struct {
	Height    int64 // inclusion height, 0: not included in time
	Delay     int64
	Refusals  int    // mempool refusals before it was admitted
	Failed    string // the block ran it and it failed (e.g. the window closed)
	GaveUp    bool   // never admitted before the measurement ended
	Submitted int64  // committed height when first submitted
}

func (d s1Delay) String() string {
	switch {
	case d.GaveUp:
		return fmt.Sprintf("never admitted (%d refusals)", d.Refusals)
	case d.Failed != "":
		return fmt.Sprintf("included at +%d blocks but FAILED: %s (%d refusals first)", d.Delay, d.Failed, d.Refusals)
	}
	return fmt.Sprintf("included at +%d blocks (%d refusals first)", d.Delay, d.Refusals)
}

const (
	s1Spammers      = 4
	s1SpamPerSender = 5_000 // pre-signed; enough for the mempool plus ~40 full blocks
	s1FillBlocks    = 5
	s1ExecuteWindow = 60
)

// s1BlockTime is the node's timeout_commit (timeout_propose twice it).
var s1BlockTime = flag.Duration("s1.blocktime", 200*time.Millisecond, "BenchmarkS1Spam/TestS1SpamCannotDelayCommitments: timeout_commit")

func (r *s1Result) log(tb testing.TB) {
	tb.Logf("S1: min-fee transfer without spam: included at +%d blocks (anchor)", r.Anchor)
	tb.Logf("S1: spam: %d accounts; mempool holds %d txs at h; commit deadline is h+%d; the spammers were refused %d times", s1Spammers, r.Mempool, int64(r.CommitDeadline)-r.Commit.Submitted, r.SpamRefused)
	tb.Logf("S1: provider commit-result: %s", r.Commit)
	tb.Logf("S1: honest transfer at 2x the min fee: %s", r.Paid2x)
	tb.Logf("S1: honest transfer at the min fee: %s", r.MinFee)
	if r.Blocks > 0 {
		per := new(uint256.Int).Div(r.SpamFees, uint256.NewInt(uint64(r.Blocks)))
		tb.Logf("S1: spammer paid %s in %d blocks: %d txs/block, %s/block", types.FormatAmount(r.SpamFees), r.Blocks, int64(r.SpamTxs)/r.Blocks, types.FormatAmount(per))
	}
	if r.SpamExhausted {
		tb.Logf("S1: the spammers ran out of pre-signed transactions during the measurement")
	}
}

// s1Refused reports whether err is a refusal worth retrying: the mempool
// is full, or the app asks for a higher fee while the mempool is busy.
func s1Refused(err error) bool {
	if err == nil {
		return false
	}
	var te *TxError
	if errors.As(err, &te) && te.Code == types.ErrFeeTooLow.Code {
		return true
	}
	return strings.Contains(err.Error(), "mempool is full") || strings.Contains(err.Error(), "recheck")
}

func runS1(tb testing.TB) *s1Result {
	tb.Helper()
	const (
		client = iota
		prov1
		prov2
		payer
		cheap
		firstSpammer
	)
	tc := startTestChainEvery(tb, firstSpammer+s1Spammers, *s1BlockTime)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := tc.local
	params, err := c.Params(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	chainID, err := c.ChainID(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	addr := func(i int) types.Address { return crypto.PubkeyToAddress(tc.keys[i].PublicKey) }
	send := func(i int, msgs ...types.RawMsg) {
		tb.Helper()
		if _, err := NewSender(c, tc.keys[i]).Send(ctx, msgs...); err != nil {
			tb.Fatal(err)
		}
	}
	r := &s1Result{SpamFees: new(uint256.Int)}

	// Anchor: a min-fee transfer on an idle chain.
	r.Anchor = s1Measure(tb, ctx, c, func() ([]byte, error) {
		return NewSender(c, tc.keys[cheap]).Submit(ctx, transfer(1))
	}, 5*time.Second).Delay

	// A pool job, claimed and awarded to two providers.
	model := sha256.Sum256([]byte("s1 model"))
	for _, p := range []int{prov1, prov2} {
		info := market.ProviderInfo{PeerID: fmt.Sprintf("peer-s1-%d", p), Runtimes: []string{"llama.cpp"}, Models: []types.Hash{model}}
		send(p, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(200)}).Raw())
	}
	post := &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModePool, Model: model, ModelSize: 1, Stages: 1, Redundancy: 2,
		MaxPrice: types.OGPU(1), Req: market.Requirements{MinStake: types.OGPU(100)}, Input: sha256.Sum256([]byte("s1 input")),
		Windows: market.Windows{Bid: 2, Execute: s1ExecuteWindow, Verify: 15}, Seal: sha256.Sum256([]byte("s1 seal")),
	}
	res, err := NewSender(c, tc.keys[client]).Send(ctx, post.Raw())
	if err != nil {
		tb.Fatal(err)
	}
	var posted market.EventJobPosted
	if err := FindEvent(res, &posted); err != nil {
		tb.Fatal(err)
	}
	send(prov1, (&market.MsgClaimTask{Job: posted.Job}).Raw())
	send(prov2, (&market.MsgClaimTask{Job: posted.Job}).Raw())
	for {
		j, err := c.Job(ctx, posted.Job)
		if err == nil && len(j.Tasks) == 1 && len(j.Tasks[0].Slots) == 2 {
			r.CommitDeadline = j.Tasks[0].CommitDeadline
			break
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("job %d not awarded: %v", posted.Job, err)
		case <-time.After(50 * time.Millisecond):
		}
	}

	// The spammers: minimum-fee transfers, pre-signed, nonces in order.
	spamFrom := make(map[types.Address]bool)
	spam := make([][][]byte, s1Spammers)
	for s := range s1Spammers {
		key := tc.keys[firstSpammer+s]
		spamFrom[addr(firstSpammer+s)] = true
		for n := range s1SpamPerSender {
			tx := &types.Tx{Body: types.TxBody{ChainID: chainID, From: addr(firstSpammer + s), Nonce: uint64(n),
				Msgs: []types.RawMsg{(&escrow.MsgSend{To: recipient(n), Amount: uint256.NewInt(1)}).Raw()}}}
			tx.Body.Fee = RequiredFee(params, tx)
			if err := tx.Sign(key); err != nil {
				tb.Fatal(err)
			}
			bz, err := tx.Encode()
			if err != nil {
				tb.Fatal(err)
			}
			spam[s] = append(spam[s], bz)
		}
	}
	spamCtx, stopSpam := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var exhausted atomic.Int32
	var refused atomic.Int64
	for s := range s1Spammers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, bz := range spam[s] {
				for {
					_, err := c.Broadcast(spamCtx, bz)
					if spamCtx.Err() != nil {
						return
					}
					if err == nil {
						break
					}
					refused.Add(1)
					if !s1Refused(err) {
						tb.Errorf("spammer %d: %v", s, err)
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			exhausted.Add(1)
		}()
	}
	defer func() { stopSpam(); wg.Wait() }()
	start, err := c.CommittedHeight(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	// Let the spam fill the mempool as far as the node lets it: until it
	// stops growing for s1FillBlocks blocks.
	for h, best, still := start, 0, 0; still < s1FillBlocks; h++ {
		if err := c.WaitHeight(ctx, h+1); err != nil {
			tb.Fatal(err)
		}
		if n := tc.node.Mempool().Size(); n > best+50 {
			best, still = n, 0
		} else {
			still++
		}
	}
	r.Mempool = tc.node.Mempool().Size()

	// At h: the commitment, a transfer paying 2x, a min-fee transfer.
	commitment := verifier.ResultCommitment(sha256.Sum256([]byte("s1 result")), sha256.Sum256([]byte("s1 salt")), addr(prov1))
	limit := time.Duration(s1ExecuteWindow+5) * 2 * *s1BlockTime * 4 // generous: blocks slow down under spam
	var mu sync.Mutex
	var measured sync.WaitGroup
	measure := func(out *s1Delay, submit func() ([]byte, error)) {
		measured.Add(1)
		go func() {
			defer measured.Done()
			d := s1Measure(tb, ctx, c, submit, limit)
			mu.Lock()
			*out = d
			mu.Unlock()
		}()
	}
	commitSender := NewSender(c, tc.keys[prov1])
	measure(&r.Commit, func() ([]byte, error) {
		return commitSender.Submit(ctx, (&verifier.MsgCommitResult{Job: posted.Job, Stage: 0, Commitment: commitment}).Raw())
	})
	measure(&r.Paid2x, func() ([]byte, error) {
		bz, tx, err := c.SignTx(ctx, tc.keys[payer], []types.RawMsg{transfer(2)}, BuildOptions{ChainID: chainID})
		if err != nil {
			return nil, err
		}
		fee := new(uint256.Int).Mul(tx.Body.Fee, uint256.NewInt(2))
		nonce := tx.Body.Nonce
		if bz, _, err = c.SignTx(ctx, tc.keys[payer], []types.RawMsg{transfer(2)}, BuildOptions{ChainID: chainID, Nonce: &nonce, Fee: fee}); err != nil {
			return nil, err
		}
		return c.Broadcast(ctx, bz)
	})
	cheapSender := NewSender(c, tc.keys[cheap])
	measure(&r.MinFee, func() ([]byte, error) { return cheapSender.Submit(ctx, transfer(3)) })
	measured.Wait()
	stopSpam()
	wg.Wait()
	r.SpamExhausted = exhausted.Load() > 0
	r.SpamRefused = refused.Load()

	// The spammer's cost over the measured blocks.
	h := r.Commit.Submitted
	last := max(r.Commit.Height, r.Paid2x.Height, r.MinFee.Height)
	if last == 0 {
		last, _ = c.CommittedHeight(ctx)
	}
	for height := h + 1; height <= last; height++ {
		b, err := c.RPC.Block(ctx, &height)
		if err != nil {
			tb.Fatal(err)
		}
		for _, bz := range b.Block.Txs {
			if chain.IsInjected(bz) {
				continue // the validators' vote extensions
			}
			tx, err := types.DecodeTx(bz)
			if err != nil {
				tb.Fatal(err)
			}
			if spamFrom[tx.Body.From] {
				r.SpamTxs++
				r.SpamFees.Add(r.SpamFees, tx.Body.Fee)
			}
		}
	}
	r.Blocks = last - h
	return r
}

// s1Measure submits (retrying refusals every 100 ms until limit) and waits
// for the block that includes the transaction.
func s1Measure(tb testing.TB, ctx context.Context, c *Client, submit func() ([]byte, error), limit time.Duration) s1Delay {
	tb.Helper()
	var d s1Delay
	var err error
	d.Submitted, err = c.CommittedHeight(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	mctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var hash []byte
	for {
		hash, err = submit()
		if err == nil {
			break
		}
		if !s1Refused(err) {
			tb.Fatalf("submit: %v", err)
		}
		d.Refusals++
		select {
		case <-mctx.Done():
			d.GaveUp = true
			return d
		case <-time.After(100 * time.Millisecond):
		}
	}
	res, err := c.WaitTx(mctx, hash)
	var te *TxError
	switch {
	case errors.As(err, &te) && te.Height > 0:
		d.Failed = te.Log
		d.Height = te.Height
	case err != nil:
		d.GaveUp = true
		return d
	default:
		d.Height = res.Height
	}
	d.Delay = d.Height - d.Submitted
	return d
}

// TestS1SpamCannotDelayCommitments performs the S1 attack on a real node:
// minimum-fee spam must not delay a result commitment, nor a transfer that
// pays twice the minimum fee, by more than two blocks.
func TestS1SpamCannotDelayCommitments(t *testing.T) {
	r := runS1(t)
	r.log(t)
	if r.SpamTxs == 0 {
		t.Fatal("no spam in the measured blocks: the measurement measured nothing")
	}
	for _, x := range []struct {
		what string
		d    s1Delay
	}{{"the provider's commit-result", r.Commit}, {"the transfer paying 2x the min fee", r.Paid2x}} {
		if x.d.GaveUp || x.d.Failed != "" || x.d.Delay > 2 || x.d.Refusals > 0 {
			t.Errorf("S1: min-fee spam delayed %s: %s", x.what, x.d)
		}
	}
}

// BenchmarkS1Spam runs the S1 measurement once per iteration and reports
// its figures (blocks are counted, not timed; the anchor is a min-fee
// transfer on the idle chain, measured in the same run):
//
//	go test -run '^$' -bench BenchmarkS1Spam -benchtime 1x -count 3 ./node
//
// -args -s1.blocktime=1s runs it at the devnet's block time.
func BenchmarkS1Spam(b *testing.B) {
	for range b.N {
		r := runS1(b)
		r.log(b)
		b.ReportMetric(float64(r.Anchor), "anchor-blocks")
		b.ReportMetric(s1Metric(r.Commit), "commit-blocks")
		b.ReportMetric(s1Metric(r.Paid2x), "2xfee-blocks")
		b.ReportMetric(s1Metric(r.MinFee), "minfee-blocks")
		if r.Blocks > 0 {
			per := new(uint256.Int).Div(r.SpamFees, uint256.NewInt(uint64(r.Blocks)))
			b.ReportMetric(float64(per.Uint64())/1e18, "spam-oGPU/block")
			b.ReportMetric(float64(r.SpamTxs)/float64(r.Blocks), "spam-tx/block")
		}
	}
}

// s1Metric is a delay in blocks, or -1 when the transaction never made it.
func s1Metric(d s1Delay) float64 {
	if d.GaveUp || d.Failed != "" {
		return -1
	}
	return float64(d.Delay)
}
