package agent

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cmtbytes "github.com/cometbft/cometbft/libs/bytes"
	rpcclient "github.com/cometbft/cometbft/rpc/client"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	cmttypes "github.com/cometbft/cometbft/types"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// downRPC is the RPC of a real node that can be taken down for a while:
// while down, queries, broadcasts, transaction lookups and status calls
// fail as a dead address's would ("connection refused"); the event
// subscription stays (a provider's block loop is not what these tests
// perturb). refused counts the calls it failed.
type downRPC struct {
	rpcclient.Client
	down    atomic.Bool
	refused atomic.Int64
	// onQuery, if set, sees each query's path before it is answered (a
	// test takes the node down at a given read).
	onQuery func(path string)
	// onBroadcast, if set, sees each transaction before it is broadcast
	// (a test takes the node down at a given transaction); it may be set
	// while the agent runs.
	onBroadcast atomic.Pointer[func(tx cmttypes.Tx)]
	// loseIf, if set and true for a transaction, answers its broadcast
	// "taken" without passing it on: the node took it into its mempool and
	// was killed before a block included it.
	loseIf atomic.Pointer[func(tx cmttypes.Tx) bool]
}

func (r *downRPC) query(path string) error {
	if r.onQuery != nil {
		r.onQuery(path)
	}
	return r.fail()
}

var errConnRefused = errors.New("post failed: dial tcp 127.0.0.1:1: connect: connection refused")

func (r *downRPC) fail() error {
	if r.down.Load() {
		r.refused.Add(1)
		return errConnRefused
	}
	return nil
}

func (r *downRPC) ABCIInfo(ctx context.Context) (*ctypes.ResultABCIInfo, error) {
	if err := r.fail(); err != nil {
		return nil, err
	}
	return r.Client.ABCIInfo(ctx)
}

func (r *downRPC) ABCIQuery(ctx context.Context, path string, data cmtbytes.HexBytes) (*ctypes.ResultABCIQuery, error) {
	if err := r.query(path); err != nil {
		return nil, err
	}
	return r.Client.ABCIQuery(ctx, path, data)
}

func (r *downRPC) ABCIQueryWithOptions(ctx context.Context, path string, data cmtbytes.HexBytes, o rpcclient.ABCIQueryOptions) (*ctypes.ResultABCIQuery, error) {
	if err := r.query(path); err != nil {
		return nil, err
	}
	return r.Client.ABCIQueryWithOptions(ctx, path, data, o)
}

func (r *downRPC) BroadcastTxSync(ctx context.Context, tx cmttypes.Tx) (*ctypes.ResultBroadcastTx, error) {
	if f := r.onBroadcast.Load(); f != nil {
		(*f)(tx)
	}
	if err := r.fail(); err != nil {
		return nil, err
	}
	if f := r.loseIf.Load(); f != nil && (*f)(tx) {
		return &ctypes.ResultBroadcastTx{Hash: tx.Hash()}, nil
	}
	return r.Client.BroadcastTxSync(ctx, tx)
}

func (r *downRPC) Tx(ctx context.Context, hash []byte, prove bool) (*ctypes.ResultTx, error) {
	if err := r.fail(); err != nil {
		return nil, err
	}
	return r.Client.Tx(ctx, hash, prove)
}

func (r *downRPC) Status(ctx context.Context) (*ctypes.ResultStatus, error) {
	if err := r.fail(); err != nil {
		return nil, err
	}
	return r.Client.Status(ctx)
}

