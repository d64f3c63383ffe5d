package chain

import (
	"context"
	"fmt"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// The end-block close benchmark (finding C2): N bidless 64-stage auction
// jobs, posted by real signed transactions over several blocks, whose
// reveal windows all end at one height. Nobody bids, so the close of each
// job finds no bid on any of its 64 stages, expires the job and refunds
// its escrow: the cheapest close work an attacker can buy per job.
const (
	endBlockStages      = 64
	endBlockPostsPerBlk = 512 // posts per setup block: 16 txs of 32 messages
	endBlockMaxBlocks   = 10_000
)

// endBlockState is the committed state just before the close height.
type endBlockState struct {
	app    *App
	tree   *store.Tree
	height int64 // the last committed height
	close  int64 // the height whose end closes every job
	jobs   uint64
}

// buildEndBlockState posts n jobs through FinalizeBlock and Commit: block h
// of the P post blocks carries up to endBlockPostsPerBlk posts with a bid
// window of P+1-h blocks and a reveal window of 1, so every job's bids end
// at height P+1, and every job, bidless, closes at the end of that block
// (an auction without a sealed bid closes at its bid window's end).
func buildEndBlockState(b *testing.B, n int) *endBlockState {
	b.Helper()
	d := genesis.Default()
	d.Validators = []genesis.Validator{{Name: "val", Operator: addrOf("val"), PubKey: testValKey(1), Stake: types.OGPU(10_000)}}
	d.Accounts = append(d.Accounts, genesis.Account{Address: addrOf("endblock client"), Balance: types.OGPU(1_000_000)})
	d.Sort()
	if err := d.Validate(); err != nil {
		b.Fatal(err)
	}
	bz, err := d.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	tree := store.NewMemTree()
	app := NewApp(tree)
	ctx := context.Background()
	if _, err := app.InitChain(ctx, &abci.InitChainRequest{ChainId: testChainID, AppStateBytes: bz, InitialHeight: 1}); err != nil {
		b.Fatal(err)
	}
	client := testKey("endblock client")
	st := &endBlockState{app: app, tree: tree, jobs: uint64(n)}
	posts := (n + endBlockPostsPerBlk - 1) / endBlockPostsPerBlk
	st.close = int64(posts) + 1
	nonce := uint64(0)
	for left := n; left > 0; {
		h := st.height + 1
		var txs [][]byte
		for k := min(left, endBlockPostsPerBlk); k > 0; {
			m := min(k, int(d.Params.MaxMsgs))
			msgs := make([]types.RawMsg, m)
			for i := range msgs {
				msgs[i] = endBlockJob(uint64(st.close - h)).Raw()
			}
			txs = append(txs, signTx(b, client, nonce, msgs...))
			nonce++
			k -= m
			left -= m
		}
		st.finalize(b, txs, true)
	}
	if st.height != st.close-1 {
		b.Fatalf("setup ended at height %d, want %d", st.height, st.close-1)
	}
	if open := st.open(b); open != st.jobs {
		b.Fatalf("%d of %d jobs open before the close", open, st.jobs)
	}
	return st
}

// endBlockJob is a bidless job's post: inference, auction, 64 stages, r = 2,
// a cap of one base unit per replica (it locks 128 base units, refunded at
// the close), bids for bid blocks, reveals for one.
func endBlockJob(bid uint64) *market.MsgPostJob {
	return &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction, Model: fmHash("endblock model"), ModelSize: 1 << 20,
		Stages: endBlockStages, Redundancy: 2, MaxPrice: uint256.NewInt(1),
		Req:     market.Requirements{MinStake: new(uint256.Int)},
		Input:   fmHash("endblock input"),
		Windows: market.Windows{Bid: bid, Reveal: 1, Execute: 1, Verify: 1},
		Seal:    fmHash("endblock seal"),
	}
}

