package console

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
)

// market is a node with two llama.cpp provider agents serving
// stories260K and a client agent, for the console's end-to-end tests.
type marketEnv struct {
	*env
	client    *AgentClient
	providers []*agent.Provider
	model     ModelChoice
	modelPath string
}

// startMarket starts the node, two providers (keys 1 and 2) and the
// client agent of key 0 (keys 3.. stay funded and idle).
func startMarket(t *testing.T) *marketEnv {
	t.Helper()
	path, err := agent.FindModel()
	if err != nil {
		t.Fatalf("the end-to-end console test needs the shared model: %v", err)
	}
	e := startEnv(t, 4)
	m := &marketEnv{env: e, modelPath: path}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	host := func(k *ecdsa.PrivateKey, access *agent.Access, boot []string) (*p2p.Host, *blobstore.Store) {
		return newHost(ctx, t, k, access, boot)
	}
	var boot []string
	for i := 1; i <= 2; i++ {
		access := agent.NewAccess(e.c)
		h, store := host(e.keys[i], access, boot)
		if boot == nil {
			boot = h.Addrs()
		}
		hash, err := store.PutFile(path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		m.model = ModelChoice{Name: "stories260K", Hash: hash, Size: uint64(st.Size())}
		p, err := agent.NewProvider(agent.ProviderConfig{
			Chain: e.c, Key: e.keys[i], Host: h, Store: store, Models: []types.Hash{hash}, Access: access,
			LLM: llm.Options{Threads: 1, BatchSize: 512, ContextSize: 512}, Bond: types.OGPU(200),
			StateDir: t.TempDir(), Logger: quiet, Strategy: agent.DefaultStrategy(), Moniker: fmt.Sprintf(`prov%d <img src=x onerror=alert(1)>`, i),
		})
		if err != nil {
			t.Fatal(err)
		}
		info, err := p.Prepare(ctx)
		if err == nil {
			err = p.Register(ctx, info)
		}
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Serve(ctx) }()
		t.Cleanup(func() { cancel(); <-done; p.Close() })
		m.providers = append(m.providers, p)
	}
	m.client = e.clientAgent(ctx, t, 0, boot, []ModelChoice{m.model})
	return m
}

// newHost starts a libp2p host on loopback with a blob store.
func newHost(ctx context.Context, t *testing.T, k *ecdsa.PrivateKey, access *agent.Access, boot []string) (*p2p.Host, *blobstore.Store) {
	t.Helper()
	store, err := blobstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := p2p.Config{Key: k, Store: store, Bootstrap: boot, Logger: slog.New(slog.DiscardHandler), Listen: []string{"/ip4/127.0.0.1/tcp/0"}}
	if access != nil {
		cfg.Authorize = access.Authorize
	}
	h, err := p2p.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, store
}

// clientAgent is the ClientSide of key i: a real client agent with its
// own libp2p host, posting with short windows.
func (e *env) clientAgent(ctx context.Context, t *testing.T, i int, boot []string, models []ModelChoice) *AgentClient {
	t.Helper()
	access := agent.NewAccess(e.c)
	h, store := newHost(ctx, t, e.keys[i], access, boot)
	c := agent.NewClient(e.c, e.keys[i], h, store, access)
	c.Logger = slog.New(slog.DiscardHandler)
	a := ClientOf(ctx, c, models, nil)
	a.Windows = market.Windows{Bid: 6, Reveal: 4, Execute: 40, Verify: 10}
	return a
}

