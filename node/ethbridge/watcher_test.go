package ethbridge

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
)

// wantDeposits compares the observed deposits with the expected tuples.
func wantDeposits(t *testing.T, got []bridge.Deposit, want ...bridge.Deposit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("observed %d deposits %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("deposit %d: observed %+v, want %+v", i, got[i], want[i])
		}
	}
}

func dep(n uint64, from, to common.Address, amt *uint256.Int) bridge.Deposit {
	return bridge.Deposit{Nonce: n, From: from, Recipient: to, Amount: amt}
}

func (e *env) observe(w *Watcher, next uint64, max int, pending ...uint64) *bridge.Observation {
	e.t.Helper()
	o, err := w.Observe(e.ctx, next, max, pending)
	if err != nil {
		e.t.Fatalf("observe: %v", err)
	}
	return o
}

// TestWatcherDepositsOnlyWhenFinalized: a deposit is reported only once
// the node's finalized block covers its block (a watcher reading latest
// would report deposits 1 and 2 at once), the list runs consecutively from
// the asked nonce, and maxDeposits caps it.
func TestWatcherDepositsOnlyWhenFinalized(t *testing.T) {
	e := newEnv(t, 1, 1, 1)
	w := e.watcher(WatcherOptions{})
	// Until the deployment block is final there is nothing to read at all.
	if o, err := w.Observe(e.ctx, 1, 16, nil); err == nil || !strings.Contains(err.Error(), "deployment block") {
		t.Fatalf("before the bridge's block is final: %v, %v", o, err)
	}
	e.commitTo(61)
	n1, b1 := e.deposit(e.alice, e.bob.addr, ogpu(1))
	n2, b2 := e.deposit(e.alice, e.carol.addr, ogpu(2))
	if n1 != 1 || n2 != 2 || b2 != 63 {
		t.Fatalf("deposits %d, %d in blocks %d, %d; want 1, 2 in 62, 63", n1, n2, b1, b2)
	}
	if f := e.finalized(); f >= b1 {
		t.Fatalf("finalized %d already covers block %d", f, b1)
	}
	o := e.observe(w, 1, 16)
	wantDeposits(t, o.Deposits)
	if !o.Locked.IsZero() {
		t.Fatalf("locked %s at finalized block %d, want 0 (the deposits are not final)", o.Locked, o.Finalized)
	}
	e.sim.Commit() // block 64: final at once
	_, b3 := e.deposit(e.alice, e.bob.addr, ogpu(3))
	if f := e.finalized(); f < b2 || f >= b3 {
		t.Fatalf("finalized %d, want between deposit 2's block %d and deposit 3's %d", f, b2, b3)
	}
	d1, d2, d3 := dep(1, e.alice.addr, e.bob.addr, ogpu(1)), dep(2, e.alice.addr, e.carol.addr, ogpu(2)), dep(3, e.alice.addr, e.bob.addr, ogpu(3))
	o = e.observe(w, 1, 16)
	wantDeposits(t, o.Deposits, d1, d2)
	if o.Finalized != e.finalized() || !o.Locked.Eq(ogpu(3)) || o.ValsetNonce != 0 {
		t.Fatalf("observation at %d: locked %s, valset nonce %d", o.Finalized, o.Locked, o.ValsetNonce)
	}
	e.finalize(b3)
	wantDeposits(t, e.observe(w, 1, 16).Deposits, d1, d2, d3)
	wantDeposits(t, e.observe(w, 2, 16).Deposits, d2, d3)
	wantDeposits(t, e.observe(w, 1, 2).Deposits, d1, d2)
	wantDeposits(t, e.observe(w, 3, 1).Deposits, d3)
	wantDeposits(t, e.observe(w, 4, 16).Deposits)
	wantDeposits(t, e.observe(w, 1, 0).Deposits)
	// A fresh watcher (no search hints) and one that splits its log
	// queries into 5-block ranges see the same.
	wantDeposits(t, e.watcher(WatcherOptions{}).observeDeposits(t, 2), d2, d3)
	wantDeposits(t, e.watcher(WatcherOptions{MaxLogRange: 5}).observeDeposits(t, 1), d1, d2, d3)
	if _, err := w.Observe(e.ctx, 0, 16, nil); err == nil {
		t.Fatal("nextDeposit 0 accepted")
	}
	// Deposits 4 and 5 in one block: the watcher, which searches for 5
	// from the block of 4, still finds it.
	id, _ := e.c.ChainID(e.ctx)
	for i := uint64(4); i <= 5; i++ {
		opts := bind.NewKeyedTransactor(e.alice.key, id)
		opts.GasLimit = 300_000
		if _, err := bind.Transact(bridgeABI.Instance(e.c.Client, e.bridge), opts, bridgeABI.PackDeposit(e.bob.addr, ogpu(i).ToBig())); err != nil {
			t.Fatal(err)
		}
	}
	e.sim.Commit()
	e.finalize(e.head())
	d4, d5 := dep(4, e.alice.addr, e.bob.addr, ogpu(4)), dep(5, e.alice.addr, e.bob.addr, ogpu(5))
	wantDeposits(t, e.observe(w, 4, 16).Deposits, d4, d5)
	wantDeposits(t, e.observe(w, 5, 16).Deposits, d5)
	wantDeposits(t, e.observe(w, 6, 16).Deposits)
}

