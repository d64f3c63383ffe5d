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
	"time"

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
	guardian account // tokenEnv's pair account; no bridge test registers it as a pair
}

var testAppChain = crypto.Keccak256Hash([]byte("ogpu-testnet-1"))

// Outflow limits of the test bridges: a 100 oGPU bucket refilled per 24 h,
// withdrawals of 50 oGPU or more always wait a day.
var (
	testOutflowCap = ogpu(100)
	testLarge      = ogpu(50)
)

const (
	testDelay       = 24 * 60 * 60
	testValsetDelay = 2 * 24 * 60 * 60
)

// newBridgeEnv deploys a bridge with validators of the given powers (set nonce 0).
func newBridgeEnv(t *testing.T, powers ...uint32) *bridgeEnv {
	t.Helper()
	e := &bridgeEnv{tokenEnv: newTokenEnv(t), br: NewOGPUBridge(), appChain: testAppChain}
	e.guardian = e.pair
	e.vals, e.set = newValidators(t, powers...)
	e.baddr, e.bc = e.deployBridge(e.appChain, e.set)
	e.send(e.holder, e.tok.PackTransfer(e.baddr, ogpu(1000)))
	return e
}

func (e *bridgeEnv) deployBridge(appChain [32]byte, set OGPUBridgeValset) (common.Address, *bind.BoundContract) {
	e.t.Helper()
	addr, tx, err := bind.DeployContract(e.opts(e.owner), common.FromHex(OGPUBridgeMetaData.Bin), e.sim.Client(),
		e.br.PackConstructor(e.addr, appChain, set, e.guardian.addr, testOutflowCap, testLarge, testDelay, testValsetDelay))
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
	Paused             bool
	LastUnpause        uint64
	OutflowUsed        *big.Int
	Queued             [8]QueuedOutput
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
	if s.Paused, err = bind.Call(c, nil, e.br.PackPaused(), e.br.UnpackPaused); err != nil {
		e.t.Fatal(err)
	}
	if s.LastUnpause, err = bind.Call(c, nil, e.br.PackLastUnpauseNonce(), e.br.UnpackLastUnpauseNonce); err != nil {
		e.t.Fatal(err)
	}
	if s.OutflowUsed, err = bind.Call(c, nil, e.br.PackOutflowUsed(), e.br.UnpackOutflowUsed); err != nil {
		e.t.Fatal(err)
	}
	for n := range s.Queued {
		if s.Queued[n], err = bind.Call(c, nil, e.br.PackQueued(uint64(n)), e.br.UnpackQueued); err != nil {
			e.t.Fatal(err)
		}
	}
	s.Locked, s.Alice, s.Bob = e.balance(c.Address()), e.balance(e.alice.addr), e.balance(e.bob.addr)
	return s
}

// bsend runs calldata on bridge c and requires success. The gas limit is
// fixed: since the outflow limit came in, the pending-block estimate of a
// withdrawal fell short of what the mined block used (by ~7k gas, most
// likely because the bucket's refill depends on the block timestamp), so
// relayers must add a margin to estimates too.
func (e *bridgeEnv) bsend(c *bind.BoundContract, from account, data []byte) *types.Receipt {
	e.t.Helper()
	if _, err := bind.Transact(c, &bind.TransactOpts{From: from.addr, Signer: e.opts(from).Signer, NoSend: true}, data); err != nil {
		e.t.Fatalf("bridge tx from %s: %v", from.addr, e.bridgeReason(err))
	}
	opts := e.opts(from)
	opts.GasLimit = 2_000_000
	tx, err := bind.Transact(c, opts, data)
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

func (e *bridgeEnv) deposited(r *types.Receipt) *OGPUBridgeDeposited {
	e.t.Helper()
	for _, l := range r.Logs {
		if l.Address != e.baddr {
			continue
		}
		if ev, err := e.br.UnpackDepositedEvent(l); err == nil {
			return ev
		}
	}
	e.t.Fatal("no Deposited event")
	return nil
}

// TestBridgeDeposit: deposits get nonces 1, 2, 3 with no gap, the event
// carries what the bridge actually received (its balance difference: here
// the depositor is a taxed pair, so 95%), and a zero recipient or amount is
// refused with nothing changed.
func TestBridgeDeposit(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1)
	e.send(e.holder, e.tok.PackTransfer(e.alice.addr, ogpu(100)))
	e.send(e.alice, e.tok.PackApprove(e.baddr, ogpu(100)))
	for n := uint64(1); n <= 3; n++ {
		before := e.balance(e.baddr)
		ev := e.deposited(e.bsend(e.bc, e.alice, e.br.PackDeposit(e.bob.addr, ogpu(int64(n)))))
		if ev.Nonce != n || ev.From != e.alice.addr || ev.Recipient != e.bob.addr || ev.Amount.Cmp(ogpu(int64(n))) != 0 {
			t.Fatalf("deposit %d: event %+v", n, ev)
		}
		if d := new(big.Int).Sub(e.balance(e.baddr), before); d.Cmp(ev.Amount) != 0 {
			t.Fatalf("deposit %d: bridge got %s, event says %s", n, d, ev.Amount)
		}
	}
	// A transfer that the token taxes (alice registered as a pair, neither
	// side exempt): the event must say 95%, not the amount asked.
	e.send(e.owner, e.tok.PackSetPair(e.alice.addr, true))
	before := e.balance(e.baddr)
	ev := e.deposited(e.bsend(e.bc, e.alice, e.br.PackDeposit(e.bob.addr, ogpu(20))))
	if ev.Nonce != 4 || ev.Amount.Cmp(ogpu(19)) != 0 {
		t.Fatalf("taxed deposit: event nonce %d amount %s, want 4 and 19 oGPU", ev.Nonce, ev.Amount)
	}
	if d := new(big.Int).Sub(e.balance(e.baddr), before); d.Cmp(ogpu(19)) != 0 {
		t.Fatalf("taxed deposit: bridge got %s", d)
	}
	wantErr[OGPUBridgeZeroAddress](t, e.brefused(e.bc, e.alice, e.br.PackDeposit(common.Address{}, ogpu(1))))
	wantErr[OGPUBridgeZeroAmount](t, e.brefused(e.bc, e.alice, e.br.PackDeposit(e.bob.addr, big.NewInt(0))))
	// Nothing approved left for bob: the transfer fails, the nonce stays.
	e.brefused(e.bc, e.bob, e.br.PackDeposit(e.bob.addr, ogpu(1)))
	ev = e.deposited(e.bsend(e.bc, e.alice, e.br.PackDeposit(e.bob.addr, ogpu(1))))
	if ev.Nonce != 5 {
		t.Fatalf("after refusals the next nonce is %d, want 5", ev.Nonce)
	}
}

