package ethbridge

import (
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/contracts"
)

// nothingSent checks that the relayer's key sent no transaction and no
// block was mined since (head, nonce) were taken.
func (e *env) nothingSent(head, nonce uint64) {
	e.t.Helper()
	if h, n := e.head(), e.nonceOf(e.rel.addr); h != head || n != nonce {
		e.t.Fatalf("something was sent: head %d -> %d, relayer nonce %d -> %d", head, h, nonce, n)
	}
}

// TestRelayerWithdraw: a withdrawal signed by more than 2/3 is relayed by
// a key that is no validator, pays the recipient, and costs the relayer
// gas; relaying it again sends nothing and reports AlreadyExecuted.
func TestRelayerWithdraw(t *testing.T) {
	e := newEnv(t, 1000, 1000, 999, 1)
	e.deposit(e.alice, e.bob.addr, ogpu(100))
	r := e.relayer()
	amt := ogpu(10)
	d := bridge.WithdrawDigest(e.domain(), 1, e.carol.addr, amt)
	eth := e.ethBalance(e.rel.addr)
	res, err := r.Withdraw(e.ctx, e.rel.key, e.set, 1, e.carol.addr, amt, sigs(t, d, e.vals, 0, 1, 3)) // 2001 of 3000
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Paid || !res.Sent() || res.GasUsed == 0 || len(res.Dropped) != 0 {
		t.Fatalf("result %+v", res)
	}
	if b := e.balance(e.carol.addr, nil); !b.Eq(amt) {
		t.Fatalf("carol has %s, want %s", b, amt)
	}
	if paid := new(big.Int).Sub(eth, e.ethBalance(e.rel.addr)); paid.Sign() <= 0 {
		t.Fatalf("the relayer paid %s wei for gas", paid)
	}
	head, nonce := e.head(), e.nonceOf(e.rel.addr)
	res, err = r.Withdraw(e.ctx, e.rel.key, e.set, 1, e.carol.addr, amt, sigs(t, d, e.vals, 0, 1, 2, 3))
	if err != nil || res.Outcome != AlreadyExecuted || res.Sent() {
		t.Fatalf("second relay: %+v, %v; want AlreadyExecuted with nothing sent", res, err)
	}
	e.nothingSent(head, nonce)
	if b := e.balance(e.carol.addr, nil); !b.Eq(amt) {
		t.Fatalf("carol has %s after the second relay", b)
	}
}

// TestRelayerRefusesBadSignatures: exactly 2/3 of the power is refused
// locally with the numbers; a forged signature (another key's, or one over
// another withdrawal) and a high-s copy of a real one are left out, so with
// them the power falls to 2/3 or below and nothing is sent, and when the
// others still hold more than 2/3 the withdrawal goes through without them.
// A set that is not the contract's is refused before anything is sent.
func TestRelayerRefusesBadSignatures(t *testing.T) {
	e := newEnv(t, 1000, 1000, 999, 1)
	e.deposit(e.alice, e.bob.addr, ogpu(100))
	r := e.relayer()
	amt := ogpu(10)
	d := bridge.WithdrawDigest(e.domain(), 1, e.carol.addr, amt)
	head, nonce := e.head(), e.nonceOf(e.rel.addr)

	_, err := r.Withdraw(e.ctx, e.rel.key, e.set, 1, e.carol.addr, amt, sigs(t, d, e.vals, 0, 1)) // 2000 of 3000
	var pe *PowerError
	if !errors.Is(err, ErrInsufficientPower) || !errors.As(err, &pe) || pe.Signed != 2000 || pe.Total != 3000 {
		t.Fatalf("exactly 2/3: %v", err)
	}
	if !strings.Contains(err.Error(), "2000 of 3000") || !strings.Contains(err.Error(), "nothing sent") {
		t.Fatalf("message %q does not say the numbers and that nothing was sent", err)
	}

	outsider := newAccount(t)
	forged, _ := bridge.Sign(outsider.key, d)
	otherDigest, _ := bridge.Sign(e.vals[0].key, bridge.WithdrawDigest(e.domain(), 1, e.carol.addr, ogpu(11)))
	real, _ := bridge.Sign(e.vals[0].key, d)
	highS := real
	s := new(big.Int).Sub(crypto.S256().Params().N, new(big.Int).SetBytes(real[32:64]))
	s.FillBytes(highS[32:64])
	highS[64] ^= 1 // the same signature, malleated: recovers to the same key, but the contract refuses high s
	for name, bad := range map[string]bridge.Sig{"another key": forged, "another digest": otherDigest, "high s": highS} {
		ss := sigs(t, d, e.vals, 1, 3)
		ss[e.vals[0].addr] = bad // would make 2001 of 3000
		_, err := r.Withdraw(e.ctx, e.rel.key, e.set, 1, e.carol.addr, amt, ss)
		if !errors.As(err, &pe) || pe.Signed != 1001 || len(pe.Invalid) != 1 || pe.Invalid[0].Member != e.vals[0].addr {
			t.Fatalf("%s: %v; want a power error naming validator 0's signature", name, err)
		}
		e.nothingSent(head, nonce)
	}

	stale := e.set
	stale.Nonce = 5
	if _, err := r.Withdraw(e.ctx, e.rel.key, stale, 1, e.carol.addr, amt, sigs(t, d, e.vals, 0, 1, 2, 3)); err == nil || !strings.Contains(err.Error(), "not the set the contract holds") {
		t.Fatalf("a set that is not the contract's: %v", err)
	}
	e.nothingSent(head, nonce)

	// All four signed, validator 3's forged: the other three hold 2999 of
	// 3000, so the forged one is dropped rather than reverting the call.
	ss := sigs(t, d, e.vals, 0, 1, 2)
	ss[e.vals[3].addr] = forged
	res, err := r.Withdraw(e.ctx, e.rel.key, e.set, 1, e.carol.addr, amt, ss)
	if err != nil || res.Outcome != Paid || len(res.Dropped) != 1 || res.Dropped[0].Member != e.vals[3].addr {
		t.Fatalf("with a forged signature among enough good ones: %+v, %v", res, err)
	}
}

