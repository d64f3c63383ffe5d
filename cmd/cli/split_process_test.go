package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cometbft/cometbft/libs/log"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// TestSplitJobRunProcesses: `ogpu job run --stages K` against provider
// processes (`ogpud provider run --slice`, one per stage replica, 2
// replica chains) prints exactly the text of the whole model, for 2 and 3
// stages.
func TestSplitJobRunProcesses(t *testing.T) {
	model, err := agent.FindModel()
	if err != nil {
		t.Skip(err)
	}
	bin := ogpud(t)
	want := wholeModelText(t, model, 40)
	for _, stages := range []int{2, 3} {
		t.Run(fmt.Sprintf("stages%d", stages), func(t *testing.T) {
			e := startSplitEnv(t, 2*stages)
			slices := t.TempDir()
			var plan llm.SplitPlan
			if err := json.Unmarshal([]byte(e.ok("model", "split", model, "--stages", fmt.Sprint(stages), "--out", slices, "-o", "json")), &plan); err != nil {
				t.Fatal(err)
			}
			for i := range 2 * stages {
				name := fmt.Sprintf("p%d", i+1)
				e.startProvider(bin, name, plan.Stages[i%stages].File)
			}
			e.waitProviders(2 * stages)
			out := e.ok("job", "run", "--from", "client", "--model", model, "--prompt", "Once upon a time", "--max-tokens", "40",
				"--stages", fmt.Sprint(stages), "--ctx", "512", "--bid-blocks", "4", "--reveal-blocks", "3", "--execute-blocks", "60",
				"--listen", "/ip4/127.0.0.1/tcp/0", "--timeout", "3m")
			// stdout (the text) comes first; progress follows on stderr.
			got, _, _ := strings.Cut(out, "\n")
			if got != "Once upon a time"+want || !strings.Contains(out, "settled [agreed") {
				t.Fatalf("split job printed\n%q\nthe whole model gives\n%q", got, "Once upon a time"+want)
			}
		})
	}
}

// wholeModelText is the whole model's greedy text after "Once upon a time".
func wholeModelText(t *testing.T, model string, n int) string {
	m, err := llm.Load(model, llm.Options{Threads: 1, ContextSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out, err := m.Generate(context.Background(), llm.Request{Prompt: "Once upon a time", MaxTokens: n}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out.Text
}

type splitEnv struct {
	*cliEnv
	wallet, pw string
	c          *node.Client
}

// startSplitEnv starts an in-process chain with an RPC listener, a wallet
// holding client and providers p1..pN, all funded.
func startSplitEnv(t *testing.T, providers int) *splitEnv {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("correct horse\n"), 0o600)
	wallet := filepath.Join(dir, "wallet")
	e := &splitEnv{cliEnv: &cliEnv{t: t, base: []string{"--home", wallet, "--password-file", pw, "--lightkdf"}}, wallet: wallet, pw: pw}
	doc := genesis.Default()
	// Random audits off: outcomes here are agreements; TestRandomAuditOnRealNodes
	// (node/agent) runs audits on real nodes.
	doc.Params.Market.AuditRateBps = 0
	names := []string{"client"}
	for i := range providers {
		names = append(names, fmt.Sprintf("p%d", i+1))
	}
	for _, name := range names {
		var k struct{ Address types.Address }
		if err := json.Unmarshal([]byte(e.ok("keys", "add", name, "-o", "json")), &k); err != nil {
			t.Fatal(err)
		}
		if err := doc.AddAccount(k.Address, types.OGPU(1000)); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(dir, "node")
	conf, err := node.LocalConfig(home, 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.InitHome(node.InitOptions{Home: home, ChainID: "ogpu-split-test", Genesis: doc, Config: conf}); err != nil {
		t.Fatal(err)
	}
	n, err := node.StartChainNode(context.Background(), conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	e.base = append(e.base, "--node", conf.RPC.ListenAddress)
	e.c, _ = node.Dial(conf.RPC.ListenAddress)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.c.WaitHeight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// startProvider runs `ogpud provider run --slice` as a separate process.
func (e *splitEnv) startProvider(bin, name, slice string) {
	e.t.Helper()
	home := filepath.Join(e.t.TempDir(), name)
	os.MkdirAll(home, 0o755)
	logf, err := os.Create(filepath.Join(home, "provider.log"))
	if err != nil {
		e.t.Fatal(err)
	}
	rpc := e.base[len(e.base)-1]
	cmd := exec.Command(bin, "provider", "run", "--home", home, "--node", rpc, "--wallet", e.wallet, "--from", name,
		"--password-file", e.pw, "--slice", slice, "--bond", "200ogpu", "--threads", "1", "--pipeline=false",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "info")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if e.t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			e.t.Logf("%s's log:\n%s", name, b)
		}
	})
}

// waitProviders waits until n providers are registered and bonded.
func (e *splitEnv) waitProviders(n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		pvs, err := e.c.Providers(ctx)
		ready := 0
		for _, p := range pvs {
			if p.Bonded != nil && !p.Bonded.IsZero() {
				ready++
			}
		}
		if err == nil && ready >= n {
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("%d of %d providers registered and bonded: %v", ready, n, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
