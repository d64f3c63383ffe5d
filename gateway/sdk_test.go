package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holiman/uint256"
)

// sdkDir holds the pinned openai SDK (package.json, package-lock.json);
// `npm ci` there installs it (.ci/run does).
const sdkDir = "sdktest"

// RequireSDKEnv makes TestOpenAISDK fail, not skip, without node or the
// installed SDK (CI sets it).
const RequireSDKEnv = "OGPU_REQUIRE_OPENAI_SDK"

func needSDK(t *testing.T) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv(RequireSDKEnv) == "1" {
		skip = t.Fatalf
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		skip("node is not installed: TestOpenAISDK drives the gateway with the official openai npm SDK (install nodejs, then cd gateway/sdktest && npm ci)")
	}
	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", "openai", "package.json")); err != nil {
		skip("gateway/sdktest/node_modules is missing: run `cd gateway/sdktest && npm ci` (.ci/run does) to test the gateway with the official openai SDK")
	}
	return nodeBin
}

// sdkOut is the JSON line test.mjs prints.
type sdkOut struct {
	SDK  string `json:"sdk"`
	Chat *struct {
		Session string      `json:"session"`
		Job     uint64      `json:"job"`
		Text    string      `json:"text"`
		Cost    json.Number `json:"cost"`
		Charged string      `json:"charged"`
	} `json:"chat"`
	Stream *struct {
		Session   string      `json:"session"`
		Job       uint64      `json:"job"`
		Text      string      `json:"text"`
		Cost      json.Number `json:"cost"`
		Charged   string      `json:"charged"`
		Chunks    int         `json:"chunks"`
		Verified  bool        `json:"verified"`
		Providers []string    `json:"providers"`
	} `json:"stream"`
	Completion *struct {
		Job     uint64 `json:"job"`
		Charged string `json:"charged"`
	} `json:"completion"`
	NotFoundPosts     int `json:"notFoundPosts"`
	BudgetPosts       int `json:"budgetPosts"`
	BudgetStreamPosts int `json:"budgetStreamPosts"`
	NoProvidersPosts  int `json:"noProvidersPosts"`
	DeathError        *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"deathError"`
	DeathPosts    int    `json:"deathPosts"`
	DeathStreamed string `json:"deathStreamed"`
}

func runSDK(t *testing.T, nodeBin string, g *testGateway, phase string) sdkOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "test.mjs", phase)
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+g.url+"/v1", "OPENAI_API_KEY="+g.Key(), "MODEL=stories260K", "CONTEXT_LENGTH=512")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node test.mjs %s: %v\n%s%s", phase, err, stdout.String(), stderr.String())
	}
	var out sdkOut
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil {
		t.Fatalf("test.mjs output: %v\n%s", err, stdout.String())
	}
	t.Logf("openai SDK %s, phase %s: %s", out.SDK, phase, lines[len(lines)-1])
	return out
}

// TestOpenAISDK drives the gateway with the official openai npm SDK
// (pinned in gateway/sdktest) against a real chain and two llama.cpp
// providers: the model list, a chat completion, the same chat streamed
// with usage in the stream, a legacy completion, an unknown model (404),
// on a restarted gateway whose day's budget is spent a 402, and on one
// asking for more replicas than there are providers a 503 the SDK does
// not retry (x-should-retry: false; it retries a plain 503 twice). The
// chain is checked against what the SDK saw.
func TestOpenAISDK(t *testing.T) {
	nodeBin := needSDK(t)
	n := newTestNet(t, false)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	dir := t.TempDir()
	cfg := n.config(dir)
	g := n.gateway(cfg, n.client, n.jobConfig())
	me := n.client.Address()
	before := n.balance(me)

	out := runSDK(t, nodeBin, g, "main")
	if out.Chat == nil || out.Stream == nil || out.Completion == nil || out.NotFoundPosts != 1 {
		t.Fatalf("main phase: %+v", out)
	}
	if n.jobsOf(me) != 3 {
		t.Fatalf("%d jobs for three requests", n.jobsOf(me))
	}
	if v := n.verifiedText(out.Chat.Job); out.Chat.Text != v || out.Stream.Text != v {
		t.Fatalf("the SDK read %q and streamed %q; the chain verified %q", out.Chat.Text, out.Stream.Text, v)
	}
	total := u256(t, out.Chat.Charged)
	total.Add(total, u256(t, out.Stream.Charged))
	total.Add(total, u256(t, out.Completion.Charged))
	if spent := sub(before, n.balance(me)); !spent.Eq(total) {
		t.Fatalf("the account paid %s, the answers say %s", spent, total)
	}
	if !mustAmount(t, string(out.Chat.Cost)).Eq(u256(t, out.Chat.Charged)) {
		t.Fatalf("usage.cost %s, charged %s", out.Chat.Cost, out.Chat.Charged)
	}

	// Restart with a day's budget of exactly what was spent: it is gone.
	g.stop()
	_, spent := g.ledger.spent()
	if !spent.Eq(total) {
		t.Fatalf("ledger %s, spent %s", spent, total)
	}
	cfg.BudgetPerDay = spent
	g2 := n.gateway(cfg, n.client, n.jobConfig())
	out = runSDK(t, nodeBin, g2, "budget")
	if out.BudgetPosts != 1 || out.BudgetStreamPosts != 1 || n.jobsOf(me) != 3 {
		t.Fatalf("budget phase: %+v; %d jobs", out, n.jobsOf(me))
	}
	jc := n.jobConfig()
	jc.Redundancy = 3
	g3 := n.gateway(n.config(t.TempDir()), n.client, jc)
	out = runSDK(t, nodeBin, g3, "noproviders")
	if out.NoProvidersPosts != 1 || n.jobsOf(me) != 3 {
		t.Fatalf("no-providers phase: %+v; %d jobs", out, n.jobsOf(me))
	}
}

// TestOpenAISDKSession drives the gateway in session mode with the
// official openai SDK against a real chain and two llama.cpp providers:
// the model list, a chat (which opens the session), the same chat
// streamed with usage, a 404; then a provider killed at the third token
// of a stream (the other lane finishes: the SDK sees the whole answer),
// then the last one (the SDK raises the error event, after one POST); on
// a restarted gateway whose day's budget is spent, a 402 for a chat and a
// stream, each after one POST. Nothing is charged twice: the lanes'
// vouchers on disk add up, with the validator fee and the sessions'
// transaction fees, to the day's ledger, to the base unit.
func TestOpenAISDKSession(t *testing.T) {
	nodeBin := needSDK(t)
	n := newTestNet(t, false)
	p1 := n.provider("prov1", 40, false)
	p2 := n.provider("prov2", 50, false)
	dir := t.TempDir()
	cfg := n.config(dir)
	sc := n.sessionConfig(dir)
	g, tb := n.sessionGateway(cfg, sc, false)
	me := n.client.Address()

	out := runSDK(t, nodeBin, g.testGateway, "session")
	if out.Chat == nil || out.Stream == nil || out.Stream.Text != out.Chat.Text || out.Chat.Session != out.Stream.Session {
		t.Fatalf("session phase: %+v", out)
	}
	text := out.Chat.Text
	tb.setTap(atPiece(3, killer(p1)))
	out = runSDK(t, nodeBin, g.testGateway, "death")
	if out.Stream == nil || out.Stream.Text != text || out.Stream.Verified || len(out.Stream.Providers) != 1 ||
		!strings.EqualFold(out.Stream.Providers[0], p2.agent.Address().Hex()) {
		t.Fatalf("death phase: %+v, want %q from prov2 alone", out.Stream, text)
	}
	tb.setTap(atPiece(3, killer(p2)))
	out = runSDK(t, nodeBin, g.testGateway, "deathall")
	if out.DeathError == nil || out.DeathError.Code != CodeSessionFailed || out.DeathPosts != 1 || !strings.HasPrefix(text, out.DeathStreamed) {
		t.Fatalf("deathall phase: %+v", out)
	}
	g.stop()

	// Nothing charged twice: the vouchers the session clients signed (on
	// disk, every lane of every session) plus the validator fee on them,
	// plus the sessions' transaction fees, are the day's ledger.
	paid := new(uint256.Int)
	files, _ := filepath.Glob(filepath.Join(sc.LedgerDir, "session-*.json"))
	for _, f := range files {
		var l struct {
			Lanes map[string]struct {
				Cumulative *uint256.Int `json:"cumulative"`
			} `json:"lanes"`
		}
		bz, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(bz, &l)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ll := range l.Lanes {
			paid.Add(paid, ll.Cumulative)
		}
	}
	_, spent := g.ledger.spent()
	// Every charge here is a multiple of 0.015 oGPU, so the 2% fee is
	// exact per request and in sum.
	want := new(uint256.Int).Add(paid, feeOn(paid, 200))
	want.Add(want, n.feesOf(me))
	if len(files) == 0 || !spent.Eq(want) {
		t.Fatalf("ledger %s; the lanes' vouchers (%d files) add up to %s, with the fees %s", spent, len(files), paid, want)
	}

	// Restart with a day's budget of exactly what was spent: 402, one
	// POST each, nothing opened.
	cfg.BudgetPerDay = spent
	g2, _ := n.sessionGateway(cfg, sc, false)
	out = runSDK(t, nodeBin, g2.testGateway, "budget")
	if out.BudgetPosts != 1 || out.BudgetStreamPosts != 1 || len(g2.b.Sessions()) != 0 {
		t.Fatalf("budget phase: %+v; sessions %+v", out, g2.b.Sessions())
	}
}
