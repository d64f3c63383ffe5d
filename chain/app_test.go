package chain

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

const testChainID = "ogpu-test-1"

// testKey derives a fixed key from a name, so tests and golden hashes are
// reproducible.
func testKey(name string) *ecdsa.PrivateKey {
	k, err := crypto.ToECDSA(crypto.Keccak256([]byte("ogpu test key " + name)))
	if err != nil {
		panic(err)
	}
	return k
}

func addrOf(name string) types.Address { return crypto.PubkeyToAddress(testKey(name).PublicKey) }

// harness drives an App through the ABCI calls CometBFT would make, with
// every invariant checked after every block.
type harness struct {
	t      testing.TB
	app    *App
	tree   *store.Tree
	height int64
	nonces map[string]uint64
	hashes []string
}

// testValKey is the consensus key of the test genesis validator "val".
func testValKey(seed byte) []byte {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)).Public().(ed25519.PublicKey)
}

func testGenesis() *genesis.Doc {
	d := genesis.Default()
	for _, n := range []string{"alice", "bob", "carol"} {
		if err := d.AddAccount(addrOf(n), types.OGPU(1000)); err != nil {
			panic(err)
		}
	}
	d.Validators = []genesis.Validator{{Name: "val", Operator: addrOf("val"), PubKey: testValKey(1), Stake: types.OGPU(10_000)}}
	return d
}

func newHarness(t testing.TB, tree *store.Tree, doc *genesis.Doc, opts ...Option) *harness {
	t.Helper()
	h := &harness{t: t, app: NewApp(tree, append([]Option{WithInvariants()}, opts...)...), tree: tree, nonces: map[string]uint64{}}
	bz, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.app.InitChain(context.Background(), &abci.InitChainRequest{ChainId: testChainID, AppStateBytes: bz, InitialHeight: 1})
	if err != nil {
		t.Fatalf("InitChain: %v", err)
	}
	h.hashes = append(h.hashes, hex.EncodeToString(res.AppHash))
	return h
}

// tx signs a transaction from name with the next nonce and the required fee.
func (h *harness) tx(name string, msgs ...types.RawMsg) []byte {
	h.t.Helper()
	bz := signTx(h.t, testKey(name), h.nonces[name], msgs...)
	h.nonces[name]++
	return bz
}

func signTx(t testing.TB, key *ecdsa.PrivateKey, nonce uint64, msgs ...types.RawMsg) []byte {
	t.Helper()
	tx := &types.Tx{Body: types.TxBody{ChainID: testChainID, Nonce: nonce, Fee: types.OGPU(1), Msgs: msgs}}
	if err := tx.Sign(key); err != nil {
		t.Fatal(err)
	}
	bz, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

func send(to string, amt *uint256.Int) types.RawMsg {
	return (&escrow.MsgSend{To: addrOf(to), Amount: amt}).Raw()
}

// block finalizes and commits one block and returns the tx results.
func (h *harness) block(txs ...[]byte) []*abci.ExecTxResult {
	h.t.Helper()
	h.height++
	res, err := h.app.FinalizeBlock(context.Background(), &abci.FinalizeBlockRequest{Height: h.height, Txs: txs, Time: time.Unix(0, 0)})
	if err != nil {
		h.t.Fatalf("FinalizeBlock %d: %v", h.height, err)
	}
	if _, err := h.app.Commit(context.Background(), &abci.CommitRequest{}); err != nil {
		h.t.Fatalf("Commit %d: %v", h.height, err)
	}
	h.hashes = append(h.hashes, hex.EncodeToString(res.AppHash))
	return res.TxResults
}

func (h *harness) checkTx(bz []byte) *abci.CheckTxResponse {
	h.t.Helper()
	res, err := h.app.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: bz, Type: abci.CHECK_TX_TYPE_CHECK})
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

func (h *harness) balance(name string) *uint256.Int {
	snap, err := h.tree.Snapshot(0)
	if err != nil {
		h.t.Fatal(err)
	}
	return escrow.NewKeeper(snap).Balance(addrOf(name))
}