func (w *Watcher) observeDeposits(t *testing.T, next uint64) []bridge.Deposit {
	t.Helper()
	o, err := w.Observe(context.Background(), next, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o.Deposits
}

// lyingClient alters what eth_getLogs returns.
type lyingClient struct {
	Client
	alter func([]types.Log) []types.Log
}

func (l *lyingClient) FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	logs, err := l.Client.FilterLogs(ctx, q)
	if err != nil {
		return nil, err
	}
	return l.alter(logs), nil
}

// TestWatcherNodeLogsChecked: deposits are reported consecutively, so a
// node that lacks deposit 2's log gets only deposit 1 reported (never 1
// and 3); a node returning two different deposits under one nonce, or a
// log from another contract, gets an error and no observation.
func TestWatcherNodeLogsChecked(t *testing.T) {
	e := newEnv(t, 1)
	for i := uint64(1); i <= 3; i++ {
		e.deposit(e.alice, e.bob.addr, ogpu(i))
	}
	e.finalize(e.head())
	nonceOf := func(l types.Log) uint64 { return new(big.Int).SetBytes(l.Topics[1][:]).Uint64() }
	for _, tc := range []struct {
		name    string
		alter   func([]types.Log) []types.Log
		want    int    // deposits reported from nonce 1
		wantErr string // or this error
	}{
		{"honest", func(l []types.Log) []types.Log { return l }, 3, ""},
		{"drops deposit 2", func(ls []types.Log) []types.Log {
			var out []types.Log
			for _, l := range ls {
				if nonceOf(l) != 2 {
					out = append(out, l)
				}
			}
			return out
		}, 1, ""},
		{"two tuples for deposit 1", func(ls []types.Log) []types.Log {
			forged := ls[0]
			forged.Data = append([]byte(nil), forged.Data...)
			forged.Data[63] ^= 1 // a different amount
			return append(ls, forged)
		}, 0, "two different deposits"},
		{"log of another contract", func(ls []types.Log) []types.Log {
			ls[0].Address = e.token
			return ls
		}, 0, "outside the query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWatcher(e.ctx, &lyingClient{Client: e.c, alter: tc.alter}, e.bridge, WatcherOptions{StartBlock: e.start})
			if err != nil {
				t.Fatal(err)
			}
			o, err := w.Observe(e.ctx, 1, 16, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || o != nil {
					t.Fatalf("observation %v, error %v; want no observation and an error containing %q", o, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(o.Deposits) != tc.want {
				t.Fatalf("reported %v, want the first %d", o.Deposits, tc.want)
			}
			for i, d := range o.Deposits {
				if d.Nonce != uint64(i+1) {
					t.Fatalf("reported %v: not consecutive from 1", o.Deposits)
				}
			}
		})
	}
}

// TestWatcherReorgForkedAway: a deposit whose block a reorg (before
// finality) replaces is never reported, although it was in the canonical
// chain for a while; the deposit that takes its nonce on the new chain is.
func TestWatcherReorgForkedAway(t *testing.T) {
	e := newEnv(t, 1)
	w := e.watcher(WatcherOptions{})
	e.commitTo(33)
	e.tokenTx(e.alice, tokenABI.PackApprove(e.bridge, ogpu(100).ToBig()))
	parent, err := e.c.HeaderByNumber(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, b := e.deposit(e.alice, e.bob.addr, ogpu(10))
	if n != 1 || b != parent.Number.Uint64()+1 {
		t.Fatalf("deposit %d in block %d", n, b)
	}
	// Its block is canonical but not final: nothing reported.
	wantDeposits(t, e.observe(w, 1, 16).Deposits)
	blk, err := e.c.BlockByNumber(e.ctx, new(big.Int).SetUint64(b))
	if err != nil {
		t.Fatal(err)
	}
	depTx := blk.Transactions()[0]
	// Reorg to the parent; the deposit goes back to the pool, and alice
	// replaces it (same account nonce, higher fees) with a plain transfer.
	if err := e.sim.Fork(parent.Hash()); err != nil {
		t.Fatal(err)
	}
	id, _ := e.c.ChainID(e.ctx)
	repl, err := types.SignNewTx(e.alice.key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
		ChainID: id, Nonce: depTx.Nonce(), GasTipCap: new(big.Int).Mul(depTx.GasTipCap(), big.NewInt(3)),
		GasFeeCap: new(big.Int).Mul(depTx.GasFeeCap(), big.NewInt(3)), Gas: 21_000, To: &e.alice.addr,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The pool resets to the new head asynchronously: until it has, it
	// still counts the forked-away deposit's nonce as used.
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := e.c.SendTransaction(e.ctx, repl)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "nonce too low") || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h := e.head(); h != b {
		t.Fatalf("head %d after the fork and one block, want %d", h, b)
	}
	if nb, _ := e.c.BlockByNumber(e.ctx, new(big.Int).SetUint64(b)); nb.Hash() == blk.Hash() {
		t.Fatal("the fork did not replace the deposit's block")
	}
	if _, err := e.c.TransactionReceipt(e.ctx, depTx.Hash()); err == nil {
		t.Fatal("the forked-away deposit still has a receipt")
	}
	// On the new chain, nonce 1 goes to another deposit.
	n, b = e.deposit(e.alice, e.carol.addr, ogpu(7))
	if n != 1 {
		t.Fatalf("the deposit on the new chain got nonce %d, want 1", n)
	}
	e.finalize(b)
	o := e.observe(w, 1, 16)
	wantDeposits(t, o.Deposits, dep(1, e.alice.addr, e.carol.addr, ogpu(7)))
	if !o.Locked.Eq(ogpu(7)) {
		t.Fatalf("locked %s, want 7 oGPU", o.Locked)
	}
}

// TestWatcherReorgReincluded: a deposit whose block is reorged away before
// finality and that lands again in another block (at another height) is
// reported exactly once, under the same nonce and tuple.
func TestWatcherReorgReincluded(t *testing.T) {
	e := newEnv(t, 1)
	w := e.watcher(WatcherOptions{})
	e.commitTo(33)
	grand, err := e.c.HeaderByNumber(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.tokenTx(e.alice, tokenABI.PackApprove(e.bridge, ogpu(10).ToBig()))
	n, b := e.deposit(e.alice, e.bob.addr, ogpu(10))
	if n != 1 || b != grand.Number.Uint64()+2 {
		t.Fatalf("deposit %d in block %d, want 1 in %d", n, b, grand.Number.Uint64()+2)
	}
	blk, err := e.c.BlockByNumber(e.ctx, new(big.Int).SetUint64(b))
	if err != nil {
		t.Fatal(err)
	}
	depTx := blk.Transactions()[0]
	if err := e.sim.Fork(grand.Hash()); err != nil {
		t.Fatal(err)
	}
	// The pool puts the forked-away approval and deposit back when it has
	// reset to the new head, asynchronously: wait for them.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n, err := e.c.PendingTransactionCount(e.ctx); err == nil && n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the forked-away transactions never returned to the pool")
		}
	}
	e.sim.Commit() // the approval and the deposit go back in, in one block
	r, err := e.c.TransactionReceipt(e.ctx, depTx.Hash())
	if err != nil {
		t.Fatalf("the deposit was not re-included: %v", err)
	}
	if r.BlockHash == blk.Hash() || r.BlockNumber.Uint64() != b-1 {
		t.Fatalf("re-included in block %d (%s), want block %d, a different one", r.BlockNumber, r.BlockHash, b-1)
	}
	e.finalize(b + 1)
	o := e.observe(w, 1, 16)
	wantDeposits(t, o.Deposits, dep(1, e.alice.addr, e.bob.addr, ogpu(10)))
	if !o.Locked.Eq(ogpu(10)) {
		t.Fatalf("locked %s, want 10 oGPU", o.Locked)
	}
	wantDeposits(t, e.observe(w, 2, 16).Deposits)
}

// TestWatcherFinalityLag: when the node's finalized block is more than
// MaxLag blocks behind its head, Observe reports nothing and says so; at
// exactly MaxLag it still reports.
func TestWatcherFinalityLag(t *testing.T) {
	e := newEnv(t, 1)
	e.deposit(e.alice, e.bob.addr, ogpu(1))
	e.commitTo(52) // finalized 32: a lag of 20
	lag := e.head() - e.finalized()
	if lag != 20 {
		t.Fatalf("lag %d, want 20", lag)
	}
	o, err := e.watcher(WatcherOptions{MaxLag: 19}).Observe(e.ctx, 1, 16, nil)
	var le *FinalityLagError
	if !errors.Is(err, ErrFinalityLag) || !errors.As(err, &le) || o != nil {
		t.Fatalf("observation %v, error %v; want ErrFinalityLag", o, err)
	}
	if le.Latest != 52 || le.Finalized != 32 || le.MaxLag != 19 {
		t.Fatalf("lag error %+v", le)
	}
	if o := e.observe(e.watcher(WatcherOptions{MaxLag: 20}), 1, 16); len(o.Deposits) != 1 {
		t.Fatalf("at lag = MaxLag: %v", o.Deposits)
	}
	if o := e.observe(e.watcher(WatcherOptions{}), 1, 16); len(o.Deposits) != 1 {
		t.Fatalf("default MaxLag: %v", o.Deposits)
	}
}

// failingClient fails the n-th call (counting from 1) of one RPC method.
type failingClient struct {
	Client
	method string
	n      int
	calls  int
}

var errRPC = errors.New("connection reset by peer")

func (f *failingClient) fail(method string) bool {
	if method != f.method {
		return false
	}
	f.calls++
	return f.calls == f.n
}

func (f *failingClient) HeaderByNumber(ctx context.Context, n *big.Int) (*types.Header, error) {
	if f.fail("HeaderByNumber") {
		return nil, errRPC
	}
	return f.Client.HeaderByNumber(ctx, n)
}

func (f *failingClient) CallContract(ctx context.Context, m ethereum.CallMsg, n *big.Int) ([]byte, error) {
	if f.fail("CallContract") {
		return nil, errRPC
	}
	return f.Client.CallContract(ctx, m, n)
}

func (f *failingClient) FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	if f.fail("FilterLogs") {
		return nil, errRPC
	}
	return f.Client.FilterLogs(ctx, q)
}

// TestWatcherRPCFailure: any failing RPC call during Observe (each header
// read, each contract read, the deposit and the withdrawal log queries)
// yields an error and no observation, and the next Observe on the same
// watcher reports everything.
func TestWatcherRPCFailure(t *testing.T) {
	e := newEnv(t, 1, 1, 1)
	e.deposit(e.alice, e.bob.addr, ogpu(100))
	e.deposit(e.alice, e.bob.addr, ogpu(2))
	r := e.relayer()
	d := bridge.WithdrawDigest(e.domain(), 1, e.carol.addr, ogpu(5))
	if _, err := r.Withdraw(e.ctx, e.rel.key, e.set, 1, e.carol.addr, ogpu(5), sigs(t, d, e.vals, 0, 1, 2)); err != nil {
		t.Fatal(err)
	}
	e.finalize(e.head())
	cases := []struct {
		method string
		n      int
	}{{"HeaderByNumber", 1}, {"HeaderByNumber", 2}, {"CallContract", 1}, {"CallContract", 2}, {"CallContract", 3}, {"FilterLogs", 1}, {"FilterLogs", 2}}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s#%d", tc.method, tc.n), func(t *testing.T) {
			fc := &failingClient{Client: e.c}
			w, err := NewWatcher(e.ctx, fc, e.bridge, WatcherOptions{StartBlock: e.start})
			if err != nil {
				t.Fatal(err)
			}
			fc.method, fc.n = tc.method, tc.n
			o, err := w.Observe(e.ctx, 1, 16, []uint64{1})
			if !errors.Is(err, errRPC) || o != nil {
				t.Fatalf("observation %v, error %v; want the RPC error and nothing", o, err)
			}
			o = e.observe(w, 1, 16, 1)
			if len(o.Deposits) != 2 || len(o.Executed) != 1 || !o.Locked.Eq(ogpu(97)) {
				t.Fatalf("after the failure: %d deposits, executed %v, locked %s", len(o.Deposits), o.Executed, o.Locked)
			}
		})
	}
}