// TestBridgeWithdrawThreshold: with powers 1000, 1000, 999, 1 (total 3000),
// signers holding exactly 2000 (= 2/3) are refused, 2001 accepted; the
// recipient is paid once and Withdrawn is emitted.
func TestBridgeWithdrawThreshold(t *testing.T) {
	e := newBridgeEnv(t, 1000, 1000, 999, 1)
	d := goWithdrawDigest(t, e.domain(e.bc), 1, e.bob.addr, ogpu(10))
	for _, signers := range [][]int{{0, 1}, {0, 2, 3}, {1, 2, 3}, {0}, {}} {
		got := wantErr[OGPUBridgeInsufficientPower](t,
			e.brefused(e.bc, e.x, e.br.PackWithdraw(e.set, 1, e.bob.addr, ogpu(10), sigs(t, d, e.vals, signers...))))
		if got.Total.Int64() != 3000 {
			t.Fatalf("signers %v: %+v", signers, got)
		}
	}
	r := e.bsend(e.bc, e.x, e.br.PackWithdraw(e.set, 1, e.bob.addr, ogpu(10), sigs(t, d, e.vals, 0, 1, 3)))
	if b := e.balance(e.bob.addr); b.Cmp(ogpu(10)) != 0 {
		t.Fatalf("bob has %s after the withdrawal, want 10 oGPU", b)
	}
	var ev *OGPUBridgeWithdrawn
	for _, l := range r.Logs {
		if x, err := e.br.UnpackWithdrawnEvent(l); err == nil && l.Address == e.baddr {
			ev = x
		}
	}
	if ev == nil || ev.Nonce != 1 || ev.To != e.bob.addr || ev.Amount.Cmp(ogpu(10)) != 0 {
		t.Fatalf("Withdrawn event %+v", ev)
	}
}

// TestBridgeWithdrawOnceAnyOrder: nonces 3, 1, 2 all execute; a second
// execution of any of them is refused, also with other signers or V in
// {0,1}; a zero recipient or amount is refused.
func TestBridgeWithdrawOnceAnyOrder(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1, 1)
	dom := e.domain(e.bc)
	for _, n := range []uint64{3, 1, 2} {
		d := goWithdrawDigest(t, dom, n, e.alice.addr, ogpu(int64(n)))
		e.bsend(e.bc, e.x, e.br.PackWithdraw(e.set, n, e.alice.addr, ogpu(int64(n)), sigs(t, d, e.vals, 0, 1, 2)))
	}
	if b := e.balance(e.alice.addr); b.Cmp(ogpu(6)) != 0 {
		t.Fatalf("alice has %s, want 6 oGPU", b)
	}
	for _, n := range []uint64{1, 2, 3} {
		d := goWithdrawDigest(t, dom, n, e.alice.addr, ogpu(int64(n)))
		raw := sigs(t, d, e.vals, 1, 2, 3)
		for i := 1; i <= 3; i++ {
			raw[i].V -= 27
		}
		got := wantErr[OGPUBridgeAlreadyExecuted](t,
			e.brefused(e.bc, e.x, e.br.PackWithdraw(e.set, n, e.alice.addr, ogpu(int64(n)), raw)))
		if got.Nonce != n {
			t.Fatalf("AlreadyExecuted(%d), want %d", got.Nonce, n)
		}
	}
	d := goWithdrawDigest(t, dom, 4, common.Address{}, ogpu(1))
	wantErr[OGPUBridgeZeroAddress](t, e.brefused(e.bc, e.x, e.br.PackWithdraw(e.set, 4, common.Address{}, ogpu(1), sigs(t, d, e.vals, 0, 1, 2, 3))))
	d = goWithdrawDigest(t, dom, 4, e.alice.addr, big.NewInt(0))
	wantErr[OGPUBridgeZeroAmount](t, e.brefused(e.bc, e.x, e.br.PackWithdraw(e.set, 4, e.alice.addr, big.NewInt(0), sigs(t, d, e.vals, 0, 1, 2, 3))))
}

