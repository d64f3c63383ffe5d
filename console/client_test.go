package console

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// form POSTs vals to path as a browser's form would, with the token (or
// not) and an Origin; it does not follow redirects.
func form(t *testing.T, base, path, token, origin string, vals url.Values) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(vals.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	if token != "" {
		req.AddCookie(&http.Cookie{Name: CookieName, Value: token})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header.Get("Location")
}

// TestClientActions attacks the client's actions on a real node with a
// real client agent: every malformed form, a post without the token or
// from another origin, cancelling someone else's job or a job past its
// bids — each refused with its reason and nothing on chain; then a post
// and a cancel that work.
func TestClientActions(t *testing.T) {
	e := startEnv(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The operator names the models: a script in a name is text on the page.
	model := ModelChoice{Name: `<script>alert("model")</script>`, Hash: sha256.Sum256([]byte("console model")), Size: 1}
	client := e.clientAgent(ctx, t, 0, nil, []ModelChoice{model})
	ce := e.serve(t, Options{Client: client})
	srv := ce.srv
	tok, origin := ce.s.Token(), srv.URL
	me := crypto.PubkeyToAddress(e.keys[0].PublicKey)

	good := url.Values{"model": {model.Hash.Hex()}, "prompt": {"Once upon a time"}, "max_tokens": {"8"}, "redundancy": {"2"}, "max_price": {"1ogpu"}, "mode": {"auction"}}
	with := func(k, v string) url.Values {
		out := url.Values{}
		for kk, vv := range good {
			out[kk] = vv
		}
		out.Set(k, v)
		return out
	}
	unknown := sha256.Sum256([]byte("not offered"))
	cases := []struct {
		name          string
		token, origin string
		vals          url.Values
		status        int
		says          string
	}{
		{"no token", "", origin, good, 401, "needs the console token"},
		{"wrong token", "0123", origin, good, 401, "needs the console token"},
		{"foreign origin", tok, "http://evil.example", good, 403, "cross-origin request refused"},
		{"null origin", tok, "null", good, 403, "cross-origin request refused"},
		{"empty prompt", tok, origin, with("prompt", "  "), 400, "the prompt is empty"},
		{"huge prompt", tok, origin, with("prompt", strings.Repeat("a", maxPromptBytes+1)), 400, "bytes"},
		{"huge body", tok, origin, with("prompt", strings.Repeat("a", 100<<10)), 400, "the form cannot be read"},
		{"zero tokens", tok, origin, with("max_tokens", "0"), 400, "want a whole number from 1"},
		{"too many tokens", tok, origin, with("max_tokens", "99999"), 400, "want a whole number from 1"},
		{"tokens not a number", tok, origin, with("max_tokens", "ten"), 400, "want a whole number from 1"},
		{"one provider", tok, origin, with("redundancy", "1"), 400, "want 2 to 8 providers"},
		{"too many providers", tok, origin, with("redundancy", "9"), 400, "want 2 to 8 providers"},
		{"bad price", tok, origin, with("max_price", "lots"), 400, "price cap"},
		{"zero price", tok, origin, with("max_price", "0"), 400, "the price cap is 0"},
		{"bad mode", tok, origin, with("mode", "free"), 400, "want &#34;auction&#34; or &#34;pool&#34;"},
		{"bad model", tok, origin, with("model", "<script>alert(1)</script>"), 400, "&lt;script&gt;"},
		{"model not offered", tok, origin, with("model", types.Hash(unknown).Hex()), 400, "is not one this console posts jobs for"},
	}
	for _, c := range cases {
		code, body, _ := form(t, srv.URL, "/api/jobs", c.token, c.origin, c.vals)
		if code != c.status || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, code, body, c.status, c.says)
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("%s: the answer echoes a script unescaped", c.name)
		}
	}
	if jobs, err := e.c.Jobs(ctx, "/client/"+me.Hex()); err != nil || len(jobs) != 0 {
		t.Fatalf("refused posts reached the chain: %d jobs (%v)", len(jobs), err)
	}

	// A good post is signed by this process and lands on chain.
	code, body, loc := form(t, srv.URL, "/api/jobs", tok, origin, good)
	var id uint64
	if _, err := fmt.Sscanf(loc, "/jobs/%d", &id); code != http.StatusSeeOther || err != nil {
		t.Fatalf("post: %d to %q: %s", code, loc, body)
	}
	j, err := e.c.Job(ctx, id)
	if err != nil || j.Client != me || j.Mode != market.ModeAuction || j.MaxTokens != 8 || !j.MaxPrice.Eq(types.OGPU(1)) {
		t.Fatalf("job %d is not the form's: %+v (%v)", id, j, err)
	}
	wantPage(t, ce, fmt.Sprintf("/jobs/%d", id), 200, `id="cancel-job"`, `id="output"`, "Who can bid")

	// A console follows at most MaxRunning jobs: a page cannot make its
	// process run jobs without end.
	client.MaxRunning = 1
	if code, body, _ := form(t, srv.URL, "/api/jobs", tok, origin, good); code != 400 || !strings.Contains(body, "1 jobs of this console are still running") {
		t.Fatalf("a post past MaxRunning: %d %q", code, body)
	}
	client.MaxRunning = DefaultMaxRunning

	// Someone else's job cannot be cancelled from this console.
	otherJob, _ := e.sendJob(t, 1, poolJob(model.Hash, "other", market.Windows{Bid: 200, Execute: 50, Verify: 15}))
	for _, c := range []struct {
		path, token string
		status      int
		says        string
	}{
		{fmt.Sprintf("/api/jobs/%d/cancel", otherJob), tok, 403, "Not your job"},
		{fmt.Sprintf("/api/jobs/%d/cancel", id), "", 401, "needs the console token"},
		{"/api/jobs/999999/cancel", tok, 404, "not found"},
		{"/api/jobs/x/cancel", tok, 400, "want a job id"},
		{"/api/sessions/999/close", tok, 409, "no session 999"},
		{"/api/sessions/999/close", "", 401, "needs the console token"},
		{"/api/sessions/0/close", tok, 400, "want a session id"},
	} {
		if code, body, _ := form(t, srv.URL, c.path, c.token, origin, nil); code != c.status || !strings.Contains(body, c.says) {
			t.Errorf("POST %s: %d %q, want %d saying %q", c.path, code, body, c.status, c.says)
		}
	}
	if o, err := e.c.Job(ctx, otherJob); err != nil || o.StateName != "bidding" {
		t.Fatalf("the other client's job was touched: %+v (%v)", o, err)
	}

	// Our own job is cancelled, once: the second time the chain says why not.
	if code, body, loc := form(t, srv.URL, fmt.Sprintf("/api/jobs/%d/cancel", id), tok, origin, nil); code != http.StatusSeeOther || !strings.HasPrefix(loc, fmt.Sprintf("/jobs/%d", id)) {
		t.Fatalf("cancel: %d to %q: %s", code, loc, body)
	}
	if j, err := e.c.Job(ctx, id); err != nil || j.StateName != "cancelled" || !j.Locked.IsZero() {
		t.Fatalf("job %d after the cancel: %+v (%v)", id, j, err)
	}
	if code, body, _ := form(t, srv.URL, fmt.Sprintf("/api/jobs/%d/cancel", id), tok, origin, nil); code != http.StatusConflict || !strings.Contains(body, "was not cancelled") {
		t.Fatalf("second cancel: %d %q, want 409", code, body)
	}
	wantPage(t, ce, "/client", 200, "Post an inference job", fmt.Sprintf(`href="/jobs/%d"`, id), "cancelled", "&lt;script&gt;alert(&#34;model&#34;)&lt;/script&gt;")
}

