package node_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dbm "github.com/cometbft/cometbft-db"
	"github.com/cometbft/cometbft/abci/example/kvstore"
	cmtcfg "github.com/cometbft/cometbft/config"
	"github.com/cometbft/cometbft/libs/log"
	mempl "github.com/cometbft/cometbft/mempool"
	nm "github.com/cometbft/cometbft/node"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	"github.com/cometbft/cometbft/proxy"
	"github.com/cometbft/cometbft/rpc/client/local"
	cmttypes "github.com/cometbft/cometbft/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Settings shared by both sub-benchmarks of BenchmarkTransfers. The flags
// exist to explore the setup; docs/benchmarks.md records which values the
// published figures used (the defaults). Pass them after -args.
var (
	benchBlockTime = flag.Duration("transfers.blocktime", 100*time.Millisecond, "BenchmarkTransfers: timeout_commit (timeout_propose is twice it)")
	benchMaxGas    = flag.Int64("transfers.maxgas", -1, "BenchmarkTransfers: consensus block.max_gas (-1: unlimited; CometBFT's default is 10000000)")
)

const (
	benchChainID     = "ogpu-bench"
	benchSenders     = 16               // one submitting goroutine each
	benchMempoolSize = 10_000           // txs
	benchMaxTxsBytes = 64 << 20         // mempool bytes, CometBFT's default
	benchCacheSize   = 20_000           // mempool dedup cache
	benchBlockBytes  = 4 << 20          // consensus block.max_bytes, CometBFT's default
	benchTimeout     = 10 * time.Minute // for one b.N round
)

// BenchmarkTransfers measures signed transactions per second through a real
// single-validator CometBFT node in this process, from the first submission
// to the mempool until the last transaction is in a committed block (the app
// has run FinalizeBlock and Commit for it):
//
//   - ogpu: oGPU transfers (escrow.MsgSend) from 16 funded senders, each with
//     its own run of nonces, through the oGPU app over its IAVL store;
//   - kvstore: the same number of "key=value" txs of the same byte size
//     through CometBFT's example kvstore app (in memory, no signatures): the
//     cost of CometBFT itself (mempool, consensus, block store, tx indexer).
//
// Both run on the same configuration (benchHome, startBenchNode): a fresh
// home, blocks every 100ms, mempool and block limits set explicitly, block
// gas unlimited, txs submitted through the local RPC client's
// BroadcastTxSync by one goroutine per sender. Transactions are built and
// signed before the timer starts; node start-up and the wait for the first
// block are not timed either. Run it with a fixed count (make bench uses
// -count 3; the figures in docs/benchmarks.md used -count 10):
//
//	go test -run '^$' -bench BenchmarkTransfers -benchtime 2000x -count 10 ./node
//
// Flags (after -args): -transfers.blocktime, -transfers.maxgas.
func BenchmarkTransfers(b *testing.B) {
	b.Run("ogpu", func(b *testing.B) {
		senders, doc := benchGenesis(b)
		conf := benchHome(b, doc)
		txs, perSender := signTransfers(b, doc.Params, senders, b.N)
		tree, err := store.OpenTree(conf.DBDir(), node.StateDBName)
		if err != nil {
			b.Fatal(err)
		}
		app := chain.NewApp(tree, node.ProposalBudget(conf))
		n := startBenchNode(b, conf, node.NewClientCreator(app, app.PreverifyTx), tree.Close)
		runTransfers(b, n, perSender, len(txs))
	})
	b.Run("kvstore", func(b *testing.B) {
		// The same genesis as ogpu's, and txs as long as a transfer. The
		// oGPU app returns its validator set from InitChain (genesis.json
		// lists none); kvstore ignores app_state, so its genesis.json must
		// list the node's validator.
		senders, doc := benchGenesis(b)
		conf := benchHome(b, doc)
		listGenesisValidator(b, conf)
		size := transferSize(b, doc.Params, senders[0])
		perSender := make([][][]byte, benchSenders)
		for i := 0; i < b.N; i++ {
			key := fmt.Sprintf("bench%09d", i)
			tx := kvstore.NewTx(key, strings.Repeat("v", max(1, size-len(key)-1)))
			perSender[i%benchSenders] = append(perSender[i%benchSenders], tx)
		}
		n := startBenchNode(b, conf, proxy.NewLocalClientCreator(kvstore.NewInMemoryApplication()))
		runTransfers(b, n, perSender, b.N)
	})
}