// TestBridgeSignatureForms: V 0/1 is accepted as 27/28; a signature from a
// key outside the set, one over another amount, a high-s twin of a valid
// signature, a V of 29 and a wrong signature count are refused.
func TestBridgeSignatureForms(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1)
	dom := e.domain(e.bc)
	d := goWithdrawDigest(t, dom, 1, e.bob.addr, ogpu(5))
	all := func() []OGPUBridgeSig { return sigs(t, d, e.vals, 0, 1, 2) }
	w := func(s []OGPUBridgeSig) []byte { return e.br.PackWithdraw(e.set, 1, e.bob.addr, ogpu(5), s) }

	forged := all()
	forged[1] = signRaw(t, d, e.x.key) // x is no validator
	forged[1].V += 27
	if got := wantErr[OGPUBridgeInvalidSignature](t, e.brefused(e.bc, e.x, w(forged))); got.Index.Int64() != 1 {
		t.Fatalf("forged: %+v", got)
	}
	other := all()
	other[2] = sigs(t, goWithdrawDigest(t, dom, 1, e.bob.addr, ogpu(500)), e.vals, 2)[2]
	wantErr[OGPUBridgeInvalidSignature](t, e.brefused(e.bc, e.x, w(other)))

	// The high-s twin (s' = n - s, V flipped) recovers the same signer under
	// plain ecrecover; OpenZeppelin's ECDSA must refuse it.
	high := all()
	n := crypto.S256().Params().N
	s := new(big.Int).SetBytes(high[0].S[:])
	new(big.Int).Sub(n, s).FillBytes(high[0].S[:])
	high[0].V = 27 + 28 - high[0].V
	if got := wantErr[OGPUBridgeInvalidSignature](t, e.brefused(e.bc, e.x, w(high))); got.Index.Int64() != 0 {
		t.Fatalf("high-s: %+v", got)
	}
	badV := all()
	badV[2].V = 29
	wantErr[OGPUBridgeInvalidV](t, e.brefused(e.bc, e.x, w(badV)))
	wantErr[OGPUBridgeSignatureCount](t, e.brefused(e.bc, e.x, w(all()[:2])))

	raw := all()
	for i := range raw {
		raw[i].V -= 27
	}
	e.bsend(e.bc, e.x, w(raw))
	if b := e.balance(e.bob.addr); b.Cmp(ogpu(5)) != 0 {
		t.Fatalf("bob has %s, want 5 oGPU", b)
	}
}

// TestBridgeCrossDomainReplay: signatures valid on one bridge are refused by
// a second deployment with the same token, app chain id and validator set
// (other address), and by a bridge built for another app chain id.
func TestBridgeCrossDomainReplay(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1)
	addr2, c2 := e.deployBridge(e.appChain, e.set)
	addr3, c3 := e.deployBridge(crypto.Keccak256Hash([]byte("ogpu-other-1")), e.set)
	for _, a := range []common.Address{addr2, addr3} {
		e.send(e.holder, e.tok.PackTransfer(a, ogpu(1000)))
	}
	d := goWithdrawDigest(t, e.domain(e.bc), 1, e.bob.addr, ogpu(5))
	ss := sigs(t, d, e.vals, 0, 1, 2)
	call := e.br.PackWithdraw(e.set, 1, e.bob.addr, ogpu(5), ss)
	for _, c := range []*bind.BoundContract{c2, c3} {
		wantErr[OGPUBridgeInvalidSignature](t, e.brefused(c, e.x, call))
	}
	// Valset updates replay the same way.
	_, next := newValidators(t, 1, 1, 1)
	next.Nonce = 1
	up := e.br.PackUpdateValset(e.set, next, sigs(t, goCheckpoint(t, e.domain(e.bc), next), e.vals, 0, 1, 2))
	for _, c := range []*bind.BoundContract{c2, c3} {
		wantErr[OGPUBridgeInvalidSignature](t, e.brefused(c, e.x, up))
	}
	e.bsend(e.bc, e.x, call)
	e.bsend(e.bc, e.x, up)
}

