package e2e

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cometbft/cometbft/p2p"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// Validators is the size of the testnet: with 4 equal validators any one
// of them may be down, cut off or paused and the other three (3/4 of the
// power, more than 2/3) go on making blocks.
const Validators = 4

// Options describe a testnet to start.
type Options struct {
	// Providers is the number of provider processes (default 3).
	Providers int
	// Commit is the validators' timeout_commit (default 300ms).
	Commit time.Duration
	// Spammers is the number of funded accounts that send spam (default 4).
	Spammers int
}

func (o *Options) defaults() {
	if o.Providers == 0 {
		o.Providers = 3
	}
	if o.Commit == 0 {
		o.Commit = 300 * time.Millisecond
	}
	if o.Spammers == 0 {
		o.Spammers = 4
	}
}

// Net is a running testnet: validators node0..node3 (`ogpud start`),
// whose P2P links all go through Proxy, and provider processes. node0
// and node1 serve the providers and the clients; every validator, these
// two included, is killed, paused and partitioned in turn (one at a
// time: the other three make blocks). The harness reads the chain from
// Ref, a validator not being perturbed.
type Net struct {
	T       testing.TB
	Dir     string
	ChainID string
	Model   string
	Proxy   *Proxy
	Vals    []*Proc
	RPC     []string // host:port of each validator's RPC
	Clients []*node.Client
	Provs   []*Provider
	// Pipeline is the encrypted pipeline jobs' model and inputs.
	Pipeline PipelineFiles

	ogpudBin, ogpuBin string
	password          string // file with the keys' password
	wallet            string // ogpu wallet home holding the provider keys
	spam              []*ecdsa.PrivateKey

	mu      sync.Mutex
	applied map[string]int // perturbations applied, by kind
	// appliedOn counts the perturbations of each validator.
	appliedOn map[int]int
	// perturbed are the providers the harness killed or paused: only
	// they may be penalised for a no-show.
	perturbed map[types.Address]bool
	// down are the node0 heights from a provider's kill to when it was
	// serving again after its restart (to 0: still down).
	down   map[types.Address][]span
	scan   *scanner
	hashes *hashChecker
	checks int
	// perturbing is the validator being perturbed now (-1: none).
	perturbing int
	// valDown are the heights each validator was perturbed at, from the
	// start of its perturbation to its return (for the findings: a
	// provider's or a client's node being down explains what it missed).
	valDown map[int][]span
	// KeepGoing makes Check report violations and go on (the soak).
	KeepGoing bool
	reported  map[string]bool // the violations reported with KeepGoing
}

// PipelineFiles are what `ogpu job run --kind pipeline` takes: the
// example classifier (`ogpu model train-example`, 3 CKKS stages) and test
// examples, one JSON array of 8 features a file.
type PipelineFiles struct {
	Model  string
	Inputs []string
}

// span is a range of heights.
type span struct{ from, to int64 }

// Provider is a provider process with its account.
type Provider struct {
	*Proc
	Name    string
	Addr    types.Address
	Home    string
	PeerID  string // after the first start
	RPCNode int    // its node (0 or 1); it also hands its transactions to node RPCNode+2
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binaries builds ogpud and ogpu once per test binary run.
func binaries(t testing.TB) (ogpud, ogpu string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "ogpu-e2e-bin-")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", buildDir+"/", "github.com/ogpu-network/ogpu/cmd/ogpud", "github.com/ogpu-network/ogpu/cmd/ogpu").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "ogpud"), filepath.Join(buildDir, "ogpu")
}

