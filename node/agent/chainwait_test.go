package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtcfg "github.com/cometbft/cometbft/config"
	cmtcrypto "github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	cmtbytes "github.com/cometbft/cometbft/libs/bytes"
	"github.com/cometbft/cometbft/libs/log"
	cmtp2p "github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	rpcclient "github.com/cometbft/cometbft/rpc/client"
	"github.com/cometbft/cometbft/rpc/client/local"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// askRPC counts what an agent asks of its node: status calls and app
// queries.
type askRPC struct {
	rpcclient.Client
	asks atomic.Int64
}

func (r *askRPC) Status(ctx context.Context) (*ctypes.ResultStatus, error) {
	r.asks.Add(1)
	return r.Client.Status(ctx)
}

func (r *askRPC) ABCIQuery(ctx context.Context, path string, data cmtbytes.HexBytes) (*ctypes.ResultABCIQuery, error) {
	r.asks.Add(1)
	return r.Client.ABCIQuery(ctx, path, data)
}

func (r *askRPC) ABCIQueryWithOptions(ctx context.Context, path string, data cmtbytes.HexBytes, o rpcclient.ABCIQueryOptions) (*ctypes.ResultABCIQuery, error) {
	r.asks.Add(1)
	return r.Client.ABCIQueryWithOptions(ctx, path, data, o)
}

// freshNode starts a full node of n's chain that validates nothing and
// has no peer: it has committed no block, so it answers as the node of a
// fresh chain does before its first commit (status at height 0, every
// state query refused with "no committed state yet"), and it stays so
// until join connects it to the chain's validator; then it syncs the
// chain's blocks and follows it.
func (n *testNet) freshNode() (cn *node.ChainNode, join func()) {
	n.t.Helper()
	home := filepath.Join(n.home, "fresh-node")
	conf, err := node.LocalConfig(home, 200*time.Millisecond)
	if err != nil {
		n.t.Fatal(err)
	}
	conf.SetRoot(home)
	cmtcfg.EnsureRoot(home)
	gen, err := os.ReadFile(n.chainConf.GenesisFile())
	if err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(conf.GenesisFile(), gen, 0o644); err != nil {
		n.t.Fatal(err)
	}
	if _, err := cmtp2p.LoadOrGenNodeKey(conf.NodeKeyFile()); err != nil {
		n.t.Fatal(err)
	}
	if _, err := privval.LoadOrGenFilePV(conf.PrivValidatorKeyFile(), conf.PrivValidatorStateFile(), func() (cmtcrypto.PrivKey, error) { return ed25519.GenPrivKey(), nil }); err != nil {
		n.t.Fatal(err)
	}
	conf.P2P.PexReactor = false
	cn, err = node.StartChainNode(n.ctx, conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = cn.Close() })
	join = func() {
		n.t.Helper()
		peer := string(n.chainNode.NodeInfo().ID()) + "@" + strings.TrimPrefix(n.chainConf.P2P.ListenAddress, "tcp://")
		if err := cn.Switch().DialPeersAsync([]string{peer}); err != nil {
			n.t.Fatal(err)
		}
	}
	return cn, join
}