// TestBridgeValsetRules: a current set that does not hash to the stored
// checkpoint is refused; a next set that is unsorted, has a duplicate, a zero
// address, a zero power, mismatched lengths or nonce +2 is refused; the
// constructor refuses unsorted and duplicate sets too.
func TestBridgeValsetRules(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1)
	dom := e.domain(e.bc)
	_, good := newValidators(t, 5, 5, 5)
	good.Nonce = 1
	up := func(cur, next OGPUBridgeValset) []byte {
		return e.br.PackUpdateValset(cur, next, sigs(t, goCheckpoint(t, dom, next), e.vals, 0, 1, 2))
	}
	clone := func(vs OGPUBridgeValset) OGPUBridgeValset {
		return OGPUBridgeValset{append([]common.Address(nil), vs.Validators...), append([]uint32(nil), vs.Powers...), vs.Nonce}
	}

	wrongPower := clone(e.set)
	wrongPower.Powers[0] = 100 // would make validator 0 alone > 2/3
	wantErr[OGPUBridgeWrongCheckpoint](t, e.brefused(e.bc, e.x, up(wrongPower, good)))
	wrongNonce := clone(e.set)
	wrongNonce.Nonce = 1
	next2 := clone(good)
	next2.Nonce = 2
	wantErr[OGPUBridgeWrongCheckpoint](t, e.brefused(e.bc, e.x, up(wrongNonce, next2)))
	wd := goWithdrawDigest(t, dom, 1, e.bob.addr, ogpu(1))
	wantErr[OGPUBridgeWrongCheckpoint](t, e.brefused(e.bc, e.x, e.br.PackWithdraw(wrongPower, 1, e.bob.addr, ogpu(1), sigs(t, wd, e.vals, 0))))

	skip := clone(good)
	skip.Nonce = 2
	got := wantErr[OGPUBridgeWrongValsetNonce](t, e.brefused(e.bc, e.x, up(e.set, skip)))
	if got.Given != 2 || got.Want != 1 {
		t.Fatalf("nonce +2: %+v", got)
	}
	same := clone(good)
	same.Nonce = 0
	wantErr[OGPUBridgeWrongValsetNonce](t, e.brefused(e.bc, e.x, up(e.set, same)))

	unsorted := clone(good)
	unsorted.Validators[0], unsorted.Validators[2] = unsorted.Validators[2], unsorted.Validators[0]
	wantErr[OGPUBridgeInvalidValidator](t, e.brefused(e.bc, e.x, up(e.set, unsorted)))
	dup := clone(good)
	dup.Validators[1] = dup.Validators[0]
	wantErr[OGPUBridgeInvalidValidator](t, e.brefused(e.bc, e.x, up(e.set, dup)))
	zeroAddr := clone(good)
	zeroAddr.Validators[0] = common.Address{}
	wantErr[OGPUBridgeInvalidValidator](t, e.brefused(e.bc, e.x, up(e.set, zeroAddr)))
	zeroPow := clone(good)
	zeroPow.Powers[1] = 0
	wantErr[OGPUBridgeInvalidValidator](t, e.brefused(e.bc, e.x, up(e.set, zeroPow)))
	short := clone(good)
	short.Powers = short.Powers[:2]
	wantErr[OGPUBridgeMalformedValset](t, e.brefused(e.bc, e.x, up(e.set, short)))
	wantErr[OGPUBridgeMalformedValset](t, e.brefused(e.bc, e.x, up(e.set, OGPUBridgeValset{Nonce: 1})))

	for name, vs := range map[string]OGPUBridgeValset{"unsorted": unsorted, "duplicate": dup} {
		if _, _, err := bind.DeployContract(e.opts(e.owner), common.FromHex(OGPUBridgeMetaData.Bin), e.sim.Client(),
			e.br.PackConstructor(e.addr, e.appChain, vs, e.guardian.addr, testOutflowCap, testLarge, testDelay, testValsetDelay)); err == nil {
			t.Fatalf("constructor accepted a %s set", name)
		}
	}
	e.bsend(e.bc, e.x, up(e.set, good))
}

