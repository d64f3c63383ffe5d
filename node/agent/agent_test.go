package agent

import (
	"context"
	"crypto/ecdsa"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cmtcfg "github.com/cometbft/cometbft/config"
	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// testNet is a real in-process chain with real libp2p hosts on loopback
// and real llama.cpp agents on the shared model.
type testNet struct {
	t         *testing.T
	ctx       context.Context
	c         *node.Client
	home      string
	boot      []string
	model     types.Hash
	modelPath string
	lo        llm.Options
	keys      map[string]*ecdsa.PrivateKey
	agents    sync.WaitGroup
	validator *Validator
	// stopValidator stops the validator agent (startValidator).
	stopValidator func()
	// validatorRPC is the validator agent's RPC: a test takes it down.
	validatorRPC *downRPC
	// checks receives the end of every dispute check of the validator.
	checks chan checkResult
	// validatorDone receives what the last started validator agent's Run
	// returned.
	validatorDone chan error
	// The validator agent's operator key, host and store (newTestNet).
	operator      *ecdsa.PrivateKey
	operatorHost  *p2p.Host
	operatorStore *blobstore.Store
	// The chain's node (the genesis validator) and its configuration.
	chainNode *node.ChainNode
	chainConf *cmtcfg.Config
	// stageEvals are the CKKS stage evaluations each pipeline provider
	// reported (ProviderConfig.OnStageEvaluated), by name.
	stageMu    sync.Mutex
	stageEvals map[string][]stageEval
}

type stageEval struct {
	preset string
	took   time.Duration
}

// stageEvaluated records a provider's stage evaluation and passes it to
// the metrics, as the provider command does.
func (n *testNet) stageEvaluated(name, preset string, took time.Duration) {
	n.stageMu.Lock()
	defer n.stageMu.Unlock()
	if n.stageEvals == nil {
		n.stageEvals = map[string][]stageEval{}
	}
	n.stageEvals[name] = append(n.stageEvals[name], stageEval{preset, took})
	metrics.ObserveHEStage(preset, took)
}

type checkResult struct {
	job   uint64
	stage uint16
	err   error
}

// newTestNet starts the chain, with what tweaks change in its genesis,
// and its validator agent.
func newTestNet(t *testing.T, tweaks ...func(*genesis.Doc)) *testNet {
	n := newTestChainNet(t, tweaks...)
	n.startValidator(n.operator, n.operatorHost, n.operatorStore)
	return n
}

// newTestChainNet is newTestNet without the validator agent: the test
// starts it (startValidator with the operator's key, host and store).
func newTestChainNet(t *testing.T, tweaks ...func(*genesis.Doc)) *testNet {
	path, err := FindModel()
	if err != nil {
		t.Fatalf("agent tests need the shared model: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	n := &testNet{t: t, ctx: ctx, home: t.TempDir(), modelPath: path, keys: map[string]*ecdsa.PrivateKey{},
		lo: llm.Options{Threads: 1, BatchSize: 512, ContextSize: 512}}
	doc := genesis.Default()
	// Random audits off: outcomes here are agreements; TestRandomAuditOnRealNodes
	// (node/agent) runs audits on real nodes.
	doc.Params.Market.AuditRateBps = 0
	for _, name := range []string{"client", "prov1", "prov2", "prov3", "mal1", "mal2", "mal3"} {
		k, _ := ethcrypto.GenerateKey()
		n.keys[name] = k
		if err := doc.AddAccount(ethcrypto.PubkeyToAddress(k.PublicKey), types.OGPU(1000)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tweak := range tweaks {
		tweak(doc)
	}
	conf, err := node.LocalConfig(n.home, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.InitHome(node.InitOptions{Home: n.home, ChainID: "agent-test", Moniker: "v", Genesis: doc, Config: conf}); err != nil {
		t.Fatal(err)
	}
	cn, err := node.StartChainNode(ctx, conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cn.Close() })
	n.chainNode, n.chainConf = cn, conf
	// Agents stop before the node closes (cleanups run last-in first-out).
	t.Cleanup(func() { cancel(); n.agents.Wait() })
	n.c = &node.Client{RPC: local.New(cn.Node)}
	if err := n.c.WaitHeight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	op, err := node.LoadOperatorKey(n.home)
	if err != nil {
		t.Fatal(err)
	}
	vh, vs := n.host("validator", op)
	n.boot = vh.Addrs()
	// The validator agent reads and sends through its own client, whose
	// node a test can take down (validatorRPC.down).
	n.validatorRPC = &downRPC{Client: n.c.RPC}
	n.checks = make(chan checkResult, 64)
	n.operator, n.operatorHost, n.operatorStore = op, vh, vs
	return n
}

// startValidator starts a validator agent of operator op on host h and
// store s; stopValidator stops it. Started again, it is a restarted
// process: nothing kept but its key, identity and blobs.
func (n *testNet) startValidator(op *ecdsa.PrivateKey, h *p2p.Host, s *blobstore.Store) {
	v := NewValidator(&node.Client{RPC: n.validatorRPC}, op, h, s, n.lo)
	v.Logger = slog.New(slog.NewTextHandler(testWriter{n.t, "validator"}, nil))
	v.checked = func(job uint64, stage uint16, err error) {
		select {
		case n.checks <- checkResult{job, stage, err}:
		default:
		}
	}
	n.t.Cleanup(v.Close)
	ctx, cancel := context.WithCancel(n.ctx)
	done := make(chan struct{})
	n.validator = v
	n.stopValidator = func() { cancel(); <-done; v.Close() }
	ran := make(chan error, 1)
	n.validatorDone = ran
	n.agents.Add(1)
	go func() { defer n.agents.Done(); defer close(done); ran <- v.Run(ctx) }()
}

func (n *testNet) host(name string, key *ecdsa.PrivateKey) (*p2p.Host, *blobstore.Store) {
	n.t.Helper()
	store, err := blobstore.Open(filepath.Join(n.home, name, "blobs"))
	if err != nil {
		n.t.Fatal(err)
	}
	access := NewAccess(n.c)
	h, err := p2p.New(n.ctx, p2p.Config{Key: key, Listen: p2p.LoopbackListen(), Bootstrap: n.boot, Store: store, Authorize: access.Authorize})
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = h.Close() })
	return h, store
}

type testProvider struct {
	agent  *Provider
	host   *p2p.Host
	cancel context.CancelFunc
	done   chan error
}

// provider starts a provider agent serving the model, priced at
// perTokenMilli thousandths of an oGPU per token, and waits until it is
// registered and bonded.
func (n *testNet) provider(name string, perTokenMilli uint64, lie bool) *testProvider {
	n.t.Helper()
	milli := func(x uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(x), uint256.NewInt(1000)) }
	return n.providerWith(name, pricing.PerToken{Base: milli(100), PerToken: milli(perTokenMilli)}, lie)
}

// providerWith starts a provider agent pricing with strategy.
func (n *testNet) providerWith(name string, strategy pricing.Strategy, lie bool, tweaks ...func(*ProviderConfig)) *testProvider {
	n.t.Helper()
	return n.startProvider(name, func(store *blobstore.Store, cfg *ProviderConfig) {
		for _, tweak := range tweaks {
			tweak(cfg)
		}
		hash, err := store.PutFile(n.modelPath)
		if err != nil {
			n.t.Fatal(err)
		}
		n.model = hash
		cfg.Models, cfg.Strategy, cfg.Attributes, cfg.Lie, cfg.Pipeline = []types.Hash{hash}, strategy, []string{"ram/16Gi"}, lie, true
		cfg.OnStageEvaluated = func(preset string, took time.Duration) { n.stageEvaluated(name, preset, took) }
	})
}

// startProvider starts a provider agent for account name on its own host
// and store, with what configure sets, and waits until it is registered
// and bonded.
func (n *testNet) startProvider(name string, configure func(*blobstore.Store, *ProviderConfig)) *testProvider {
	n.t.Helper()
	nodeKey, _ := ethcrypto.GenerateKey()
	h, store := n.host(name, nodeKey)
	access, err := OpenAccess(n.c, filepath.Join(n.home, name, "access"))
	if err != nil {
		n.t.Fatal(err)
	}
	cfg := ProviderConfig{Access: access, Chain: n.c, Key: n.keys[name], Host: h, Store: store, LLM: n.lo,
		Bond: types.OGPU(200), AdvertEvery: 200 * time.Millisecond, StateDir: filepath.Join(n.home, name, "state"),
		Logger: slog.New(slog.NewTextHandler(testWriter{n.t, name}, nil)),
	}
	configure(store, &cfg)
	p, err := NewProvider(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(p.Close)
	info, err := p.Prepare(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := p.Register(n.ctx, info); err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(n.ctx)
	tp := &testProvider{agent: p, host: h, cancel: cancel, done: make(chan error, 1)}
	n.agents.Add(1)
	go func() { defer n.agents.Done(); tp.done <- p.Serve(ctx) }()
	return tp
}

// kill stops the agent and its host: the provider is gone.
func (tp *testProvider) kill() {
	tp.cancel()
	<-tp.done
	_ = tp.host.Close()
}

func (n *testNet) client() *Client {
	k := n.keys["client"]
	h, store := n.host("client", k)
	return NewClient(n.c, k, h, store, NewAccess(n.c))
}

type testWriter struct {
	t    *testing.T
	name string
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("[%s] %s", w.name, strings.TrimSpace(string(p)))
	if f, ok := logTaps.Load(w.t); ok {
		f.(func(name, line string))(w.name, strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (n *testNet) job(maxTokens uint64) LLMJob {
	st, err := os.Stat(n.modelPath)
	if err != nil {
		n.t.Fatal(err)
	}
	return LLMJob{
		Model: n.model, ModelSize: uint64(st.Size()), Prompt: "Once upon a time", MaxTokens: maxTokens,
		Redundancy: 2, MaxPrice: types.OGPU(5), Req: market.Requirements{MinStake: types.OGPU(100)},
		Windows: market.Windows{Bid: 4, Reveal: 3, Execute: 30, Verify: 15},
	}
}

func (n *testNet) supplyIsCap() {
	n.t.Helper()
	s, err := n.c.Supply(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	total := s.Total()
	if !total.Eq(types.MaxSupply) {
		n.t.Fatalf("supply %s != cap %s", total, types.MaxSupply)
	}
}

// TestProviderKilledAfterBidding: a provider that bids, reveals and then
// dies is awarded a slot it never works on. At the commit deadline the
// chain marks it a no-show, slashes it, and gives its slot to the backup
// bidder, whose agent runs the job; the client still gets the agreed
// answer, pays two replicas, and no oGPU is lost.
func TestProviderKilledAfterBidding(t *testing.T) {
	n := newTestNet(t)
	n.provider("prov1", 40, false)
	doomed := n.provider("prov2", 50, false)
	n.provider("prov3", 60, false)
	cl := n.client()

	// Kill prov2 once its bid is revealed: it is still awarded.
	prov2 := ethcrypto.PubkeyToAddress(n.keys["prov2"].PublicKey)
	killed := make(chan struct{})
	go func() {
		blocks, err := n.c.Subscribe(n.ctx, 1)
		if err != nil {
			return
		}
		for b := range blocks {
			for _, e := range node.EventsOf[market.EventBidRevealed](b.Events) {
				if e.Provider == prov2 {
					doomed.kill()
					close(killed)
					return
				}
			}
		}
	}()
	var lines []string
	res, err := cl.RunLLM(n.ctx, n.job(24), func(f string, a ...any) { lines = append(lines, f) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-killed
	if res.Outcome != "agreed" || !strings.Contains(res.Text, "Lily") {
		t.Fatalf("outcome %s text %q: want the agreed greedy answer", res.Outcome, res.Text)
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	var noShow, prov3 bool
	for _, s := range j.Tasks[0].Slots {
		noShow = noShow || (s.Provider == prov2 && s.NoShow)
		prov3 = prov3 || (s.Provider == ethcrypto.PubkeyToAddress(n.keys["prov3"].PublicKey) && s.Revealed)
	}
	if !noShow || !prov3 {
		t.Fatalf("slots %+v: want prov2 a no-show and prov3 (the backup) revealed", j.Tasks[0].Slots)
	}
	st, err := n.c.Stake(n.ctx, prov2)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Bonded.Lt(types.OGPU(200)) {
		t.Errorf("prov2 still has %s bonded: a no-show is slashed", st.Bonded)
	}
	paid := new(uint256.Int).Mul(j.Prices[0], uint256.NewInt(2))
	if !res.Paid.Eq(paid) {
		t.Errorf("paid %s, want 2 × %s", res.Paid, j.Prices[0])
	}
	n.supplyIsCap()
}

// TestProviderRestartResumes: a provider killed and restarted from its
// state dir picks up what the chain still expects of it although it missed
// the events: killed after sealing its bid and back once the job takes
// reveals, it reveals the bid; killed after revealing and back once the
// job was awarded to it, it runs the task and commits in the window. It is
// neither a no-show nor slashed, and the client pays two replicas (the
// e2e perturbation suite found restarted providers slashed as no-shows).
// With two providers for a redundancy of 2 there is no backup bidder: the
// restarted provider must do the work itself.
func TestProviderRestartResumes(t *testing.T) {
	n := newTestNet(t)
	n.provider("prov1", 40, false)
	prov2 := n.provider("prov2", 50, false)
	addr2 := ethcrypto.PubkeyToAddress(n.keys["prov2"].PublicKey)
	cl := n.client()
	j := n.job(24)
	// Wide windows: a restart (Prepare, Register) takes about 20 blocks
	// here, more under the race detector on a loaded machine.
	j.Windows = market.Windows{Bid: 6, Reveal: 100, Execute: 100, Verify: 15}

	blocks, err := n.c.Subscribe(n.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res *LLMResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cl.RunLLM(n.ctx, j, func(string, ...any) {}, nil)
		done <- result{res, err}
	}()
	// The steps: kill on the first event, restart on the second, and so on.
	// One block may hold two steps' events: the last reveal and the award
	// it triggers (the auction closes at its last sealed bid's reveal).
	step := 0
	var job uint64
	for step < 4 {
		b, ok := <-blocks
		if !ok {
			t.Fatalf("subscription ended at step %d", step)
		}
		if step == 0 {
			for _, e := range node.EventsOf[market.EventBidCommitted](b.Events) {
				if e.Provider == addr2 {
					job = e.Job
					prov2.kill()
					t.Logf("height %d: prov2 sealed its bid on job %d and was killed", b.Height, job)
					step++
				}
			}
		}
		if step == 1 {
			for _, e := range node.EventsOf[market.EventJobRevealing](b.Events) {
				if e.Job == job {
					prov2 = n.provider("prov2", 50, false)
					t.Logf("height %d: job %d takes reveals; prov2 restarted", b.Height, job)
					step++
				}
			}
		}
		if step == 2 {
			for _, e := range node.EventsOf[market.EventBidRevealed](b.Events) {
				if e.Provider == addr2 && e.Job == job {
					prov2.kill()
					t.Logf("height %d: prov2 revealed its bid and was killed", b.Height)
					step++
				}
			}
			if step == 2 && (len(node.EventsOf[market.EventJobAwarded](b.Events)) > 0 || len(node.EventsOf[market.EventJobExpired](b.Events)) > 0) {
				t.Fatalf("height %d: the reveal window of job %d ended without prov2's reveal: the restarted provider forgot its sealed bid", b.Height, job)
			}
		}
		if step == 3 {
			for _, e := range node.EventsOf[market.EventJobAwarded](b.Events) {
				if e.Job == job && slices.Contains(e.Providers, addr2.Hex()) {
					prov2 = n.provider("prov2", 50, false)
					t.Logf("height %d: job %d awarded to prov2 (commit by %d); prov2 restarted", b.Height, job, e.CommitDeadline)
					step++
				}
			}
		}
	}
	var r result
	select {
	case r = <-done:
	case <-n.ctx.Done():
		t.Fatal("the job did not finish")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.Outcome != "agreed" {
		t.Fatalf("outcome %s: want agreed", r.res.Outcome)
	}
	jv, err := n.c.Job(n.ctx, r.res.Job)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range jv.Tasks[0].Slots {
		if s.Provider == addr2 && (s.NoShow || !s.Revealed) {
			t.Fatalf("prov2's slot %+v: a provider restarted within the window must run its task", s)
		}
	}
	st, err := n.c.Stake(n.ctx, addr2)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Bonded.Eq(types.OGPU(200)) {
		t.Fatalf("prov2 has %s bonded after its restarts, want its 200ogpu: slashed", types.FormatAmount(st.Bonded))
	}
	if paid := new(uint256.Int).Mul(jv.Prices[0], uint256.NewInt(2)); !r.res.Paid.Eq(paid) {
		t.Fatalf("paid %s, want 2 × %s", r.res.Paid, jv.Prices[0])
	}
	n.supplyIsCap()
}

// TestProviderAdvertises: a running provider gossips a signed capability
// advert naming its account, peer, runtime and model.
func TestProviderAdvertises(t *testing.T) {
	n := newTestNet(t)
	k, _ := ethcrypto.GenerateKey()
	watcher, _ := n.host("watcher", k)
	ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
	defer cancel()
	ads, err := watcher.Adverts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := n.provider("prov1", 40, false)
	for a := range ads {
		if a.Provider != p.agent.Address() {
			continue
		}
		if a.PeerID != p.host.ID().String() || len(a.Models) != 1 || a.Models[0] != n.model || a.Runtimes[0] != Runtime || a.Class == "" {
			t.Fatalf("advert %+v", a)
		}
		return
	}
	t.Fatal("no advert from the provider before the test's deadline")
}
