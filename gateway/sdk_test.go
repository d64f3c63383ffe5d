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
		Job     uint64      `json:"job"`
		Text    string      `json:"text"`
		Cost    json.Number `json:"cost"`
		Charged string      `json:"charged"`
	} `json:"chat"`
	Stream *struct {
		Job     uint64      `json:"job"`
		Text    string      `json:"text"`
		Cost    json.Number `json:"cost"`
		Charged string      `json:"charged"`
		Chunks  int         `json:"chunks"`
	} `json:"stream"`
	Completion *struct {
		Job     uint64 `json:"job"`
		Charged string `json:"charged"`
	} `json:"completion"`
	NotFoundPosts     int `json:"notFoundPosts"`
	BudgetPosts       int `json:"budgetPosts"`
	BudgetStreamPosts int `json:"budgetStreamPosts"`
	NoProvidersPosts  int `json:"noProvidersPosts"`
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
