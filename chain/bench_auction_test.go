package chain

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"runtime/pprof"
	"slices"
	"sync"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// The auction-close benchmark: benchJobs auction jobs (one stage, r = 2),
// each with benchBidsPerJob revealed bids from distinct providers (one
// provider per bid: benchJobs × benchBidsPerJob registered and bonded
// providers), all closing in the end of one block.
// BenchmarkAuctionCloseJobs closes other numbers of jobs the same way.
const (
	benchJobs       = 100
	benchBidsPerJob = 100
	benchProviders  = benchJobs * benchBidsPerJob
)

// benchCloseHeight is the block whose end closes every auction: the jobs
// are posted in block 2 with a one-block bid window (bids in block 3) and
// a two-block reveal window (reveals in block 4, each job's last in block
// 5, whose end closes the job: the early close).
const benchCloseHeight = 5

type auctionBench struct {
	app  *App
	tree *store.Tree
	// jobs and perJob are the shape: jobs × perJob bids, one provider each.
	jobs, perJob int
	// last holds each job's last reveal, the timed block's transactions:
	// an auction closes at the end of the block of its last sealed bid's
	// reveal (market's early close).
	last [][]byte
	// reveals, in a state built for BenchmarkAuctionReveal (at height
	// benchCloseHeight-2), are the reveal block's transactions: every
	// reveal but each job's last.
	reveals [][]byte
	// setup is how long building the state took (not part of the figure).
	setup time.Duration
	// logged: the setup time was logged once.
	logged sync.Once
}

// benchAuctionState builds, once per process, the committed state at height
// benchCloseHeight-1 of the 100 × 100 benchmark.
var benchAuctionState = sync.OnceValues(func() (*auctionBench, error) {
	return buildAuctionState(benchJobs, benchBidsPerJob)
})

// benchAuctionStates holds the states of BenchmarkAuctionCloseJobs, one per
// shape, each built once per process.
var benchAuctionStates = struct {
	sync.Mutex
	m map[[2]int]func() (*auctionBench, error)
}{m: map[[2]int]func() (*auctionBench, error){}}

func auctionStateOf(jobs, perJob int) (*auctionBench, error) {
	if jobs == benchJobs && perJob == benchBidsPerJob {
		return benchAuctionState()
	}
	benchAuctionStates.Lock()
	f, ok := benchAuctionStates.m[[2]int{jobs, perJob}]
	if !ok {
		f = sync.OnceValues(func() (*auctionBench, error) { return buildAuctionState(jobs, perJob) })
		benchAuctionStates.m[[2]int{jobs, perJob}] = f
	}
	benchAuctionStates.Unlock()
	return f()
}

// buildAuctionState builds the committed state at height
// benchCloseHeight-1 with real signed transactions through FinalizeBlock:
//
//	block 1: every provider registers (attributes matching the jobs) and
//	         bonds the minimum provider stake, one tx each;
//	block 2: the client posts the jobs (32 per tx);
//	block 3: every provider commits a sealed bid on its job;
//	block 4: every provider but each job's last reveals it.
//
// Each benchmark iteration finalizes block 5, with each job's last reveal,
// on top of it and rolls the
// working tree back, so every iteration closes the same auctions from the
// same saved state.
func buildAuctionState(jobs, perJob int) (*auctionBench, error) {
	return buildAuctionStateTo(jobs, perJob, true)
}