// TestWatcherWithdrawnAndLocked: a Withdrawn event is reported only for
// withdrawals the caller asks about and only once its block is final, in
// nonce order; Locked is the bridge's balance at the finalized block, not
// at the head.
func TestWatcherWithdrawnAndLocked(t *testing.T) {
	e := newEnv(t, 1, 1, 1)
	w := e.watcher(WatcherOptions{})
	e.commitTo(33)
	e.deposit(e.alice, e.bob.addr, ogpu(100))
	e.finalize(e.head())
	r := e.relayer()
	pay := func(nonce uint64, to common.Address, amt *uint256.Int) uint64 {
		d := bridge.WithdrawDigest(e.domain(), nonce, to, amt)
		res, err := r.Withdraw(e.ctx, e.rel.key, e.set, nonce, to, amt, sigs(t, d, e.vals, 0, 1, 2))
		if err != nil || res.Outcome != Paid {
			t.Fatalf("withdrawal %d: %+v, %v", nonce, res, err)
		}
		return res.Block
	}
	b1 := pay(1, e.bob.addr, ogpu(10))
	pay(3, e.carol.addr, ogpu(5))
	o := e.observe(w, 1, 16, 1, 2)
	if len(o.Executed) != 0 {
		t.Fatalf("withdrawal reported before its block %d is final (finalized %d): %v", b1, o.Finalized, o.Executed)
	}
	atF := e.balance(e.bridge, new(big.Int).SetUint64(o.Finalized))
	if !o.Locked.Eq(atF) || !o.Locked.Eq(ogpu(100)) || e.balance(e.bridge, nil).Eq(o.Locked) {
		t.Fatalf("locked %s; at finalized %s, at head %s", o.Locked, atF, e.balance(e.bridge, nil))
	}
	e.finalize(e.head())
	o = e.observe(w, 1, 16, 2, 1)
	if len(o.Executed) != 1 || o.Executed[0].Nonce != 1 || o.Executed[0].To != e.bob.addr || !o.Executed[0].Amount.Eq(ogpu(10)) {
		t.Fatalf("executed %+v, want withdrawal 1 only (3 was not asked about, 2 never paid)", o.Executed)
	}
	if !o.Locked.Eq(ogpu(85)) {
		t.Fatalf("locked %s, want 85 oGPU", o.Locked)
	}
	for i := 0; i < 2; i++ { // the second time from the watcher's memory
		o = e.observe(w, 1, 16, 3, 2, 1, 3)
		if len(o.Executed) != 2 || o.Executed[0].Nonce != 1 || o.Executed[1].Nonce != 3 || o.Executed[1].To != e.carol.addr {
			t.Fatalf("executed %+v, want withdrawals 1 and 3 in order", o.Executed)
		}
	}
	// Withdrawal 2 paid later is found although the watcher searched for
	// it before.
	pay(2, e.bob.addr, ogpu(1))
	e.finalize(e.head())
	if o = e.observe(w, 1, 16, 2); len(o.Executed) != 1 || o.Executed[0].Nonce != 2 {
		t.Fatalf("executed %+v, want withdrawal 2", o.Executed)
	}
}

