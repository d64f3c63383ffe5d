package contracts

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"reflect"
	"sort"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
)

// validator is a bridge signing key (a plain secp256k1 key, as the
// app-chain's validators will hold).
type validator struct {
	key  *ecdsa.PrivateKey
	addr common.Address
}

// newValidators makes len(powers) keys sorted by address ascending, the
// order the contract requires, with powers[i] for the i-th in that order.
func newValidators(t *testing.T, powers ...uint32) ([]validator, OGPUBridgeValset) {
	t.Helper()
	vals := make([]validator, len(powers))
	for i := range vals {
		a := newAccount(t)
		vals[i] = validator{a.key, a.addr}
	}
	sort.Slice(vals, func(i, j int) bool { return bytes.Compare(vals[i].addr[:], vals[j].addr[:]) < 0 })
	vs := OGPUBridgeValset{Powers: append([]uint32(nil), powers...)}
	for _, v := range vals {
		vs.Validators = append(vs.Validators, v.addr)
	}
	return vals, vs
}

// bridgeEnv is an OGPUBridge over the OGPUToken of a tokenEnv, with a
// validator set of Go keys and 1,000 oGPU locked so withdrawals can pay.
type bridgeEnv struct {
	*tokenEnv
	br       *OGPUBridge
	bc       *bind.BoundContract
	baddr    common.Address
	appChain [32]byte
	vals     []validator
	set      OGPUBridgeValset
}

var testAppChain = crypto.Keccak256Hash([]byte("ogpu-testnet-1"))

// newBridgeEnv deploys a bridge with validators of the given powers (set nonce 0).
func newBridgeEnv(t *testing.T, powers ...uint32) *bridgeEnv {
	t.Helper()
	e := &bridgeEnv{tokenEnv: newTokenEnv(t), br: NewOGPUBridge(), appChain: testAppChain}
	e.vals, e.set = newValidators(t, powers...)
	e.baddr, e.bc = e.deployBridge(e.appChain, e.set)
	e.send(e.holder, e.tok.PackTransfer(e.baddr, ogpu(1000)))
	return e
}

func (e *bridgeEnv) deployBridge(appChain [32]byte, set OGPUBridgeValset) (common.Address, *bind.BoundContract) {
	e.t.Helper()
	addr, tx, err := bind.DeployContract(e.opts(e.owner), common.FromHex(OGPUBridgeMetaData.Bin), e.sim.Client(),
		e.br.PackConstructor(e.addr, appChain, set))
	if err != nil {
		e.t.Fatalf("deploy bridge: %v", err)
	}
	e.mined(tx)
	return addr, e.br.Instance(e.sim.Client(), addr)
}

// Go-side digests, computed independently of the contract (the app-chain
// signers will compute them this way).
var (
	tBytes32, _ = abi.NewType("bytes32", "", nil)
	tString, _  = abi.NewType("string", "", nil)
	tUint64, _  = abi.NewType("uint64", "", nil)
	tUint256, _ = abi.NewType("uint256", "", nil)
	tAddress, _ = abi.NewType("address", "", nil)
	tAddrs, _   = abi.NewType("address[]", "", nil)
	tUint32s, _ = abi.NewType("uint32[]", "", nil)
)

