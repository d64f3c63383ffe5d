package console

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// evilProvider is provider keys[1]'s moniker: every page shows it as text.
const evilProvider = `<script>alert("provider")</script>`

// RequireAssetsEnv makes TestConsoleAssets fail, not skip, when the chart
// library is not embedded (make test sets it).
const RequireAssetsEnv = "OGPU_REQUIRE_CONSOLE_ASSETS"

func (e *env) addr(i int) types.Address { return crypto.PubkeyToAddress(e.keys[i].PublicKey) }

// registerProviders registers keys[1] (moniker evilProvider) and keys[2]
// as providers of model, 200 oGPU bonded each.
func (e *env) registerProviders(t *testing.T, model types.Hash) {
	e.registerProvidersBonded(t, model, types.OGPU(200))
}

// registerProvidersBonded is registerProviders with stake bonded each.
func (e *env) registerProvidersBonded(t *testing.T, model types.Hash, stake *uint256.Int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range []int{1, 2} {
		info := market.ProviderInfo{PeerID: fmt.Sprintf("peer-provider-%d", p), Runtimes: []string{"llama.cpp"}, Models: []types.Hash{model},
			Attributes: []string{"gpu/vendor/nvidia/model/h100"}}
		if p == 1 {
			info.Moniker = evilProvider
		}
		if _, err := node.NewSender(e.c, e.keys[p]).Send(ctx, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: stake}).Raw()); err != nil {
			t.Fatal(err)
		}
	}
}

// agreedJob runs a pool job of keys[0] (1 oGPU per replica, r=2) to
// "agreed": keys[1] and keys[2] claim it, commit and reveal the same
// result; it returns once the job completed.
func (e *env) agreedJob(t *testing.T, model types.Hash) *uint256.Int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// A 40-block claim window (4 s): the claims land in it, and the job
	// runs once it is over and the beacon drew them (market/pool.go).
	id, _ := e.sendJob(t, 0, poolJob(model, "provider page", market.Windows{Bid: 40, Execute: 60, Verify: 30}))
	for _, p := range []int{1, 2} {
		if _, err := node.NewSender(e.c, e.keys[p]).Send(ctx, (&market.MsgClaimTask{Job: id}).Raw()); err != nil {
			t.Fatal(err)
		}
	}
	e.waitJobState(t, id, "running")
	result, salt := sha256.Sum256([]byte("the answer")), sha256.Sum256([]byte("salt"))
	for _, p := range []int{1, 2} {
		c := verifier.ResultCommitment(result, salt, e.addr(p))
		if _, err := node.NewSender(e.c, e.keys[p]).Send(ctx, (&verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: c}).Raw()); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []int{1, 2} {
		if _, err := node.NewSender(e.c, e.keys[p]).Send(ctx, (&verifier.MsgRevealResult{Job: id, Stage: 0, Result: result, Salt: salt}).Raw()); err != nil {
			t.Fatal(err)
		}
	}
	if state := e.waitJobEnd(t, id); state != "completed" {
		t.Fatalf("job %d is %s, want completed", id, state)
	}
	j, err := e.c.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Tasks[0].Status != "settled" || !j.Paid.Eq(types.OGPU(2)) {
		t.Fatalf("job %d: task %s, paid %s; want settled, 2ogpu", id, j.Tasks[0].Status, types.FormatAmount(j.Paid))
	}
	return uint256.NewInt(id)
}

