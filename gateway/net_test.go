package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// testNet is a real in-process chain (200 ms blocks), a validator agent,
// real provider agents running llama.cpp on the shared stories260K model
// over libp2p on loopback, and the wallet's client agent: what the
// gateway runs against in production, in one process.
type testNet struct {
	t         testing.TB
	ctx       context.Context
	c         *node.Client
	home      string
	boot      []string
	modelPath string
	model     types.Hash
	modelSize uint64
	lo        llm.Options
	keys      map[string]*ecdsa.PrivateKey
	agents    sync.WaitGroup
	client    *agent.Client
}

// testWindows are short job windows for 200 ms blocks.
var testWindows = market.Windows{Bid: 4, Reveal: 3, Execute: 30, Verify: 15}

func newTestNet(t testing.TB, validator bool) *testNet {
	t.Helper()
	path, err := agent.FindModel()
	if err != nil {
		t.Fatalf("gateway tests need the shared model: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	n := &testNet{t: t, ctx: ctx, home: t.TempDir(), modelPath: path, keys: map[string]*ecdsa.PrivateKey{},
		lo: llm.Options{Threads: 1, BatchSize: 512, ContextSize: 512}}
	n.model, n.modelSize, err = blobstore.HashFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := genesis.Default()
	// Random audits off: outcomes here are agreements; TestRandomAuditOnRealNodes
	// (node/agent) runs audits on real nodes.
	doc.Params.Market.AuditRateBps = 0
	for _, name := range []string{"client", "poor", "prov1", "prov2", "prov3"} {
		k, _ := ethcrypto.GenerateKey()
		n.keys[name] = k
		amount := types.OGPU(1000)
		if name == "poor" {
			amount = types.OGPU(1)
		}
		if err := doc.AddAccount(ethcrypto.PubkeyToAddress(k.PublicKey), amount); err != nil {
			t.Fatal(err)
		}
	}
	conf, err := node.LocalConfig(n.home, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.InitHome(node.InitOptions{Home: n.home, ChainID: "gateway-test", Moniker: "v", Genesis: doc, Config: conf}); err != nil {
		t.Fatal(err)
	}
	cn, err := node.StartChainNode(ctx, conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cn.Close() })
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
	if validator {
		v := agent.NewValidator(n.c, op, vh, vs, n.lo)
		v.Logger = slog.New(slog.NewTextHandler(testWriter{t, "validator"}, nil))
		t.Cleanup(v.Close)
		n.agents.Add(1)
		go func() { defer n.agents.Done(); _ = v.Run(ctx) }()
	}
	n.client = n.newClient("client")
	return n
}

func (n *testNet) host(name string, key *ecdsa.PrivateKey) (*p2p.Host, *blobstore.Store) {
	n.t.Helper()
	store, err := blobstore.Open(filepath.Join(n.home, name, "blobs"))
	if err != nil {
		n.t.Fatal(err)
	}
	access := agent.NewAccess(n.c)
	h, err := p2p.New(n.ctx, p2p.Config{Key: key, Listen: p2p.LoopbackListen(), Bootstrap: n.boot, Store: store, Authorize: access.Authorize})
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = h.Close() })
	return h, store
}

// newClient is the wallet account name's client agent; its store holds
// the model, so the gateway finds the model's header and tokenizer there.
func (n *testNet) newClient(name string) *agent.Client {
	k := n.keys[name]
	h, store := n.host(name, k)
	if _, err := store.PutFile(n.modelPath); err != nil {
		n.t.Fatal(err)
	}
	cl := agent.NewClient(n.c, k, h, store, agent.NewAccess(n.c))
	cl.Logger = slog.New(slog.NewTextHandler(testWriter{n.t, name}, nil))
	return cl
}

type testProvider struct {
	agent  *agent.Provider
	host   *p2p.Host
	cancel context.CancelFunc
	done   chan error
}

