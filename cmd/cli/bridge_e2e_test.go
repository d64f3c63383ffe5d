package cli

import (
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	ethtypes "github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/contracts"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// TestBridgeE2E is the bridge end to end, every party a separate process
// as an operator runs it: a real `geth --dev` (1 s blocks, finalized every
// 32), a 4-validator `ogpud testnet --bridge-eth-rpc` whose fourth
// validator's Ethereum node is down, `ogpud bridge relay`, and the `ogpu`
// commands a user types. A deposit is credited on 3 of 4 attestations,
// spent on a job, partly withdrawn, relayed and attested paid, and at the
// end the contract holds exactly what the app-chain's books say it must.
func TestBridgeE2E(t *testing.T) {
	gethBin := findGeth(t)
	bin := ogpud(t)
	begin := time.Now()
	step := func(what string) { t.Logf("%6.1fs  %s", time.Since(begin).Seconds(), what) }
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// 1. geth --dev, the deployer, the relayer and the client's Ethereum
	// account funded with ETH from the dev account.
	g := startGeth(t, gethBin, dir)
	step("geth --dev up at " + g.url)
	deployer, deployerFile := newEthKey(t, dir, "deployer")
	relayer, relayerFile := newEthKey(t, dir, "relayer")

	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("correct horse\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, base: []string{"--home", filepath.Join(dir, "wallet"), "--password-file", pw, "--lightkdf"}}
	var client struct{ Address types.Address }
	if err := json.Unmarshal([]byte(e.ok("keys", "add", "client", "-o", "json")), &client); err != nil {
		t.Fatal(err)
	}
	for _, a := range []common.Address{crypto.PubkeyToAddress(deployer.PublicKey), crypto.PubkeyToAddress(relayer.PublicKey), client.Address} {
		g.fund(ctx, t, a)
	}
	step("deployer, relayer and client funded with ETH")
	// Two providers run a real job with the shared tiny model, when it is
	// there (../shared/models or OGPU_MODELS).
	model, modelErr := agent.FindModel()
	accounts := []string{"--account", client.Address.Hex() + "=1ogpu"}
	if modelErr == nil {
		for _, p := range []string{"p1", "p2"} {
			var k struct{ Address types.Address }
			mustJSON(t, e.ok("keys", "add", p, "-o", "json"), &k)
			accounts = append(accounts, "--account", k.Address.Hex()+"=300ogpu")
		}
	} else {
		t.Logf("no model for a real provider job (%v): the job is only posted and cancelled", modelErr)
	}

	// The testnet deploys the token and the bridge with valset 0 and locks
	// what genesis allocates outside the reserve. The client holds 1 oGPU
	// on the app-chain: what it spends beyond that is bridged.
	out := filepath.Join(dir, "testnet")
	base := freeBase(t, 4)
	gen := runOgpud(t, append([]string{"testnet", "--validators", "4", "--output", out, "--starting-port", fmt.Sprint(base), "--timeout-commit", "300ms",
		"--chain-id", "ogpu-bridge-e2e", "--bridge-eth-rpc", g.url, "--bridge-deployer-key", deployerFile}, accounts...)...)
	t.Logf("ogpud testnet:\n%s", gen)
	if !strings.Contains(gen, "bridge: token ") {
		t.Fatalf("ogpud testnet did not deploy the bridge:\n%s", gen)
	}
	step("testnet generated, token and bridge deployed")

	// 2. node0..node2 read geth; node3's Ethereum node is down (a port
	// nobody listens on).
	down, err := node.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	clients := make([]*node.Client, 4)
	for i := range clients {
		eth := g.url
		if i == 3 {
			eth = fmt.Sprintf("http://127.0.0.1:%d", down)
		}
		home := filepath.Join(out, fmt.Sprintf("node%d", i))
		startProc(t, home, "--eth-rpc", eth)
		clients[i] = rpcClient(t, fmt.Sprintf("127.0.0.1:%d", base+10*i+1))
		dumpOnFailure(t, fmt.Sprintf("node%d", i), filepath.Join(home, "ogpud.log"))
	}
	for _, c := range clients {
		waitHeight(t, c, 3, 90*time.Second)
	}
	rpc0 := fmt.Sprintf("127.0.0.1:%d", base+1)
	e.base = append(e.base, "--node", rpc0)
	step("4 validators making blocks")
	if modelErr == nil {
		// They register and bond while the deposit waits for finality.
		for _, p := range []string{"p1", "p2"} {
			home := filepath.Join(dir, p)
			if err := os.MkdirAll(home, 0o755); err != nil {
				t.Fatal(err)
			}
			startDaemon(t, p, filepath.Join(home, "provider.log"), bin, "provider", "run", "--home", home, "--node", "tcp://"+rpc0,
				"--wallet", filepath.Join(dir, "wallet"), "--from", p, "--password-file", pw, "--model", model, "--bond", "200ogpu",
				"--threads", "1", "--pipeline=false", "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "info")
		}
	}

	var b0 chain.BridgeView
	mustJSON(t, e.ok("query", "bridge", "-o", "json"), &b0)
	if b0.Params == nil || b0.Valset == nil || len(b0.Valset.Members) != 4 || !b0.Valset.Adopted || b0.LastDeposit != 0 {
		t.Fatalf("bridge after genesis: %+v", b0)
	}
	contract := b0.Params.Contract
	token := g.tokenOf(ctx, t, contract)
	if locked := g.balanceOf(ctx, t, token, contract); !locked.Eq(b0.OnEthereum) {
		t.Fatalf("after launch the bridge holds %s on Ethereum, the app-chain's books want %s", types.FormatAmount(locked), types.FormatAmount(b0.OnEthereum))
	}
	t.Logf("ogpu query bridge:\n%s", e.ok("query", "bridge"))
	node3Key := bridgeKeyAddr(t, filepath.Join(out, "node3"))

	// 3. The deployer (the token's holder) sends the client 1000 oGPU on
	// Ethereum; the client deposits 100 of them for itself.
	g.transferToken(ctx, t, deployer, token, client.Address, types.OGPU(1000))
	before := e.balance("client").Balance
	h0 := height(t, clients[0])
	depOut := e.ok("bridge", "deposit", "100ogpu", "--from", "client", "--eth-rpc", g.url, "--wait", "--timeout", "4m")
	t.Logf("ogpu bridge deposit 100ogpu --from client --wait:\n%s", depOut)
	step("deposit credited")
	if !strings.Contains(depOut, "deposit 1: 100ogpu locked on Ethereum for "+client.Address.Hex()) || !strings.Contains(depOut, "credited on this chain") {
		t.Fatalf("deposit output:\n%s", depOut)
	}
	after := e.balance("client").Balance
	if got := new(uint256.Int).Sub(after, before); !got.Eq(types.OGPU(100)) {
		t.Fatalf("the client's balance went from %s to %s: up by %s, want exactly 100ogpu", types.FormatAmount(before), types.FormatAmount(after), types.FormatAmount(got))
	}
	if held := g.balanceOf(ctx, t, token, client.Address); !held.Eq(types.OGPU(900)) {
		t.Fatalf("the client holds %s on Ethereum after depositing 100 of 1000", types.FormatAmount(held))
	}
	// The credit event names the nonce, the parties, and the power that
	// attested it: 3 of the 4 equal validators (node3 cannot see Ethereum).
	credits := findEvents[bridge.EventDepositCredited](ctx, t, clients[0], h0, height(t, clients[0]))
	if len(credits) != 1 {
		t.Fatalf("%d deposit credit events, want 1: %+v", len(credits), credits)
	}
	if c := credits[0]; c.Nonce != 1 || c.Recipient != client.Address || c.From != client.Address || !c.Amount.Eq(types.OGPU(100)) || c.PowerBps != 7500 {
		t.Fatalf("deposit credit event: %+v (want nonce 1, from and to the client, 100ogpu, power 7500 bps)", c)
	}

	// A deposit beyond what the client holds on Ethereum is refused before
	// anything is sent.
	if _, err := e.fails("bridge", "deposit", "5000ogpu", "--from", "client", "--eth-rpc", g.url); !strings.Contains(err.Error(), "holds 900ogpu of the oGPU token on Ethereum, 5000ogpu needed; nothing sent") {
		t.Fatalf("deposit beyond the Ethereum balance: %v", err)
	}

	// 4. Spend bridged oGPU: a job whose escrow exceeds the client's
	// genesis 1 oGPU is paid from the deposit; cancelled, it refunds.
	var post JobPostOutput
	mustJSON(t, e.ok("tx", "job", "post", "--from", "client", "--model", hashHex("model"), "--max-price", "10ogpu",
		"--redundancy", "2", "--bid-blocks", "50", "--reveal-blocks", "10", "-o", "json"), &post)
	if post.Code != 0 || post.Job == 0 || post.Locked == nil || !post.Locked.Gt(types.OGPU(20)) {
		t.Fatalf("job post: %+v", post)
	}
	var job chain.JobView
	mustJSON(t, e.ok("query", "job", strconv.FormatUint(post.Job, 10), "-o", "json"), &job)
	if !job.Locked.Eq(post.Locked) {
		t.Fatalf("job %d has %s locked, the post said %s", post.Job, types.FormatAmount(job.Locked), types.FormatAmount(post.Locked))
	}
	spent := new(uint256.Int).Sub(after, e.balance("client").Balance)
	if spent.Lt(post.Locked) {
		t.Fatalf("posting locked %s but the client paid only %s", types.FormatAmount(post.Locked), types.FormatAmount(spent))
	}
	t.Logf("job %d posted with %s locked from the bridged balance", post.Job, types.FormatAmount(post.Locked))
	cancelOut := e.ok("tx", "job", "cancel", strconv.FormatUint(post.Job, 10), "--from", "client")
	if !strings.Contains(cancelOut, fmt.Sprintf("job %d cancelled: %s refunded", post.Job, types.FormatAmount(post.Locked))) {
		t.Fatalf("cancel:\n%s", cancelOut)
	}
	step("job posted from bridged funds and cancelled")
	if modelErr == nil {
		// A real job: two provider processes bid, generate and agree; the
		// client pays them from the bridged balance.
		waitProviders(ctx, t, clients[0], 2)
		step("2 providers registered and bonded")
		beforeJob := e.balance("client").Balance
		var res agent.LLMResult
		stdout, progress := e.split("job", "run", "--from", "client", "--model", model, "--prompt", "Once upon a time", "--max-tokens", "16",
			"--stages", "1", "--bid-blocks", "8", "--reveal-blocks", "6", "--execute-blocks", "100", "--verify-blocks", "60",
			"--listen", "/ip4/127.0.0.1/tcp/0", "--timeout", "2m", "-o", "json")
		t.Logf("ogpu job run (progress):\n%s", progress)
		mustJSON(t, stdout, &res)
		// Agreed, or audited if the beacon drew it (market/audit.go).
		if !market.VerifiedOutcome(res.Outcome) || res.Text == "" || res.Paid == nil || res.Paid.IsZero() {
			t.Fatalf("job run: %+v", res)
		}
		paid := new(uint256.Int).Sub(beforeJob, e.balance("client").Balance)
		if want := new(uint256.Int).Add(res.Paid, res.ValidatorFee); paid.Lt(want) {
			t.Fatalf("the client's balance fell by %s, less than the %s paid and the %s validator fee", types.FormatAmount(paid), types.FormatAmount(res.Paid), types.FormatAmount(res.ValidatorFee))
		}
		t.Logf("job %d %s: %q; paid %s to the providers, validator fee %s, client balance down %s", res.Job, res.Outcome, res.Text,
			types.FormatAmount(res.Paid), types.FormatAmount(res.ValidatorFee), types.FormatAmount(paid))
		step("job run by 2 provider processes, paid from bridged oGPU")
	}

	// 5. Withdraw 40 to a fresh Ethereum address: debited at once into
	// the outbound escrow; the supply still adds up to the cap.
	to := common.HexToAddress("0x00000000000000000000000000000000000b1d9e")
	preWithdraw := e.balance("client").Balance
	// Refused before anything is debited: not an address, below
	// params.bridge.min_withdrawal, more than the balance. (The withdrawal
	// below getting nonce 1 shows none of them made one.)
	for _, c := range []struct{ to, amount, want string }{
		{"0x1234", "40ogpu", "is not an Ethereum address"},
		{to.Hex(), "0.5ogpu", "below params.bridge.min_withdrawal (1ogpu)"},
		{to.Hex(), "5000ogpu", "insufficient funds"},
	} {
		if _, err := e.fails("bridge", "withdraw", c.to, c.amount, "--from", "client"); !strings.Contains(err.Error(), c.want) {
			t.Fatalf("withdraw %s %s: %v, want %q", c.to, c.amount, err, c.want)
		}
	}
	if b := e.balance("client").Balance; !b.Eq(preWithdraw) {
		t.Fatalf("refused withdrawals moved the balance from %s to %s", types.FormatAmount(preWithdraw), types.FormatAmount(b))
	}
	wdOut := e.ok("bridge", "withdraw", to.Hex(), "40ogpu", "--from", "client")
	t.Logf("ogpu bridge withdraw %s 40ogpu --from client:\n%s", to.Hex(), wdOut)
	if !strings.Contains(wdOut, "withdrawal 1: 40ogpu to "+to.Hex()) {
		t.Fatalf("withdraw output:\n%s", wdOut)
	}
	debited := new(uint256.Int).Sub(preWithdraw, e.balance("client").Balance)
	if debited.Lt(types.OGPU(40)) || debited.Gt(types.OGPU(41)) {
		t.Fatalf("withdrawing 40ogpu debited %s (40 plus the fee expected)", types.FormatAmount(debited))
	}
	var sup chain.SupplyView
	mustJSON(t, e.ok("query", "supply", "-o", "json"), &sup)
	if !sup.BridgeOutbound.Eq(types.OGPU(40)) || !sup.Total().Eq(types.MaxSupply) {
		t.Fatalf("supply after the withdrawal: outbound %s, total %s (want 40ogpu and the cap)", types.FormatAmount(sup.BridgeOutbound), types.FormatAmount(sup.Total()))
	}
	t.Logf("ogpu query supply:\n%s", e.ok("query", "supply"))

	// The three validators that see Ethereum sign it; node3 signs nothing
	// it has not observed (its extensions are empty).
	w := waitWithdrawal(ctx, t, clients[0], 1, func(w *chain.WithdrawalView) bool { return w.Signed })
	if len(w.Signatures) != 3 {
		t.Fatalf("withdrawal 1 signed by %d validators, want the 3 that see Ethereum: %+v", len(w.Signatures), w.Signatures)
	}
	for _, s := range w.Signatures {
		if s.Signer == node3Key {
			t.Fatalf("node3 (Ethereum down) signed withdrawal 1")
		}
	}
	t.Logf("ogpu bridge status 1 (signed):\n%s", e.ok("bridge", "status", "1"))
	step("withdrawal signed by 3 of 4")

	// The relay pays it on Ethereum; the validators attest Withdrawn once
	// it is finalized and the outbound escrow empties.
	relayLog := filepath.Join(dir, "relay.log")
	startDaemon(t, "relay", relayLog, bin, "bridge", "relay", "--node", "tcp://"+rpc0, "--eth-rpc", g.url, "--eth-key", relayerFile, "--interval", "1s")
	waitFor(ctx, t, "40ogpu paid to "+to.Hex()+" on Ethereum", func() bool {
		return g.balanceOf(ctx, t, token, to).Eq(types.OGPU(40))
	})
	step("withdrawal paid on Ethereum by the relay")
	w = waitWithdrawal(ctx, t, clients[0], 1, func(w *chain.WithdrawalView) bool { return w.Executed != 0 })
	step(fmt.Sprintf("Withdrawn attested at height %d", w.Executed))
	statusOut := e.ok("bridge", "status", "1")
	t.Logf("ogpu bridge status 1:\n%s", statusOut)
	if !strings.Contains(statusOut, "paid on Ethereum (attested at height") {
		t.Fatalf("status after execution:\n%s", statusOut)
	}
	if got := g.balanceOf(ctx, t, token, to); !got.Eq(types.OGPU(40)) {
		t.Fatalf("%s holds %s on Ethereum, want exactly 40ogpu", to.Hex(), types.FormatAmount(got))
	}
	mustJSON(t, e.ok("query", "supply", "-o", "json"), &sup)
	if !sup.BridgeOutbound.IsZero() || !sup.Total().Eq(types.MaxSupply) {
		t.Fatalf("supply after the attestation: outbound %s, total %s", types.FormatAmount(sup.BridgeOutbound), types.FormatAmount(sup.Total()))
	}
	relayed, _ := os.ReadFile(relayLog)
	t.Logf("ogpud bridge relay:\n%s", relayed)

	// 6. Cross-chain: the contract holds what the app-chain's books say,
	// and the four nodes agree on every app hash checked.
	var b1 chain.BridgeView
	mustJSON(t, e.ok("query", "bridge", "-o", "json"), &b1)
	locked := g.balanceOf(ctx, t, token, contract)
	if !locked.Eq(b1.OnEthereum) || !new(uint256.Int).Sub(types.MaxSupply, b1.Reserve).Eq(locked) {
		t.Fatalf("the bridge holds %s on Ethereum; the app-chain's reserve %s wants %s", types.FormatAmount(locked), types.FormatAmount(b1.Reserve), types.FormatAmount(b1.OnEthereum))
	}
	if d := new(uint256.Int).Sub(locked, b0.OnEthereum); !d.Eq(types.OGPU(60)) {
		t.Fatalf("the bridge's holding moved by %s, want +60ogpu (100 in, 40 out)", types.FormatAmount(d))
	}
	t.Logf("ogpu query bridge:\n%s", e.ok("query", "bridge"))
	top := height(t, clients[0])
	waitHeight(t, clients[3], top, 30*time.Second)
	for _, at := range []int64{2, h0, top - 1} {
		want := appHashAfter(t, clients[0], at)
		for i, c := range clients[1:] {
			if got := appHashAfter(t, c, at); got != want {
				t.Fatalf("node%d app hash at height %d = %s, node0 has %s", i+1, at, got, want)
			}
		}
	}
	// node3 kept validating with its Ethereum node down, and said why it
	// sent empty extensions.
	if n := countLines(filepath.Join(out, "node3", "ogpud.log"), "sending an empty vote extension"); n == 0 {
		t.Fatal("node3 never logged that its Ethereum node is unreachable")
	}
	step("cross-chain books and app hashes agree")
}

// split runs an ogpu command and returns its stdout and stderr apart.
func (e *cliEnv) split(args ...string) (string, string) {
	e.t.Helper()
	cmd := NewOgpuCommand()
	var out, errOut strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(append([]string{}, e.base...), args...))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		e.t.Fatalf("ogpu %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// waitProviders waits until n providers are registered and bonded.
func waitProviders(ctx context.Context, t *testing.T, c *node.Client, n int) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("%d bonded providers", n), func() bool {
		pvs, err := c.Providers(ctx)
		ready := 0
		for _, p := range pvs {
			if p.Bonded != nil && !p.Bonded.IsZero() {
				ready++
			}
		}
		return err == nil && ready >= n
	})
}

// findGeth finds the geth binary: $OGPU_GETH, then PATH, then
// ~/go/bin/geth. Without one the test is skipped, unless
// OGPU_REQUIRE_GETH=1 (CI), where it fails.
func findGeth(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs geth and ogpud processes")
	}
	if p := os.Getenv("OGPU_GETH"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("OGPU_GETH=%s: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("geth"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, "go", "bin", "geth")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	const how = "geth not found (OGPU_GETH, PATH, ~/go/bin/geth): install it with `go install github.com/ethereum/go-ethereum/cmd/geth@v1.17.10`"
	if os.Getenv("OGPU_REQUIRE_GETH") == "1" {
		t.Fatal(how + " (OGPU_REQUIRE_GETH=1)")
	}
	t.Skip(how)
	return ""
}

// gethDev is a running `geth --dev`.
type gethDev struct {
	url string
	rpc *rpc.Client
	eth *ethclient.Client
	dev common.Address // the dev account, unlocked, with the ETH
}

func startGeth(t *testing.T, bin, dir string) *gethDev {
	t.Helper()
	port, err := node.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// --dev without --datadir keeps everything in memory and turns P2P
	// off, and opens no engine API port; its IPC endpoint would be the
	// shared /tmp/geth.ipc, hence --ipcdisable.
	startDaemon(t, "geth", filepath.Join(dir, "geth.log"), bin, "--dev", "--dev.period", "1",
		"--http", "--http.addr", "127.0.0.1", "--http.port", fmt.Sprint(port), "--http.api", "eth,net,web3", "--ipcdisable")
	g := &gethDev{url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var accts []common.Address
		if g.rpc == nil {
			g.rpc, _ = rpc.Dial(g.url)
		}
		if g.rpc != nil && g.rpc.Call(&accts, "eth_accounts") == nil && len(accts) > 0 {
			g.dev = accts[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("geth --dev did not answer eth_accounts at %s within 30s", g.url)
		}
		time.Sleep(200 * time.Millisecond)
	}
	g.eth = ethclient.NewClient(g.rpc)
	t.Cleanup(g.rpc.Close)
	return g
}

// fund sends 100 ETH from the dev account to a.
func (g *gethDev) fund(ctx context.Context, t *testing.T, a common.Address) {
	t.Helper()
	var hash common.Hash
	hundred := new(big.Int).Mul(big.NewInt(100), big.NewInt(1e18))
	err := g.rpc.CallContext(ctx, &hash, "eth_sendTransaction", map[string]any{"from": g.dev, "to": a, "value": (*hexutil.Big)(hundred)})
	if err != nil {
		t.Fatalf("eth_sendTransaction from the dev account: %v", err)
	}
	g.mined(ctx, t, hash, "funding "+a.Hex())
}

func (g *gethDev) mined(ctx context.Context, t *testing.T, hash common.Hash, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := bind.WaitMined(ctx, g.eth, hash)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if r.Status != ethtypes.ReceiptStatusSuccessful {
		t.Fatalf("%s: transaction %s reverted", what, hash)
	}
}

var (
	e2eToken  = contracts.NewOGPUToken()
	e2eBridge = contracts.NewOGPUBridge()
)

func (g *gethDev) tokenOf(ctx context.Context, t *testing.T, bridgeAddr common.Address) common.Address {
	t.Helper()
	a, err := bind.Call(e2eBridge.Instance(g.eth, bridgeAddr), &bind.CallOpts{Context: ctx}, e2eBridge.PackToken(), e2eBridge.UnpackToken)
	if err != nil {
		t.Fatalf("bridge %s: token(): %v", bridgeAddr, err)
	}
	return a
}

// balanceOf is holder's oGPU ERC-20 balance at the head.
func (g *gethDev) balanceOf(ctx context.Context, t *testing.T, token, holder common.Address) *uint256.Int {
	t.Helper()
	b, err := bind.Call(e2eToken.Instance(g.eth, token), &bind.CallOpts{Context: ctx}, e2eToken.PackBalanceOf(holder), e2eToken.UnpackBalanceOf)
	if err != nil {
		t.Fatalf("balanceOf(%s): %v", holder, err)
	}
	u, overflow := uint256.FromBig(b)
	if overflow {
		t.Fatalf("balanceOf(%s) = %s overflows", holder, b)
	}
	return u
}

// transferToken sends amount of the ERC-20 from key to to.
func (g *gethDev) transferToken(ctx context.Context, t *testing.T, key *ecdsa.PrivateKey, token, to common.Address, amount *uint256.Int) {
	t.Helper()
	from := crypto.PubkeyToAddress(key.PublicKey)
	nonce, err := g.eth.PendingNonceAt(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	chainID, err := g.eth.ChainID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tip, err := g.eth.SuggestGasTipCap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	head, err := g.eth.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	data := e2eToken.PackTransfer(to, amount.ToBig())
	gas, err := g.eth.EstimateGas(ctx, ethereum.CallMsg{From: from, To: &token, Data: data})
	if err != nil {
		t.Fatalf("token transfer of %s to %s refused: %v", types.FormatAmount(amount), to, err)
	}
	tx, err := ethtypes.SignNewTx(key, ethtypes.LatestSignerForChainID(chainID), &ethtypes.DynamicFeeTx{
		ChainID: chainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: gas + 50_000, To: &token, Data: data,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.eth.SendTransaction(ctx, tx); err != nil {
		t.Fatalf("token transfer: %v", err)
	}
	g.mined(ctx, t, tx.Hash(), "token transfer to "+to.Hex())
}

// newEthKey writes a fresh secp256k1 key, hex, to DIR/NAME.hex.
func newEthKey(t *testing.T, dir, name string) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".hex")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(crypto.FromECDSA(k))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return k, path
}

func bridgeKeyAddr(t *testing.T, home string) common.Address {
	t.Helper()
	k, err := node.LoadBridgeKey(home)
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(k.PublicKey)
}

// startDaemon runs a long-lived process with its output in logPath,
// stopped (SIGINT, then SIGKILL) when the test ends; its log is shown if
// the test failed.
func startDaemon(t *testing.T, name, logPath, bin string, args ...string) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	dumpOnFailure(t, name, logPath)
}

// dumpOnFailure logs the tail of a process's log if the test failed.
func dumpOnFailure(t *testing.T, name, path string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b, _ := os.ReadFile(path)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("--- %s (%s), last lines:\n%s", name, path, b)
	})
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v in:\n%s", err, s)
	}
}

func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func waitWithdrawal(ctx context.Context, t *testing.T, c *node.Client, n uint64, ok func(*chain.WithdrawalView) bool) *chain.WithdrawalView {
	t.Helper()
	var last *chain.WithdrawalView
	for {
		w, err := c.BridgeWithdrawal(ctx, n)
		if err == nil {
			last = w
			if ok(w) {
				return w
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting on withdrawal %d; last seen %+v (err %v)", n, last, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// findEvents decodes every event of type E in the blocks from..to.
func findEvents[E any, P interface {
	*E
	types.Event
}](ctx context.Context, t *testing.T, c *node.Client, from, to int64) []E {
	t.Helper()
	var out []E
	for h := from; h <= to; h++ {
		res, err := c.RPC.BlockResults(ctx, &h)
		if err != nil {
			t.Fatalf("block results %d: %v", h, err)
		}
		for _, tx := range res.TxResults {
			evs, err := node.DecodeEvents[E, P](tx.Events)
			if err != nil {
				t.Fatalf("height %d: %v", h, err)
			}
			out = append(out, evs...)
		}
		evs, err := node.DecodeEvents[E, P](res.FinalizeBlockEvents)
		if err != nil {
			t.Fatalf("height %d: %v", h, err)
		}
		out = append(out, evs...)
	}
	return out
}