// buildAuctionStateTo is buildAuctionState; without revealed, it stops
// before the reveal block (at height benchCloseHeight-2) and keeps that
// block's transactions in reveals.
func buildAuctionStateTo(jobs, perJob int, revealed bool) (*auctionBench, error) {
	providers := jobs * perJob
	start := time.Now()
	keys := make([]*ecdsa.PrivateKey, providers)
	addrs := make([]types.Address, providers)
	d := genesis.Default()
	d.Validators = []genesis.Validator{{Name: "val", Operator: addrOf("val"), PubKey: testValKey(1), Stake: types.OGPU(10_000)}}
	client := testKey("bench client")
	d.Accounts = append(d.Accounts, genesis.Account{Address: addrOf("bench client"), Balance: types.OGPU(100 * uint64(jobs))})
	for i := range keys {
		name := fmt.Sprintf("bench provider %d", i)
		keys[i], addrs[i] = testKey(name), addrOf(name)
		d.Accounts = append(d.Accounts, genesis.Account{Address: addrs[i], Balance: types.OGPU(300)})
	}
	d.Sort()
	if err := d.Validate(); err != nil {
		return nil, err
	}
	tree := store.NewMemTree()
	app := NewApp(tree)
	bz, err := d.Marshal()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if _, err := app.InitChain(ctx, &abci.InitChainRequest{ChainId: testChainID, AppStateBytes: bz, InitialHeight: 1}); err != nil {
		return nil, err
	}
	sign := func(key *ecdsa.PrivateKey, nonce uint64, msgs ...types.RawMsg) []byte {
		tx := &types.Tx{Body: types.TxBody{ChainID: testChainID, Nonce: nonce, Fee: types.OGPU(1), Msgs: msgs}}
		if err := tx.Sign(key); err != nil {
			panic(err)
		}
		bz, err := tx.Encode()
		if err != nil {
			panic(err)
		}
		return bz
	}
	height := int64(0)
	block := func(txs [][]byte) error {
		height++
		res, err := app.FinalizeBlock(ctx, &abci.FinalizeBlockRequest{Height: height, Txs: txs, Time: time.Unix(0, 0), Hash: benchBlockHash(height)})
		if err != nil {
			return err
		}
		for i, r := range res.TxResults {
			if r.Code != 0 {
				return fmt.Errorf("setup block %d tx %d: code %d: %s", height, i, r.Code, r.Log)
			}
		}
		_, err = app.Commit(ctx, &abci.CommitRequest{})
		return err
	}
	job := benchJob()
	// Provider i bids on job i/perJob + 1 at one of 20 prices
	// (0.1 .. 2 oGPU under the cap of 10), so prices tie and the close
	// ranks by reputation and the block-hash tie-break too.
	price := func(i int) *uint256.Int { return benchPrice(i % perJob) }
	salt := func(i int) types.Hash { return fmHash(fmt.Sprint("bench salt ", i)) }
	jobOf := func(i int) uint64 { return uint64(i/perJob + 1) }

	var txs [][]byte
	for i, k := range keys {
		info := market.ProviderInfo{PeerID: fmt.Sprintf("peer-%d", i), Attributes: []string{"gpu/vendor/nvidia/model/h100/ram/80Gi", "ram/256Gi"}, Runtimes: []string{"llama.cpp"}, Class: "cuda"}
		// The stake at risk on one slot at the 10 oGPU cap (market
		// deterrence.go: 20 × the price at the defaults).
		bond := market.AtRisk(d.Params.Market, types.OGPU(10))
		txs = append(txs, sign(k, 0, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: bond}).Raw()))
	}
	if err := block(txs); err != nil {
		return nil, err
	}
	txs = nil
	var posts []types.RawMsg
	for range jobs {
		posts = append(posts, job.Raw())
	}
	for n := uint64(0); len(posts) > 0; n++ {
		m := min(len(posts), int(d.Params.MaxMsgs))
		txs = append(txs, sign(client, n, posts[:m]...))
		posts = posts[m:]
	}
	if err := block(txs); err != nil {
		return nil, err
	}
	txs = nil
	for i, k := range keys {
		c := market.BidCommitment(jobOf(i), 0, price(i), salt(i), addrs[i])
		txs = append(txs, sign(k, 1, (&market.MsgCommitBid{Job: jobOf(i), Commitment: c}).Raw()))
	}
	if err := block(txs); err != nil {
		return nil, err
	}
	txs = nil
	var last [][]byte // each job's last reveal: it goes in the timed block
	for i, k := range keys {
		tx := sign(k, 2, (&market.MsgRevealBid{Job: jobOf(i), Price: price(i), Salt: salt(i)}).Raw())
		if i%perJob == perJob-1 {
			last = append(last, tx)
			continue
		}
		txs = append(txs, tx)
	}
	if !revealed {
		if err := CheckInvariants(tree); err != nil {
			return nil, err
		}
		return &auctionBench{app: app, tree: tree, jobs: jobs, perJob: perJob, last: last, reveals: txs, setup: time.Since(start)}, nil
	}
	if err := block(txs); err != nil {
		return nil, err
	}
	if height != benchCloseHeight-1 {
		return nil, fmt.Errorf("setup ended at height %d, want %d", height, benchCloseHeight-1)
	}
	if err := CheckInvariants(tree); err != nil {
		return nil, err
	}
	return &auctionBench{app: app, tree: tree, jobs: jobs, perJob: perJob, last: last, setup: time.Since(start)}, nil
}

