package chain

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// The state-growth benchmark (issue 17): settle jobs through real signed
// transactions and FinalizeBlock/Commit on a disk-backed IAVL tree (the
// node's keep-recent pruning of old versions on, 100 versions), with job
// pruning off (retain_blocks 0) and on (the default 500, and the least
// allowed, dispute_blocks = 100), and report the state's size and the
// time per block.
//
// Each job takes the cheapest realistic path: a one-stage pool job, r = 2
// (the least redundancy that can be verified), claimed by two providers
// (the second claim awards the task), both commit the same result and
// reveal it, the task settles agreed after the canary window and the job
// completes. Jobs come in cohorts of stateCohort, one cohort posted per
// block, so that in a steady block one cohort is posted, the one before
// claimed, the one before that committed and the next older revealed
// (each provider sends one transaction per stage per block, its messages
// for its share of the cohort). After the last cohort settles, empty
// blocks run until every pruned job's retain window is over (the same
// number of blocks with pruning off, for the same block count).
const stateCohort = 100

// stateProviders share each cohort's claims: every job is claimed by two
// of them.
const stateProviders = 10

// stateGrowth is one run's figures.
type stateGrowth struct {
	blocks                     int
	keys, bytes                int           // key+value bytes of the latest version
	disk                       int64         // the database directory's size
	peakKeys, peakBytes        int           // the most, sampled every stateSample blocks
	finalizeBusy, commitBusy   time.Duration // sums over the blocks with jobs
	finalizeDrain, commitDrain time.Duration // sums over the empty blocks after
	busy, drain                int
	pruned                     int
	// The blocks that pruned jobs (a subset of the above).
	finalizePrune, commitPrune time.Duration
	pruneBlocks                int
}

const stateSample = 25