// TestReadOnlyConsoleHasNoClient: a console without a key offers no
// client page and refuses posts with the remedy, even with the token.
func TestReadOnlyConsoleHasNoClient(t *testing.T) {
	e := startEnv(t, 1)
	wantPage(t, e, "/client", 404, "ogpu console --from NAME")
	code, body, _ := form(t, e.srv.URL, "/api/jobs", e.s.Token(), e.srv.URL, url.Values{"prompt": {"x"}})
	if code != 404 || !strings.Contains(body, "holds no client key") {
		t.Fatalf("post on a read-only console: %d %q", code, body)
	}
	if strings.Contains(wantPage(t, e, "/", 200), "My jobs") {
		t.Fatal("a read-only console links to a client page")
	}
}

// TestModelChoices reads --model specs as the gateway does: a file is
// hashed, a hash kept, anything else refused with the forms it takes.
func TestModelChoices(t *testing.T) {
	path, err := agent.FindModel()
	if err != nil {
		t.Skipf("no model: %v", err)
	}
	h := sha256.Sum256([]byte("m"))
	got, err := ModelChoices([]string{"tiny=" + path, fmt.Sprintf("named=sha256:%x", h[:])})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "tiny" || got[0].Size == 0 || got[1].Name != "named" || got[1].Hash != types.Hash(h) || got[1].Size != 0 {
		t.Fatalf("choices %+v", got)
	}
	want, _, err := blobstore.HashFile(path)
	if err != nil || got[0].Hash != want {
		t.Fatalf("the file's hash %x, want %x (%v)", got[0].Hash, want, err)
	}
	for _, bad := range []string{"x=/no/such/file.gguf", "x=sha256:12", "justaname"} {
		if _, err := ModelChoices([]string{bad}); err == nil || !strings.Contains(err.Error(), "want NAME=sha256:HEX") {
			t.Errorf("--model %q: %v, want the forms it takes", bad, err)
		}
	}
}

// TestClientModelsDefault: without --model a client's console offers the
// model the registered providers serve; with none registered it says to
// pass --model.
func TestClientModelsDefault(t *testing.T) {
	e := startEnv(t, 3)
	if _, err := ClientModels(context.Background(), e.c, nil); err == nil || !strings.Contains(err.Error(), "pass --model") {
		t.Fatalf("no provider: %v", err)
	}
	model := sha256.Sum256([]byte("default model"))
	e.registerProviders(t, model)
	ms, err := ClientModels(context.Background(), e.c, nil)
	if err != nil || len(ms) != 1 || ms[0].Hash != types.Hash(model) || ms[0].Name != fmt.Sprintf("%x", model[:4]) {
		t.Fatalf("default models %+v (%v), want %x", ms, err, model)
	}
}
