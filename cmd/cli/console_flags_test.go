package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
)

// runInBackground runs an ogpud command line in-process until the test
// ends, and returns the console URL it prints ("console: open URL").
func runInBackground(t *testing.T, args ...string) (base, token string) {
	t.Helper()
	prev := slog.Default()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		cmd := NewOgpudCommand()
		cmd.SetOut(pw)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(args)
		done <- cmd.ExecuteContext(ctx)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ogpud %s after cancel: %v", args[0], err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("ogpud %s did not stop", args[0])
		}
		slog.SetDefault(prev)
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("ogpud %s ended without printing the console URL: %v", args[0], <-done)
			}
			raw, ok := strings.CutPrefix(line, "console: open ")
			if !ok {
				continue
			}
			u, err := url.Parse(raw)
			if err != nil || u.Hostname() != "127.0.0.1" || !strings.HasPrefix(u.Fragment, "token=") {
				t.Fatalf("console URL %q: want http://127.0.0.1:PORT/#token=…", raw)
			}
			return "http://" + u.Host, strings.TrimPrefix(u.Fragment, "token=")
		case <-deadline:
			t.Fatalf("ogpud %s printed no console URL within 2 minutes", args[0])
		}
	}
}

// consoleServes checks the console at base serves the explorer and
// refuses an action without its token, and takes one with it.
func consoleServes(t *testing.T, base, token string) {
	t.Helper()
	res, err := http.Get(base + "/validators")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "<html") {
		t.Fatalf("GET /validators: %d\n%.300s", res.StatusCode, body)
	}
	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"wrong", http.StatusUnauthorized}, {token, http.StatusOK}} {
		req, _ := http.NewRequest("POST", base+"/api/whoami", nil)
		req.Header.Set("Origin", base)
		if c.token != "" {
			req.Header.Set("X-Ogpu-Token", c.token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Fatalf("POST /api/whoami with token %q: %d, want %d", c.token, res.StatusCode, c.want)
		}
	}
}

// TestProviderRunConsole: `ogpud provider run --console` serves the
// console beside a running agent (registered and bonded on chain), prints
// its URL with the token, and refuses an action without the token.
func TestProviderRunConsole(t *testing.T) {
	model, err := agent.FindModel()
	if err != nil {
		t.Skip(err)
	}
	e := startSplitEnv(t, 1)
	rpc := e.base[len(e.base)-1]
	base, token := runInBackground(t, "provider", "run", "--home", filepath.Join(t.TempDir(), "p1"), "--node", rpc,
		"--wallet", e.wallet, "--from", "p1", "--password-file", e.pw, "--model", model, "--bond", "200ogpu",
		"--threads", "1", "--pipeline=false", "--listen", "/ip4/127.0.0.1/tcp/0", "--metrics.laddr", "off",
		"--console", "127.0.0.1:0")
	consoleServes(t, base, token)
	e.waitProviders(1)
}

// TestStartConsole: `ogpud start --console` serves the read-only explorer
// of its own node.
func TestStartConsole(t *testing.T) {
	home := filepath.Join(t.TempDir(), "node")
	cmd := NewOgpudCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"init", "--home", home, "--chain-id", "ogpu-console-start", "--moniker", "solo"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	rpcPort, _ := node.FreePort()
	p2pPort, _ := node.FreePort()
	flags := []string{"start", "--home", home, "--log_level", "error", "--rpc.laddr", fmt.Sprintf("tcp://127.0.0.1:%d", rpcPort),
		"--p2p.laddr", fmt.Sprintf("tcp://127.0.0.1:%d", p2pPort), "--consensus.timeout_commit", "100ms",
		"--metrics.laddr", "off", "--validator-agent=false"}
	base, token := runInBackground(t, append(flags, "--console", "127.0.0.1:0")...)
	consoleServes(t, base, token)
}