// TestRelayerQueuedWithdrawal: a withdrawal at or above the large
// threshold is queued, not paid; paying it early is refused with the time
// it becomes ready (nothing sent); relaying it again reports AlreadyQueued;
// after the delay ExecuteQueued pays it, once.
func TestRelayerQueuedWithdrawal(t *testing.T) {
	e := newEnv(t, 1, 1, 1, 1)
	e.deposit(e.alice, e.bob.addr, ogpu(500))
	r := e.relayer()
	amt := ogpu(60)
	d := bridge.WithdrawDigest(e.domain(), 7, e.carol.addr, amt)
	ss := sigs(t, d, e.vals, 0, 1, 2)
	res, err := r.Withdraw(e.ctx, e.rel.key, e.set, 7, e.carol.addr, amt, ss)
	if err != nil || res.Outcome != Queued || res.ReadyAt == 0 {
		t.Fatalf("large withdrawal: %+v, %v; want Queued", res, err)
	}
	if b := e.balance(e.carol.addr, nil); !b.IsZero() {
		t.Fatalf("carol was paid %s before the delay", b)
	}
	head, nonce := e.head(), e.nonceOf(e.rel.addr)
	_, err = r.ExecuteQueued(e.ctx, e.rel.key, 7)
	var ce *ContractError
	if !errors.As(err, &ce) || ce.Tx != (common.Hash{}) {
		t.Fatalf("early executeQueued: %v; want a contract refusal with nothing sent", err)
	}
	if nr, ok := ce.Reason.(*contracts.OGPUBridgeNotReady); !ok || nr.ReadyAt != res.ReadyAt || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("early executeQueued: %v (%T)", err, ce.Reason)
	}
	again, err := r.Withdraw(e.ctx, e.rel.key, e.set, 7, e.carol.addr, amt, ss)
	if err != nil || again.Outcome != AlreadyQueued || again.ReadyAt != res.ReadyAt || again.Sent() {
		t.Fatalf("relaying a queued withdrawal again: %+v, %v", again, err)
	}
	if _, err := r.ExecuteQueued(e.ctx, e.rel.key, 8); err == nil || !strings.Contains(err.Error(), "not queued") {
		t.Fatalf("executeQueued of a withdrawal never relayed: %v", err)
	}
	e.nothingSent(head, nonce)
	if err := e.sim.AdjustTime(24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	res, err = r.ExecuteQueued(e.ctx, e.rel.key, 7)
	if err != nil || res.Outcome != Paid {
		t.Fatalf("executeQueued after the delay: %+v, %v", res, err)
	}
	if b := e.balance(e.carol.addr, nil); !b.Eq(amt) {
		t.Fatalf("carol has %s, want %s", b, amt)
	}
	if res, err = r.ExecuteQueued(e.ctx, e.rel.key, 7); err != nil || res.Outcome != AlreadyExecuted || res.Sent() {
		t.Fatalf("executeQueued again: %+v, %v", res, err)
	}
}