// run runs a one-shot command and returns its stdout.
func run(t testing.TB, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// freeBase finds a port p such that p .. p+10n+1 are free on loopback
// (`ogpud testnet` gives node i P2P port p+10i and RPC port p+10i+1).
func freeBase(t testing.TB, n int) int {
	t.Helper()
	base, err := node.FreeTestnetBase(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

var (
	peersLine = regexp.MustCompile(`(?m)^persistent_peers = ".*"$`)
	pexLine   = regexp.MustCompile(`(?m)^pex = (true|false)$`)
)

// Start generates and starts the testnet and the providers (model is the
// GGUF file they serve), and stops everything when the test ends.
func Start(t testing.TB, model string, o Options) *Net {
	t.Helper()
	o.defaults()
	ogpudBin, ogpuBin := binaries(t)
	n := &Net{T: t, Dir: t.TempDir(), ChainID: "ogpu-e2e", Model: model, Proxy: NewProxy(), ogpudBin: ogpudBin, ogpuBin: ogpuBin,
		applied: map[string]int{}, appliedOn: map[int]int{}, reported: map[string]bool{}, valDown: map[int][]span{}, perturbed: map[types.Address]bool{}, down: map[types.Address][]span{}, perturbing: -1}
	t.Cleanup(n.Proxy.Close)
	n.password = filepath.Join(n.Dir, "password")
	if err := os.WriteFile(n.password, []byte("perturbation suite\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.wallet = filepath.Join(n.Dir, "wallet")
	var accounts []string
	for i := 0; i < o.Providers; i++ {
		name := fmt.Sprintf("p%d", i+1)
		addr := n.newKey(n.wallet, name)
		accounts = append(accounts, "--account", addr.Hex()+"=1000ogpu")
		n.Provs = append(n.Provs, &Provider{Name: name, Addr: addr, Home: filepath.Join(n.Dir, name), RPCNode: i % 2})
	}
	for i := 0; i < o.Spammers; i++ {
		k, err := crypto.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		n.spam = append(n.spam, k)
		accounts = append(accounts, "--account", crypto.PubkeyToAddress(k.PublicKey).Hex()+"=1000ogpu")
	}
	for i := 0; i < maxClients; i++ {
		addr := n.newKey(n.clientHome(i), clientName(i))
		accounts = append(accounts, "--account", addr.Hex()+"=10000ogpu")
	}

	n.Pipeline = n.pipelineFiles(5)

	out := filepath.Join(n.Dir, "testnet")
	base := freeBase(t, Validators)
	run(t, ogpudBin, append([]string{"testnet", "--validators", fmt.Sprint(Validators), "--output", out, "--starting-port", fmt.Sprint(base),
		"--timeout-commit", o.Commit.String(), "--chain-id", n.ChainID}, accounts...)...)

	// Every validator reaches every other through the proxy: its
	// persistent peers are the proxy's ports, and PEX is off so that no
	// node learns (and dials) another's real address.
	ids := make([]string, Validators)
	for i := range ids {
		nk, err := p2p.LoadNodeKey(filepath.Join(out, fmt.Sprintf("node%d", i), "config", "node_key.json"))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = string(nk.ID())
	}
	for i := 0; i < Validators; i++ {
		var peers []string
		for j := 0; j < Validators; j++ {
			if j == i {
				continue
			}
			addr, err := n.Proxy.Link(i, j, fmt.Sprintf("127.0.0.1:%d", base+10*j))
			if err != nil {
				t.Fatal(err)
			}
			peers = append(peers, ids[j]+"@"+addr)
		}
		cfg := filepath.Join(out, fmt.Sprintf("node%d", i), "config", "config.toml")
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !peersLine.Match(b) || !pexLine.Match(b) {
			t.Fatalf("%s has no persistent_peers or pex line to point at the proxy", cfg)
		}
		b = peersLine.ReplaceAll(b, []byte(`persistent_peers = "`+strings.Join(peers, ",")+`"`))
		b = pexLine.ReplaceAll(b, []byte("pex = false"))
		if err := os.WriteFile(cfg, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Cleanup(n.stopAll)
	t.Cleanup(n.dumpOnFailure)
	for i := 0; i < Validators; i++ {
		home := filepath.Join(out, fmt.Sprintf("node%d", i))
		p := &Proc{Name: fmt.Sprintf("node%d", i), Bin: ogpudBin, Args: []string{"start", "--home", home, "--log_level", "error"}, Log: filepath.Join(home, "ogpud.log")}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		n.Vals = append(n.Vals, p)
		n.RPC = append(n.RPC, fmt.Sprintf("127.0.0.1:%d", base+10*i+1))
		c, err := node.Dial(n.RPC[i])
		if err != nil {
			t.Fatal(err)
		}
		n.Clients = append(n.Clients, c)
	}
	for i := range n.Vals {
		n.waitHeight(i, 3, 2*time.Minute)
	}
	n.scan = newScanner()
	n.hashes = newHashChecker(n.Clients)

	for _, p := range n.Provs {
		if err := os.MkdirAll(p.Home, 0o755); err != nil {
			t.Fatal(err)
		}
		p.Proc = &Proc{Name: p.Name, Bin: ogpudBin, Log: filepath.Join(p.Home, "provider.log"), Args: []string{"provider", "run", "--home", p.Home,
			"--node", "tcp://" + n.RPC[p.RPCNode], "--broadcast", "tcp://" + n.RPC[p.RPCNode+2], "--wallet", n.wallet, "--from", p.Name, "--password-file", n.password,
			"--model", model, "--bond", "200ogpu", "--threads", "1", "--pipeline=true", "--finetune=false",
			"--listen", "/ip4/127.0.0.1/tcp/0", "--metrics.laddr", "off", "--log-level", "info"}}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
	}
	n.waitProviders(len(n.Provs), 3*time.Minute)
	for _, p := range n.Provs {
		pv, err := n.Clients[n.Ref()].Provider(context.Background(), p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		p.PeerID = pv.PeerID
	}
	return n
}

// pipelineFiles trains the example classifier and writes the first k test
// examples as inputs.
func (n *Net) pipelineFiles(k int) PipelineFiles {
	n.T.Helper()
	dir := filepath.Join(n.Dir, "pipeline")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		n.T.Fatal(err)
	}
	pf := PipelineFiles{Model: filepath.Join(dir, "model.json")}
	testSet := filepath.Join(dir, "test.json")
	run(n.T, n.ogpuBin, "model", "train-example", "--out", pf.Model, "--test-out", testSet, "-o", "json")
	b, err := os.ReadFile(testSet)
	if err != nil {
		n.T.Fatal(err)
	}
	var ts struct{ X [][]float64 }
	if err := json.Unmarshal(b, &ts); err != nil || len(ts.X) < k {
		n.T.Fatalf("%s: %d test examples (%v), want %d", testSet, len(ts.X), err, k)
	}
	for i := 0; i < k; i++ {
		x, _ := json.Marshal(ts.X[i])
		f := filepath.Join(dir, fmt.Sprintf("x%d.json", i))
		if err := os.WriteFile(f, x, 0o644); err != nil {
			n.T.Fatal(err)
		}
		pf.Inputs = append(pf.Inputs, f)
	}
	return pf
}

// newKey creates key name in the ogpu wallet at home and returns its
// address.
func (n *Net) newKey(home, name string) types.Address {
	n.T.Helper()
	var k struct{ Address types.Address }
	out := run(n.T, n.ogpuBin, "--home", home, "--password-file", n.password, "--lightkdf", "keys", "add", name, "-o", "json")
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		n.T.Fatalf("ogpu keys add %s: %v in %s", name, err, out)
	}
	return k.Address
}

// maxClients is how many client accounts the genesis funds.
const maxClients = 3

func clientName(i int) string { return fmt.Sprintf("client%d", i+1) }

func (n *Net) clientHome(i int) string { return filepath.Join(n.Dir, clientName(i)) }

func (n *Net) stopAll() {
	var wg sync.WaitGroup
	for _, p := range n.Provs {
		if p.Proc != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.Kill() }()
		}
	}
	for _, p := range n.Vals {
		wg.Add(1)
		go func() { defer wg.Done(); p.Kill() }()
	}
	wg.Wait()
}

// dumpOnFailure logs the tails of every process's log if the test failed.
// With OGPU_E2E_LOGS=DIR every process's whole log is copied to DIR
// (the test's temporary directory is removed when it ends).
func (n *Net) dumpOnFailure() {
	if !n.T.Failed() {
		return
	}
	if dir := os.Getenv(LogsEnv); dir != "" {
		n.keepLogs(dir)
	}
	for _, p := range n.Vals {
		n.T.Logf("--- %s (%s), last lines:\n%s", p.Name, p.Log, p.Tail(4000))
	}
	for _, p := range n.Provs {
		if p.Proc != nil {
			n.T.Logf("--- %s (%s), last lines:\n%s", p.Name, p.Log, p.Tail(4000))
		}
	}
}

// LogsEnv names the directory a failed run's process logs are copied to;
// every client run's whole output is written there as it ends (see
// Load.keepRun), failed run or not.
const LogsEnv = "OGPU_E2E_LOGS"

// keepLogs copies every process's log to dir as NAME.log.
func (n *Net) keepLogs(dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		n.T.Logf("%s=%s: %v", LogsEnv, dir, err)
		return
	}
	for _, p := range n.procs() {
		b, err := os.ReadFile(p.Log)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, p.Name+".log"), b, 0o644)
		}
		if err != nil {
			n.T.Logf("cannot keep %s's log: %v", p.Name, err)
		}
	}
	n.T.Logf("process logs copied to %s", dir)
}

