package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/node"
)

// These tests run ogpud as separate processes, as an operator would: they
// build the binary once per test run.

var (
	buildOnce sync.Once
	ogpudBin  string
	buildErr  error
)

func ogpud(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs ogpud processes")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ogpud-bin-")
		if err != nil {
			buildErr = err
			return
		}
		ogpudBin = filepath.Join(dir, "ogpud")
		out, err := exec.Command("go", "build", "-o", ogpudBin, "github.com/ogpu-network/ogpu/cmd/ogpud").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return ogpudBin
}

func runOgpud(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(ogpud(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ogpud %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// proc is a running `ogpud start`.
type proc struct {
	cmd *exec.Cmd
	log *os.File
}

func startProc(t *testing.T, home string, args ...string) *proc {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(home, "ogpud.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ogpud(t), append([]string{"start", "--home", home, "--log_level", "error"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: logf}
	t.Cleanup(func() { p.kill(); logf.Close() })
	return p
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

func (p *proc) interrupt(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ogpud exited with %v after Ctrl-C", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ogpud did not stop within 30s of Ctrl-C")
	}
}

func rpcClient(t *testing.T, addr string) *node.Client {
	t.Helper()
	c, err := node.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitHeight(t *testing.T, c *node.Client, h int64, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := c.WaitHeight(ctx, h); err != nil {
		t.Fatal(err)
	}
}

func height(t *testing.T, c *node.Client) int64 {
	t.Helper()
	st, err := c.RPC.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.SyncInfo.LatestBlockHeight
}

// appHashAfter is the app hash committed by block h (in block h+1's header).
func appHashAfter(t *testing.T, c *node.Client, h int64) string {
	t.Helper()
	next := h + 1
	waitHeight(t, c, next, 30*time.Second)
	b, err := c.RPC.Block(context.Background(), &next)
	if err != nil {
		t.Fatal(err)
	}
	return b.Block.AppHash.String()
}

func TestStartKillRestart(t *testing.T) {
	home := filepath.Join(t.TempDir(), "node")
	runOgpud(t, "init", "--home", home, "--chain-id", "ogpu-restart", "--moniker", "solo")
	runOgpud(t, "genesis", "add-account", "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23", "500ogpu", "--home", home)
	rpcPort, _ := node.FreePort()
	p2pPort, _ := node.FreePort()
	flags := []string{"--rpc.laddr", fmt.Sprintf("tcp://127.0.0.1:%d", rpcPort), "--p2p.laddr", fmt.Sprintf("tcp://127.0.0.1:%d", p2pPort), "--consensus.timeout_commit", "100ms"}
	c := rpcClient(t, fmt.Sprintf("127.0.0.1:%d", rpcPort))

	p := startProc(t, home, flags...)
	waitHeight(t, c, 4, 60*time.Second)
	// The validator agent started with the fresh chain, before its first
	// block: it waits for the block, then runs (issue 30 item 6: it
	// stopped, "no committed state yet", and the node ran on without it).
	waitLog(t, filepath.Join(home, "ogpud.log"), "looking for open disputes in the blocks before the start", 60*time.Second)
	if logBytes, _ := os.ReadFile(filepath.Join(home, "ogpud.log")); strings.Contains(string(logBytes), "agent stopped") ||
		strings.Contains(string(logBytes), "WITHOUT its") {
		t.Fatalf("an agent stopped on the chain's first start:\n%s", logBytes)
	}
	h := height(t, c)
	hash := appHashAfter(t, c, h-1)

	// SIGKILL between (or during) blocks, then start again.
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	p = startProc(t, home, flags...)
	waitHeight(t, c, h+3, 60*time.Second)
	if got := appHashAfter(t, c, h-1); got != hash {
		t.Fatalf("after SIGKILL the app hash of height %d is %s, was %s", h-1, got, hash)
	}
	out, err := runCLI(t, "--node", fmt.Sprintf("127.0.0.1:%d", rpcPort), "query", "balance", "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23", "--prove")
	if err != nil || !strings.Contains(out, "500ogpu") || !strings.Contains(out, "verified") {
		t.Fatalf("balance after restart: %v\n%s", err, out)
	}

	// Ctrl-C stops cleanly and says where.
	h = height(t, c)
	p.interrupt(t)
	logBytes, _ := os.ReadFile(filepath.Join(home, "ogpud.log"))
	if !strings.Contains(string(logBytes), "stopped at height") {
		t.Fatalf("no clean shutdown message in:\n%s", logBytes)
	}
	startProc(t, home, flags...)
	waitHeight(t, c, h+2, 60*time.Second)
	if got := appHashAfter(t, c, h-1); got == "" {
		t.Fatal("no app hash after clean restart")
	}
	// Only the first start began from scratch.
	if n := countLines(filepath.Join(home, "ogpud.log"), "resuming after height 0"); n != 1 {
		t.Fatalf("node started from height 0 %d times, want once", n)
	}
}

// waitLog waits until the file at path has a line with s.
func waitLog(t *testing.T, path, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for countLines(path, s) == 0 {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			t.Fatalf("no %q in %s within %s:\n%s", s, path, within, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func countLines(path, s string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			n++
		}
	}
	return n
}

// freeBase finds a port p such that p .. p+10n+1 are free on loopback.
func freeBase(t *testing.T, n int) int {
	t.Helper()
	base, err := node.FreeTestnetBase(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

func TestTestnetFourValidators(t *testing.T) {
	out := filepath.Join(t.TempDir(), "testnet")
	base := freeBase(t, 4)
	runOgpud(t, "testnet", "--validators", "4", "--output", out, "--starting-port", fmt.Sprint(base), "--timeout-commit", "200ms",
		"--account", "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23=100ogpu")
	procs := make([]*proc, 4)
	clients := make([]*node.Client, 4)
	for i := range procs {
		procs[i] = startProc(t, filepath.Join(out, fmt.Sprintf("node%d", i)))
		clients[i] = rpcClient(t, fmt.Sprintf("127.0.0.1:%d", base+10*i+1))
	}
	for _, c := range clients {
		waitHeight(t, c, 3, 90*time.Second)
	}

	// Kill one validator: the other three hold 3/4 of the power and go on.
	procs[3].cmd.Process.Signal(syscall.SIGKILL)
	procs[3].cmd.Wait()
	h := height(t, clients[0])
	for _, c := range clients[:3] {
		waitHeight(t, c, h+3, 90*time.Second)
	}

	// Restart it: it catches up and agrees on every app hash.
	procs[3] = startProc(t, filepath.Join(out, "node3"))
	target := height(t, clients[0]) + 1
	waitHeight(t, clients[3], target, 90*time.Second)
	for _, at := range []int64{2, h + 1, target - 1} {
		want := appHashAfter(t, clients[0], at)
		for i, c := range clients[1:] {
			if got := appHashAfter(t, c, at); got != want {
				t.Fatalf("node%d app hash at height %d = %s, node0 has %s", i+1, at, got, want)
			}
		}
	}
}