// TestRelayerValsetUpdate: an update moving at most 1/3 of the power
// applies at once and CurrentValset returns the new set; relaying it again
// sends nothing; the old set can no longer withdraw and the new one can;
// an update replacing the whole set is queued, CurrentValset keeps the old
// one, applying it early is refused, and after the delay it applies.
func TestRelayerValsetUpdate(t *testing.T) {
	e := newEnv(t, 1, 1, 1, 1)
	e.deposit(e.alice, e.bob.addr, ogpu(100))
	w := e.watcher(WatcherOptions{})
	r := e.relayer()

	// Replace validator 3 (1/4 of the power) by a newcomer.
	newcomer := newAccount(t)
	next := bridge.Valset{Nonce: 1}
	nextVals := append([]account{}, e.vals[:3]...)
	nextVals = append(nextVals, newcomer)
	nextVals, next = sortedSet(1, nextVals, 1, 1, 1, 1)
	cp := bridge.Checkpoint(e.domain(), &next)
	if _, err := r.UpdateValset(e.ctx, e.rel.key, e.set, next, sigs(t, cp, e.vals, 0, 1)); !errors.Is(err, ErrInsufficientPower) {
		t.Fatalf("update signed by half: %v", err)
	}
	res, err := r.UpdateValset(e.ctx, e.rel.key, e.set, next, sigs(t, cp, e.vals, 0, 1, 2))
	if err != nil || res.Outcome != ValsetApplied {
		t.Fatalf("update: %+v, %v", res, err)
	}
	if vs, err := w.CurrentValset(e.ctx); err != nil || !sameValset(vs, next) {
		t.Fatalf("current set %+v, %v; want %+v", vs, err, next)
	}
	head, nonce := e.head(), e.nonceOf(e.rel.addr)
	if res, err := r.UpdateValset(e.ctx, e.rel.key, e.set, next, sigs(t, cp, e.vals, 0, 1, 2)); err != nil || res.Outcome != ValsetAlreadyApplied {
		t.Fatalf("update again: %+v, %v", res, err)
	}
	d := bridge.WithdrawDigest(e.domain(), 1, e.carol.addr, ogpu(1))
	if _, err := r.Withdraw(e.ctx, e.rel.key, e.set, 1, e.carol.addr, ogpu(1), sigs(t, d, e.vals, 0, 1, 2, 3)); err == nil {
		t.Fatal("the old set still withdraws")
	}
	e.nothingSent(head, nonce)
	if res, err := r.Withdraw(e.ctx, e.rel.key, next, 1, e.carol.addr, ogpu(1), sigs(t, d, nextVals, 0, 1, 2)); err != nil || res.Outcome != Paid {
		t.Fatalf("withdrawal signed by the new set: %+v, %v", res, err)
	}

	// A whole new set: queued for the valset delay.
	thirdVals, third := newValset(t, 2, 5, 5, 5)
	cp3 := bridge.Checkpoint(e.domain(), &third)
	res, err = r.UpdateValset(e.ctx, e.rel.key, next, third, sigs(t, cp3, nextVals, 0, 1, 3))
	if err != nil || res.Outcome != ValsetQueued || res.ReadyAt == 0 {
		t.Fatalf("drastic update: %+v, %v; want ValsetQueued", res, err)
	}
	if vs, err := w.CurrentValset(e.ctx); err != nil || !sameValset(vs, next) {
		t.Fatalf("current set while the update waits: %+v, %v", vs, err)
	}
	if res2, err := r.UpdateValset(e.ctx, e.rel.key, next, third, sigs(t, cp3, nextVals, 0, 1, 3)); err != nil || res2.Outcome != ValsetAlreadyQueued || res2.ReadyAt != res.ReadyAt {
		t.Fatalf("relaying the queued update again: %+v, %v", res2, err)
	}
	var ce *ContractError
	if _, err := r.ApplyQueuedValset(e.ctx, e.rel.key, third); !errors.As(err, &ce) || ce.Tx != (common.Hash{}) {
		t.Fatalf("early apply: %v", err)
	} else if _, ok := ce.Reason.(*contracts.OGPUBridgeNotReady); !ok {
		t.Fatalf("early apply: %v", err)
	}
	if err := e.sim.AdjustTime(48 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if res, err := r.ApplyQueuedValset(e.ctx, e.rel.key, third); err != nil || res.Outcome != ValsetApplied {
		t.Fatalf("apply after the delay: %+v, %v", res, err)
	}
	if vs, err := w.CurrentValset(e.ctx); err != nil || !sameValset(vs, third) {
		t.Fatalf("current set %+v, %v; want the third", vs, err)
	}
	d = bridge.WithdrawDigest(e.domain(), 2, e.carol.addr, ogpu(1))
	if res, err := r.Withdraw(e.ctx, e.rel.key, third, 2, e.carol.addr, ogpu(1), sigs(t, d, thirdVals, 0, 1, 2)); err != nil || res.Outcome != Paid {
		t.Fatalf("withdrawal signed by the third set: %+v, %v", res, err)
	}
}

// TestRelayerMinedRevertDecoded: when the contract's state changes between
// the estimate and the block (here the guardian pauses in the same block,
// ahead of the withdrawal), the mined transaction reverts and the error
// names the contract's reason and the transaction.
func TestRelayerMinedRevertDecoded(t *testing.T) {
	e := newEnv(t, 1, 1, 1)
	e.deposit(e.alice, e.bob.addr, ogpu(100))
	r := e.relayer()
	id, _ := e.c.ChainID(e.ctx)
	e.c.mu.Lock()
	e.c.beforeSend = func() {
		opts := bind.NewKeyedTransactor(e.guardian.key, id)
		opts.GasLimit = 200_000
		opts.GasTipCap = big.NewInt(100e9) // ahead of the relayer's transaction
		opts.GasFeeCap = big.NewInt(1000e9)
		if _, err := bind.Transact(bridgeABI.Instance(e.c.Client, e.bridge), opts, bridgeABI.PackPause()); err != nil {
			t.Errorf("pause: %v", err)
		}
	}
	e.c.mu.Unlock()
	d := bridge.WithdrawDigest(e.domain(), 1, e.carol.addr, ogpu(1))
	res, err := r.Withdraw(e.ctx, e.rel.key, e.set, 1, e.carol.addr, ogpu(1), sigs(t, d, e.vals, 0, 1, 2))
	var ce *ContractError
	if !errors.As(err, &ce) || ce.Tx == (common.Hash{}) || ce.Tx != res.Tx {
		blk, _ := e.c.BlockByNumber(e.ctx, nil)
		for _, tx := range blk.Transactions() {
			rc, _ := e.c.TransactionReceipt(e.ctx, tx.Hash())
			t.Logf("tx %s to %s tip %s gas %d status %d", tx.Hash(), tx.To(), tx.GasTipCap(), rc.GasUsed, rc.Status)
		}
		t.Fatalf("%+v, %v; want a mined revert", res, err)
	}
	if _, ok := ce.Reason.(*contracts.OGPUBridgeIsPaused); !ok || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("reason %T: %v", ce.Reason, err)
	}
	if b := e.balance(e.carol.addr, nil); !b.IsZero() {
		t.Fatalf("carol got %s", b)
	}
}