// TestBridgeValsetUpdate: the current set signs the next one (nonce + 1);
// afterwards withdrawals signed by the old set are refused (passed as the
// old set: wrong checkpoint; passed as the new set: bad signatures) and the
// new set's are accepted; the next update must be signed by the new set.
func TestBridgeValsetUpdate(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1)
	dom := e.domain(e.bc)
	newVals, next := newValidators(t, 3, 3, 2, 1)
	next.Nonce = 1
	cp := goCheckpoint(t, dom, next)
	// 2 of 3 old signers: exactly 2/3, refused.
	wantErr[OGPUBridgeInsufficientPower](t, e.brefused(e.bc, e.x, e.br.PackUpdateValset(e.set, next, sigs(t, cp, e.vals, 0, 2))))
	// A whole new set moves all the power: queued for valsetDelay, then applied.
	e.bsend(e.bc, e.x, e.br.PackUpdateValset(e.set, next, sigs(t, cp, e.vals, 0, 1, 2)))
	e.advance(testValsetDelay * time.Second)
	r := e.bsend(e.bc, e.x, e.br.PackApplyQueuedValset(next))
	var ev *OGPUBridgeValsetUpdated
	for _, l := range r.Logs {
		if x, err := e.br.UnpackValsetUpdatedEvent(l); err == nil {
			ev = x
		}
	}
	if ev == nil || ev.Nonce != 1 || ev.Checkpoint != cp || !reflect.DeepEqual(ev.Validators, next.Validators) || !reflect.DeepEqual(ev.Powers, next.Powers) {
		t.Fatalf("ValsetUpdated %+v", ev)
	}
	st := e.state(e.bc)
	if st.Checkpoint != cp || st.ValsetNonce != 1 {
		t.Fatalf("after the update: checkpoint %x nonce %d", st.Checkpoint, st.ValsetNonce)
	}

	wd := goWithdrawDigest(t, dom, 1, e.bob.addr, ogpu(7))
	old := sigs(t, wd, e.vals, 0, 1, 2)
	wantErr[OGPUBridgeWrongCheckpoint](t, e.brefused(e.bc, e.x, e.br.PackWithdraw(e.set, 1, e.bob.addr, ogpu(7), old)))
	padded := append(old, OGPUBridgeSig{})
	wantErr[OGPUBridgeInvalidSignature](t, e.brefused(e.bc, e.x, e.br.PackWithdraw(next, 1, e.bob.addr, ogpu(7), padded)))
	// New set: 3+2 of 9 is not > 2/3; 3+3+1 = 7 of 9 is.
	wantErr[OGPUBridgeInsufficientPower](t, e.brefused(e.bc, e.x, e.br.PackWithdraw(next, 1, e.bob.addr, ogpu(7), sigs(t, wd, newVals, 0, 2))))
	wantErr[OGPUBridgeInsufficientPower](t, e.brefused(e.bc, e.x, e.br.PackWithdraw(next, 1, e.bob.addr, ogpu(7), sigs(t, wd, newVals, 0, 1))))
	e.bsend(e.bc, e.x, e.br.PackWithdraw(next, 1, e.bob.addr, ogpu(7), sigs(t, wd, newVals, 0, 1, 3)))

	// The old set can no longer move the set; the new one can.
	_, third := newValidators(t, 1, 1)
	third.Nonce = 2
	cp3 := goCheckpoint(t, dom, third)
	// The old set (nonce 0) proposing a nonce-1 set again: its checkpoint is gone.
	replay := OGPUBridgeValset{third.Validators, third.Powers, 1}
	wantErr[OGPUBridgeWrongCheckpoint](t, e.brefused(e.bc, e.x,
		e.br.PackUpdateValset(e.set, replay, sigs(t, goCheckpoint(t, dom, replay), e.vals, 0, 1, 2))))
	wantErr[OGPUBridgeWrongValsetNonce](t, e.brefused(e.bc, e.x, e.br.PackUpdateValset(e.set, third, sigs(t, cp3, e.vals, 0, 1, 2))))
	e.bsend(e.bc, e.x, e.br.PackUpdateValset(next, third, sigs(t, cp3, newVals, 0, 1, 2, 3)))
	if pending, _ := bind.Call(e.bc, nil, e.br.PackPendingValsetCheckpoint(), e.br.UnpackPendingValsetCheckpoint); pending != cp3 {
		t.Fatalf("pending checkpoint %x, want %x", pending, cp3)
	}
}

func goUnpauseDigest(t *testing.T, domain [32]byte, nonce uint64) [32]byte {
	return crypto.Keccak256Hash(encode(t, []abi.Type{tBytes32, tString, tUint64}, domain, "unpause", nonce))
}