// script is the fixed block script of the golden test: transfers, a replay,
// a failing send, an empty block.
func script(h *harness) {
	h.block(h.tx("alice", send("bob", types.OGPU(10))), h.tx("bob", send("carol", uint256.NewInt(1_500_000_000_000_000_000))))
	replay := h.tx("carol", send("alice", types.OGPU(3)))
	h.block(replay, replay)
	h.block(h.tx("alice", send("carol", types.OGPU(5000)))) // fails: fee paid, send reverted
	h.block()
	h.block(h.tx("bob", send("alice", types.OGPU(1)), send("carol", types.OGPU(2))))
}

// goldenHashes are the app hashes after InitChain and each block of script.
// They change only when the state machine's rules or encodings change, which
// is a new AppVersion.
//
// Last changed by issue 30 (AppVersion 8): the params record carries
// params.market.audit_rate_bps and deterrence_bps (and canary_rate_bps
// is 0: canaries retired by default), and every block's end
// writes the beacon's value of the height before it and its next height
// (keys 0x71, 0x72; package beacon). Before that, issue 17's pruning (AppVersion 7) added
// params.market.retain_blocks, and issue 16 (fine-tune jobs, AppVersion 5)
// the finetune section; AppVersion 6 changed no hash here, only the
// scenarios' goldens (testdata/scenarios).
var goldenHashes = []string{
	"0d46e2c042dfcb637075fdd381ba83ebd7ab4cd0fd06f1d847f15a53129ae600",
	"519e5747dd3bd3667ff9467f359e26b2c14fb1b7137e986e115fad3a991e660b",
	"0907d821f854cc8f076ef18d0c21384e81ebdbb7270b464c8d2d15866e9ce508",
	"fab7b00d218fc65a3f0e5fa4173deb39b58b532870ad40d7da74f205f0ff5285",
	"19b71cda853bf12b214bdf08816f7a25fdefaf0e982f1c487166e735845a2dc9",
	"b4c27dcc779c6f33c2d33fa548731e255d6d5f72fa5c496b7e12b0e068f5a905",
}

func runScript(t testing.TB) []string {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	script(h)
	return h.hashes
}

func TestGoldenAppHash(t *testing.T) {
	got := runScript(t)
	if len(goldenHashes) == 0 {
		t.Fatalf("no golden hashes; got:\n%s", strings.Join(got, "\n"))
	}
	for i := range goldenHashes {
		if got[i] != goldenHashes[i] {
			t.Errorf("app hash after step %d = %s, want %s", i, got[i], goldenHashes[i])
		}
	}
}

func TestDeterminismAcrossRunsAndGOMAXPROCS(t *testing.T) {
	first := runScript(t)
	if second := runScript(t); strings.Join(first, ",") != strings.Join(second, ",") {
		t.Fatalf("two runs disagree:\n%v\n%v", first, second)
	}
	for _, procs := range []string{"1", fmt.Sprint(runtime.NumCPU() + 3)} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPrintScriptHashes$", "-test.v")
		cmd.Env = append(os.Environ(), "OGPU_PRINT_HASHES=1", "GOMAXPROCS="+procs)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child with GOMAXPROCS=%s: %v\n%s", procs, err, out)
		}
		if !strings.Contains(string(out), "HASHES "+strings.Join(first, ",")) {
			t.Fatalf("child with GOMAXPROCS=%s disagrees:\n%s", procs, out)
		}
	}
}

// TestPrintScriptHashes is the child process of the determinism test.
func TestPrintScriptHashes(t *testing.T) {
	if os.Getenv("OGPU_PRINT_HASHES") == "" {
		t.Skip("child process of TestDeterminismAcrossRunsAndGOMAXPROCS")
	}
	fmt.Printf("HASHES %s\n", strings.Join(runScript(t), ","))
}