func stateSize(r store.Reader) (keys, bytes int) {
	r.Iterate(nil, nil, func(k, v []byte) bool {
		keys++
		bytes += len(k) + len(v)
		return false
	})
	return keys, bytes
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func runStateGrowth(tb testing.TB, jobs int, retain uint64) stateGrowth {
	ctx := context.Background()
	d := genesis.Default()
	d.Params.Market.RetainBlocks = retain
	// Random audits, and with them the exposure cap, off: each provider
	// here holds ~120 slots at once, and what grows is the jobs' state.
	d.Params.Market.AuditRateBps = 0
	d.Validators = []genesis.Validator{{Name: "val", Operator: addrOf("val"), PubKey: testValKey(1), Stake: types.OGPU(10_000)}}
	client := testKey("state client")
	d.Accounts = append(d.Accounts, genesis.Account{Address: addrOf("state client"), Balance: types.OGPU(10 * uint64(jobs))})
	provs := make([]*ecdsa.PrivateKey, stateProviders)
	for i := range provs {
		name := fmt.Sprintf("state provider %d", i)
		provs[i] = testKey(name)
		d.Accounts = append(d.Accounts, genesis.Account{Address: addrOf(name), Balance: types.OGPU(1_000)})
	}
	d.Sort()
	if err := d.Validate(); err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	tree, err := store.OpenTree(dir, "state")
	if err != nil {
		tb.Fatal(err)
	}
	defer tree.Close()
	app := NewApp(tree, WithPruning(100))
	bz, err := d.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := app.InitChain(ctx, &abci.InitChainRequest{ChainId: testChainID, AppStateBytes: bz, InitialHeight: 1}); err != nil {
		tb.Fatal(err)
	}
	nonces := map[*ecdsa.PrivateKey]uint64{}
	sign := func(key *ecdsa.PrivateKey, msgs ...types.RawMsg) []byte {
		tx := &types.Tx{Body: types.TxBody{ChainID: testChainID, Nonce: nonces[key], Fee: types.OGPU(1), Msgs: msgs}}
		nonces[key]++
		if err := tx.Sign(key); err != nil {
			tb.Fatal(err)
		}
		bz, err := tx.Encode()
		if err != nil {
			tb.Fatal(err)
		}
		return bz
	}
	var g stateGrowth
	height := int64(0)
	block := func(txs [][]byte, busy bool) {
		height++
		t0 := time.Now()
		res, err := app.FinalizeBlock(ctx, &abci.FinalizeBlockRequest{Height: height, Txs: txs, Time: time.Unix(0, 0), Hash: benchBlockHash(height)})
		t1 := time.Now()
		if err != nil {
			tb.Fatal(err)
		}
		for i, r := range res.TxResults {
			if r.Code != 0 {
				tb.Fatalf("block %d tx %d: code %d: %s", height, i, r.Code, r.Log)
			}
		}
		pruned := 0
		for _, e := range res.Events {
			if e.Type == (market.EventJobPruned{}).EventType() {
				pruned++
			}
		}
		g.pruned += pruned
		if _, err := app.Commit(ctx, &abci.CommitRequest{}); err != nil {
			tb.Fatal(err)
		}
		t2 := time.Now()
		if busy {
			g.busy++
			g.finalizeBusy += t1.Sub(t0)
			g.commitBusy += t2.Sub(t1)
		} else {
			g.drain++
			g.finalizeDrain += t1.Sub(t0)
			g.commitDrain += t2.Sub(t1)
		}
		if pruned > 0 {
			g.pruneBlocks++
			g.finalizePrune += t1.Sub(t0)
			g.commitPrune += t2.Sub(t1)
		}
		if height%stateSample == 0 {
			if k, b := stateSize(tree); b > g.peakBytes {
				g.peakKeys, g.peakBytes = k, b
			}
		}
	}
	// Block 1: the providers register and bond.
	var txs [][]byte
	for _, k := range provs {
		info := market.ProviderInfo{PeerID: "peer", Attributes: []string{"gpu/vendor/nvidia/model/h100/ram/80Gi"}, Runtimes: []string{"llama.cpp"}, Class: "cuda"}
		txs = append(txs, sign(k, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: d.Params.Staking.MinProviderStake}).Raw()))
	}
	block(txs, true)
	job := &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModePool, Model: fmHash("state model"), ModelSize: 1 << 30,
		Stages: 1, Redundancy: 2, MaxPrice: types.OGPU(1),
		Req:     market.Requirements{MinStake: types.OGPU(0)},
		Input:   fmHash("state input"),
		Windows: market.Windows{Bid: 3, Reveal: 1, Execute: 5, Verify: 5},
		Seal:    fmHash("state seal"),
	}
	result, salt := fmHash("state result"), fmHash("state salt")
	cohorts := (jobs + stateCohort - 1) / stateCohort
	first := func(c int) uint64 { return uint64(c*stateCohort + 1) } // ids are 1.. in posting order
	size := func(c int) int { return min(stateCohort, jobs-c*stateCohort) }
	// perProv calls fn with each provider pair's share of cohort c: job
	// i of the cohort is claimed by providers i and i+1 (mod the count).
	perProv := func(c int, msg func(job uint64, p int) types.RawMsg) [][]byte {
		if c < 0 || c >= cohorts {
			return nil
		}
		msgs := make([][]types.RawMsg, stateProviders)
		for i := range size(c) {
			for _, p := range []int{i % stateProviders, (i + 1) % stateProviders} {
				msgs[p] = append(msgs[p], msg(first(c)+uint64(i), p))
			}
		}
		var out [][]byte
		for p, m := range msgs {
			for len(m) > 0 {
				n := min(len(m), int(d.Params.MaxMsgs))
				out = append(out, sign(provs[p], m[:n]...))
				m = m[n:]
			}
		}
		return out
	}
	// Block 2 + b: cohort b is posted, b-1 claimed, b-6 committed, b-7
	// revealed (settled at the end of b-7 + canary_blocks). A pool job
	// takes claims until 4 blocks after its post and is awarded a block
	// later, once the beacon value of its last claim height is final
	// (market/pool.go): cohort b-6, posted at 2 + b - 6, runs from 2 + b - 1.
	for b := 0; b < cohorts+7; b++ {
		txs = nil
		if b < cohorts {
			var posts []types.RawMsg
			for range size(b) {
				posts = append(posts, job.Raw())
			}
			for len(posts) > 0 {
				n := min(len(posts), int(d.Params.MaxMsgs))
				txs = append(txs, sign(client, posts[:n]...))
				posts = posts[n:]
			}
		}
		txs = append(txs, perProv(b-1, func(id uint64, _ int) types.RawMsg { return (&market.MsgClaimTask{Job: id}).Raw() })...)
		txs = append(txs, perProv(b-6, func(id uint64, p int) types.RawMsg {
			return (&verifier.MsgCommitResult{Job: id, Commitment: verifier.ResultCommitment(result, salt, addrOf(fmt.Sprintf("state provider %d", p)))}).Raw()
		})...)
		txs = append(txs, perProv(b-7, func(id uint64, _ int) types.RawMsg {
			return (&verifier.MsgRevealResult{Job: id, Result: result, Salt: salt}).Raw()
		})...)
		block(txs, true)
	}
	// The last cohort settles canary_blocks after its reveal.
	for range d.Params.Market.CanaryBlocks {
		block(nil, true)
	}
	done := 0
	store.IteratePrefix(tree, market.ByStatePrefix(market.JobCompleted), func(_, _ []byte) bool { done++; return false })
	if done+g.pruned != jobs {
		tb.Fatalf("%d jobs completed and %d pruned after the last settlement, want %d", done, g.pruned, jobs)
	}
	// Until every job's retain window is over (the same count with
	// pruning off).
	for range max(retain, 500) + 1 {
		block(nil, false)
	}
	if retain != 0 && g.pruned != jobs {
		tb.Fatalf("%d jobs pruned, want %d", g.pruned, jobs)
	}
	if err := CheckInvariants(tree); err != nil {
		tb.Fatal(err)
	}
	g.blocks = int(height)
	g.keys, g.bytes = stateSize(tree)
	g.disk = dirSize(dir)
	return g
}