// TestBridgePause: only the guardian can pause; a pause stops deposits and
// withdrawals but not valset updates; the guardian cannot unpause; an
// unpause needs > 2/3 of the current set over (domain, "unpause",
// lastUnpauseNonce+1), so exactly 2/3, another bridge's signature, or the
// first unpause's signatures replayed after a second pause are refused.
func TestBridgePause(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1)
	dom := e.domain(e.bc)
	e.send(e.holder, e.tok.PackTransfer(e.alice.addr, ogpu(10)))
	e.send(e.alice, e.tok.PackApprove(e.baddr, ogpu(10)))
	wd := goWithdrawDigest(t, dom, 1, e.bob.addr, ogpu(1))
	withdraw := e.br.PackWithdraw(e.set, 1, e.bob.addr, ogpu(1), sigs(t, wd, e.vals, 0, 1, 2))
	u1 := func(signers ...int) []byte {
		return e.br.PackUnpause(e.set, 1, sigs(t, goUnpauseDigest(t, dom, 1), e.vals, signers...))
	}

	wantErr[OGPUBridgeNotPaused](t, e.brefused(e.bc, e.x, u1(0, 1, 2)))
	for _, a := range []account{e.owner, e.alice, e.x} {
		wantErr[OGPUBridgeNotGuardian](t, e.brefused(e.bc, a, e.br.PackPause()))
	}
	e.bsend(e.bc, e.guardian, e.br.PackPause())
	if !e.state(e.bc).Paused {
		t.Fatal("not paused after pause()")
	}
	wantErr[OGPUBridgeIsPaused](t, e.brefused(e.bc, e.guardian, e.br.PackPause()))
	wantErr[OGPUBridgeIsPaused](t, e.brefused(e.bc, e.alice, e.br.PackDeposit(e.bob.addr, ogpu(1))))
	wantErr[OGPUBridgeIsPaused](t, e.brefused(e.bc, e.x, withdraw))

	wantErr[OGPUBridgeInsufficientPower](t, e.brefused(e.bc, e.guardian, u1(0, 1)))
	wantErr[OGPUBridgeInsufficientPower](t, e.brefused(e.bc, e.guardian, u1()))
	wantErr[OGPUBridgeWrongUnpauseNonce](t, e.brefused(e.bc, e.x,
		e.br.PackUnpause(e.set, 2, sigs(t, goUnpauseDigest(t, dom, 2), e.vals, 0, 1, 2))))
	// Signatures for a second deployment (other address) do not unpause this one.
	addr2, _ := e.deployBridge(e.appChain, e.set)
	dom2 := goDomain(t, func() *big.Int { id, _ := e.sim.Client().ChainID(context.Background()); return id }(), addr2, e.appChain)
	wantErr[OGPUBridgeInvalidSignature](t, e.brefused(e.bc, e.x,
		e.br.PackUnpause(e.set, 1, sigs(t, goUnpauseDigest(t, dom2, 1), e.vals, 0, 1, 2))))

	// Valset updates stay open while paused (this one moves less than 1/3
	// of the power, so it applies at once).
	newVals := e.vals
	next := OGPUBridgeValset{e.set.Validators, []uint32{2, 2, 1}, 1}
	e.bsend(e.bc, e.x, e.br.PackUpdateValset(e.set, next, sigs(t, goCheckpoint(t, dom, next), e.vals, 0, 1, 2)))
	// The old set can no longer unpause; the new one can.
	wantErr[OGPUBridgeWrongCheckpoint](t, e.brefused(e.bc, e.x, u1(0, 1, 2)))
	unpause1 := e.br.PackUnpause(next, 1, sigs(t, goUnpauseDigest(t, dom, 1), newVals, 0, 1, 2))
	e.bsend(e.bc, e.x, unpause1)
	if st := e.state(e.bc); st.Paused || st.LastUnpause != 1 {
		t.Fatalf("after unpause: %+v", st)
	}
	e.bsend(e.bc, e.alice, e.br.PackDeposit(e.bob.addr, ogpu(1)))
	e.bsend(e.bc, e.x, e.br.PackWithdraw(next, 1, e.bob.addr, ogpu(1), sigs(t, wd, newVals, 0, 1, 2)))

	// Paused again: the first unpause cannot be replayed.
	e.bsend(e.bc, e.guardian, e.br.PackPause())
	wantErr[OGPUBridgeWrongUnpauseNonce](t, e.brefused(e.bc, e.x, unpause1))
	e.bsend(e.bc, e.x, e.br.PackUnpause(next, 2, sigs(t, goUnpauseDigest(t, dom, 2), newVals, 0, 1, 2)))
}

