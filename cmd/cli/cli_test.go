package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// runCLI runs one ogpu command line in-process and returns its stdout.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewOgpuCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

type cliEnv struct {
	t    *testing.T
	base []string
	node *node.ChainNode
	rpc  string
}

func (e *cliEnv) ok(args ...string) string {
	e.t.Helper()
	out, err := runCLI(e.t, append(append([]string{}, e.base...), args...)...)
	if err != nil {
		e.t.Fatalf("ogpu %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (e *cliEnv) fails(args ...string) (string, error) {
	e.t.Helper()
	out, err := runCLI(e.t, append(append([]string{}, e.base...), args...)...)
	if err == nil {
		e.t.Fatalf("ogpu %s succeeded, want an error:\n%s", strings.Join(args, " "), out)
	}
	return out, err
}

func (e *cliEnv) balance(name string) BalanceOutput {
	e.t.Helper()
	var b BalanceOutput
	if err := json.Unmarshal([]byte(e.ok("query", "balance", name, "-o", "json")), &b); err != nil {
		e.t.Fatal(err)
	}
	return b
}

// startEnv creates alice and bob in a wallet, funds alice in genesis and
// starts a real single-validator node in-process.
func startEnv(t *testing.T) *cliEnv {
	t.Helper()
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("correct horse\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, base: []string{"--home", filepath.Join(dir, "wallet"), "--password-file", pwFile, "--lightkdf"}}
	var alice struct{ Address types.Address }
	if err := json.Unmarshal([]byte(e.ok("keys", "add", "alice", "-o", "json")), &alice); err != nil {
		t.Fatal(err)
	}
	e.ok("keys", "add", "bob")

	home := filepath.Join(dir, "node")
	conf, err := node.LocalConfig(home, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	doc := genesis.Default()
	if err := doc.AddAccount(alice.Address, types.OGPU(1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := node.InitHome(node.InitOptions{Home: home, ChainID: "ogpu-cli-test", Genesis: doc, Config: conf}); err != nil {
		t.Fatal(err)
	}
	n, err := node.StartChainNode(context.Background(), conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	e.node = n
	e.rpc = conf.RPC.ListenAddress
	e.base = append(e.base, "--node", conf.RPC.ListenAddress)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := node.Dial(conf.RPC.ListenAddress)
	if err := c.WaitHeight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestCLISendSignOnlyReplayAndTamper(t *testing.T) {
	e := startEnv(t)

	keys := e.ok("keys", "list")
	if !strings.Contains(keys, "alice") || !strings.Contains(keys, "bob") {
		t.Fatalf("keys list:\n%s", keys)
	}
	if out := e.ok("tx", "send", "bob", "10ogpu", "--from", "alice"); !strings.Contains(out, "(code 0)") {
		t.Fatalf("send: %s", out)
	}
	if b := e.balance("bob"); b.Display != "10ogpu" {
		t.Fatalf("bob: %+v", b)
	}

	// Sign offline, broadcast, and broadcast the same file again.
	txFile := filepath.Join(t.TempDir(), "tx.hex")
	e.ok("tx", "send", "bob", "2.5ogpu", "--from", "alice", "--sign-only", "--out", txFile)
	var res TxOutput
	if err := json.Unmarshal([]byte(e.ok("tx", "broadcast", txFile, "-o", "json")), &res); err != nil || res.Code != 0 || res.Height == 0 {
		t.Fatalf("broadcast: %+v %v", res, err)
	}
	aliceBefore, bobBefore := e.balance("alice"), e.balance("bob")
	out, err := e.fails("tx", "broadcast", txFile)
	if !strings.Contains(err.Error(), "nonce 1") || !strings.Contains(err.Error(), "already used") || !strings.Contains(err.Error(), "code 5") {
		t.Fatalf("replay error %q does not name the nonce\n%s", err, out)
	}

	// A signature with one byte changed is refused.
	tampered := filepath.Join(t.TempDir(), "tampered.hex")
	e.ok("tx", "send", "bob", "1ogpu", "--from", "alice", "--sign-only", "--out", tampered)
	raw, _ := os.ReadFile(tampered)
	bz, _ := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(string(raw)), "0x"))
	bz[len(bz)-40] ^= 0x01 // inside S of the trailing [R || S || V]
	os.WriteFile(tampered, []byte("0x"+hex.EncodeToString(bz)), 0o600)
	if _, err := e.fails("tx", "broadcast", tampered); !strings.Contains(err.Error(), "bad signature") || !strings.Contains(err.Error(), "code 4") {
		t.Fatalf("tampered signature: %v", err)
	}

	// Garbage is refused before it reaches the node.
	garbage := filepath.Join(t.TempDir(), "garbage")
	os.WriteFile(garbage, []byte("0xdeadbeef"), 0o600)
	if _, err := e.fails("tx", "broadcast", garbage); !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("garbage: %v", err)
	}

	// Nothing moved on refusals, even after more blocks.
	c, _ := node.Dial(e.rpc)
	st, _ := c.RPC.Status(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitHeight(ctx, st.SyncInfo.LatestBlockHeight+2); err != nil {
		t.Fatal(err)
	}
	if a, b := e.balance("alice"), e.balance("bob"); !a.Balance.Eq(aliceBefore.Balance) || !b.Balance.Eq(bobBefore.Balance) {
		t.Fatalf("balances moved after refusals: alice %s -> %s, bob %s -> %s", aliceBefore.Display, a.Display, bobBefore.Display, b.Display)
	}
	if b := e.balance("bob"); b.Display != "12.5ogpu" {
		t.Fatalf("bob has %s, want 12.5ogpu", b.Display)
	}

	// Sending more than the balance is refused with nothing charged.
	if _, err := e.fails("tx", "send", "bob", "5000ogpu", "--from", "alice"); !strings.Contains(err.Error(), "insufficient funds") {
		t.Fatalf("overspend: %v", err)
	}
	var acct chain.AccountView
	json.Unmarshal([]byte(e.ok("query", "account", "alice", "-o", "json")), &acct)
	if acct.Nonce != 2 || !acct.Balance.Eq(aliceBefore.Balance) {
		t.Fatalf("alice after overspend: %+v, want nonce 2 and balance %s", acct, aliceBefore.Display)
	}

	// The balance proves against the block header.
	var proven BalanceOutput
	json.Unmarshal([]byte(e.ok("query", "balance", "bob", "--prove", "-o", "json")), &proven)
	if !proven.Proven || proven.Display != "12.5ogpu" {
		t.Fatalf("proof: %+v", proven)
	}
	if out := e.ok("query", "tx", res.Hash); !strings.Contains(out, "event transfer") {
		t.Fatalf("query tx: %s", out)
	}
	if out := e.ok("status", "-o", "json"); !strings.Contains(out, `"chain_id": "ogpu-cli-test"`) {
		t.Fatalf("status: %s", out)
	}
	var supply chain.SupplyView
	json.Unmarshal([]byte(e.ok("query", "supply", "-o", "json")), &supply)
	total := new(uint256.Int)
	for _, x := range []*uint256.Int{supply.Circulating, supply.FeePool, supply.BridgeReserve, supply.BridgeOutbound, supply.Bonded, supply.Unbonding, supply.Locked, supply.Burned} {
		total.Add(total, x)
	}
	// The fees went to the fee pool and on to the validator at each block's end.
	if !total.Eq(types.MaxSupply) || supply.Bonded.IsZero() {
		t.Fatalf("supply does not add up: %+v", supply)
	}
}

func TestCLIKeysExportImportDelete(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("pw1"), 0o600)
	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("nope"), 0o600)
	e := &cliEnv{t: t, base: []string{"--home", filepath.Join(dir, "w"), "--lightkdf", "--password-file", pw}}
	addr := strings.TrimSpace(e.ok("keys", "add", "carol"))
	addr = strings.Fields(strings.SplitN(addr, "\n", 2)[0])[3]
	exported := filepath.Join(dir, "carol.json")
	e.ok("keys", "export", "carol", "--out", exported)
	if _, err := e.fails("keys", "export", "carol", "--password-file", wrong); !strings.Contains(err.Error(), "password") {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := e.fails("keys", "import", "carol2", exported); !strings.Contains(err.Error(), "carol") {
		t.Fatalf("importing a key already held should name its holder: %v", err)
	}
	if _, err := e.fails("keys", "delete", "carol"); !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("delete without --yes: %v", err)
	}
	e.ok("keys", "delete", "carol", "--yes")
	if out := e.ok("keys", "import", "carol", exported); !strings.Contains(out, addr) {
		t.Fatalf("re-import gave another address: %s (want %s)", out, addr)
	}
	if out := e.ok("keys", "show", "carol"); strings.TrimSpace(out) != addr {
		t.Fatalf("show: %q want %q", out, addr)
	}
}