// benchPrice is the price of a job's k-th bid: one of 20 prices from 0.1
// to 2 oGPU under the cap of 10, so with more than 20 bids prices tie and
// the close ranks by reputation and the block-hash tie-break too.
func benchPrice(k int) *uint256.Int {
	p := uint256.NewInt(uint64(1 + k%20))
	return p.Mul(p, uint256.NewInt(100_000_000_000_000_000))
}

// benchJob is each benchmark job: one stage, r = 2, cap 10 oGPU, bids in
// the block after the post, reveals in the next, the close in the one
// after.
func benchJob() *market.MsgPostJob {
	return &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction, Model: fmHash("bench model"), ModelSize: 8 << 30,
		Stages: 1, Redundancy: 2, MaxPrice: types.OGPU(10),
		Req:     market.Requirements{MinStake: new(uint256.Int), Attributes: []string{"gpu/vendor/nvidia", "ram>=64Gi"}, Runtime: "llama.cpp", Class: "cuda"},
		Input:   fmHash("bench input"),
		Windows: market.Windows{Bid: 1, Reveal: 2, Execute: 10, Verify: 10},
		Seal:    fmHash("bench seal"),
	}
}

func benchBlockHash(h int64) []byte { return types.TxHash([]byte(fmt.Sprint("bench block ", h))) }

// BenchmarkAuctionClose times FinalizeBlock of the block that closes every
// auction (each job's last reveal, 100 transactions; the end of block ranks
// 10,000 revealed bids,
// awards 200 slots, refunds 10,000 deposits and the unused escrow, writes
// the tasks) including the write of the block's changes into the IAVL
// working tree and its root hash. Not timed: building the state (once per
// process), checking the result, and rolling the tree back after each
// iteration. Run with -benchtime Nx; see docs/benchmarks.md.
func BenchmarkAuctionClose(b *testing.B) {
	st, err := benchAuctionState()
	if err != nil {
		b.Fatal(err)
	}
	benchClose(b, st)
}

// BenchmarkAuctionCloseJobs closes 100 and 1,000 jobs of 10 revealed bids
// each at one height, as BenchmarkAuctionClose does: the time per job
// should not grow with the number of jobs (the "linear").
func BenchmarkAuctionCloseJobs(b *testing.B) {
	for _, jobs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			st, err := auctionStateOf(jobs, 10)
			if err != nil {
				b.Fatal(err)
			}
			benchClose(b, st)
		})
	}
}

// benchClose times the close of st's auctions, b.N times from the same
// saved state.
func benchClose(b *testing.B, st *auctionBench) {
	st.logged.Do(func() {
		b.Logf("state built in %s: %d providers, %d jobs, %d bids", st.setup.Round(time.Millisecond), st.jobs*st.perJob, st.jobs, st.jobs*st.perJob)
	})
	req := &abci.FinalizeBlockRequest{Height: benchCloseHeight, Time: time.Unix(0, 0), Hash: benchBlockHash(benchCloseHeight), Txs: st.last}
	b.ReportAllocs()
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := finalizeTimed(b, st.app, req, "close", &cpu)
		if i == 0 {
			checkAuctionClose(b, st, res)
		}
		st.tree.Rollback()
	}
	bids := float64(st.jobs * st.perJob)
	b.ReportMetric(bids*float64(b.N)/b.Elapsed().Seconds(), "bids/s")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(st.jobs), "µs/job")
	// The block's CPU time: with other jobs on the machine its wall time
	// depends on its share of the cores, its CPU time much less.
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
}