// serve starts another console, with o, on the node of e: the env
// returned reads its pages.
func (e *env) serve(t *testing.T, o Options) *env {
	t.Helper()
	s, err := New(e.c, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	s.AllowListener(srv.Listener.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.Run(ctx)
	out := *e
	out.s, out.srv = s, srv
	return &out
}

// TestBrowserPostJobToSettled is the console's end-to-end test: a real
// node with two llama.cpp provider agents, the console of a process
// holding the client's key, opened in headless Chromium. The job is
// posted through the page's form, and the job's page follows it live
// (no reload) from posted to settled while the generated text streams
// in; the client's page then lists it with what it paid. An action
// without the token is refused. Screenshots of the pages are written.
func TestBrowserPostJobToSettled(t *testing.T) {
	m := startMarket(t)
	ce := m.serve(t, Options{Client: m.client, Provider: ProviderOf(m.providers[0])})
	s, srv := ce.s, ce.srv
	c := openChrome(t, 120*time.Second)
	ctx, shot := c.ctx, c.shot

	// Before the token: the page's own POST is refused, and nothing is
	// posted.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/client"), chromedp.WaitVisible(chromedp.CSS("#post-job"))); err != nil {
		t.Fatal(err)
	}
	refused, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/api/jobs", {method: "POST", body: new URLSearchParams({model: "0x`+strings.Repeat("0", 64)+`", prompt: "x", max_tokens: "4", redundancy: "1", max_price: "1ogpu"})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if refused != http.StatusUnauthorized {
		t.Fatalf("posting a job without the console token: %d, want 401", refused)
	}
	if jobs, err := m.c.Jobs(ctx, "/client/"+m.client.Address().Hex()); err != nil || len(jobs) != 0 {
		t.Fatalf("a refused post reached the chain: %d jobs (%v)", len(jobs), err)
	}

	// With the token: post through the form.
	c.login(s, srv.Listener.Addr())
	const prompt = "Once upon a time, a cat"
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/client"),
		chromedp.WaitVisible(chromedp.CSS("#post-job")),
		chromedp.SetValue(chromedp.CSS(`#post-job textarea[name="prompt"]`), prompt),
		chromedp.SetValue(chromedp.CSS(`#post-job input[name="max_tokens"]`), "16"),
		chromedp.SetValue(chromedp.CSS(`#post-job input[name="redundancy"]`), "2"),
		chromedp.SetValue(chromedp.CSS(`#post-job input[name="max_price"]`), "2ogpu"),
	); err != nil {
		t.Fatal(err)
	}
	shot("client-post.png")
	if err := chromedp.Do(ctx, chromedp.Submit(chromedp.CSS(`#post-job`))); err != nil {
		t.Fatal(err)
	}
	// The form's POST answers with a redirect once the job is on chain;
	// evaluating while the page navigates fails, so ask again.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		at, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState === "complete" ? location.pathname : ""`))
		if err == nil && at != "" && at != "/client" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the post did not lead anywhere (at %q): %v", at, err)
		}
	}
	loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname`))
	if err != nil || !strings.HasPrefix(loc, "/jobs/") {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.textContent`))
		t.Fatalf("the post did not lead to the job's page: at %q (%v): %s", loc, err, body)
	}
	var id uint64
	fmt.Sscanf(loc, "/jobs/%d", &id)
	j, err := m.c.Job(ctx, id)
	if err != nil || j.Client != m.client.Address() || j.MaxTokens != 16 || j.Redundancy != 2 || !j.MaxPrice.Eq(types.OGPU(2)) {
		t.Fatalf("job %d on chain is not the one the form posted: %+v (%v)", id, j, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__noReload = true`)); err != nil {
		t.Fatal(err)
	}
	settled := `window.__noReload === true && ["posted", "bids", "award", "results", "settled"].every(s => document.querySelector('#steps li[data-step="' + s + '"]').classList.contains("done")) && document.querySelector("#timeline tbody").textContent.includes("job_completed")`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](settled, chromedp.WithPollingTimeout(90*time.Second))); err != nil {
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#steps").textContent + " | " + document.querySelector("#timeline tbody").textContent`))
		t.Fatalf("the job's timeline did not reach settled live (shown: %s): %v", shown, err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("output").textContent`))
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("no generated text streamed into the page (%q, %v)", out, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("job-state").textContent === "completed"`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the job's state was not refreshed live: %v", err)
	}
	shot("job-settled.png")
	j, err = m.c.Job(ctx, id)
	if err != nil || j.Paid == nil || j.Paid.IsZero() {
		t.Fatalf("job %d settled without paying anyone: %+v (%v)", id, j, err)
	}
	t.Logf("job %d settled: paid %s, text %q", id, types.FormatAmount(j.Paid), out)

	// The client's page lists the job with what it paid.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/client"), chromedp.WaitVisible(chromedp.CSS("#jobs"))); err != nil {
		t.Fatal(err)
	}
	row, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#jobs tbody tr").textContent`))
	if err != nil || !strings.Contains(row, fmt.Sprint(id)) || !strings.Contains(row, "completed") || !strings.Contains(row, types.FormatAmount(j.Paid)) {
		t.Fatalf("the client page's job row %q does not show job %d completed and its payment %s (%v)", row, id, types.FormatAmount(j.Paid), err)
	}
	shot("client.png")

	// The provider page of the console's own provider agent shows what
	// it earned from this job, its bid among its decisions, and its speed.
	prov := m.providers[0].Address()
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/providers/%s", srv.URL, prov.Hex())), chromedp.WaitVisible(chromedp.CSS("#earn-total"))); err != nil {
		t.Fatal(err)
	}
	price := j.Prices[0]
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById("earn-total").textContent === %q && document.getElementById("earn-day").textContent === %q`, types.FormatAmount(price), types.FormatAmount(price)), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("earn-total").textContent + " / " + document.getElementById("earn-day").textContent`))
		t.Fatalf("the provider page shows earnings %s, want %s for job %d: %v", shown, types.FormatAmount(price), id, err)
	}
	dec, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#decisions tbody").textContent`))
	if err != nil || !strings.Contains(dec, fmt.Sprint(id)) {
		t.Fatalf("the provider's decisions %q do not show its bid on job %d (%v)", dec, id, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#earn-chart canvas") !== null && document.querySelector("#speeds tbody tr") !== null`, chromedp.WithPollingTimeout(10*time.Second))); err != nil && ChartsEmbedded() {
		t.Fatalf("the earnings chart or the measured speeds are missing: %v", err)
	}
	moniker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.textContent.includes("prov1 <img src=x onerror=alert(1)>") && document.querySelectorAll("main img").length === 0`))
	if err != nil || !moniker {
		t.Fatalf("the provider's moniker is not shown as text (%v)", err)
	}
	shot("provider.png")

	// A session the client opened shows with its budget, and the page
	// closes it early.
	model, err := llm.Load(m.modelPath, llm.Options{Threads: 1, BatchSize: 64, ContextSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	sc, err := agent.OpenSession(ctx, agent.SessionClientConfig{Chain: m.c, Key: m.keys[0], Host: m.client.c.Host, Sender: m.client.c.Sender(), Model: model},
		agent.SessionOrder{Model: m.model.Hash, ModelSize: m.model.Size, Lanes: 2, MaxPrice: types.OGPU(1), Budget: types.OGPU(5), Blocks: 300, Grace: 5,
			Req: market.Requirements{MinStake: types.OGPU(0)}, Windows: market.Windows{Bid: 4, Reveal: 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The session's job page speaks of lanes and vouchers.
	wantPage(t, ce, fmt.Sprintf("/jobs/%d", sc.ID()), 200, "session open: 2 lanes serve requests until height")
	closeBtn := fmt.Sprintf("#close-session-%d", sc.ID())
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/client"), chromedp.WaitVisible(chromedp.CSS("#sessions"))); err != nil {
		t.Fatal(err)
	}
	row, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#sessions tbody tr").textContent`))
	sv, err := m.c.Session(ctx, sc.ID())
	if err != nil {
		t.Fatal(err)
	}
	budget := new(uint256.Int)
	for _, l := range sv.Lanes {
		budget.Add(budget, l.Budget)
	}
	if !strings.HasPrefix(row, fmt.Sprint(sc.ID())+"open") || !strings.Contains(row, types.FormatAmount(budget)) {
		t.Fatalf("the session row %q does not show session %d open with its budget %s", row, sc.ID(), types.FormatAmount(budget))
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(closeBtn))); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		flash, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState === "complete" && document.querySelector("main .good") ? document.querySelector("main .good").textContent : ""`))
		if err == nil && strings.Contains(flash, fmt.Sprintf("Session %d closed", sc.ID())) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("closing the session from the page showed no confirmation (%q, %v)", flash, err)
		}
	}
	if v, err := m.c.Session(ctx, sc.ID()); err != nil || v.Phase == "open" {
		t.Fatalf("session %d after the page closed it: %+v (%v)", sc.ID(), v, err)
	}
	wantPage(t, ce, fmt.Sprintf("/jobs/%d", sc.ID()), 200, "session in its grace window")
	shot("client-session-closed.png")
}