// processCPU is the CPU time this process has used so far, user and
// system, all threads. Only the benchmark's goroutine may call it (it
// fails the benchmark); others call rusageCPU.
func processCPU(b *testing.B) time.Duration {
	d, err := rusageCPU()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func rusageCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// benchGenesis returns the senders' keys and an app_state funding each with
// 100,000 oGPU.
func benchGenesis(b *testing.B) ([]*ecdsa.PrivateKey, *genesis.Doc) {
	b.Helper()
	senders := benchKeys(benchSenders)
	doc := genesis.Default()
	for _, k := range senders {
		if err := doc.AddAccount(crypto.PubkeyToAddress(k.PublicKey), types.OGPU(100_000)); err != nil {
			b.Fatal(err)
		}
	}
	return senders, doc
}

// benchKeys returns n fixed secp256k1 keys, so runs are reproducible.
func benchKeys(n int) []*ecdsa.PrivateKey {
	keys := make([]*ecdsa.PrivateKey, n)
	for i := range keys {
		seed := sha256.Sum256([]byte(fmt.Sprintf("ogpu-bench-sender-%d", i)))
		k, err := crypto.ToECDSA(seed[:])
		if err != nil {
			panic(err)
		}
		keys[i] = k
	}
	return keys
}

// benchHome writes a fresh node home in a temporary directory with the
// benchmark's configuration and consensus parameters, and returns its config.
func benchHome(b *testing.B, doc *genesis.Doc) *cmtcfg.Config {
	b.Helper()
	home := b.TempDir()
	conf, err := node.LocalConfig(home, *benchBlockTime)
	if err != nil {
		b.Fatal(err)
	}
	conf.Mempool.Size = benchMempoolSize
	conf.Mempool.MaxTxsBytes = benchMaxTxsBytes
	conf.Mempool.CacheSize = benchCacheSize
	// The oGPU app needs recheck: Commit resets its mempool view to the
	// committed state, and rechecking the txs left in the mempool rebuilds
	// their senders' pending nonces. CometBFT's default, set for both.
	conf.Mempool.Recheck = true
	if _, err := node.InitHome(node.InitOptions{Home: home, ChainID: benchChainID, Moniker: "bench", Genesis: doc, Config: conf}); err != nil {
		b.Fatal(err)
	}
	gen, err := cmttypes.GenesisDocFromFile(conf.GenesisFile())
	if err != nil {
		b.Fatal(err)
	}
	gen.ConsensusParams.Block.MaxBytes = benchBlockBytes
	gen.ConsensusParams.Block.MaxGas = *benchMaxGas
	if err := gen.ValidateAndComplete(); err != nil {
		b.Fatal(err)
	}
	if err := gen.SaveAs(conf.GenesisFile()); err != nil {
		b.Fatal(err)
	}
	return conf
}

// listGenesisValidator writes the node's own validator key into
// genesis.json's validators, with power 10, for apps (kvstore) that do not
// return a validator set from InitChain.
func listGenesisValidator(b *testing.B, conf *cmtcfg.Config) {
	b.Helper()
	pv := privval.LoadFilePV(conf.PrivValidatorKeyFile(), conf.PrivValidatorStateFile())
	pub, err := pv.GetPubKey()
	if err != nil {
		b.Fatal(err)
	}
	gen, err := cmttypes.GenesisDocFromFile(conf.GenesisFile())
	if err != nil {
		b.Fatal(err)
	}
	gen.Validators = []cmttypes.GenesisValidator{{Address: pub.Address(), PubKey: pub, Power: 10, Name: "bench"}}
	if err := gen.ValidateAndComplete(); err != nil {
		b.Fatal(err)
	}
	if err := gen.SaveAs(conf.GenesisFile()); err != nil {
		b.Fatal(err)
	}
}

// startBenchNode starts CometBFT over conf's home with app behind a local
// client, as node.StartChainNode does for the oGPU app (same calls, same
// defaults), and stops it when the benchmark ends. One difference: the tx
// and block indexer writes to an in-memory database. CometBFT v1.0.1's
// Node.OnStop never closes the indexer's database, and its indexer goroutine
// may still be writing when the node stops, so the on-disk (pebble) one can
// neither be closed safely nor be left running while b.TempDir deletes the
// home (pebble then logs "background error" lines into the benchmark
// output). closers (the app's store) run after the node has stopped.
func startBenchNode(b *testing.B, conf *cmtcfg.Config, app proxy.ClientCreator, closers ...func() error) *nm.Node {
	b.Helper()
	dbProvider := func(ctx *cmtcfg.DBContext) (dbm.DB, error) {
		if ctx.ID == "tx_index" {
			return dbm.NewMemDB(), nil
		}
		return cmtcfg.DefaultDBProvider(ctx)
	}
	fail := func(err error) {
		for _, c := range closers {
			_ = c()
		}
		b.Fatal(err)
	}
	nodeKey, err := p2p.LoadNodeKey(conf.NodeKeyFile())
	if err != nil {
		fail(err)
	}
	pv := privval.LoadFilePV(conf.PrivValidatorKeyFile(), conf.PrivValidatorStateFile())
	n, err := nm.NewNode(context.Background(), conf, pv, nodeKey, app,
		nm.DefaultGenesisDocProviderFunc(conf), dbProvider,
		nm.DefaultMetricsProvider(conf.Instrumentation), log.NewNopLogger())
	if err != nil {
		fail(err)
	}
	if err := n.Start(); err != nil {
		fail(err)
	}
	// Registered after b.TempDir's cleanup, so it runs before it.
	b.Cleanup(func() {
		if err := n.Stop(); err != nil {
			b.Error(err)
		}
		n.Wait()
		for _, c := range closers {
			if err := c(); err != nil {
				b.Error(err)
			}
		}
	})
	return n
}

// transferTx builds and signs transfer number i of sender key with the given
// nonce: no round trip to a node.
func transferTx(params genesis.Params, key *ecdsa.PrivateKey, i int, nonce uint64) ([]byte, error) {
	to := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("ogpu-bench-recipient"), uint64(i)))
	tx := &types.Tx{Body: types.TxBody{
		ChainID: benchChainID,
		From:    crypto.PubkeyToAddress(key.PublicKey),
		Nonce:   nonce,
		Msgs:    []types.RawMsg{(&escrow.MsgSend{To: types.BytesToAddress(to[:]), Amount: uint256.NewInt(1_000_000_000)}).Raw()},
	}}
	tx.Body.Fee = node.RequiredFee(&params, tx)
	if err := tx.Sign(key); err != nil {
		return nil, err
	}
	return tx.Encode()
}