// TestWatcherChecksChainAndContract: a watcher refuses a node on another
// Ethereum chain, an address without code, and a bridge serving another
// app chain.
func TestWatcherChecksChainAndContract(t *testing.T) {
	e := newEnv(t, 1)
	for _, tc := range []struct {
		name string
		addr common.Address
		opts WatcherOptions
		want string
	}{
		{"other chain", e.bridge, WatcherOptions{ChainID: 1}, "chain 1337"},
		{"no code", e.alice.addr, WatcherOptions{}, "no contract"},
		{"other app chain", e.bridge, WatcherOptions{AppChainID: "ogpu-other"}, "another app chain"},
	} {
		if _, err := NewWatcher(e.ctx, e.c, tc.addr, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	w, err := NewWatcher(e.ctx, e.c, e.bridge, WatcherOptions{ChainID: 1337, AppChainID: testAppChain})
	if err != nil {
		t.Fatal(err)
	}
	if w.Token() != e.token || w.Domain() != e.domain() {
		t.Fatalf("token %s domain %x", w.Token(), w.Domain())
	}
	vs, err := w.CurrentValset(e.ctx)
	if err != nil || !sameValset(vs, e.set) {
		t.Fatalf("current set %+v, %v; want the initial %+v", vs, err, e.set)
	}
}

func sameValset(a, b bridge.Valset) bool {
	if a.Nonce != b.Nonce || len(a.Members) != len(b.Members) {
		return false
	}
	for i := range a.Members {
		if a.Members[i] != b.Members[i] {
			return false
		}
	}
	return true
}
