package ethbridge

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// stubObserver returns a fixed observation (or error): the Signer's rules
// are tested on the real chain state against chosen Ethereum views.
type stubObserver struct {
	obs *bridge.Observation
	err error
}

func (s stubObserver) Observe(context.Context, uint64, int, []uint64) (*bridge.Observation, error) {
	return s.obs, s.err
}

const signerChain = "signer-test"

// signerState is a real app's committed state: one validator with bridge
// key bkey (registered by a genesis tx), and alice's withdrawal 1 of 10
// oGPU to eth pending.
func signerState(t *testing.T) (store.KV, *uint256.Int) {
	t.Helper()
	op, _ := crypto.GenerateKey()
	alice, _ := crypto.GenerateKey()
	doc := genesis.Default()
	p := genesis.DefaultBridgeParams()
	p.EthChainID, p.Contract = 1337, common.HexToAddress("0xb41d6e")
	doc.Params.Bridge = &p
	opAddr, aliceAddr := crypto.PubkeyToAddress(op.PublicKey), crypto.PubkeyToAddress(alice.PublicKey)
	for _, a := range []types.Address{opAddr, aliceAddr} {
		if err := doc.AddAccount(a, types.OGPU(100)); err != nil {
			t.Fatal(err)
		}
	}
	pub := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	doc.Validators = []genesis.Validator{{Name: "v", Operator: opAddr, PubKey: pub, Stake: types.OGPU(10_000)}}
	proof, _ := bridge.ProveKey(bkey, signerChain, opAddr)
	doc.GenTxs = append(doc.GenTxs, signed(t, op, 0, (&bridge.MsgSetBridgeKey{Key: crypto.PubkeyToAddress(bkey.PublicKey), Proof: proof}).Raw()))
	tree := store.NewMemTree()
	app := chain.NewApp(tree, chain.WithInvariants())
	bz, _ := json.Marshal(doc)
	ctx := context.Background()
	if _, err := app.InitChain(ctx, &abci.InitChainRequest{ChainId: signerChain, AppStateBytes: bz, InitialHeight: 1}); err != nil {
		t.Fatal(err)
	}
	w := signed(t, alice, 0, (&bridge.MsgBridgeWithdraw{To: signerEth, Amount: types.OGPU(10)}).Raw())
	res, err := app.FinalizeBlock(ctx, &abci.FinalizeBlockRequest{Height: 1, Txs: [][]byte{w}, Time: time.Unix(0, 0)})
	if err != nil || res.TxResults[0].Code != 0 {
		t.Fatalf("withdraw: %v %+v", err, res.TxResults)
	}
	if _, err := app.Commit(ctx, &abci.CommitRequest{}); err != nil {
		t.Fatal(err)
	}
	snap, err := tree.Snapshot(0)
	if err != nil {
		t.Fatal(err)
	}
	want := new(uint256.Int).Sub(types.MaxSupply, escrow.NewKeeper(snap).BridgeReserve())
	return snap, want
}

var (
	bkey, _   = crypto.ToECDSA(crypto.Keccak256([]byte("signer test bridge key")))
	signerEth = common.HexToAddress("0x00000000000000000000000000000000000e7e7a")
)

func signed(t *testing.T, k *ecdsa.PrivateKey, nonce uint64, msgs ...types.RawMsg) []byte {
	t.Helper()
	tx := &types.Tx{Body: types.TxBody{ChainID: signerChain, Nonce: nonce, Fee: types.OGPU(1), Msgs: msgs}}
	if err := tx.Sign(k); err != nil {
		t.Fatal(err)
	}
	bz, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return bz
}

// TestSignerChecksTheCrossChainInvariant: the signer signs the pending
// withdrawal only while Ethereum holds at least what the app-chain's books
// say (max supply − reserve, counting withdrawals paid there and not yet
// attested); with one unit missing it signs nothing, says it halted, and
// still reports deposits. An unregistered key and an Ethereum node that
// fails give empty extensions.
func TestSignerChecksTheCrossChainInvariant(t *testing.T) {
	kv, want := signerState(t)
	dep := bridge.Deposit{Nonce: 1, From: common.HexToAddress("0xd0"), Recipient: common.HexToAddress("0xa11ce"), Amount: types.OGPU(3)}
	ctx := context.Background()
	domain := bridge.Domain(1337, common.HexToAddress("0xb41d6e"), signerChain)
	digest := bridge.WithdrawDigest(domain, 1, signerEth, types.OGPU(10))

	s := NewSigner(stubObserver{obs: &bridge.Observation{Locked: want, Deposits: []bridge.Deposit{dep}}}, bkey, nil)
	ext, err := s.Build(ctx, kv)
	if err != nil || s.Halted() {
		t.Fatalf("books agree: %v, halted %v", err, s.Halted())
	}
	if len(ext.Withdrawals) != 1 || len(ext.Deposits) != 1 {
		t.Fatalf("extension %+v: want the deposit and a signature of withdrawal 1", ext)
	}
	if got, err := ext.Withdrawals[0].Sig.Signer(digest); err != nil || got != s.Address() {
		t.Fatalf("the signature recovers to %s (%v), want %s", got, err, s.Address())
	}

	short := new(uint256.Int).Sub(want, uint256.NewInt(1))
	s = NewSigner(stubObserver{obs: &bridge.Observation{Locked: short, Deposits: []bridge.Deposit{dep}}}, bkey, nil)
	ext, err = s.Build(ctx, kv)
	if err != nil || !s.Halted() || len(ext.Withdrawals) != 0 || len(ext.Valsets) != 0 || len(ext.Deposits) != 1 {
		t.Fatalf("one unit missing on Ethereum: %+v, halted %v, err %v; want no signature, halted, the deposit still reported", ext, s.Halted(), err)
	}

	// Withdrawal 1 paid on Ethereum and not attested yet: the books agree.
	paid := new(uint256.Int).Sub(want, types.OGPU(10))
	s = NewSigner(stubObserver{obs: &bridge.Observation{Locked: paid, Executed: []bridge.Executed{{Nonce: 1, To: signerEth, Amount: types.OGPU(10)}}}}, bkey, nil)
	ext, err = s.Build(ctx, kv)
	if err != nil || s.Halted() || len(ext.Executed) != 1 || len(ext.Withdrawals) != 0 {
		t.Fatalf("paid, not attested: %+v, halted %v, err %v; want the Withdrawn report and no new signature", ext, s.Halted(), err)
	}

	other, _ := crypto.GenerateKey()
	if got := NewSigner(stubObserver{obs: &bridge.Observation{Locked: want}}, other, nil).Extension(ctx, 2, kv); got != nil {
		t.Errorf("an unregistered key sent %x", got)
	}
	if got := NewSigner(stubObserver{err: errors.New("connection refused")}, bkey, nil).Extension(ctx, 2, kv); got != nil {
		t.Errorf("with the Ethereum node down the signer sent %x", got)
	}
}