// signTransfers signs n transfers, round-robin over senders, each to a new
// recipient. perSender[s] holds sender s's txs in nonce order.
func signTransfers(b *testing.B, params genesis.Params, senders []*ecdsa.PrivateKey, n int) (all [][]byte, perSender [][][]byte) {
	b.Helper()
	perSender = make([][][]byte, len(senders))
	for i := 0; i < n; i++ {
		s := i % len(senders)
		bz, err := transferTx(params, senders[s], i, uint64(len(perSender[s])))
		if err != nil {
			b.Fatal(err)
		}
		perSender[s] = append(perSender[s], bz)
		all = append(all, bz)
	}
	return all, perSender
}

// transferSize is the encoded size of a typical benchmark transfer.
func transferSize(b *testing.B, params genesis.Params, key *ecdsa.PrivateKey) int {
	bz, err := transferTx(params, key, 1000, 100)
	if err != nil {
		b.Fatal(err)
	}
	return len(bz)
}

// runTransfers is the timed part: every sender's goroutine submits its txs in
// order through the local RPC client's BroadcastTxSync (CheckTx), retrying
// while the mempool is full; the benchmark ends when committed blocks hold
// total txs. Afterwards, outside the timer, it checks that every tx
// succeeded.
func runTransfers(b *testing.B, n *nm.Node, perSender [][][]byte, total int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	rpc := local.New(n)

	// Start from a running chain: wait for the first committed block.
	sub, err := n.EventBus().Subscribe(ctx, "bench", cmttypes.EventQueryNewBlockEvents, 10_000)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = n.EventBus().UnsubscribeAll(context.Background(), "bench") }()
	var first int64
	select {
	case msg := <-sub.Out():
		first = msg.Data().(cmttypes.EventDataNewBlockEvents).Height
	case <-sub.Canceled():
		b.Fatal(sub.Err())
	case <-ctx.Done():
		b.Fatal("no block committed")
	}

	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	errc := make(chan error, len(perSender))
	var submitted sync.WaitGroup
	var submitDone, submitCPU time.Duration
	var mu sync.Mutex
	for _, txs := range perSender {
		submitted.Add(1)
		go func() {
			defer submitted.Done()
			for _, tx := range txs {
				for {
					_, err := rpc.BroadcastTxSync(ctx, tx)
					if err == nil {
						break
					}
					if errors.As(err, &mempl.ErrMempoolIsFull{}) || errors.Is(err, mempl.ErrRecheckFull) {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					errc <- fmt.Errorf("broadcast: %w", err)
					return
				}
			}
			cpu, err := rusageCPU()
			if err != nil {
				errc <- err
				return
			}
			mu.Lock()
			submitDone = max(submitDone, time.Since(start))
			submitCPU = max(submitCPU, cpu-cpu0)
			mu.Unlock()
		}()
	}
	committed, last := 0, first
	for committed < total {
		select {
		case msg := <-sub.Out():
			ev := msg.Data().(cmttypes.EventDataNewBlockEvents)
			committed += int(ev.NumTxs)
			last = ev.Height
		case <-sub.Canceled():
			b.Fatal(sub.Err())
		case err := <-errc:
			b.Fatal(err)
		case <-ctx.Done():
			b.Fatalf("%d of %d txs committed: %v", committed, total, ctx.Err())
		}
	}
	elapsed := time.Since(start)
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	submitted.Wait()
	if committed != total {
		b.Fatalf("%d txs committed, want %d", committed, total)
	}

	ok, rounds := 0, 0
	for h := first + 1; h <= last; h++ {
		res, err := rpc.BlockResults(ctx, &h)
		if err != nil {
			b.Fatal(err)
		}
		c, err := rpc.Commit(ctx, &h)
		if err != nil {
			b.Fatal(err)
		}
		rounds += int(c.Commit.Round)
		for _, r := range res.TxResults {
			if r.Code != 0 {
				b.Fatalf("tx in block %d failed (code %d): %s", h, r.Code, r.Log)
			}
			ok++
		}
	}
	if ok != total {
		b.Fatalf("%d successful txs in blocks %d..%d, want %d", ok, first+1, last, total)
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "tx/s")
	b.ReportMetric(float64(total)/float64(last-first), "tx/block")
	b.ReportMetric(float64(total)/submitDone.Seconds(), "submit-tx/s")
	// The process's CPU time (user and system, every thread: the
	// submitters, CometBFT and the app) per transaction: what the run
	// cost, apart from how many cores the machine had to give it.
	b.ReportMetric(float64(cpu.Microseconds())/float64(total), "cpu-µs/tx")
	// Rounds beyond the first, summed over the blocks: a proposal that took
	// longer than timeout_propose to build lost its round.
	b.ReportMetric(float64(rounds), "extra-rounds")
	// The same over the submission only (until the last sender's last
	// CheckTx answered), and the cores it kept busy meanwhile: below the
	// machine's cores, admission waits on something other than the CPU.
	b.ReportMetric(float64(submitCPU.Microseconds())/float64(total), "submit-cpu-µs/tx")
	b.ReportMetric(float64(submitCPU)/float64(submitDone), "submit-cores")
}