func (e *bridgeEnv) available() *big.Int {
	e.t.Helper()
	a, err := bind.Call(e.bc, nil, e.br.PackOutflowAvailable(), e.br.UnpackOutflowAvailable)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *bridgeEnv) advance(d time.Duration) {
	e.t.Helper()
	// The simulated backend's pool resets after a Commit asynchronously: for
	// a moment the pending block can still hold the transaction just mined,
	// and AdjustTime refuses a non-empty block ("could not adjust time on
	// non-empty block", seen once in make test). It changes nothing when it
	// refuses, so it is tried again for up to a second.
	var err error
	for try := 0; try < 100; try++ {
		if err = e.sim.AdjustTime(d); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	e.sim.Commit()
}

// TestBridgeOutflowLimit: withdrawals within the 100 oGPU bucket pay at
// once; one that does not fit, and any of 50 oGPU or more, is queued (signed
// and marked executed, nothing paid) and paid by anyone only after the
// delay, once, and not while paused; the bucket refills over 24 h.
func TestBridgeOutflowLimit(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1)
	dom := e.domain(e.bc)
	w := func(n uint64, amt *big.Int) []byte {
		return e.br.PackWithdraw(e.set, n, e.bob.addr, amt, sigs(t, goWithdrawDigest(t, dom, n, e.bob.addr, amt), e.vals, 0, 1, 2))
	}
	e.bsend(e.bc, e.x, w(1, ogpu(40)))
	e.bsend(e.bc, e.x, w(2, ogpu(40)))
	if b := e.balance(e.bob.addr); b.Cmp(ogpu(80)) != 0 {
		t.Fatalf("bob has %s, want 80 oGPU", b)
	}
	if a := e.available(); a.Cmp(ogpu(21)) > 0 || a.Cmp(ogpu(20)) < 0 {
		t.Fatalf("available %s, want about 20 oGPU", a)
	}
	// 30 does not fit: queued, nothing paid.
	r := e.bsend(e.bc, e.x, w(3, ogpu(30)))
	var q *OGPUBridgeWithdrawalQueued
	for _, l := range r.Logs {
		if x, err := e.br.UnpackWithdrawalQueuedEvent(l); err == nil {
			q = x
		}
		if _, err := e.br.UnpackWithdrawnEvent(l); err == nil {
			t.Fatal("Withdrawn emitted for a queued withdrawal")
		}
	}
	if q == nil || q.Nonce != 3 || q.Amount.Cmp(ogpu(30)) != 0 {
		t.Fatalf("WithdrawalQueued %+v", q)
	}
	st := e.state(e.bc)
	if st.Bob.Cmp(ogpu(80)) != 0 || !st.Executed[3] || st.Queued[3].Amount.Cmp(ogpu(30)) != 0 || st.Queued[3].ReadyAt != q.ReadyAt {
		t.Fatalf("after queueing: %+v", st)
	}
	wantErr[OGPUBridgeAlreadyExecuted](t, e.brefused(e.bc, e.x, w(3, ogpu(30))))
	if got := wantErr[OGPUBridgeNotReady](t, e.brefused(e.bc, e.x, e.br.PackExecuteQueued(3))); got.ReadyAt != q.ReadyAt {
		t.Fatalf("NotReady %+v", got)
	}
	wantErr[OGPUBridgeNotQueued](t, e.brefused(e.bc, e.x, e.br.PackExecuteQueued(1)))
	wantErr[OGPUBridgeNotQueued](t, e.brefused(e.bc, e.x, e.br.PackExecuteQueued(7)))

	// Half a day refills about 50: a 45 pays at once, a 50 (large) still waits.
	e.advance(12 * time.Hour)
	e.bsend(e.bc, e.x, w(4, ogpu(45)))
	if b := e.balance(e.bob.addr); b.Cmp(ogpu(125)) != 0 {
		t.Fatalf("bob has %s, want 125 oGPU", b)
	}
	e.advance(24 * time.Hour)
	if a := e.available(); a.Cmp(testOutflowCap) != 0 {
		t.Fatalf("available %s after a full day, want the whole cap", a)
	}
	e.bsend(e.bc, e.x, w(5, ogpu(50)))
	if b := e.balance(e.bob.addr); b.Cmp(ogpu(125)) != 0 {
		t.Fatalf("a large withdrawal paid at once: bob has %s", b)
	}
	// Nonce 3's delay is over: anyone pays it, once. A pause blocks nonce 5.
	e.bsend(e.bc, e.alice, e.br.PackExecuteQueued(3))
	if b := e.balance(e.bob.addr); b.Cmp(ogpu(155)) != 0 {
		t.Fatalf("bob has %s after executeQueued(3), want 155 oGPU", b)
	}
	wantErr[OGPUBridgeNotQueued](t, e.brefused(e.bc, e.x, e.br.PackExecuteQueued(3)))
	e.advance(24 * time.Hour)
	e.bsend(e.bc, e.guardian, e.br.PackPause())
	wantErr[OGPUBridgeIsPaused](t, e.brefused(e.bc, e.x, e.br.PackExecuteQueued(5)))
	e.bsend(e.bc, e.x, e.br.PackUnpause(e.set, 1, sigs(t, goUnpauseDigest(t, dom, 1), e.vals, 0, 1, 2)))
	e.bsend(e.bc, e.x, e.br.PackExecuteQueued(5))
	if b := e.balance(e.bob.addr); b.Cmp(ogpu(205)) != 0 {
		t.Fatalf("bob has %s, want 205 oGPU", b)
	}
}

