package agent

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// newCanaryNet is newTestNet with canary_rate_bps = 10,000 in genesis (one
// validator: every client inference job draws a canary) and a validator
// agent that keeps its canaries under its home.
func newCanaryNet(t *testing.T) *testNet {
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
	doc.Params.Market.CanaryRateBps = 10_000
	for _, name := range []string{"client", "prov1", "prov2", "mal1", "mal2"} {
		k, _ := ethcrypto.GenerateKey()
		n.keys[name] = k
		if err := doc.AddAccount(ethcrypto.PubkeyToAddress(k.PublicKey), types.OGPU(1000)); err != nil {
			t.Fatal(err)
		}
	}
	conf, err := node.LocalConfig(n.home, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.InitHome(node.InitOptions{Home: n.home, ChainID: "canary-test", Moniker: "v", Genesis: doc, Config: conf}); err != nil {
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
	v := NewValidator(n.c, op, vh, vs, n.lo)
	v.Logger = slog.New(slog.NewTextHandler(testWriter{t, "validator"}, nil))
	v.Canary = CanaryConfig{Dir: filepath.Join(n.home, "validator", "canaries"), Listen: p2p.LoopbackListen()}
	n.validator, n.checks = v, make(chan checkResult, 64)
	t.Cleanup(v.Close)
	n.agents.Add(1)
	go func() { defer n.agents.Done(); _ = v.Run(ctx) }()
	return n
}

// waitCanary waits for the validator's first canary to have a job id and
// (with done) to have settled.
func (n *testNet) waitCanary(done bool) CanaryStatus {
	n.t.Helper()
	for {
		for _, c := range n.validator.Canaries() {
			if c.Job != 0 && (!done || c.Done) {
				return c
			}
		}
		select {
		case <-n.ctx.Done():
			n.t.Fatalf("no canary posted (done=%v) before the test's deadline; canaries: %+v", done, n.validator.Canaries())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestC1ValidatorPostsCanaryCatchesCartel: two providers collude (both
// change the same token of every output, so they agree on a wrong
// result) and hold every slot. The client's job settles on their wrong
// agreement: nobody contests it. But the validator agent drew a canary for
// that job (rate 10,000 bps), posted it from a shell account, knew its
// answer by re-execution, saw the cartel agree on something else, claimed
// the canary, voted its re-execution: the cartel is slashed for fraud and
// tombstoned, and none of the slash goes to the canary's poster.
func TestC1ValidatorPostsCanaryCatchesCartel(t *testing.T) {
	n := newCanaryNet(t)
	mal1 := n.provider("mal1", 40, true)
	mal2 := n.provider("mal2", 50, true)
	cl := n.client()
	op := n.validator.Address()

	// Every slash and reveal on the way, from the first block.
	events := make(chan node.BlockEvents, 1024)
	go func() {
		blocks, err := n.c.Subscribe(n.ctx, 1)
		if err != nil {
			return
		}
		for b := range blocks {
			events <- b
		}
	}()
	type jobResult struct {
		res *LLMResult
		err error
	}
	clientDone := make(chan jobResult, 1)
	go func() {
		res, err := cl.RunLLM(n.ctx, n.job(24), nil, nil)
		clientDone <- jobResult{res, err}
	}()

	c := n.waitCanary(true)
	if c.Shell == op || c.Shell == cl.Address() {
		t.Fatalf("canary %d posted from %s: want a shell account, neither the operator nor the client", c.Job, c.Shell.Hex())
	}
	if c.Void {
		t.Fatalf("canary %d is void (another job took its predicted id)", c.Job)
	}
	j, err := n.c.Job(n.ctx, c.Job)
	if err != nil {
		t.Fatal(err)
	}
	if j.Client != c.Shell || j.Seal != verifier.CanarySeal(op, c.StageHashes) {
		t.Fatalf("canary job %d: client %s seal %x; want the shell and the validator's canary seal", c.Job, j.Client.Hex(), j.Seal)
	}
	if !c.Claimed || j.CanaryBy != op {
		t.Fatalf("canary %+v, CanaryBy %s: the validator did not claim the canary the cartel answered wrong", c, j.CanaryBy.Hex())
	}
	if c.Outcome != "verdict" || c.Result != c.Answer || j.Tasks[0].Verdict != c.Answer {
		t.Fatalf("canary settled %s on %x; want a verdict on the known answer %x", c.Outcome, c.Result, c.Answer)
	}
	if c.Agreed == c.Answer || c.Agreed == (types.Hash{}) {
		t.Fatalf("the cartel agreed on %x, the known answer is %x: want a wrong agreement", c.Agreed, c.Answer)
	}
	for _, p := range []*testProvider{mal1, mal2} {
		pv, err := n.c.Provider(n.ctx, p.agent.Address())
		if err != nil {
			t.Fatal(err)
		}
		if !pv.Tombstoned || !pv.Bonded.Lt(types.OGPU(200)) {
			t.Errorf("cartel member %s: tombstoned %v, bonded %s; want slashed for fraud and tombstoned", p.agent.Address().Hex(), pv.Tombstoned, pv.Bonded)
		}
	}
	// The canary's slashes are burned: its poster gains nothing.
	slashed := 0
	deadline := time.After(30 * time.Second)
	for slashed < 2 {
		select {
		case b := <-events:
			for _, e := range node.EventsOf[market.EventSlashed](b.Events) {
				if e.Job != c.Job {
					continue
				}
				slashed++
				if !e.Compensation.IsZero() || e.Burned.IsZero() {
					t.Errorf("slash of %s on canary %d: compensation %s, burned %s; want all burned", e.Account.Hex(), c.Job, e.Compensation, e.Burned)
				}
			}
		case <-deadline:
			t.Fatalf("%d slash events on canary %d, want 2", slashed, c.Job)
		}
	}
	if !j.Compensated.IsZero() {
		t.Errorf("canary %d compensated %s to its poster", c.Job, j.Compensated)
	}
	vals, err := n.c.Validators(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		if v.Operator == op && (!v.Active || v.Jailed) {
			t.Errorf("the validator that claimed a true canary answer is %+v", v)
		}
	}
	select {
	case r := <-clientDone:
		if r.err == nil {
			t.Logf("client job %d settled %s (the cartel's agreement, uncontested: the canary is what catches it)", r.res.Job, r.res.Outcome)
		}
	case <-time.After(30 * time.Second):
	}
	n.supplyIsCap()
}

// TestH4CanaryIndistinguishable: a canary and the client job it was drawn
// from, read through the chain's /job/ID query in the block each was
// posted in, differ only in id, client, seal, input and heights; after the
// honest providers answered the canary right it settles like any job and
// stays hidden (no CanaryBy, never claimed).
func TestH4CanaryIndistinguishable(t *testing.T) {
	n := newCanaryNet(t)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	cl := n.client()

	views := make(chan map[string]any, 16)
	go func() {
		blocks, err := n.c.Subscribe(n.ctx, 1)
		if err != nil {
			return
		}
		for b := range blocks {
			for _, e := range node.EventsOf[market.EventJobPosted](b.Events) {
				res, err := n.c.Query(n.ctx, chain.QueryJob+strconv.FormatUint(e.Job, 10), nil, b.Height, false)
				if err != nil {
					t.Errorf("query job %d at height %d: %v", e.Job, b.Height, err)
					continue
				}
				var m map[string]any
				if err := json.Unmarshal(res.Value, &m); err != nil {
					t.Error(err)
					continue
				}
				views <- m
			}
		}
	}()
	res, err := cl.RunLLM(n.ctx, n.job(24), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := n.waitCanary(true)
	byID := map[uint64]map[string]any{}
	for len(byID) < 2 {
		select {
		case m := <-views:
			byID[uint64(m["ID"].(float64))] = m
		case <-time.After(30 * time.Second):
			t.Fatalf("job views: %d", len(byID))
		}
	}
	client, canary := byID[res.Job], byID[c.Job]
	if client == nil || canary == nil {
		t.Fatalf("views of jobs %v; want the client's %d and the canary %d", byID, res.Job, c.Job)
	}
	if c.Source != res.Job {
		t.Fatalf("canary %d mirrors job %d, want %d", c.Job, c.Source, res.Job)
	}
	// What differs between any two client jobs.
	differs := map[string]bool{"ID": true, "Client": true, "Seal": true, "Input": true, "Posted": true, "BidEnd": true, "RevealEnd": true, "Expiry": true}
	heights := regexp.MustCompile(`[0-9]+`)
	var keys []string
	for k := range client {
		keys = append(keys, k)
	}
	for k := range canary {
		if _, ok := client[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, b := client[k], canary[k]
		if k == "phase" {
			a, b = heights.ReplaceAllString(a.(string), "N"), heights.ReplaceAllString(b.(string), "N")
		}
		if differs[k] {
			continue
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("field %s: client job %v, canary %v: a canary must look like any job", k, a, b)
		}
	}
	if len(keys) < 20 {
		t.Fatalf("only %d fields compared: %v", len(keys), keys)
	}
	t.Logf("compared %d fields of /job/%d and /job/%d: equal but for %v", len(keys), res.Job, c.Job, differs)
	// Answered right: settled agreed, never revealed.
	if c.Outcome != "agreed" || c.Claimed || c.Agreed != c.Answer {
		t.Fatalf("canary %+v: want agreed on the known answer, not claimed", c)
	}
	j, err := n.c.Job(n.ctx, c.Job)
	if err != nil {
		t.Fatal(err)
	}
	if j.CanaryBy != (types.Address{}) {
		t.Fatalf("canary %d answered right was revealed (CanaryBy %s)", c.Job, j.CanaryBy.Hex())
	}
	n.supplyIsCap()
}
