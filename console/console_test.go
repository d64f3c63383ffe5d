package console

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// evilMoniker is the validator's name: the pages must show it as text.
const evilMoniker = `<script>alert("moniker")</script>`

type env struct {
	c    *node.Client
	keys []*ecdsa.PrivateKey
	s    *Server
	srv  *httptest.Server
}

func testKey(t testing.TB, i int) *ecdsa.PrivateKey {
	seed := sha256.Sum256([]byte(fmt.Sprintf("ogpu-console-test-%d", i)))
	k, err := crypto.ToECDSA(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startEnv starts a real single-validator node (blocks every 100 ms, the
// validator named evilMoniker, keys funded) and the console on it.
func startEnv(t *testing.T, funded int) *env {
	t.Helper()
	return startEnvOpts(t, funded, func(*env) Options { return Options{} })
}

// startEnvOpts is startEnv with the console's Options made from the env
// (its keys exist by then).
func startEnvOpts(t *testing.T, funded int, opts func(*env) Options) *env {
	t.Helper()
	home := t.TempDir()
	conf, err := node.LocalConfig(home, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	doc := genesis.Default()
	// Random audits off: outcomes here are agreements; TestRandomAuditOnRealNodes
	// (node/agent) runs audits on real nodes.
	doc.Params.Market.AuditRateBps = 0
	e := &env{}
	for i := range funded {
		k := testKey(t, i)
		e.keys = append(e.keys, k)
		if err := doc.AddAccount(crypto.PubkeyToAddress(k.PublicKey), types.OGPU(1000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := node.InitHome(node.InitOptions{Home: home, ChainID: "ogpu-console-test", Moniker: evilMoniker, Genesis: doc, Config: conf}); err != nil {
		t.Fatal(err)
	}
	n, err := node.StartChainNode(context.Background(), conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if e.c, err = node.Dial(conf.RPC.ListenAddress); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.c.WaitHeight(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if e.s, err = New(e.c, opts(e)); err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.s.Handler())
	t.Cleanup(e.srv.Close)
	e.s.AllowListener(e.srv.Listener.Addr())
	rctx, rcancel := context.WithCancel(context.Background())
	t.Cleanup(rcancel)
	go e.s.Run(rctx)
	return e
}

// postJob posts a pool job from key 0 and returns its id and the tx.
func (e *env) postJob(t *testing.T) (uint64, []byte) {
	t.Helper()
	id, res := e.sendJob(t, 0, poolJob(sha256.Sum256([]byte("console model")), "console", market.Windows{Bid: 200, Execute: 50, Verify: 15}))
	return id, res.Hash
}

// poolJob is a pool inference job for model at 1 oGPU per replica, r=2,
// 100 oGPU minimum stake; name makes its input and seal.
func poolJob(model types.Hash, name string, w market.Windows) *market.MsgPostJob {
	return &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModePool, Model: model, ModelSize: 1, Stages: 1, Redundancy: 2,
		MaxPrice: types.OGPU(1), Req: market.Requirements{MinStake: types.OGPU(100)}, Input: sha256.Sum256([]byte(name + " input")),
		Windows: w, Seal: sha256.Sum256([]byte(name + " seal")),
	}
}

// sendJob sends m from key i and returns the job it posted and the tx.
func (e *env) sendJob(t *testing.T, i int, m *market.MsgPostJob) (uint64, *ctypes.ResultTx) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := node.NewSender(e.c, e.keys[i]).Send(ctx, m.Raw())
	if err != nil {
		t.Fatal(err)
	}
	var posted market.EventJobPosted
	if err := node.FindEvent(res, &posted); err != nil {
		t.Fatal(err)
	}
	return posted.Job, res
}

func (e *env) cancelJob(t *testing.T, id uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := node.NewSender(e.c, e.keys[0]).Send(ctx, (&market.MsgCancelJob{Job: id}).Raw()); err != nil {
		t.Fatal(err)
	}
}

func (e *env) get(t *testing.T, path string) (int, string, http.Header) {
	t.Helper()
	res, err := http.Get(e.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

func wantPage(t *testing.T, e *env, path string, status int, contains ...string) string {
	t.Helper()
	code, body, h := e.get(t, path)
	if code != status {
		t.Fatalf("GET %s: status %d, want %d; body:\n%s", path, code, status, body)
	}
	if h.Get("Content-Security-Policy") != CSP {
		t.Fatalf("GET %s: CSP %q, want %q", path, h.Get("Content-Security-Policy"), CSP)
	}
	for _, c := range contains {
		if !strings.Contains(body, c) {
			t.Fatalf("GET %s: the page lacks %q; body:\n%s", path, c, body)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Fatalf("GET %s: an unescaped script in the page:\n%s", path, body)
	}
	return body
}

func TestPages(t *testing.T) {
	e := startEnv(t, 2)
	id, hash := e.postJob(t)
	addr := crypto.PubkeyToAddress(e.keys[0].PublicKey)
	hx := fmt.Sprintf("%X", hash)

	wantPage(t, e, "/", 200, "Latest block", "ogpu-console-test", `href="/blocks/1"`)
	wantPage(t, e, "/validators", 200, "&lt;script&gt;alert(&#34;moniker&#34;)&lt;/script&gt;", "active", "Total power")
	wantPage(t, e, "/params", 200, "Parameters")
	wantPage(t, e, "/supply", 200, "The supply invariant holds", "Circulating", "Bridge outbound")
	wantPage(t, e, "/tx/"+hx, 200, "post-job", addr.Hex(), "job_posted", `<span class="ok">ok</span>`)
	wantPage(t, e, "/accounts/"+addr.Hex(), 200, "Balance", "Nonce", "Bonded stake")
	job := wantPage(t, e, fmt.Sprintf("/jobs/%d", id), 200, "Timeline", "job_posted", `data-step="posted" class="done"`, addr.Hex())
	if strings.Contains(job, `data-step="settled" class="done"`) {
		t.Fatalf("an open job's timeline is settled:\n%s", job)
	}

	// The block with the job's tx shows it decoded.
	ctx := context.Background()
	res, err := e.c.RPC.Tx(ctx, hash, false)
	if err != nil {
		t.Fatal(err)
	}
	wantPage(t, e, fmt.Sprintf("/blocks/%d", res.Height), 200, "post-job", addr.Hex(), "Transactions (1)")

	// After a cancel the timeline reaches settled.
	e.cancelJob(t, id)
	wantPage(t, e, fmt.Sprintf("/jobs/%d", id), 200, "job_cancelled", `data-step="settled" class="done"`)

	// Search sends each kind of query to its page.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for q, want := range map[string]string{
		fmt.Sprint(id):              fmt.Sprintf("/jobs/%d", id),
		hx:                          "/tx/" + hx,
		"0x" + hx:                   "/tx/" + hx,
		addr.Hex():                  "/accounts/" + addr.Hex(),
		strings.ToLower(addr.Hex()): "/accounts/" + addr.Hex(),
	} {
		r, err := noRedirect.Get(e.srv.URL + "/search?q=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != want {
			t.Fatalf("search %q: %d to %q, want 303 to %q", q, r.StatusCode, r.Header.Get("Location"), want)
		}
	}
	// The static assets are served, with no inline script in any page.
	wantPage(t, e, "/static/app.js", 200, "EventSource")
	wantPage(t, e, "/static/style.css", 200, ".stepper")
}

func TestBadInput(t *testing.T) {
	e := startEnv(t, 1)
	cases := []struct {
		path   string
		status int
		says   string
	}{
		{"/jobs/999999", 404, "Job 999999 not found"},
		{"/jobs/abc", 400, "want a job id"},
		{"/jobs/0", 400, "want a job id"},
		{"/jobs/99999999999999999999999", 400, "want a job id"},
		{"/?page=999999999", 404, "past the last page"},
		{"/?page=18446744073709551615", 404, "past the last page"},
		{"/?page=18446744073709551616", 400, "want a page number"},
		{"/?page=-1", 400, "want a page number"},
		{"/blocks/99999999", 404, "is not on this node"},
		{"/blocks/x", 400, "want a height"},
		{"/tx/zz", 400, "want 64 hex digits"},
		{"/tx/" + strings.Repeat("ab", 32), 404, "no transaction"},
		{"/accounts/0x12", 400, "want 0x and 40 hex digits"},
		{"/search?q=" + url.QueryEscape(`<script>alert("q")</script>`), 400, "&lt;script&gt;"},
		{"/nope", 404, "There is no page"},
		{"/api/events?job=x", 400, "want a job id"},
	}
	for _, c := range cases {
		code, body, _ := e.get(t, c.path)
		if code != c.status || !strings.Contains(body, c.says) {
			t.Errorf("GET %s: %d, want %d with %q; body:\n%s", c.path, code, c.status, c.says, body)
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("GET %s: an unescaped script:\n%s", c.path, body)
		}
	}
}

// post sends a POST to path with the given Origin, cookie and form.
func (e *env) post(t *testing.T, path, origin, cookie string, form url.Values) (int, *http.Response) {
	t.Helper()
	req, err := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res
}

// TestActionsNeedTokenAndOrigin: the attacks of another web page (a
// cross-origin POST, with or without the victim's cookie), of a page
// without the token, and of DNS rebinding.
func TestActionsNeedTokenAndOrigin(t *testing.T) {
	e := startEnv(t, 1)
	self := e.srv.URL
	tok := e.s.Token()
	if len(tok) < 32 {
		t.Fatalf("token %q: too short", tok)
	}
	// No token: refused, even same-origin.
	if code, _ := e.post(t, "/api/whoami", self, "", nil); code != http.StatusUnauthorized {
		t.Fatalf("POST without the token: %d, want 401", code)
	}
	if code, _ := e.post(t, "/api/whoami", self, "0123", nil); code != http.StatusUnauthorized {
		t.Fatalf("POST with a wrong token: %d, want 401", code)
	}
	if code, _ := e.post(t, "/api/session", self, "", url.Values{"token": {"bad"}}); code != http.StatusUnauthorized {
		t.Fatalf("session with a wrong token: %d, want 401", code)
	}
	// Cross-origin, or no Origin: refused even with the right token.
	for _, o := range []string{"http://evil.example", "", "null", "http://127.0.0.1:1"} {
		if code, _ := e.post(t, "/api/whoami", o, tok, nil); code != http.StatusForbidden {
			t.Fatalf("POST from Origin %q with the token: %d, want 403", o, code)
		}
		if code, _ := e.post(t, "/api/session", o, "", url.Values{"token": {tok}}); code != http.StatusForbidden {
			t.Fatalf("session from Origin %q: %d, want 403", o, code)
		}
	}
	// The token exchange sets an HttpOnly SameSite=Strict cookie that
	// authorises actions.
	code, res := e.post(t, "/api/session", self, "", url.Values{"token": {tok}})
	if code != http.StatusNoContent {
		t.Fatalf("session with the token: %d, want 204", code)
	}
	var ck *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == CookieName {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value != tok {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, the token", ck)
	}
	if code, _ := e.post(t, "/api/whoami", self, ck.Value, nil); code != http.StatusOK {
		t.Fatalf("POST with the cookie: %d, want 200", code)
	}
	// DNS rebinding: a foreign Host is refused, for reads too.
	req, _ := http.NewRequest("GET", self+"/validators", nil)
	req.Host = "attacker.example:80"
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("GET with Host attacker.example: %d, want 421", r.StatusCode)
	}
}

// TestEventsStream: the SSE stream delivers new blocks and the job's
// events as they commit.
func TestEventsStream(t *testing.T) {
	e := startEnv(t, 1)
	id, _ := e.postJob(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/events?job=%d", e.srv.URL, id), nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	go func() {
		c2, cl := context.WithTimeout(context.Background(), 20*time.Second)
		defer cl()
		node.NewSender(e.c, e.keys[0]).Send(c2, (&market.MsgCancelJob{Job: id}).Raw())
	}()
	var seen strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), `"type":"job_cancelled"`) {
		n, err := res.Body.Read(buf)
		if err != nil {
			t.Fatalf("stream ended before job_cancelled (%v); got:\n%s", err, seen.String())
		}
		seen.Write(buf[:n])
	}
	if !strings.Contains(seen.String(), "event: block") || !strings.Contains(seen.String(), `"step":"settled"`) {
		t.Fatalf("stream lacks blocks or the settled step:\n%s", seen.String())
	}
}

// TestScriptInMemoEscaped: a transaction's memo is anyone's text; the
// block and tx pages show a script in it as text.
func TestScriptInMemoEscaped(t *testing.T) {
	e := startEnv(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	memo := `<script>alert("memo")</script><img src=x onerror=alert(1)>`
	bz, _, err := e.c.SignTx(ctx, e.keys[0], []types.RawMsg{(&escrow.MsgSend{To: crypto.PubkeyToAddress(e.keys[0].PublicKey), Amount: types.OGPU(1)}).Raw()}, node.BuildOptions{Memo: memo})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.c.BroadcastAndWait(ctx, bz)
	if err != nil {
		t.Fatal(err)
	}
	hx := fmt.Sprintf("%X", res.Hash)
	body := wantPage(t, e, "/tx/"+hx, 200, "&lt;script&gt;alert(&#34;memo&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;", ">send<")
	if strings.Contains(body, "<img src=x") {
		t.Fatalf("an unescaped tag from the memo:\n%s", body)
	}
	wantPage(t, e, fmt.Sprintf("/blocks/%d", res.Height), 200, ">send<", hx[:12])
}

// poolJob registers and bonds providers keys[1] and keys[2], posts a pool
// job from keys[0] whose execute window is short, and returns its id and
// the claims to send (the job is awarded when its 200-block claim window
// is over and the beacon drew them: market/pool.go).
func (e *env) poolJob(t *testing.T) (uint64, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	model := sha256.Sum256([]byte("console pool model"))
	for _, p := range []int{1, 2} {
		info := market.ProviderInfo{PeerID: fmt.Sprintf("peer-console-%d", p), Runtimes: []string{"llama.cpp"}, Models: []types.Hash{model}}
		if _, err := node.NewSender(e.c, e.keys[p]).Send(ctx, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(200)}).Raw()); err != nil {
			t.Fatal(err)
		}
	}
	id, _ := e.sendJob(t, 0, poolJob(model, "console pool", market.Windows{Bid: 200, Execute: 10, Verify: 5}))
	claim := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, p := range []int{1, 2} {
			if _, err := node.NewSender(e.c, e.keys[p]).Send(ctx, (&market.MsgClaimTask{Job: id}).Raw()); err != nil {
				t.Error(err)
			}
		}
	}
	return id, claim
}

// waitJobEnd waits until the job leaves bidding and running.
func (e *env) waitJobEnd(t *testing.T, id uint64) string {
	t.Helper()
	return e.waitJobState(t, id, "completed", "expired", "cancelled")
}

// waitJobState waits until the job is in one of states (a pool job runs
// once its claim window is over and the beacon drew its claimants:
// market/pool.go) and returns it.
func (e *env) waitJobState(t *testing.T, id uint64, states ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		j, err := e.c.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(states, j.StateName) {
			return j.StateName
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %d still %s", id, j.StateName)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestJobTimelineAwardedToSettled: an awarded job whose providers never
// deliver runs through award, the no-shows and settlement; the page's
// timeline shows every step with its heights from the indexer (the award
// is a FinalizeBlock or claim event, the no-shows end-block events).
func TestJobTimelineAwardedToSettled(t *testing.T) {
	e := startEnv(t, 3)
	id, claim := e.poolJob(t)
	claim()
	state := e.waitJobEnd(t, id)
	body := wantPage(t, e, fmt.Sprintf("/jobs/%d", id), 200, "job_posted", state, "max_price=1ogpu")
	for _, step := range []string{"posted", "award", "results", "settled"} {
		if !strings.Contains(body, fmt.Sprintf(`data-step="%s" class="done"`, step)) {
			t.Errorf("step %s not done on the page of a %s job:\n%s", step, state, body)
		}
	}
}
