package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestOgpudConsole runs `ogpud console` on a real node: it prints a
// loopback URL with the token in its fragment, serves the explorer there,
// takes the token, and stops cleanly; a node it cannot reach is a clear
// error.
func TestOgpudConsole(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		cmd := NewOgpudCommand()
		cmd.SetOut(pw)
		cmd.SetErr(pw)
		cmd.SetArgs([]string{"console", "--laddr", "127.0.0.1:0", "--node", e.rpc})
		done <- cmd.ExecuteContext(ctx)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("ogpud console printed no URL: %v", err)
	}
	go io.Copy(io.Discard, pr)
	raw, ok := strings.CutPrefix(strings.TrimSpace(line), "console: open ")
	if !ok {
		t.Fatalf("ogpud console printed %q, want `console: open URL`", line)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() != "127.0.0.1" || !strings.HasPrefix(u.Fragment, "token=") || len(u.Fragment) < len("token=")+32 {
		t.Fatalf("console URL %q: want http://127.0.0.1:PORT/#token=… (%v)", raw, err)
	}
	base := "http://" + u.Host
	res, err := http.Get(base + "/validators")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /validators: %d", res.StatusCode)
	}
	for tok, want := range map[string]int{"wrong": 401, strings.TrimPrefix(u.Fragment, "token="): 204} {
		req, _ := http.NewRequest("POST", base+"/api/session", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("POST /api/session with token %q: %d, want %d", tok, res.StatusCode, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ogpud console after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ogpud console did not stop")
	}

	cmd := NewOgpudCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"console", "--laddr", "127.0.0.1:0", "--node", "http://127.0.0.1:1"})
	if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot reach node") {
		t.Fatalf("ogpud console on a dead node: %v, want `cannot reach node`", err)
	}
}