// checkAuctionClose checks, outside the timer, that the timed block did the
// work: every job awarded to two providers at the clearing price, every
// invariant holding.
func checkAuctionClose(b *testing.B, st *auctionBench, res *abci.FinalizeBlockResponse) {
	b.Helper()
	awarded := 0
	for _, e := range res.Events {
		if e.Type == (market.EventJobAwarded{}).EventType() {
			awarded++
		}
	}
	if awarded != st.jobs {
		b.Fatalf("%d job-awarded events, want %d", awarded, st.jobs)
	}
	// The clearing price is the third lowest of the job's prices (r = 2):
	// with 100 bids at 20 prices, five at each, the lowest price, 0.1
	// oGPU; with 10 bids at 10 prices, the third, 0.3 oGPU.
	prices := make([]*uint256.Int, st.perJob)
	for k := range prices {
		prices[k] = benchPrice(k)
	}
	slices.SortFunc(prices, func(a, b *uint256.Int) int { return a.Cmp(b) })
	want := prices[2]
	for id := uint64(1); id <= uint64(st.jobs); id++ {
		j, ok := market.GetJob(st.tree, id)
		if !ok || j.State != market.JobRunning {
			b.Fatalf("job %d not running after the close", id)
		}
		if !j.Prices[0].Eq(want) {
			b.Fatalf("job %d clears at %s, want %s", id, j.Prices[0].Dec(), want.Dec())
		}
	}
	if err := CheckInvariants(st.tree); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAuctionReveal times FinalizeBlock of the reveal block of the
// 100 × 100 benchmark: 9,900 reveals (each job's but its last), each a
// signed transaction. Since AppVersion 7 a reveal ranks its bid (an
// eligibility check, the stage's leaders list, the refund of the bid it
// pushes out), work the close did before: this is where it went. As
// BenchmarkAuctionClose: the state (height 3) is built once per process,
// each iteration rolls the tree back.
func BenchmarkAuctionReveal(b *testing.B) {
	st, err := benchRevealState()
	if err != nil {
		b.Fatal(err)
	}
	st.logged.Do(func() {
		b.Logf("state built in %s: %d providers, %d jobs, %d reveals timed", st.setup.Round(time.Millisecond), st.jobs*st.perJob, st.jobs, len(st.reveals))
	})
	req := &abci.FinalizeBlockRequest{Height: benchCloseHeight - 1, Time: time.Unix(0, 0), Hash: benchBlockHash(benchCloseHeight - 1), Txs: st.reveals}
	b.ReportAllocs()
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := finalizeTimed(b, st.app, req, "reveal", &cpu)
		if i == 0 {
			for k, r := range res.TxResults {
				if r.Code != 0 {
					b.Fatalf("reveal tx %d: code %d: %s", k, r.Code, r.Log)
				}
			}
			if err := CheckInvariants(st.tree); err != nil {
				b.Fatal(err)
			}
		}
		st.tree.Rollback()
	}
	b.ReportMetric(float64(len(st.reveals))*float64(b.N)/b.Elapsed().Seconds(), "reveals/s")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
}

// benchRevealState is the 100 × 100 state before its reveal block, built
// once per process.
var benchRevealState = sync.OnceValues(func() (*auctionBench, error) {
	return buildAuctionStateTo(benchJobs, benchBidsPerJob, false)
})

// finalizeTimed is one timed iteration: FinalizeBlock(req) with the timer
// running, under the pprof label phase (so that a profile of the whole
// run, setup included, can be cut down to the timed blocks: go tool pprof
// -tagfocus phase=close), its process CPU added to *cpu.
func finalizeTimed(b *testing.B, app *App, req *abci.FinalizeBlockRequest, phase string, cpu *time.Duration) *abci.FinalizeBlockResponse {
	b.Helper()
	var res *abci.FinalizeBlockResponse
	var err error
	pprof.Do(context.Background(), pprof.Labels("phase", phase), func(ctx context.Context) {
		c0 := processCPU(b)
		b.StartTimer()
		res, err = app.FinalizeBlock(ctx, req)
		b.StopTimer()
		*cpu += processCPU(b) - c0
	})
	if err != nil {
		b.Fatal(err)
	}
	return res
}