// TestDeployHelpers: the bridge is exempt from the token's tax; a bridge
// deployment by a key that does not own the token is refused before
// anything is sent; Deposit approves when needed, returns consecutive
// nonces, and a deposit beyond the balance is refused with the token's
// reason.
func TestDeployHelpers(t *testing.T) {
	e := newEnv(t, 1)
	exempt, err := bind.Call(tokenABI.Instance(e.c, e.token), nil, tokenABI.PackIsExempt(e.bridge), tokenABI.UnpackIsExempt)
	if err != nil || !exempt {
		t.Fatalf("bridge exempt: %v, %v", exempt, err)
	}
	before := e.nonceOf(e.bob.addr)
	if _, _, err := DeployBridge(e.ctx, e.c, e.bob.key, e.token, testAppChain, e.set, e.guardian.addr, testLimits); err == nil || !strings.Contains(err.Error(), "not the owner") {
		t.Fatalf("deploy by a non-owner: %v", err)
	}
	if _, _, err := DeployBridge(e.ctx, e.c, e.deployer.key, e.token, testAppChain, e.set, e.guardian.addr, Limits{OutflowCap: ogpu(1)}); err == nil {
		t.Fatal("deploy with zero limits accepted")
	}
	if n := e.nonceOf(e.bob.addr); n != before {
		t.Fatalf("bob sent %d transactions", n-before)
	}
	e.tokenTx(e.alice, tokenABI.PackTransfer(e.bob.addr, ogpu(5).ToBig()))
	for i := uint64(1); i <= 2; i++ {
		n, err := Deposit(e.ctx, e.c, e.bob.key, e.bridge, e.carol.addr, ogpu(2))
		if err != nil || n != i {
			t.Fatalf("deposit %d: nonce %d, %v", i, n, err)
		}
	}
	before = e.nonceOf(e.bob.addr)
	if _, err = Deposit(e.ctx, e.c, e.bob.key, e.bridge, e.carol.addr, ogpu(2)); err == nil || !strings.Contains(err.Error(), "holds 1ogpu of the oGPU token on Ethereum, 2ogpu needed") {
		t.Fatalf("deposit beyond the balance: %v", err)
	}
	if n := e.nonceOf(e.bob.addr); n != before {
		t.Fatal("a deposit beyond the balance sent a transaction")
	}
	if _, err := Deposit(e.ctx, e.c, e.bob.key, e.bridge, common.Address{}, ogpu(1)); err == nil {
		t.Fatal("deposit to the zero recipient accepted")
	}
	if b := e.balance(e.bridge, nil); !b.Eq(ogpu(4)) {
		t.Fatalf("bridge holds %s, want 4 oGPU", b)
	}
}