// TestFetchTextWhileProviderNodeDown is the soak's finding 4a: a job
// settles and is paid, then the providers' chain node goes down before
// the client fetches the verified text. The providers' access check
// cannot read the chain: it answers "unavailable, try again"
// (p2p.ErrUnavailable), never "forbidden", and the client's fetch keeps
// asking until the node is back, then gets the text. A peer that is no
// party of the job is still refused once the node answers, and that
// refusal ends the fetch at once (it is not retried until the deadline).
func TestFetchTextWhileProviderNodeDown(t *testing.T) {
	n := newTestNet(t)
	rpc := &downRPC{Client: n.c.RPC}
	viaDown := &node.Client{RPC: rpc}
	onDownNode := func(name string) func(*ProviderConfig) {
		return func(cfg *ProviderConfig) {
			a, err := OpenAccess(viaDown, filepath.Join(n.home, name, "access"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Access = a
		}
	}
	perToken := func(milli uint64) pricing.Strategy {
		m := func(x uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(x), uint256.NewInt(1000)) }
		return pricing.PerToken{Base: m(100), PerToken: m(milli)}
	}
	p1 := n.providerWith("prov1", perToken(40), false, onDownNode("prov1"))
	n.providerWith("prov2", perToken(50), false, onDownNode("prov2"))
	cl := n.client()
	res, err := cl.RunLLM(n.ctx, n.job(8), func(f string, a ...any) { t.Logf("[client] "+f, a...) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text == "" {
		t.Fatalf("outcome %s: no text", res.Outcome)
	}
	// The client loses its copy; the providers' node goes down.
	if err := cl.Store.Delete(res.Result); err != nil {
		t.Fatal(err)
	}
	rpc.down.Store(true)
	time.Sleep(decisionTTL + 100*time.Millisecond) // the access decisions cached for the client's fetch expire

	// What a provider answers while its node is down: unavailable, not
	// forbidden.
	fctx, fcancel := context.WithTimeout(n.ctx, 20*time.Second)
	_, err = cl.Host.Fetch(fctx, res.Result, p2p.FetchOptions{Peers: []peer.ID{p1.host.ID()}})
	fcancel()
	if !errors.Is(err, p2p.ErrUnavailable) || errors.Is(err, p2p.ErrForbidden) {
		t.Fatalf("a fetch from a provider whose node is down: %v, want p2p.ErrUnavailable and not ErrForbidden", err)
	}

	type answer struct {
		text string
		err  error
	}
	got := make(chan answer, 1)
	ctx, cancel := context.WithTimeout(n.ctx, 60*time.Second)
	defer cancel()
	go func() {
		text, err := cl.FetchText(ctx, res.Job)
		got <- answer{text, err}
	}()
	// The node stays down until the providers refused several requests
	// for want of it (the client asked, and asked again).
	before := rpc.refused.Load()
	for rpc.refused.Load() < before+6 {
		select {
		case a := <-got:
			t.Fatalf("FetchText returned while the providers' node was down: %q, %v", a.text, a.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case a := <-got:
		t.Fatalf("FetchText returned while the providers' node was down: %q, %v", a.text, a.err)
	default:
	}
	rpc.down.Store(false)
	a := <-got
	if a.err != nil {
		t.Fatalf("FetchText after the node came back: %v", a.err)
	}
	if a.text != res.Text {
		t.Fatalf("FetchText = %q, want the verified %q", a.text, res.Text)
	}

	// A real refusal is final: a stranger is refused, and its fetch
	// ends without waiting for its deadline.
	sk, _ := ethcrypto.GenerateKey()
	stranger, sstore := n.host("stranger", sk)
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(n.ctx, 60*time.Second)
	defer scancel()
	err = fetchVerdict(sctx, stranger, n.c, sstore, j, 0, res.Result)
	if !errors.Is(err, p2p.ErrForbidden) || errors.Is(err, p2p.ErrUnavailable) {
		t.Fatalf("a stranger's fetch: %v, want ErrForbidden", err)
	}
	if sctx.Err() != nil {
		t.Fatalf("a refused fetch was retried until its deadline: %v", err)
	}
}

// TestPipelineStagesWhileNodeDown is the soak's finding 4b: both
// providers of a 3-stage pipeline job reach the chain through one node,
// which goes down (three times) while their stage tasks read the job,
// while the first stage commits, and while the last stage's tasks ask
// whether it is open yet. Each read and the commit are tried again until
// the node is back, instead of ending the task: every stage settles, the
// client decrypts the right output, and no provider is a no-show or
// slashed.
func TestPipelineStagesWhileNodeDown(t *testing.T) {
	n := newTestNet(t)
	rpc := &downRPC{Client: n.c.RPC}
	viaDown := &node.Client{RPC: rpc}
	onDownNode := func(cfg *ProviderConfig) { cfg.Chain = viaDown }
	// The node goes down three times: at the first read of the job once
	// a stage is awarded (a stage task's start: the read that fails is
	// that task's own, not a race with its log line), once a stage-0
	// output is evaluated (its commit follows), and once stage 2's tasks
	// wait for their turn (they ask whether it is open). It comes back
	// half a second after a task logs a retry, or after 20 s (a task that
	// gave up logs none).
	var reads, commits, stageReads atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}
	downOnce := func(why string) {
		mu.Lock()
		defer mu.Unlock()
		if seen[why] {
			return
		}
		seen[why] = true
		rpc.down.Store(true)
		time.AfterFunc(20*time.Second, func() { rpc.down.Store(false) })
	}
	rpc.onQuery = func(path string) {
		// A read of the job once the chain has awarded a stage (through
		// the test's own client): a stage task's start. Bids and reveals
		// are all in by then.
		id, err := strconv.ParseUint(strings.TrimPrefix(path, chain.QueryJob), 10, 64)
		if !strings.HasPrefix(path, chain.QueryJob) || err != nil {
			return
		}
		if j, err := n.c.Job(n.ctx, id); err == nil && len(j.Tasks) > 0 && j.Tasks[0].Status == "executing" {
			downOnce("start")
		}
	}
	tapLogs(t, func(name, line string) {
		switch {
		case strings.Contains(line, "evaluated stage on ciphertexts") && strings.Contains(line, " stage=0 "):
			downOnce("commit")
		case strings.Contains(line, "loaded model and evaluation keys") && strings.Contains(line, " stage=2 "):
			downOnce("turn")
		case strings.Contains(line, "cannot reach the node; retrying"):
			switch {
			case strings.Contains(line, `what="commit result"`):
				commits.Add(1)
			case strings.Contains(line, `what="read the stage"`):
				stageReads.Add(1)
			default:
				reads.Add(1)
			}
			time.AfterFunc(500*time.Millisecond, func() { rpc.down.Store(false) })
		}
	})
	prov1 := n.providerWith("prov1", stagePrices{100, 100, 100}, false, onDownNode)
	prov2 := n.providerWith("prov2", stagePrices{200, 200, 200}, false, onDownNode)
	c := n.client()
	m := pipelineModel(t)
	input := []float64{0.61803, -0.27182, 0.31415, -0.14142, 0.1732, 0.2236}
	job, _ := n.pipelineJob(t, m, input)
	res, err := c.RunPipeline(n.ctx, job, func(f string, a ...any) { t.Logf("[client] "+f, a...) })
	if err != nil {
		t.Fatal(err)
	}
	if reads.Load() < 1 || commits.Load() < 1 || stageReads.Load() < 1 {
		t.Fatalf("stage tasks retried %d reads of the job, %d of a stage's state and %d commits while the node was down (refused %d calls), want each at least once",
			reads.Load(), stageReads.Load(), commits.Load(), rpc.refused.Load())
	}
	want, _ := m.Forward(input)
	for i := range want {
		if math.Abs(res.Output[i]-want[i]) > 1e-3 {
			t.Fatalf("output %d: decrypted %v, plaintext %v", i, res.Output[i], want[i])
		}
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range j.Tasks {
		if task.Status != "settled" {
			t.Errorf("stage %d is %s, want settled", task.Stage, task.Status)
		}
		for _, sl := range task.Slots {
			if sl.NoShow {
				t.Errorf("stage %d: %s was a no-show", task.Stage, sl.Provider.Hex())
			}
		}
	}
	for _, p := range []*testProvider{prov1, prov2} {
		pv, err := n.c.Provider(n.ctx, p.agent.Address())
		if err != nil {
			t.Fatal(err)
		}
		if pv.Jailed || pv.Tombstoned || pv.Reputation.Lost != 0 {
			t.Errorf("%s punished: jailed %v, tombstoned %v, lost %d", p.agent.Address().Hex(), pv.Jailed, pv.Tombstoned, pv.Reputation.Lost)
		}
	}
	t.Logf("chain calls refused while down: %d; tasks that retried: %d job reads, %d stage reads, %d commits", rpc.refused.Load(), reads.Load(), stageReads.Load(), commits.Load())
	n.supplyIsCap()
}

// TestRevealWhileNodeDownIsNoFailure: a provider gives up revealing a
// result after 5 refusals (a reveal the chain keeps refusing will not be
// taken). Reveals tried while its node is down are no refusals: after
// more than 5 of them the result is still to be revealed, and only the
// chain's own refusal (here: an unknown job) counts.
func TestRevealWhileNodeDownIsNoFailure(t *testing.T) {
	n := newTestNet(t)
	rpc := &downRPC{Client: n.c.RPC}
	tp := n.startProvider("prov1", func(_ *blobstore.Store, cfg *ProviderConfig) { cfg.Chain, cfg.Pipeline = &node.Client{RPC: rpc}, true })
	p := tp.agent
	k := taskKey{Job: 999, Stage: 0}
	r := &resultSecret{Result: types.Hash{1}, Salt: types.Hash{2}, CommitDeadline: 1 << 40}
	p.mu.Lock()
	p.results[k] = r
	p.mu.Unlock()
	rpc.down.Store(true)
	for range 8 {
		p.revealResult(n.ctx, k)
	}
	p.mu.Lock()
	failures, revealed := r.Failures, r.Revealed
	p.mu.Unlock()
	if failures != 0 || revealed {
		t.Fatalf("after 8 reveals tried while the node was down (%d calls refused): %d failures, given up %v; want 0, false", rpc.refused.Load(), failures, revealed)
	}
	rpc.down.Store(false)
	p.revealResult(n.ctx, k)
	p.mu.Lock()
	failures = r.Failures
	p.mu.Unlock()
	if failures != 1 {
		t.Fatalf("the chain refused the reveal (unknown job): %d failures counted, want 1", failures)
	}
}

// TestBidRevealLostByItsNode is the 30-minute soak's job 205: both
// providers' reveals reached their node's mempool, the node was killed
// before a block included them, the reveal window ended with no bid
// revealed, the job expired (refunded), and each provider forfeited its
// bid deposit. A reveal is now handed to the node again until a block
// includes it or the window ends: the job is awarded and settles.
func TestBidRevealLostByItsNode(t *testing.T) {
	n := newTestNet(t)
	rpc := &downRPC{Client: n.c.RPC}
	var mu sync.Mutex
	lost := map[types.Address]bool{}
	lose := func(tx cmttypes.Tx) bool {
		dec, err := types.DecodeTx(tx)
		if err != nil || len(dec.Body.Msgs) != 1 || dec.Body.Msgs[0].Type != types.MsgTypeRevealBid {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if lost[dec.Body.From] {
			return false
		}
		lost[dec.Body.From] = true // each provider's first reveal
		return true
	}
	rpc.loseIf.Store(&lose)
	onDownNode := func(cfg *ProviderConfig) { cfg.Chain = &node.Client{RPC: rpc} }
	perToken := func(milli uint64) pricing.Strategy {
		m := func(x uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(x), uint256.NewInt(1000)) }
		return pricing.PerToken{Base: m(100), PerToken: m(milli)}
	}
	n.providerWith("prov1", perToken(40), false, onDownNode)
	n.providerWith("prov2", perToken(50), false, onDownNode)
	cl := n.client()
	lj := n.job(8)
	lj.Windows.Reveal = 25 // 5 s at 200 ms blocks: room for a resend 3 s on
	res, err := cl.RunLLM(n.ctx, lj, func(f string, a ...any) { t.Logf("[client] "+f, a...) }, nil)
	if err != nil {
		t.Fatalf("the job did not settle with its reveals lost once: %v", err)
	}
	mu.Lock()
	nLost := len(lost)
	mu.Unlock()
	if nLost != 2 {
		t.Fatalf("%d providers' reveals were lost, want 2", nLost)
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range j.Tasks[0].Slots {
		if sl.NoShow {
			t.Errorf("%s was a no-show", sl.Provider.Hex())
		}
	}
	t.Logf("job %d %s (%s) with both first reveals lost", res.Job, j.StateName, res.Outcome)
	n.supplyIsCap()
}

// TestRevealsSentTogether: a provider's reveals of one job's bids (one
// per stage) all go out before any is included, and their inclusions are
// awaited side by side. The 20-minute soak on the first version of the
// lost-reveal fix found reveals sent one after another's inclusion: a
// 3-stage job's last reveal came after its 3-block window (the job
// expired), and a bid dropped meanwhile crashed the agent.
func TestRevealsSentTogether(t *testing.T) {
	sentTogether(t, types.MsgTypeRevealBid, "reveals")
}

// TestSealsSentTogether: a provider's sealed bids on one job's stages all
// go out before any is included (finding 18: the soak's pipeline job 221
// expired with no bid on its third stage, whose seals every provider sent
// two blocks into the 4-block bid window, after the first two stages'
// inclusions).
func TestSealsSentTogether(t *testing.T) {
	sentTogether(t, types.MsgTypeCommitBid, "seals")
}

// sentTogether runs a 3-stage pipeline job and fails unless prov1
// broadcast its three transactions of msgType (one per stage) within one
// block of each other.
func sentTogether(t *testing.T, msgType types.MsgType, what string) {
	n := newTestNet(t)
	rpc := &downRPC{Client: n.c.RPC}
	var mu sync.Mutex
	var heights []int64
	rec := func(tx cmttypes.Tx) {
		dec, err := types.DecodeTx(tx)
		if err != nil || len(dec.Body.Msgs) != 1 || dec.Body.Msgs[0].Type != msgType {
			return
		}
		h, _ := n.c.CommittedHeight(n.ctx)
		mu.Lock()
		heights = append(heights, h)
		mu.Unlock()
	}
	rpc.onBroadcast.Store(&rec)
	onDownNode := func(cfg *ProviderConfig) { cfg.Chain = &node.Client{RPC: rpc} }
	n.providerWith("prov1", stagePrices{100, 100, 100}, false, onDownNode)
	n.providerWith("prov2", stagePrices{200, 200, 200}, false)
	c := n.client()
	m := pipelineModel(t)
	input := []float64{0.61803, -0.27182, 0.31415, -0.14142, 0.1732, 0.2236}
	job, _ := n.pipelineJob(t, m, input)
	if _, err := c.RunPipeline(n.ctx, job, func(f string, a ...any) { t.Logf("[client] "+f, a...) }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heights) != 3 {
		t.Fatalf("prov1 broadcast %d %s, want 3 (one per stage)", len(heights), what)
	}
	if span := slices.Max(heights) - slices.Min(heights); span > 1 {
		t.Fatalf("prov1's %s went out at heights %v: one after another's inclusion", what, heights)
	}
}