// BenchmarkStateGrowth settles jobs=N jobs (see runStateGrowth) with job
// pruning off and on, and reports the state after every retain window is
// over: keys, key+value bytes, the database directory's bytes, the peak
// key+value bytes (sampled every 25 blocks), and FinalizeBlock and
// Commit (IAVL SaveVersion: the app hash's tree written) milliseconds per
// block, over the blocks that carry jobs, over the empty blocks after
// them, and over the blocks (of either kind) that pruned jobs. -short runs jobs=500 only. Run with
// -benchtime 1x; see docs/benchmarks.md.
func BenchmarkStateGrowth(b *testing.B) {
	sizes := []int{500, 10_000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, jobs := range sizes {
		for _, retain := range []uint64{0, 500, 100} {
			name := fmt.Sprintf("jobs=%d/retain=%d", jobs, retain)
			if retain == 0 {
				name = fmt.Sprintf("jobs=%d/retain=off", jobs)
			}
			b.Run(name, func(b *testing.B) {
				var g stateGrowth
				for range b.N {
					g = runStateGrowth(b, jobs, retain)
				}
				ms := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(max(n, 1)) }
				b.ReportMetric(float64(g.keys), "keys")
				b.ReportMetric(float64(g.bytes), "kv-bytes")
				b.ReportMetric(float64(g.disk), "disk-bytes")
				b.ReportMetric(float64(g.peakBytes), "peak-kv-bytes")
				b.ReportMetric(ms(g.finalizeBusy, g.busy), "finalize-ms/busy-block")
				b.ReportMetric(ms(g.commitBusy, g.busy), "commit-ms/busy-block")
				b.ReportMetric(ms(g.finalizeDrain, g.drain), "finalize-ms/drain-block")
				b.ReportMetric(ms(g.commitDrain, g.drain), "commit-ms/drain-block")
				b.ReportMetric(ms(g.finalizePrune, g.pruneBlocks), "finalize-ms/prune-block")
				b.ReportMetric(ms(g.commitPrune, g.pruneBlocks), "commit-ms/prune-block")
				b.ReportMetric(float64(g.pruneBlocks), "prune-blocks")
				b.ReportMetric(float64(g.pruned), "pruned")
				b.ReportMetric(float64(g.blocks), "blocks")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