// TestAgentsWaitForTheChainsFirstCommit (issue 30 item 6): a validator
// agent and a provider agent started on a node that has committed no
// block yet (a fresh chain's first start: its state queries are refused,
// "no committed state yet") wait for the chain, saying so in their log,
// and ask again rather than stop: before the fix the validator agent
// returned at once ("cannot read the chain's voting windows: ... no
// committed state yet"), the provider agent on its registration's fee
// (the chain's parameters), and the node ran on without them. Once the
// node has the chain's blocks, the provider registers and bonds and
// follows the blocks, and the validator checks a dispute and votes: the
// chain settles on its re-generation (a hash no slot revealed) and
// slashes both liars. Neither agent logged an error.
func TestAgentsWaitForTheChainsFirstCommit(t *testing.T) {
	n := newTestChainNet(t)
	fresh, join := n.freshNode()

	var mu sync.Mutex
	waiting := map[string]bool{} // agent name -> it logged that it waits
	var errs []string
	tapLogs(t, func(name, line string) {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(line, "waiting for the chain") {
			waiting[name] = true
		}
		if strings.Contains(line, "level=ERROR") {
			errs = append(errs, name+": "+line)
		}
	})
	logged := func(name string) bool {
		mu.Lock()
		defer mu.Unlock()
		return waiting[name]
	}

	// The validator agent, on the fresh node.
	vrpc := &askRPC{Client: local.New(fresh.Node)}
	n.validatorRPC = &downRPC{Client: vrpc}
	n.startValidator(n.operator, n.operatorHost, n.operatorStore)
	vdone := n.validatorDone
	t.Cleanup(n.stopValidator) // before the fresh node closes

	// A provider agent (encrypted pipelines only: it cannot claim the LLM
	// job below), on the fresh node.
	nodeKey, _ := ethcrypto.GenerateKey()
	h, store := n.host("prov1", nodeKey)
	prpc := &askRPC{Client: local.New(fresh.Node)}
	p, err := NewProvider(ProviderConfig{Chain: &node.Client{RPC: prpc}, Key: n.keys["prov1"], Host: h, Store: store, LLM: n.lo,
		Pipeline: true, Bond: types.OGPU(200), AdvertEvery: 200 * time.Millisecond, StateDir: filepath.Join(n.home, "prov1", "state"),
		Logger: slog.New(slog.NewTextHandler(testWriter{t, "prov1"}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	pctx, pcancel := context.WithCancel(n.ctx)
	pdone := make(chan error, 1)
	n.agents.Add(1)
	go func() { defer n.agents.Done(); pdone <- p.Run(pctx) }()
	t.Cleanup(func() { pcancel(); <-pdone }) // before the fresh node closes

	// Each agent logs that it waits for the chain, then asks its node
	// again: it is still running.
	for _, a := range []struct {
		name string
		rpc  *askRPC
		done chan error
	}{{"validator", vrpc, vdone}, {"prov1", prpc, pdone}} {
		var asked int64
		for asked == 0 || a.rpc.asks.Load() <= asked {
			if asked == 0 && logged(a.name) {
				asked = a.rpc.asks.Load()
			}
			select {
			case err := <-a.done:
				a.done <- err
				t.Fatalf("the %s agent stopped on a node with no committed block yet: %v", a.name, err)
			case <-n.ctx.Done():
				t.Fatalf("the %s agent never logged that it waits for the chain and asked again (logged: %v)", a.name, logged(a.name))
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if h := fresh.BlockStore().Height(); h != 0 {
		t.Fatalf("the fresh node has block %d before it joined the chain", h)
	}

	// The node joins the chain: the agents go on.
	join()
	paddr := ethcrypto.PubkeyToAddress(n.keys["prov1"].PublicKey)
	for {
		pv, err := n.c.Provider(n.ctx, paddr)
		if err == nil && pv.PeerID == h.ID().String() && pv.Bonded != nil && !pv.Bonded.Lt(types.OGPU(200)) {
			break
		}
		select {
		case err := <-pdone:
			pdone <- err
			t.Fatalf("the provider agent stopped: %v", err)
		case <-n.ctx.Done():
			t.Fatalf("the provider agent never registered and bonded once its node had the chain (last: %+v, %v)", pv, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	h0, err := n.c.CommittedHeight(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p.height.Load() < uint64(h0)+2 {
		select {
		case err := <-pdone:
			pdone <- err
			t.Fatalf("the provider agent stopped: %v", err)
		case <-n.ctx.Done():
			t.Fatalf("the provider agent's block loop never reached height %d (at %d)", h0+2, p.height.Load())
		case <-time.After(50 * time.Millisecond):
		}
	}

	g := n.greedyJob("Once upon a time", 16)
	job, mal1, mal2, truth := g.job, g.mal1, g.mal2, g.truth
	n.dispute(job, mal1, mal2, mal1.output(g.m, job, g.wrong(3)), mal2.output(g.m, job, g.wrong(5)))
	if r := n.waitCheck(job); r.err != nil {
		t.Fatalf("the validator's check of job %d failed: %v", job, r.err)
	}
	j := n.waitJob(job, "settled", func(j *chain.JobView) bool { return j.Tasks[0].Status == "settled" })
	if j.Tasks[0].Verdict != truth {
		t.Fatalf("settled on %x, want the validator's re-generation %x that no slot revealed", j.Tasks[0].Verdict[:8], truth[:8])
	}
	for _, name := range []string{"mal1", "mal2"} {
		if !n.slashed(name) {
			t.Errorf("%s revealed a wrong output and was not slashed", name)
		}
	}
	for _, a := range []struct {
		name string
		done chan error
	}{{"validator", vdone}, {"prov1", pdone}} {
		select {
		case err := <-a.done:
			a.done <- err
			t.Errorf("the %s agent stopped: %v", a.name, err)
		default:
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Errorf("the agents logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// recordLog records every record a logger writes, with its level.
type recordLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *recordLog) WithGroup(string) slog.Handler      { return l }

func (l *recordLog) with(level string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.HasPrefix(s, level+" ") {
			out = append(out, s)
		}
	}
	return out
}

// TestWaitForChain: an agent's start-up read is asked again while the node
// has no committed state, refuses a query or cannot be reached, and the
// wait is logged with the agent and what it waits for; a refused
// transaction or an answer that cannot be decoded ends it at once, and so
// does the end of its context (with the last refusal).
func TestWaitForChain(t *testing.T) {
	ctx := context.Background()
	noState := &node.QueryError{Code: types.ErrNotFound.Code, Log: "not found: no committed state yet"}
	answers := []error{errNoBlockYet, noState, errors.New("cannot reach node: connection refused"), nil}
	rec := &recordLog{}
	calls := 0
	err := waitForChain(ctx, slog.New(rec), "validator", "the chain's voting windows", func() error {
		calls++
		return answers[calls-1]
	})
	if err != nil || calls != len(answers) {
		t.Fatalf("waitForChain: %v after %d reads, want nil after %d", err, calls, len(answers))
	}
	infos, warns := rec.with("INFO"), rec.with("WARN")
	if len(infos) != 2 || !strings.Contains(infos[0], "validator agent waiting for the chain: its first block") ||
		!strings.Contains(infos[0], "what=the chain's voting windows") || !strings.Contains(infos[1], "the chain answers") {
		t.Errorf("logged %q: want the wait for the first block once (however the node says it has none), naming the agent and what it waits for, and the end of the wait", infos)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "validator agent waiting for the chain: the node to answer (down, starting or catching up)") {
		t.Errorf("logged warnings %q: want one for the node that does not answer", warns)
	}

	var bad map[string]int
	decodeErr := json.Unmarshal([]byte("not json"), &bad)
	for _, final := range []error{
		&node.TxError{Code: types.ErrInsufficientFunds.Code, Log: "insufficient funds"},
		fmt.Errorf("cannot decode the node's answer to /params: %w", decodeErr),
	} {
		calls = 0
		err := waitForChain(ctx, slog.New(rec), "provider", "x", func() error { calls++; return final })
		if !errors.Is(err, final) || calls != 1 {
			t.Errorf("%v: returned %v after %d reads, want it at once", final, err, calls)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	err = waitForChain(cctx, slog.New(rec), "provider", "x", func() error {
		if calls++; calls == 2 {
			cancel()
		}
		return noState
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, noState) || calls != 2 {
		t.Errorf("cancelled while waiting: %v after %d reads, want context.Canceled and the last refusal after 2", err, calls)
	}
}

// undecodable is a node at height 5 whose parameters this agent cannot
// decode (a node of another version): a real error, not one to wait out.
type undecodable struct{ rpcclient.Client }

func (undecodable) Status(context.Context) (*ctypes.ResultStatus, error) {
	return &ctypes.ResultStatus{SyncInfo: ctypes.SyncInfo{LatestBlockHeight: 5, EarliestBlockHeight: 1}}, nil
}

func (undecodable) ABCIQueryWithOptions(context.Context, string, cmtbytes.HexBytes, rpcclient.ABCIQueryOptions) (*ctypes.ResultABCIQuery, error) {
	return &ctypes.ResultABCIQuery{Response: abci.QueryResponse{Value: []byte("not json"), Height: 5}}, nil
}

// TestValidatorStopsLoudly: a validator agent that stops for good (not a
// wait for the chain, not the end of its context) says so at error level,
// naming the agent and what to do; stopped by its context, it does not.
func TestValidatorStopsLoudly(t *testing.T) {
	rec := &recordLog{}
	v := &Validator{Chain: &node.Client{RPC: undecodable{}}, Logger: slog.New(rec)}
	err := v.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot decode") {
		t.Fatalf("Run on a node whose answer cannot be decoded: %v, want that error", err)
	}
	errs := rec.with("ERROR")
	if len(errs) != 1 || !strings.Contains(errs[0], "validator agent stopped for good") || !strings.Contains(errs[0], "restart") ||
		!strings.Contains(errs[0], "agent=validator") || !strings.Contains(errs[0], "cannot decode") {
		t.Fatalf("logged errors %q: want one naming the validator agent, what to do and why", errs)
	}

	rec = &recordLog{}
	v.Logger = slog.New(rec)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := v.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with its context ended: %v, want context.Canceled", err)
	}
	if errs := rec.with("ERROR"); len(errs) != 0 {
		t.Fatalf("logged %q when stopped by its context: want no error", errs)
	}
}
