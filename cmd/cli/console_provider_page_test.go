package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ogpu-network/ogpu/node/agent"
)

// TestProviderRunConsolePage: `ogpud provider run --console` serves the
// agent's own section on its provider page: a job the agent cannot run
// (a model it does not serve) is listed with the reason; a pricing change
// without the token is refused (401), and with it reaches the agent.
func TestProviderRunConsolePage(t *testing.T) {
	model, err := agent.FindModel()
	if err != nil {
		t.Skip(err)
	}
	e := startSplitEnv(t, 1)
	rpc := e.base[len(e.base)-1]
	var p1 struct{ Address string }
	if err := json.Unmarshal([]byte(e.ok("keys", "show", "p1", "-o", "json")), &p1); err != nil {
		t.Fatal(err)
	}
	base, token := runInBackground(t, "provider", "run", "--home", filepath.Join(t.TempDir(), "p1"), "--node", rpc,
		"--wallet", e.wallet, "--from", "p1", "--password-file", e.pw, "--model", model, "--bond", "200ogpu",
		"--threads", "1", "--pipeline=false", "--listen", "/ip4/127.0.0.1/tcp/0", "--metrics.laddr", "off",
		"--console", "127.0.0.1:0")
	e.waitProviders(1)

	var post JobPostOutput
	if err := json.Unmarshal([]byte(e.ok("tx", "job", "post", "--from", "client", "--model", hashHex("unserved"), "--max-price", "1ogpu",
		"--max-tokens", "8", "--bid-blocks", "50", "-o", "json")), &post); err != nil || post.Job == 0 {
		t.Fatalf("job post: %+v %v", post, err)
	}
	page := base + "/providers/" + p1.Address
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		res, err := http.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		body = string(b)
		if res.StatusCode == 200 && strings.Contains(body, `id="decisions"`) && strings.Contains(body, ">"+strconv.FormatUint(post.Job, 10)+"</a>") {
			break
		}
	}
	if !strings.Contains(body, `id="decisions"`) || !strings.Contains(body, ">"+strconv.FormatUint(post.Job, 10)+"</a>") || !strings.Contains(body, "is not served here") {
		t.Fatalf("provider page %s does not list the agent's decision on job %d with its reason:\n%s", page, post.Job, body)
	}

	form := url.Values{"base": {"0.2ogpu"}, "per_token": {"0.01ogpu"}}
	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {token, http.StatusOK}} {
		req, _ := http.NewRequest("POST", base+"/api/provider/pricing", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		if c.token != "" {
			req.Header.Set("X-Ogpu-Token", c.token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Fatalf("POST /api/provider/pricing with token %q: %d %s, want %d", c.token, res.StatusCode, b, c.want)
		}
	}
	res, err := http.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(b), "0.01") {
		t.Errorf("the provider page does not show the new price per token 0.01 oGPU:\n%s", b)
	}
}