// TestBridgeValsetTimelock: an update that moves at most 1/3 of the power
// (overlap of the power shares >= 2/3, the edge included) applies at once;
// one that moves more is queued: the current set keeps signing, it cannot be
// applied before valsetDelay, nor while paused, nor as another set; a later
// small update makes it stale.
func TestBridgeValsetTimelock(t *testing.T) {
	e := newBridgeEnv(t, 1, 1, 1)
	dom := e.domain(e.bc)
	nonce := func() uint64 { return e.state(e.bc).ValsetNonce }
	// Build sets over e.vals[0], e.vals[1] and fresh keys, sorted.
	mk := func(n uint64, keep []int, fresh int, powers ...uint32) ([]validator, OGPUBridgeValset) {
		var vals []validator
		for _, i := range keep {
			vals = append(vals, e.vals[i])
		}
		nv, _ := newValidators(t, make([]uint32, fresh)...)
		vals = append(vals, nv...)
		sort.Slice(vals, func(i, j int) bool { return bytes.Compare(vals[i].addr[:], vals[j].addr[:]) < 0 })
		vs := OGPUBridgeValset{Powers: powers, Nonce: n}
		for _, v := range vals {
			vs.Validators = append(vs.Validators, v.addr)
		}
		return vals, vs
	}
	upd := func(curVals []validator, cur, next OGPUBridgeValset) []byte {
		all := make([]int, len(curVals))
		for i := range all {
			all[i] = i
		}
		return e.br.PackUpdateValset(cur, next, sigs(t, goCheckpoint(t, dom, next), curVals, all...))
	}

	// Exactly 1/3 moved (one of three equal validators replaced): at once.
	v1, s1 := mk(1, []int{0, 1}, 1, 1, 1, 1)
	e.bsend(e.bc, e.x, upd(e.vals, e.set, s1))
	if n := nonce(); n != 1 {
		t.Fatalf("valset nonce %d after a 1/3 move, want 1 (applied at once)", n)
	}
	// Just over 1/3 moved: queued.
	v2, s2 := mk(2, []int{0, 1}, 1, 1000, 1000, 1000)
	for i, v := range v2 { // give the fresh validator 1001
		if v.addr != e.vals[0].addr && v.addr != e.vals[1].addr {
			s2.Powers[i] = 1001
		}
	}
	// s2 keeps e.vals[0..1] but drops v1's fresh validator: overlap 2000/3001 < 2/3.
	e.bsend(e.bc, e.x, upd(v1, s1, s2))
	if n := nonce(); n != 1 {
		t.Fatalf("valset nonce %d after a >1/3 move, want 1 (queued)", n)
	}
	cp2 := goCheckpoint(t, dom, s2)
	if got := wantErr[OGPUBridgeNotReady](t, e.brefused(e.bc, e.x, e.br.PackApplyQueuedValset(s2))); got.Nonce != 2 {
		t.Fatalf("NotReady %+v", got)
	}
	other := OGPUBridgeValset{s2.Validators, []uint32{1, 1, 1}, 2}
	wantErr[OGPUBridgeNotQueuedValset](t, e.brefused(e.bc, e.x, e.br.PackApplyQueuedValset(other)))
	// The current set still signs withdrawals meanwhile.
	wd := goWithdrawDigest(t, dom, 1, e.bob.addr, ogpu(1))
	e.bsend(e.bc, e.x, e.br.PackWithdraw(s1, 1, e.bob.addr, ogpu(1), sigs(t, wd, v1, 0, 1, 2)))

	e.advance(testValsetDelay * time.Second)
	e.bsend(e.bc, e.guardian, e.br.PackPause())
	wantErr[OGPUBridgeIsPaused](t, e.brefused(e.bc, e.x, e.br.PackApplyQueuedValset(s2)))
	e.bsend(e.bc, e.x, e.br.PackUnpause(s1, 1, sigs(t, goUnpauseDigest(t, dom, 1), v1, 0, 1, 2)))
	e.bsend(e.bc, e.x, e.br.PackApplyQueuedValset(s2))
	if st := e.state(e.bc); st.ValsetNonce != 2 || st.Checkpoint != cp2 {
		t.Fatalf("after applying: %+v", st)
	}
	wantErr[OGPUBridgeNotQueuedValset](t, e.brefused(e.bc, e.x, e.br.PackApplyQueuedValset(s2)))

	// A queued update made stale by a small one.
	_, s3 := mk(3, nil, 3, 1, 1, 1) // all new: queued
	e.bsend(e.bc, e.x, upd(v2, s2, s3))
	s3b := OGPUBridgeValset{s2.Validators, []uint32{1000, 1000, 1000}, 3} // small move: at once
	e.bsend(e.bc, e.x, upd(v2, s2, s3b))
	if n := nonce(); n != 3 {
		t.Fatalf("valset nonce %d, want 3", n)
	}
	e.advance(testValsetDelay * time.Second)
	wantErr[OGPUBridgeNotQueuedValset](t, e.brefused(e.bc, e.x, e.br.PackApplyQueuedValset(s3)))
}

// TestBridgeConstructorRefuses: a zero token or guardian, or a zero limit,
// is refused at deployment.
func TestBridgeConstructorRefuses(t *testing.T) {
	e := newBridgeEnv(t, 1)
	deploy := func(token, guardian common.Address, limits ...int64) error {
		_, _, err := bind.DeployContract(e.opts(e.owner), common.FromHex(OGPUBridgeMetaData.Bin), e.sim.Client(),
			e.br.PackConstructor(token, e.appChain, e.set, guardian, big.NewInt(limits[0]), big.NewInt(limits[1]), uint64(limits[2]), uint64(limits[3])))
		return err
	}
	if err := deploy(e.addr, e.guardian.addr, 1, 1, 1, 1); err != nil {
		t.Fatalf("valid deployment refused: %v", err)
	}
	for name, err := range map[string]error{
		"zero token":            deploy(common.Address{}, e.guardian.addr, 1, 1, 1, 1),
		"zero guardian":         deploy(e.addr, common.Address{}, 1, 1, 1, 1),
		"zero cap":              deploy(e.addr, e.guardian.addr, 0, 1, 1, 1),
		"zero large withdrawal": deploy(e.addr, e.guardian.addr, 1, 0, 1, 1),
		"zero withdrawal delay": deploy(e.addr, e.guardian.addr, 1, 1, 0, 1),
		"zero valset delay":     deploy(e.addr, e.guardian.addr, 1, 1, 1, 0),
	} {
		if err == nil {
			t.Errorf("%s: deployed", name)
		}
	}
}