// record records a perturbation.
func (n *Net) record(kind string) {
	n.mu.Lock()
	n.applied[kind]++
	n.mu.Unlock()
	n.T.Logf("perturbation: %s", kind)
}

// recordOn records a perturbation of validator i.
func (n *Net) recordOn(kind string, i int) {
	n.mu.Lock()
	n.applied[kind]++
	n.appliedOn[i]++
	n.mu.Unlock()
	n.T.Logf("perturbation: %s node%d", kind, i)
}

// AppliedOn counts the perturbations of each validator.
func (n *Net) AppliedOn() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]int, len(n.Vals))
	for i, k := range n.appliedOn {
		out[i] = k
	}
	return out
}

// Applied returns the perturbations applied, by kind.
func (n *Net) Applied() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := make(map[string]int, len(n.applied))
	for k, v := range n.applied {
		m[k] = v
	}
	return m
}

// Ref is the validator the harness reads the chain from: node0, or node1
// while node0 is being perturbed.
func (n *Net) Ref() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.perturbing == 0 {
		return 1
	}
	return 0
}

// clientNode is the validator client i posts a job through: node i%2, or
// node i%2+2 while that one is being perturbed.
func (n *Net) clientNode(i int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := i % 2
	if n.perturbing == v {
		v += 2
	}
	return v
}