func TestTransfersAndRefusals(t *testing.T) {
	h := newHarness(t, store.NewMemTree(), testGenesis())
	ok := h.tx("alice", send("bob", types.OGPU(10)))
	if res := h.checkTx(ok); res.Code != 0 {
		t.Fatalf("CheckTx: %d %s", res.Code, res.Log)
	}
	res := h.block(ok)
	if res[0].Code != 0 {
		t.Fatalf("send failed: %s", res[0].Log)
	}
	if got, want := h.balance("bob"), types.OGPU(1010); !got.Eq(want) {
		t.Fatalf("bob has %s, want %s", got, want)
	}
	wantAlice := new(uint256.Int).Sub(types.OGPU(990), types.OGPU(1)) // 10 sent, fee 1
	if got := h.balance("alice"); !got.Eq(wantAlice) {
		t.Fatalf("alice has %s, want %s", got, wantAlice)
	}

	tampered := func() []byte {
		tx, err := types.DecodeTx(h.tx("alice", send("bob", types.OGPU(1))))
		if err != nil {
			t.Fatal(err)
		}
		tx.Body.Msgs[0] = send("carol", types.OGPU(1))
		bz, _ := tx.Encode()
		h.nonces["alice"]--
		return bz
	}()
	wrongChain := func() []byte {
		tx := &types.Tx{Body: types.TxBody{ChainID: "other-chain", Nonce: h.nonces["alice"], Fee: types.OGPU(1), Msgs: []types.RawMsg{send("bob", types.OGPU(1))}}}
		tx.Sign(testKey("alice"))
		bz, _ := tx.Encode()
		return bz
	}()
	lowFee := func() []byte {
		tx := &types.Tx{Body: types.TxBody{ChainID: testChainID, Nonce: h.nonces["alice"], Fee: uint256.NewInt(1), Msgs: []types.RawMsg{send("bob", types.OGPU(1))}}}
		tx.Sign(testKey("alice"))
		bz, _ := tx.Encode()
		return bz
	}()
	big := signTx(t, testKey("alice"), h.nonces["alice"], types.RawMsg{Type: types.MsgTypeSend, Data: make([]byte, 70_000)})
	cases := []struct {
		name string
		tx   []byte
		want *types.Error
		log  string
	}{
		{"replayed nonce", ok, types.ErrNonceUsed, "nonce 0"},
		{"future nonce", signTx(t, testKey("alice"), 7, send("bob", types.OGPU(1))), types.ErrNonceAhead, "nonce 7"},
		{"tampered signature", tampered, types.ErrBadSignature, "not by sender"},
		{"wrong chain", wrongChain, types.ErrWrongChainID, "other-chain"},
		{"fee too low", lowFee, types.ErrFeeTooLow, "below the required"},
		{"insufficient funds", h.tx("carol", send("bob", types.OGPU(5000))), types.ErrInsufficientFunds, "has 999ogpu"},
		{"malformed bytes", []byte{0xc3, 0x01, 0x02}, types.ErrMalformedTx, ""},
		{"empty", nil, types.ErrMalformedTx, ""},
		{"oversized", big, types.ErrTxTooLarge, "limit is 65536"},
		{"unknown message", signTx(t, testKey("alice"), h.nonces["alice"], types.RawMsg{Type: 999, Data: []byte{0xc0}}), types.ErrUnknownMsg, "type 999"},
		{"zero amount", signTx(t, testKey("alice"), h.nonces["alice"], send("bob", new(uint256.Int))), types.ErrInvalidMsg, "positive"},
		{"no messages", signTx(t, testKey("alice"), h.nonces["alice"]), types.ErrNoMsgs, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := h.checkTx(tc.tx)
			if res.Code != tc.want.Code || !strings.Contains(res.Log, tc.log) {
				t.Fatalf("CheckTx = %d %q, want code %d containing %q", res.Code, res.Log, tc.want.Code, tc.log)
			}
			// FinalizeBlock repeats the check: the tx is recorded as
			// refused and the state does not move.
			out := h.block(tc.tx)
			if out[0].Code != tc.want.Code {
				t.Fatalf("FinalizeBlock code = %d %q, want %d", out[0].Code, out[0].Log, tc.want.Code)
			}
		})
	}
	// insufficient funds in a block is a failed message: carol pays the fee.
	if got, want := h.balance("carol"), types.OGPU(999); !got.Eq(want) {
		t.Fatalf("carol has %s, want %s (fee only)", got, want)
	}
	if got := h.balance("bob"); !got.Eq(types.OGPU(1010)) {
		t.Fatalf("bob has %s after refusals, want 1010ogpu", got)
	}
	if got := h.balance("alice"); !got.Eq(wantAlice) {
		t.Fatalf("alice has %s after refusals, want %s", got, wantAlice)
	}
}

func TestErrorsAreStable(t *testing.T) {
	wrapped := types.ErrNonceUsed.Wrapf("x")
	if !errors.Is(wrapped, types.ErrNonceUsed) || types.CodeOf(wrapped) != 5 {
		t.Fatalf("wrapped error lost its code: %v", wrapped)
	}
}
