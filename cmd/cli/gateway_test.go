package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/node/agent"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGatewayCommand runs ogpu gateway against a real node: the flags and
// the [gateway] table of config.toml reach the server, the API key is made
// in the wallet home with mode 0600, the API answers (no provider serves
// the model: an empty list and a 404), and Ctrl-C stops it cleanly.
func TestGatewayCommand(t *testing.T) {
	model, err := agent.FindModel()
	if err != nil {
		t.Skip(err)
	}
	e := startEnv(t)
	home := e.base[1]
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[gateway]\nallow-host = [\"gw.internal\"]\nbudget-per-day = \"7ogpu\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := NewOgpuCommand()
	var out syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(append([]string{}, e.base...), "gateway", "--from", "alice", "--addr", addr,
		"--model", "stories260K="+model, "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "warn"))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("ogpu gateway stopped: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not start:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	keyFile := filepath.Join(home, "gateway.key")
	st, err := os.Stat(keyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	key, _ := os.ReadFile(keyFile)
	if !strings.Contains(out.String(), "export OPENAI_API_KEY=$(cat "+keyFile+")") || !strings.Contains(out.String(), "7ogpu per UTC day") ||
		!strings.Contains(out.String(), "session mode, job mode: one on-chain job per request when no session can be opened") {
		t.Fatalf("start message:\n%s", out.String())
	}
	do := func(method, path, host, body string, auth bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if host != "" {
			req.Host = host
		}
		if auth {
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(key)))
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		bz, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(bz)
	}
	if code, body := do("GET", "/v1/models", "", "", true); code != 200 || strings.TrimSpace(body) != `{"object":"list","data":[]}` {
		t.Fatalf("models: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/models", "", "", false); code != 401 {
		t.Fatalf("without the key: %d %s", code, body)
	}
	if code, _ := do("GET", "/health", "gw.internal:80", "", false); code != 200 {
		t.Fatalf("an allowed host from config.toml: %d", code)
	}
	if code, _ := do("GET", "/health", "gw.example:80", "", false); code != 403 {
		t.Fatalf("a foreign host: %d", code)
	}
	code, body := do("POST", "/v1/chat/completions", "", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}]}`, true)
	var e2 struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal([]byte(body), &e2)
	if code != 404 || e2.Error.Code != "model_not_found" || !strings.Contains(e2.Error.Message, "no unjailed provider serves it") {
		t.Fatalf("chat without providers: %d %s", code, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ogpu gateway returned %v after Ctrl-C", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ogpu gateway did not stop")
	}
}

// TestGatewayCommandFlags: bad settings are refused before anything
// starts, each naming what is wrong.
func TestGatewayCommandFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "stories=/no/such/file.gguf"}, "neither a hash nor a file"},
		{[]string{"--model", "m=sha256:" + strings.Repeat("a", 64), "--template", "other=chatml"}, "--template"},
		{[]string{"--model", "m=sha256:" + strings.Repeat("a", 64), "--template", "m=jinja"}, "chatml"},
		{[]string{"--budget-per-day", "lots"}, "--budget-per-day"},
		{[]string{"--cors-origin", "*"}, "no wildcard"},
		{[]string{"--addr", "8080"}, "host:port"},
		{[]string{"--require", "ram>=lots"}, "ram>=lots"},
		{[]string{"--mode", "fast"}, "--mode"},
		{[]string{"--session-budget", "0.01ogpu"}, "session budget"},
		{[]string{"--session-max-price", "much"}, "--session-max-price"},
		{[]string{"--session-grace", "1"}, "session grace"},
		{[]string{"--session-renew-blocks", "700"}, "session renew blocks"},
	} {
		out, err := runCLI(t, append([]string{"--home", dir, "gateway", "--from", "alice"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%v: %v, want %q\n%s", tc.args, err, tc.want, out)
		}
	}
}