// finalize runs FinalizeBlock (timed, and returning how long it took,
// unless setup is set) and Commit for the next height, and requires every
// tx to succeed.
func (st *endBlockState) finalize(b *testing.B, txs [][]byte, setup bool) (wall, cpu time.Duration) {
	b.Helper()
	st.height++
	ctx := context.Background()
	req := &abci.FinalizeBlockRequest{Height: st.height, Txs: txs, Time: time.Unix(0, 0), Hash: benchBlockHash(st.height)}
	var res *abci.FinalizeBlockResponse
	var err error
	if setup {
		res, err = st.app.FinalizeBlock(ctx, req)
	} else {
		// The label lets a profile be cut down to the timed blocks:
		// go tool pprof -tagfocus phase=close.
		pprof.Do(ctx, pprof.Labels("phase", "close"), func(ctx context.Context) {
			cpu0 := processCPU(b)
			b.StartTimer()
			start := time.Now()
			res, err = st.app.FinalizeBlock(ctx, req)
			wall = time.Since(start)
			b.StopTimer()
			cpu = processCPU(b) - cpu0
		})
	}
	if err != nil {
		b.Fatalf("FinalizeBlock %d: %v", st.height, err)
	}
	for i, r := range res.TxResults {
		if r.Code != 0 {
			b.Fatalf("block %d tx %d: code %d: %s", st.height, i, r.Code, r.Log)
		}
	}
	if _, err := st.app.Commit(ctx, &abci.CommitRequest{}); err != nil {
		b.Fatalf("Commit %d: %v", st.height, err)
	}
	return wall, cpu
}

// processCPU is the process's user + system CPU time: the timed blocks'
// CPU time, unlike their wall time, does not grow when other processes
// share the machine's cores.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// open counts the jobs still bidding or revealing.
func (st *endBlockState) open(b *testing.B) uint64 {
	b.Helper()
	var open uint64
	for id := uint64(1); id <= st.jobs; id++ {
		j, ok := market.GetJob(st.tree, id)
		if !ok {
			b.Fatalf("job %d missing", id)
		}
		if j.State == market.JobBidding || j.State == market.JobRevealing {
			open++
		}
	}
	return open
}

// BenchmarkEndBlockClose times the close of N bidless 64-stage jobs whose
// reveal windows end at one height: FinalizeBlock of the close height (no
// transactions), including the write of the block's changes into the IAVL
// working tree and its root hash, and, should the chain spread deadline
// work over several blocks, the FinalizeBlock of every following empty
// block until no job is bidding or revealing any more (summed; close-blocks
// counts them); cpu-ns/job is the process's CPU time in those blocks per
// job (garbage collection included), which a busy machine does not
// inflate. Not timed: building the state (fresh for each iteration,
// since the close blocks are committed), Commit, and the checks. ns/job is
// ns/op ÷ N: flat in N when the close is linear. Run with -benchtime 1x;
// see docs/benchmarks.md.
func BenchmarkEndBlockClose(b *testing.B) {
	for _, n := range []int{250, 2000, 8000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			b.StopTimer()
			var total, totalCPU, worst time.Duration
			blocks := 0
			for range b.N {
				st := buildEndBlockState(b, n)
				for st.open(b) > 0 {
					if st.height-st.close > endBlockMaxBlocks {
						b.Fatalf("%d jobs still open %d blocks after the close height", st.open(b), endBlockMaxBlocks)
					}
					took, cpu := st.finalize(b, nil, false)
					total += took
					totalCPU += cpu
					worst = max(worst, took)
					blocks++
				}
				for id := uint64(1); id <= st.jobs; id++ {
					if j, _ := market.GetJob(st.tree, id); j.State != market.JobExpired {
						b.Fatalf("job %d is %s after the close, want expired", id, j.State)
					}
				}
				if err := CheckInvariants(st.tree); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/float64(n), "ns/job")
			b.ReportMetric(float64(totalCPU.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/job")
			b.ReportMetric(float64(blocks)/float64(b.N), "close-blocks")
			b.ReportMetric(float64(worst.Nanoseconds()), "max-block-ns")
		})
	}
}