// provider starts a provider agent on the model priced at perTokenMilli
// thousandths of an oGPU per token (plus 0.1 oGPU a job), registered and
// bonded when it returns; lie makes it change one token of every output.
func (n *testNet) provider(name string, perTokenMilli uint64, lie bool) *testProvider {
	n.t.Helper()
	milli := func(x uint64) *uint256.Int { return new(uint256.Int).Div(types.OGPU(x), uint256.NewInt(1000)) }
	nodeKey, _ := ethcrypto.GenerateKey()
	h, store := n.host(name, nodeKey)
	access, err := agent.OpenAccess(n.c, filepath.Join(n.home, name, "access"))
	if err != nil {
		n.t.Fatal(err)
	}
	hash, err := store.PutFile(n.modelPath)
	if err != nil {
		n.t.Fatal(err)
	}
	cfg := agent.ProviderConfig{Access: access, Chain: n.c, Key: n.keys[name], Host: h, Store: store, LLM: n.lo,
		Bond: types.OGPU(200), AdvertEvery: 200 * time.Millisecond, StateDir: filepath.Join(n.home, name, "state"),
		Logger: slog.New(slog.NewTextHandler(testWriter{n.t, name}, nil)), Models: []types.Hash{hash},
		Strategy: pricing.PerToken{Base: milli(100), PerToken: milli(perTokenMilli)}, Attributes: []string{"ram/16Gi"}, Lie: lie,
	}
	p, err := agent.NewProvider(cfg)
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

type testWriter struct {
	t    testing.TB
	name string
}

func (w testWriter) Write(p []byte) (int, error) {
	if _, bench := w.t.(*testing.B); bench {
		return len(p), nil // benchmarks print their logs: keep the figures readable
	}
	w.t.Logf("[%s] %s", w.name, strings.TrimSpace(string(p)))
	return len(p), nil
}

// testGateway is a gateway served on a loopback port.
type testGateway struct {
	*Server
	url    string
	cancel context.CancelFunc
	done   chan error
}

// config is a gateway config for tests: files under dir, the model named
// "stories260K", job terms for 200 ms blocks.
func (n *testNet) config(dir string) Config {
	return Config{
		Listen:     "127.0.0.1:0",
		KeyFile:    filepath.Join(dir, "gateway.key"),
		LedgerFile: filepath.Join(dir, "gateway-ledger.json"),
		Models:     []ModelConfig{{Name: "stories260K", Model: modelID(n.model)}},
		// The providers' context (n.lo).
		ContextLength: 512,
		Logger:        slog.New(slog.NewTextHandler(testWriter{n.t, "gateway"}, nil)),
	}
}

func (n *testNet) jobConfig() JobConfig {
	return JobConfig{Redundancy: 2, Req: market.Requirements{MinStake: types.OGPU(100)}, Windows: testWindows}
}

// gateway starts a gateway with cfg over a job backend of client.
func (n *testNet) gateway(cfg Config, client *agent.Client, jc JobConfig) *testGateway {
	n.t.Helper()
	b, err := NewJobBackend(client, jc)
	if err != nil {
		n.t.Fatal(err)
	}
	s, err := New(cfg, n.c, client.Store, b)
	if err != nil {
		n.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &testGateway{Server: s, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { g.done <- s.Serve(ctx, ln, 5*time.Second) }()
	n.t.Cleanup(g.stop)
	return g
}

func (g *testGateway) stop() {
	if g.cancel != nil {
		g.cancel()
		<-g.done
		g.cancel = nil
	}
}

// call sends a request to the gateway with its key and a JSON body.
func (g *testGateway) call(t testing.TB, method, path string, body any, hdr map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		bz, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(bz)
	}
	req, err := http.NewRequest(method, g.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.Key())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// decode reads resp's JSON body into v and checks the status.
func decode(t testing.TB, resp *http.Response, status int, v any) {
	t.Helper()
	defer resp.Body.Close()
	bz, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, bz)
	}
	if v != nil {
		if err := json.Unmarshal(bz, v); err != nil {
			t.Fatalf("%v: %s", err, bz)
		}
	}
}

// apiErr is the error envelope as a client reads it.
type apiErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// wantError checks an error answer: status, code, and that it says
// x-should-retry: false when noRetry.
func wantError(t *testing.T, resp *http.Response, status int, code string, noRetry bool) apiErr {
	t.Helper()
	var e apiErr
	decode(t, resp, status, &e)
	if e.Error.Code != code || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("error %+v, want code %s", e.Error, code)
	}
	if got := resp.Header.Get("X-Should-Retry") == "false"; got != noRetry {
		t.Fatalf("x-should-retry: false is %v, want %v (%s)", got, noRetry, e.Error.Message)
	}
	return e
}

// sseEvent is one server-sent event: its data, or a comment.
type sseEvent struct {
	data    string
	comment string
}

// readSSE reads a whole event stream.
func readSSE(t testing.TB, resp *http.Response) []sseEvent {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		bz, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q, want an event stream: %s", resp.StatusCode, resp.Header.Get("Content-Type"), bz)
	}
	var evs []sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			evs = append(evs, sseEvent{data: strings.TrimPrefix(line, "data: ")})
		case strings.HasPrefix(line, ": "):
			evs = append(evs, sseEvent{comment: strings.TrimPrefix(line, ": ")})
		case line == "":
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// balance is addr's balance.
func (n *testNet) balance(addr types.Address) *uint256.Int {
	n.t.Helper()
	a, err := n.c.Account(n.ctx, addr)
	if err != nil {
		n.t.Fatal(err)
	}
	return a.Balance
}

// jobsOf counts the jobs addr posted.
func (n *testNet) jobsOf(addr types.Address) int {
	n.t.Helper()
	js, err := n.c.Jobs(n.ctx, "/client/"+addr.Hex())
	if err != nil {
		n.t.Fatal(err)
	}
	return len(js)
}

// verifiedText is the text the chain settled on for job id, fetched
// independently of the gateway.
func (n *testNet) verifiedText(id uint64) string {
	n.t.Helper()
	text, err := n.client.FetchText(n.ctx, id)
	if err != nil {
		n.t.Fatal(err)
	}
	return text
}

func mustAmount(t *testing.T, s string) *uint256.Int {
	t.Helper()
	a, err := types.ParseAmount(s + types.Denom)
	if err != nil {
		t.Fatalf("amount %q: %v", s, err)
	}
	return a
}

func sub(a, b *uint256.Int) *uint256.Int { return new(uint256.Int).Sub(a, b) }