// TestProviderPage: a provider paid for an agreed job (in FinalizeBlock,
// at the end of the canary window: only block_search finds it) sees the
// exact amount in its 24 h and all-time figures, in the job's row and in
// the earnings JSON; its moniker, a script, is shown as text everywhere;
// the 24 h figure drops the payment a day later. The other provider's
// payment is not counted.
func TestProviderPage(t *testing.T) {
	e := startEnv(t, 3)
	model := sha256.Sum256([]byte("provider page model"))
	e.registerProviders(t, model)
	id := e.agreedJob(t, model).Uint64()
	p1 := e.addr(1)
	// CometBFT indexes a block's events just after it commits: wait
	// until the payment is searchable (a live page refreshes on blocks).
	e.waitEarnings(t, p1)
	escaped := "&lt;script&gt;alert(&#34;provider&#34;)&lt;/script&gt;"

	wantPage(t, e, "/providers", 200, escaped, p1.Hex(), e.addr(2).Hex(), `href="/providers/`+p1.Hex()+`"`, "200ogpu", "active")
	body := wantPage(t, e, "/providers/"+p1.Hex(), 200,
		escaped,
		`id="earn-day">1ogpu<`,
		`id="earn-total">1ogpu<`,
		fmt.Sprintf(`data-job="%d">1ogpu<`, id),
		fmt.Sprintf(`href="/jobs/%d"`, id),
		"peer-provider-1", "gpu/vendor/nvidia/model/h100", "completed", "settled", "Bonded", "200ogpu")
	if strings.Contains(body, `id="jail"`) {
		t.Errorf("a provider in good standing has a jail banner:\n%s", body)
	}
	if strings.Contains(body, "This console&#39;s agent") || strings.Contains(body, "This console's agent") {
		t.Errorf("a console without an agent shows the agent's section:\n%s", body)
	}
	if strings.Contains(body, "2ogpu<") {
		t.Errorf("the page counts the other provider's payment (2ogpu in all):\n%s", body)
	}

	code, js, _ := e.get(t, "/api/providers/"+p1.Hex()+"/earnings")
	var ej earningsJSON
	if code != 200 || json.Unmarshal([]byte(js), &ej) != nil {
		t.Fatalf("earnings JSON: %d %s", code, js)
	}
	if ej.Total != "1ogpu" || ej.Day != "1ogpu" || ej.Payments != 1 || len(ej.Series[0]) < 2 || ej.Series[1][0] != 0 || ej.Series[1][1] != 1 || ej.Series[1][len(ej.Series[1])-1] != 1 ||
		len(ej.PerJob) != 1 || ej.PerJob[0].Job != id || ej.PerJob[0].Paid != "1ogpu" {
		t.Fatalf("earnings JSON %+v, want 1ogpu for job %d in total and in 24 h", ej, id)
	}

	// A day later the payment leaves the 24 h figure, not the total.
	ctx := context.Background()
	later, err := e.s.earningsOf(ctx, p1, time.Now().Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !later.Total.Eq(types.OGPU(1)) || !later.Day.IsZero() {
		t.Fatalf("25 h later: total %s, 24 h %s; want 1ogpu, 0ogpu", types.FormatAmount(later.Total), types.FormatAmount(later.Day))
	}

	// Unbonding stake shows beside the bonded stake, with its maturity.
	if _, err := node.NewSender(e.c, e.keys[1]).Send(ctx, (&escrow.MsgUnbond{Amount: types.OGPU(50)}).Raw()); err != nil {
		t.Fatal(err)
	}
	st, err := e.c.Stake(ctx, p1)
	if err != nil || len(st.Unbonding) != 1 {
		t.Fatalf("stake after unbonding: %+v (%v)", st, err)
	}
	wantPage(t, e, "/providers/"+p1.Hex(), 200, `<div class="k">Bonded</div><div class="v">150ogpu<`, `<div class="k">Unbonding</div><div class="v">50ogpu<`,
		fmt.Sprintf("50ogpu at block %d", st.Unbonding[0].Matures))

	// Without the chart library, the page says how to get it and lists
	// the payments; with it, the chart's container and the library load.
	e.s.charts = false
	wantPage(t, e, "/providers/"+p1.Hex(), 200, "Charts need <code>make console-assets</code>", `id="payments"`)
	e.s.charts = true
	body = wantPage(t, e, "/providers/"+p1.Hex(), 200, `id="earn-chart"`, `src="/static/vendor/uPlot.iife.min.js"`)
	if strings.Contains(body, "Charts need") {
		t.Errorf("charts on, yet the page says they need the assets")
	}
}

// waitEarnings waits until the indexer has a payment to addr.
func (e *env) waitEarnings(t *testing.T, addr types.Address) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		got, err := e.s.earningsOf(ctx, addr, time.Now())
		if err == nil && len(got.Payments) > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no payment to %s indexed after 10 s (last error %v)", addr.Hex(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestProviderJailBanner: a provider that claimed a task and never
// committed is slashed and jailed at the deadline (in FinalizeBlock). Its
// page shows the banner: until which block, why (the provider_jailed
// event's reason, found through block_search), the exact unjail command,
// and, its stake now below the minimum, the bond to make first.
func TestProviderJailBanner(t *testing.T) {
	e := startEnv(t, 3)
	model := sha256.Sum256([]byte("jail model"))
	e.registerProvidersBonded(t, model, types.OGPU(100)) // the minimum: a slash takes them below
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, _ := e.sendJob(t, 0, poolJob(model, "jail", market.Windows{Bid: 40, Execute: 5, Verify: 5}))
	for _, p := range []int{1, 2} {
		if _, err := node.NewSender(e.c, e.keys[p]).Send(ctx, (&market.MsgClaimTask{Job: job}).Raw()); err != nil {
			t.Fatal(err)
		}
	}
	e.waitJobEnd(t, job)
	p1 := e.addr(1)
	pv, err := e.c.Provider(ctx, p1)
	if err != nil {
		t.Fatal(err)
	}
	if !pv.Jailed || !pv.Bonded.Lt(types.OGPU(100)) {
		t.Fatalf("the no-show: jailed %v, bonded %s; want jailed below 100ogpu", pv.Jailed, types.FormatAmount(pv.Bonded))
	}
	missing := types.FormatAmount(new(uint256.Int).Sub(types.OGPU(100), pv.Bonded))
	// The jail event is indexed just after its block commits.
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for {
		_, body, _ = e.get(t, "/providers/"+p1.Hex())
		if strings.Contains(body, "Why: ") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantPage(t, e, "/providers/"+p1.Hex(), 200, `id="jail"`,
		fmt.Sprintf("Jailed until block %d", pv.JailedUntil),
		fmt.Sprintf("Why: missed the commit deadline of job %d", job),
		"<code>ogpu tx provider unjail --from NAME</code>",
		"bond at least "+missing+" more first",
		"<code>ogpu tx provider bond "+missing+" --from NAME</code>")
	wantPage(t, e, "/providers", 200, `<span class="bad">jailed</span>`)
}

// TestProviderPageSession: a session lane pays its provider twice over:
// the reservation at the award (provider_paid via=reservation, at the
// close in FinalizeBlock) and each voucher redeemed (session_redeemed, in
// a transaction). The page adds both, exactly, and lists each.
func TestProviderPageSession(t *testing.T) {
	e := startEnv(t, 3)
	model := sha256.Sum256([]byte("session page model"))
	e.registerProviders(t, model)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	terms := &market.SessionTerms{Budget: types.OGPU(10), Blocks: 100, Grace: 10}
	post := &market.MsgPostJob{
		Kind: market.KindSession, Mode: market.ModeAuction, Model: model, ModelSize: 1, Stages: 1, Redundancy: 2,
		MaxPrice: types.OGPU(1), Req: market.Requirements{MinStake: types.OGPU(100)},
		Windows: market.Windows{Bid: 15, Reveal: 15}, Seal: sha256.Sum256([]byte("session page seal")), Session: terms,
	}
	id, _ := e.sendJob(t, 0, post)
	price := types.OGPU(1)
	salt := func(p int) types.Hash { return sha256.Sum256([]byte(fmt.Sprintf("bid salt %d", p))) }
	for _, p := range []int{1, 2} {
		c := market.BidCommitment(id, 0, price, salt(p), e.addr(p))
		if _, err := node.NewSender(e.c, e.keys[p]).Send(ctx, (&market.MsgCommitBid{Job: id, Stage: 0, Commitment: c}).Raw()); err != nil {
			t.Fatal(err)
		}
	}
	j, err := e.c.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.WaitHeight(ctx, int64(j.BidEnd)+1); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{1, 2} {
		if _, err := node.NewSender(e.c, e.keys[p]).Send(ctx, (&market.MsgRevealBid{Job: id, Stage: 0, Price: price, Salt: salt(p)}).Raw()); err != nil {
			t.Fatal(err)
		}
	}
	for {
		if j, err = e.c.Job(ctx, id); err != nil {
			t.Fatal(err)
		}
		if j.StateName == "running" {
			break
		}
		if j.StateName != "bidding" && j.StateName != "revealing" {
			t.Fatalf("session job %d is %s, want running", id, j.StateName)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("session job %d still %s", id, j.StateName)
		case <-time.After(100 * time.Millisecond):
		}
	}
	p1 := e.addr(1)
	v := session.Voucher{ChainID: "ogpu-console-test", Session: id, Provider: p1, Cumulative: types.OGPU(2), Seq: 1}
	sig, err := session.Sign(e.keys[0], v.Hash())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.NewSender(e.c, e.keys[1]).Send(ctx, (&session.MsgRedeemVoucher{Voucher: v, Sig: sig}).Raw()); err != nil {
		t.Fatal(err)
	}
	reservation := market.ReservationFee(genesis.DefaultParams().Market, terms)
	want := new(uint256.Int).Add(reservation, types.OGPU(2))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := e.s.earningsOf(ctx, p1, time.Now())
		if err == nil && got.Total.Eq(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("earnings %+v (%v), want %s: the reservation %s and the voucher's 2ogpu", got, err, types.FormatAmount(want), types.FormatAmount(reservation))
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantPage(t, e, "/providers/"+p1.Hex(), 200,
		`id="earn-total">`+types.FormatAmount(want)+`<`,
		`id="earn-day">`+types.FormatAmount(want)+`<`,
		`<span class="tag">reservation</span></td><td class="num">`+types.FormatAmount(reservation)+`<`,
		`<span class="tag">session</span></td><td class="num">2ogpu<`,
		fmt.Sprintf(`data-job="%d">`+types.FormatAmount(want)+`<`, id))

	// Past the bound on blocks read, the newest payments are kept and the
	// page says its figures are partial.
	defer func(n int) { earnMaxBlocks = n }(earnMaxBlocks)
	earnMaxBlocks = 1
	body := wantPage(t, e, "/providers/"+p1.Hex(), 200, "Showing the latest 1 payments", `id="earn-total">2ogpu<`)
	if strings.Contains(body, `<span class="tag">reservation</span>`) {
		t.Errorf("the older payment is listed past the bound:\n%s", body)
	}
}

// TestProviderPageBadInput: a malformed address is a 400, an address that
// is no provider a 404, each with what to do.
func TestProviderPageBadInput(t *testing.T) {
	e := startEnv(t, 1)
	cases := []struct {
		path   string
		status int
		says   string
	}{
		{"/providers/0x12", 400, "want 0x and 40 hex digits"},
		{"/providers/" + url.PathEscape(`<script>alert("a")</script>`), 400, "&lt;script&gt;"},
		{"/providers/" + e.addr(0).Hex(), 404, "is not a registered provider"},
		{"/providers?after=nope", 400, "want 0x and 40 hex digits"},
		{"/api/providers/0xzz/earnings", 400, "want 0x and 40 hex digits"},
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
	wantPage(t, e, "/providers", 200, "No provider is registered yet")
}

// fakeAgent records the calls of the console's provider actions. It
// stands in for the provider agent (node/agent implements ProviderSide
// on its own branch): what is under test is the console's guard, token
// and parsing, and that bad input calls nothing.
type fakeAgent struct {
	addr types.Address
	mu   sync.Mutex
	// calls are "bond AMOUNT", "unbond AMOUNT", "pricing BASE PER".
	calls  []string
	script string
}

func (f *fakeAgent) Address() types.Address { return f.addr }
func (f *fakeAgent) Decisions() []Decision {
	return []Decision{
		{Time: time.Unix(1_700_000_100, 0), Job: 7, Bid: true, Price: types.OGPU(2)},
		{Time: time.Unix(1_700_000_000, 0), Job: 6, Reason: `<img src=x onerror=alert(1)> model not held`},
	}
}
func (f *fakeAgent) Speeds() []SpeedSample {
	return []SpeedSample{{Time: time.Unix(1_700_000_000, 0), Tokens: 64, Took: 2 * time.Second}}
}
func (f *fakeAgent) Reachability() Reachability {
	return Reachability{PeerID: "12D3KooWfake", Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}, Status: "private", Peers: 3}
}
func (f *fakeAgent) Pricing() Pricing {
	return Pricing{Base: types.OGPU(1), PerToken: new(uint256.Int).Div(types.OGPU(1), uint256.NewInt(1000)), Script: f.script}
}
func (f *fakeAgent) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}
func (f *fakeAgent) SetPricing(_ context.Context, p Pricing) error {
	f.record("pricing " + types.FormatAmount(p.Base) + " " + types.FormatAmount(p.PerToken))
	return nil
}
func (f *fakeAgent) Bond(_ context.Context, a *uint256.Int) error {
	f.record("bond " + types.FormatAmount(a))
	return nil
}
func (f *fakeAgent) Unbond(_ context.Context, a *uint256.Int) error {
	f.record("unbond " + types.FormatAmount(a))
	return fmt.Errorf("only 200ogpu bonded")
}
func (f *fakeAgent) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// TestProviderActions: the agent's actions need the token and the
// console's own Origin (another page cannot bond or reprice through the
// provider's browser); bad amounts are refused with a clear message and
// call nothing; a good one reaches the agent; a form navigation comes
// back to the page with the message, escaped.
func TestProviderActions(t *testing.T) {
	fake := &fakeAgent{}
	e := startEnvOpts(t, 3, func(e *env) Options {
		fake.addr = e.addr(1)
		return Options{Provider: fake}
	})
	self, tok := e.srv.URL, e.s.Token()
	good := url.Values{"amount": {"5ogpu"}}
	if code, _ := e.post(t, "/api/provider/bond", self, "", good); code != http.StatusUnauthorized {
		t.Fatalf("bond without the token: %d, want 401", code)
	}
	for _, o := range []string{"http://evil.example", ""} {
		if code, _ := e.post(t, "/api/provider/bond", o, tok, good); code != http.StatusForbidden {
			t.Fatalf("bond from Origin %q with the token: %d, want 403", o, code)
		}
	}
	if c := fake.Calls(); len(c) != 0 {
		t.Fatalf("refused requests reached the agent: %v", c)
	}
	bad := []struct {
		path string
		form url.Values
		says string
	}{
		{"/api/provider/bond", url.Values{"amount": {"10"}}, "write the unit"},
		{"/api/provider/bond", url.Values{"amount": {"0ogpu"}}, "more than 0ogpu"},
		{"/api/provider/bond", url.Values{"amount": {"-1ogpu"}}, "amount"},
		{"/api/provider/bond", url.Values{}, "amount is missing"},
		{"/api/provider/unbond", url.Values{"amount": {"1e3ogpu"}}, "amount"},
		{"/api/provider/pricing", url.Values{"base": {"1ogpu"}}, "per_token is missing"},
		{"/api/provider/pricing", url.Values{"base": {"1ogpu"}, "per_token": {"0.5"}}, "write the unit"},
		{"/api/provider/pricing", url.Values{"base": {"1ogpu"}, "per_token": {"0ogpu"}}, "per_token must be more than 0ogpu"},
		{"/api/provider/pricing", url.Values{"base": {"1ogpu"}, "per_token": {"2000000000000ogpu"}}, "more than the whole supply"},
		{"/api/provider/pricing", url.Values{"base": {"99999999999999999999999999999999999999999999999999999999999999999999999999999999ogpu"}, "per_token": {"1ogpu"}}, "too large"},
	}
	for _, b := range bad {
		code, body := e.postText(t, b.path, tok, b.form)
		if code != http.StatusBadRequest || !strings.Contains(body, b.says) {
			t.Errorf("POST %s %v: %d %q, want 400 saying %q", b.path, b.form, code, body, b.says)
		}
	}
	if c := fake.Calls(); len(c) != 0 {
		t.Fatalf("bad input reached the agent: %v", c)
	}
	if code, body := e.postText(t, "/api/provider/bond", tok, good); code != 200 || !strings.Contains(body, "bonded 5ogpu") {
		t.Fatalf("bond 5ogpu: %d %q", code, body)
	}
	if code, body := e.postText(t, "/api/provider/pricing", tok, url.Values{"base": {"0.5ogpu"}, "per_token": {"0.001ogpu"}}); code != 200 || !strings.Contains(body, "pricing set") {
		t.Fatalf("pricing: %d %q", code, body)
	}
	if code, body := e.postText(t, "/api/provider/unbond", tok, good); code != http.StatusBadGateway || !strings.Contains(body, "only 200ogpu bonded") {
		t.Fatalf("unbond the agent refuses: %d %q, want 502 with its reason", code, body)
	}
	if got, want := strings.Join(fake.Calls(), "; "), "bond 5ogpu; pricing 0.5ogpu 0.001ogpu; unbond 5ogpu"; got != want {
		t.Fatalf("agent calls %q, want %q", got, want)
	}
	fake.script = "/etc/ogpu/price.sh"
	if code, body := e.postText(t, "/api/provider/pricing", tok, url.Values{"base": {"1ogpu"}, "per_token": {"1ogpu"}}); code != http.StatusConflict || !strings.Contains(body, "prices with the script") {
		t.Fatalf("pricing under a script: %d %q, want 409", code, body)
	}
	fake.script = ""

	// A form navigation (no script) returns to the page with the message.
	req, _ := http.NewRequest("POST", self+"/api/provider/bond", strings.NewReader(url.Values{"amount": {"<b>x</b>"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", self)
	req.Header.Set("Accept", "text/html")
	req.AddCookie(&http.Cookie{Name: CookieName, Value: tok})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/providers/"+fake.addr.Hex()+"?failed=") {
		t.Fatalf("form navigation: %d to %q, want 303 back to the provider page with failed=", res.StatusCode, loc)
	}

	// The agent's section shows on its own provider's page only.
	model := sha256.Sum256([]byte("actions model"))
	e.registerProviders(t, model)
	body := wantPage(t, e, loc, 200, "This console", "12D3KooWfake", "private: clients may not reach it", "bid 2ogpu",
		"&lt;img src=x onerror=alert(1)&gt; model not held", `action="/api/provider/pricing"`, `value="0.001ogpu"`, "32.0",
		`class="card flash error"`, "&lt;b&gt;x&lt;/b&gt;")
	if strings.Contains(body, "<img src=x") || strings.Contains(body, "<b>x</b>") {
		t.Fatalf("an unescaped tag from the agent or the flash:\n%s", body)
	}
	other := wantPage(t, e, "/providers/"+e.addr(2).Hex(), 200, "peer-provider-2")
	if strings.Contains(other, "12D3KooWfake") || strings.Contains(other, "/api/provider/bond") {
		t.Fatalf("another provider's page shows this console's agent:\n%s", other)
	}
}

// TestProviderActionsWithoutAgent: a console with no agent answers its
// actions 404 (after the token and Origin checks), calling nothing.
func TestProviderActionsWithoutAgent(t *testing.T) {
	e := startEnv(t, 1)
	code, body := e.postText(t, "/api/provider/bond", e.s.Token(), url.Values{"amount": {"5ogpu"}})
	if code != http.StatusNotFound || !strings.Contains(body, "runs no provider agent") {
		t.Fatalf("bond without an agent: %d %q, want 404", code, body)
	}
}

// postText POSTs a form same-origin with the token and returns the
// status and the text answer.
func (e *env) postText(t *testing.T, path, token string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	req.Header.Set(TokenHeader, token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return res.StatusCode, b.String()
}

// TestConsoleAssets: the chart library is embedded (make test requires
// it: OGPU_REQUIRE_CONSOLE_ASSETS=1), served, and the very version the
// lockfile pins.
func TestConsoleAssets(t *testing.T) {
	if !ChartsEmbedded() {
		msg := "the chart library is not embedded: run `make console-assets` (npm ci in console/ui, then a copy into console/web/static/vendor)"
		if os.Getenv(RequireAssetsEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	lock, err := os.ReadFile("ui/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(lock, &l); err != nil {
		t.Fatal(err)
	}
	v := l.Packages["node_modules/uplot"].Version
	if v == "" {
		t.Fatal("console/ui/package-lock.json pins no uplot")
	}
	js, err := webFS.ReadFile(uplotJS)
	if err != nil {
		t.Fatal(err)
	}
	if head := string(js[:min(len(js), 80)]); !strings.Contains(head, "uPlot (v"+v+")") {
		t.Fatalf("embedded %s starts %q, want uPlot v%s (the lockfile's): run make console-assets", uplotJS, head, v)
	}
	e := startEnv(t, 1)
	wantPage(t, e, "/static/vendor/uPlot.iife.min.js", 200, "var uPlot=")
	wantPage(t, e, "/static/vendor/uPlot.min.css", 200, ".uplot")
}