func encode(t *testing.T, types []abi.Type, vals ...any) []byte {
	t.Helper()
	args := make(abi.Arguments, len(types))
	for i, ty := range types {
		args[i] = abi.Argument{Type: ty}
	}
	b, err := args.Pack(vals...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func goDomain(t *testing.T, chainID *big.Int, bridge common.Address, appChain [32]byte) [32]byte {
	return crypto.Keccak256Hash(encode(t, []abi.Type{tString, tUint256, tAddress, tBytes32},
		"ogpu-bridge-v1", chainID, bridge, appChain))
}

func goWithdrawDigest(t *testing.T, domain [32]byte, nonce uint64, to common.Address, amount *big.Int) [32]byte {
	return crypto.Keccak256Hash(encode(t, []abi.Type{tBytes32, tString, tUint64, tAddress, tUint256},
		domain, "withdraw", nonce, to, amount))
}

func goCheckpoint(t *testing.T, domain [32]byte, vs OGPUBridgeValset) [32]byte {
	return crypto.Keccak256Hash(encode(t, []abi.Type{tBytes32, tString, tUint64, tAddrs, tUint32s},
		domain, "checkpoint", vs.Nonce, vs.Validators, vs.Powers))
}

// signRaw signs the EIP-191 form of digest; V is crypto.Sign's 0/1.
func signRaw(t *testing.T, digest [32]byte, key *ecdsa.PrivateKey) OGPUBridgeSig {
	t.Helper()
	h := crypto.Keccak256([]byte("\x19Ethereum Signed Message:\n32"), digest[:])
	sig, err := crypto.Sign(h, key)
	if err != nil {
		t.Fatal(err)
	}
	var s OGPUBridgeSig
	copy(s.R[:], sig[:32])
	copy(s.S[:], sig[32:64])
	s.V = sig[64]
	return s
}

// sigs has a signature (V 27/28) from vals[i] for each i in signers and an
// all-zero entry (absent) for the others.
func sigs(t *testing.T, digest [32]byte, vals []validator, signers ...int) []OGPUBridgeSig {
	t.Helper()
	out := make([]OGPUBridgeSig, len(vals))
	for _, i := range signers {
		out[i] = signRaw(t, digest, vals[i].key)
		out[i].V += 27
	}
	return out
}

func (e *bridgeEnv) domain(c *bind.BoundContract) [32]byte {
	e.t.Helper()
	d, err := bind.Call(c, nil, e.br.PackDomain(), e.br.UnpackDomain)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// bridgeState is everything a refused call must leave unchanged.
type bridgeState struct {
	Checkpoint         [32]byte
	ValsetNonce        uint64
	LastDeposit        uint64
	Locked, Alice, Bob *big.Int
	Executed           [8]bool
}

func (e *bridgeEnv) state(c *bind.BoundContract) bridgeState {
	e.t.Helper()
	var s bridgeState
	var err error
	if s.Checkpoint, err = bind.Call(c, nil, e.br.PackValsetCheckpoint(), e.br.UnpackValsetCheckpoint); err != nil {
		e.t.Fatal(err)
	}
	if s.ValsetNonce, err = bind.Call(c, nil, e.br.PackValsetNonce(), e.br.UnpackValsetNonce); err != nil {
		e.t.Fatal(err)
	}
	if s.LastDeposit, err = bind.Call(c, nil, e.br.PackLastDepositNonce(), e.br.UnpackLastDepositNonce); err != nil {
		e.t.Fatal(err)
	}
	for n := range s.Executed {
		if s.Executed[n], err = bind.Call(c, nil, e.br.PackExecuted(uint64(n)), e.br.UnpackExecuted); err != nil {
			e.t.Fatal(err)
		}
	}
	s.Locked, s.Alice, s.Bob = e.balance(c.Address()), e.balance(e.alice.addr), e.balance(e.bob.addr)
	return s
}

// bsend runs calldata on bridge c and requires success.
func (e *bridgeEnv) bsend(c *bind.BoundContract, from account, data []byte) *types.Receipt {
	e.t.Helper()
	tx, err := bind.Transact(c, e.opts(from), data)
	if err != nil {
		e.t.Fatalf("bridge tx from %s: %v", from.addr, e.bridgeReason(err))
	}
	return e.mined(tx)
}

// brefused requires calldata on bridge c to revert, twice: at estimation,
// which gives the custom error it returns, and as a mined transaction with a
// fixed gas limit, which must fail and leave the bridge's state unchanged.
func (e *bridgeEnv) brefused(c *bind.BoundContract, from account, data []byte) any {
	e.t.Helper()
	before := e.state(c)
	_, err := bind.Transact(c, e.opts(from), data)
	if err == nil {
		e.sim.Commit()
		e.t.Fatalf("bridge tx from %s succeeded, want a revert", from.addr)
	}
	reason := e.bridgeReason(err)
	opts := e.opts(from)
	opts.GasLimit = 2_000_000
	tx, err := bind.Transact(c, opts, data)
	if err != nil {
		e.t.Fatalf("sending with a fixed gas limit: %v", err)
	}
	e.sim.Commit()
	r, err := bind.WaitMined(context.Background(), e.sim.Client(), tx.Hash())
	if err != nil {
		e.t.Fatal(err)
	}
	if r.Status != types.ReceiptStatusFailed {
		e.t.Fatalf("mined tx succeeded, want a revert (%v at estimation)", reason)
	}
	if after := e.state(c); !reflect.DeepEqual(before, after) {
		e.t.Fatalf("refused call changed the state:\nbefore %+v\nafter  %+v", before, after)
	}
	return reason
}

func (e *bridgeEnv) bridgeReason(err error) any {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return err
	}
	h, ok := de.ErrorData().(string)
	if !ok {
		return err
	}
	raw, derr := hexutil.Decode(h)
	if derr != nil || len(raw) < 4 {
		return err
	}
	if v, uerr := e.br.UnpackError(raw); uerr == nil {
		return v
	}
	if v, uerr := e.tok.UnpackError(raw); uerr == nil {
		return v
	}
	return err
}

func wantErr[T any](t *testing.T, got any) *T {
	t.Helper()
	v, ok := got.(*T)
	if !ok {
		var z T
		t.Fatalf("got %T %+v, want %T", got, got, &z)
	}
	return v
}

func (e *bridgeEnv) withdrawTx(c *bind.BoundContract, set OGPUBridgeValset, nonce uint64, to common.Address, amount *big.Int, s []OGPUBridgeSig) []byte {
	return e.br.PackWithdraw(set, nonce, to, amount, s)
}

// TestBridgeDigestsMatchGo: the contract's domain, withdrawal digest and
// checkpoint are exactly what Go computes from (chain id, bridge address,
// app chain id): the app-chain signers can build them without the EVM, and
// the Ethereum chain id is part of the domain.
func TestBridgeDigestsMatchGo(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1)
	id, err := e.sim.Client().ChainID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := goDomain(t, id, e.baddr, e.appChain)
	if got := e.domain(e.bc); got != d {
		t.Fatalf("contract domain %x, Go %x", got, d)
	}
	if other := goDomain(t, new(big.Int).Add(id, big.NewInt(1)), e.baddr, e.appChain); other == d {
		t.Fatal("domain does not depend on the chain id")
	}
	wd, err := bind.Call(e.bc, nil, e.br.PackWithdrawDigest(7, e.bob.addr, ogpu(3)), e.br.UnpackWithdrawDigest)
	if err != nil {
		t.Fatal(err)
	}
	if g := goWithdrawDigest(t, d, 7, e.bob.addr, ogpu(3)); wd != g {
		t.Fatalf("withdraw digest %x, Go %x", wd, g)
	}
	cp, err := bind.Call(e.bc, nil, e.br.PackValsetCheckpoint(), e.br.UnpackValsetCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	if g := goCheckpoint(t, d, e.set); cp != g {
		t.Fatalf("stored checkpoint %x, Go %x", cp, g)
	}
}