// perturb marks validator i as being perturbed until the returned func
// runs.
func (n *Net) perturb(i int) func() {
	from := n.Height(n.others(i)[0])
	n.mu.Lock()
	n.perturbing = i
	n.mu.Unlock()
	return func() {
		to := n.Height(n.others(i)[0])
		n.mu.Lock()
		n.perturbing = -1
		n.valDown[i] = append(n.valDown[i], span{from, to})
		n.mu.Unlock()
	}
}

// Height is node i's committed height (0 if it does not answer).
func (n *Net) Height(i int) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h, err := n.Clients[i].CommittedHeight(ctx)
	if err != nil {
		return 0
	}
	return h
}

// Top is the highest committed height among the nodes.
func (n *Net) Top() int64 {
	var top int64
	for i := range n.Vals {
		if h := n.Height(i); h > top {
			top = h
		}
	}
	return top
}

func (n *Net) waitHeight(i int, h int64, within time.Duration) {
	n.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := n.Clients[i].WaitHeight(ctx, h); err != nil {
		n.T.Fatalf("node%d: %v (it is at %d)", i, err, n.Height(i))
	}
}

// Advance waits until every node in on has committed `blocks` more blocks
// than the highest of them now.
func (n *Net) Advance(blocks int64, within time.Duration, on ...int) {
	n.T.Helper()
	var top int64
	for _, i := range on {
		top = max(top, n.Height(i))
	}
	for _, i := range on {
		n.waitHeight(i, top+blocks, within)
	}
}

// CatchUp waits until node i is within 2 blocks of the others' top.
func (n *Net) CatchUp(i int, within time.Duration) {
	n.T.Helper()
	deadline := time.Now().Add(within)
	for {
		var top int64
		for j := range n.Vals {
			if j != i {
				top = max(top, n.Height(j))
			}
		}
		h := n.Height(i)
		if h >= top-2 && h > 0 {
			return
		}
		if time.Now().After(deadline) {
			n.T.Fatalf("node%d did not catch up within %s: at %d, the others at %d", i, within, h, top)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *Net) waitProviders(want int, within time.Duration) {
	n.T.Helper()
	deadline := time.Now().Add(within)
	for {
		pvs, err := n.Clients[n.Ref()].Providers(context.Background())
		ready := 0
		for _, p := range pvs {
			if p.Bonded != nil && !p.Bonded.IsZero() {
				ready++
			}
		}
		if err == nil && ready >= want {
			return
		}
		if time.Now().After(deadline) {
			n.T.Fatalf("%d of %d providers registered and bonded after %s (%v)", ready, want, within, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
