package node

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rpcclient "github.com/cometbft/cometbft/rpc/client"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	cmttypes "github.com/cometbft/cometbft/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/types"
)

// txNonce decodes the nonce of an included transaction.
func txNonce(t *testing.T, res *ctypes.ResultTx) uint64 {
	t.Helper()
	tx, err := types.DecodeTx(res.Tx)
	if err != nil {
		t.Fatal(err)
	}
	return tx.Body.Nonce
}

// TestSenderConcurrentSubmits: 20 submissions at once from one key all land,
// with nonces 0..19.
func TestSenderConcurrentSubmits(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := NewSender(tc.http, tc.keys[0])
	const n = 20
	hashes := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashes[i], errs[i] = s.Submit(ctx, transfer(i))
		}()
	}
	wg.Wait()
	seen := make(map[uint64]int)
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		res, err := tc.http.WaitTx(ctx, hashes[i])
		if err != nil {
			t.Fatalf("transfer %d: %v", i, err)
		}
		nonce := txNonce(t, res)
		if j, dup := seen[nonce]; dup {
			t.Fatalf("transfers %d and %d both have nonce %d", j, i, nonce)
		}
		seen[nonce] = i
	}
	for nonce := range uint64(n) {
		if _, ok := seen[nonce]; !ok {
			t.Fatalf("no transfer with nonce %d: %v", nonce, seen)
		}
	}
	acct, err := tc.http.Account(ctx, s.Address())
	if err != nil || acct.Nonce != n {
		t.Fatalf("account nonce %v, %v; want %d", acct, err, n)
	}
}

// TestSenderResyncs: another client using the same key, in a block or still
// in the mempool, and transactions the mempool dropped, cost no Send.
func TestSenderResyncs(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := NewSender(tc.http, tc.keys[0])
	send := func(i int, want uint64) {
		t.Helper()
		res, err := s.Send(ctx, transfer(i))
		if err != nil {
			t.Fatal(err)
		}
		if got := txNonce(t, res); got != want {
			t.Fatalf("transfer %d has nonce %d, want %d", i, got, want)
		}
	}
	send(0, 0)

	// Another client used nonce 1, and its transaction is in a block.
	bz, _, err := tc.local.SignTx(ctx, tc.keys[0], []types.RawMsg{transfer(100)}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.local.BroadcastAndWait(ctx, bz); err != nil {
		t.Fatal(err)
	}
	send(1, 2)

	// Another sender on the same key used nonce 3: it may still be in the
	// mempool, where the account query does not see it.
	other := NewSender(tc.local, tc.keys[0])
	if _, err := other.Submit(ctx, transfer(101)); err != nil {
		t.Fatal(err)
	}
	send(2, 4)

	// The mempool dropped transactions this sender counted: its next nonce
	// is ahead of the chain.
	s.next += 3
	send(3, 5)
}

// TestSenderRefusal: a transaction the mempool refuses comes back as a
// *TxError and does not use a nonce.
func TestSenderRefusal(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := NewSender(tc.local, tc.keys[0])
	if _, err := s.Send(ctx, transfer(0)); err != nil {
		t.Fatal(err)
	}
	tooMuch := (&escrow.MsgSend{To: recipient(1), Amount: types.OGPU(1_000_000)}).Raw()
	_, err := s.Send(ctx, tooMuch)
	var te *TxError
	if !errors.As(err, &te) || te.Code != types.ErrInsufficientFunds.Code {
		t.Fatalf("overspend: %v", err)
	}
	res, err := s.Send(ctx, transfer(2))
	if err != nil {
		t.Fatal(err)
	}
	if got := txNonce(t, res); got != 1 {
		t.Fatalf("transfer after a refusal has nonce %d, want 1", got)
	}

	if _, err := s.Submit(ctx); err == nil || !strings.Contains(err.Error(), "at least one message") {
		t.Fatalf("no messages: %v", err)
	}
	if _, err := NewSender(tc.local, nil).Submit(ctx, transfer(3)); err == nil {
		t.Fatal("a sender without a key submitted")
	}
}

// TestSenderLostAnswer: a submission whose answer was lost reached the
// mempool; submitting the same messages again returns that transaction
// instead of sending the transfer twice.
func TestSenderLostAnswer(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := NewSender(tc.local, tc.keys[0])
	if err := s.load(ctx); err != nil { // s's next nonce is 0, as before a lost answer
		t.Fatal(err)
	}
	nonce := uint64(0)
	bz, _, err := tc.local.SignTx(ctx, tc.keys[0], []types.RawMsg{transfer(0)}, BuildOptions{Nonce: &nonce})
	if err != nil {
		t.Fatal(err)
	}
	lost, err := tc.local.Broadcast(ctx, bz)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := s.Submit(ctx, transfer(0))
	if err != nil {
		t.Fatal(err)
	}
	if string(hash) != string(lost) {
		t.Fatalf("resubmission is transaction %X, the first was %X", hash, lost)
	}
	res, err := s.Send(ctx, transfer(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := txNonce(t, res); got != 1 {
		t.Fatalf("next transfer has nonce %d, want 1", got)
	}
	acct, err := tc.local.Account(ctx, recipient(0))
	if err != nil || acct.Balance.Uint64() != 1000 {
		t.Fatalf("recipient of the resubmitted transfer holds %v, %v; want 1000 base units", acct, err)
	}
}

// BenchmarkSenderSubmit measures Submit from 8 goroutines sharing one
// Sender (broadcasts are serialized, each a CheckTx round trip), in-process
// and over HTTP, on a node making blocks every 100ms.
//
//	go test -run '^$' -bench BenchmarkSenderSubmit -benchtime 500x ./node
func BenchmarkSenderSubmit(b *testing.B) {
	tc := startTestChainEvery(b, 2, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i, c := range []struct {
		name string
		c    *Client
	}{{"local", tc.local}, {"http", tc.http}} {
		b.Run(c.name, func(b *testing.B) {
			s := NewSender(c.c, tc.keys[i])
			if err := s.load(ctx); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			b.ResetTimer()
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						if _, err := s.Submit(ctx, transfer(int(n))); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
		})
	}
}

// losingRPC is a node's RPC that answers the first broadcast "taken"
// without passing it on: the node took the transaction into its mempool
// and was killed before any block included it. lost counts the
// broadcasts it dropped, sent all the others.
type losingRPC struct {
	rpcclient.Client
	lose atomic.Int32 // broadcasts still to drop
	sent atomic.Int32
}

func (r *losingRPC) BroadcastTxSync(ctx context.Context, tx cmttypes.Tx) (*ctypes.ResultBroadcastTx, error) {
	if r.lose.Add(-1) >= 0 {
		return &ctypes.ResultBroadcastTx{Hash: tx.Hash()}, nil
	}
	r.sent.Add(1)
	return r.Client.BroadcastTxSync(ctx, tx)
}

// TestSendSurvivesLostMempool is the soak's job 130: a provider's
// commitment was taken by its node's mempool, the node was killed before
// a block included it, and the provider's Send waited for a transaction
// nobody held until the commit deadline passed (a no-show). Send now
// hands the node the same bytes again while it waits: the transfer lands
// once, with the nonce it was signed with, and the next one follows.
func TestSendSurvivesLostMempool(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rpc := &losingRPC{Client: tc.local.RPC}
	rpc.lose.Store(1)
	s := NewSender(&Client{RPC: rpc}, tc.keys[0])
	res, err := s.Send(ctx, transfer(0))
	if err != nil {
		t.Fatalf("a transaction its node lost was not sent again: %v", err)
	}
	if got := txNonce(t, res); got != 0 {
		t.Fatalf("the lost transfer landed with nonce %d, want 0", got)
	}
	if rpc.sent.Load() == 0 {
		t.Fatal("landed without a broadcast reaching the node")
	}
	// Rebroadcasts of an included transaction change nothing: one
	// transfer, and the sender's next nonce is 1.
	res, err = s.Send(ctx, transfer(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := txNonce(t, res); got != 1 {
		t.Fatalf("the next transfer has nonce %d, want 1", got)
	}
	acct, err := tc.local.Account(ctx, recipient(0))
	if err != nil || acct.Balance.Uint64() != 1000 {
		t.Fatalf("recipient of the lost transfer holds %v, %v; want 1000 base units (once)", acct, err)
	}
}

// TestSendLostTxWhoseNonceWasTaken: the node lost a transaction and the
// sender's key signed another with the same nonce (a second process, or
// the sender's own resync after "nonce ahead"). The lost one can never
// land: Send says so with a nonce refusal soon after (the caller signs
// its messages again), instead of waiting for its context to end.
func TestSendLostTxWhoseNonceWasTaken(t *testing.T) {
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rpc := &losingRPC{Client: tc.local.RPC}
	rpc.lose.Store(1)
	s := NewSender(&Client{RPC: rpc}, tc.keys[0])
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := s.Send(ctx, transfer(0))
		done <- err
	}()
	for rpc.lose.Load() > 0 { // the lost broadcast happened
		time.Sleep(10 * time.Millisecond)
	}
	other := NewSender(tc.local, tc.keys[0]) // reads nonce 0 from the chain
	if res, err := other.Send(ctx, transfer(1)); err != nil || txNonce(t, res) != 0 {
		t.Fatalf("the other transaction: %v", err)
	}
	err := <-done
	var te *TxError
	if !errors.As(err, &te) || te.Code != types.ErrNonceUsed.Code {
		t.Fatalf("Send of the lost transaction: %v, want a nonce-used refusal", err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("Send gave up after %s, want soon after its nonce was taken", waited)
	}
	if acct, err := tc.local.Account(ctx, recipient(0)); err != nil || !acct.Balance.IsZero() {
		t.Fatalf("recipient of the lost transfer holds %v, %v; want nothing", acct, err)
	}
}

// deadRPC is a node's RPC whose mempool takes the first lose broadcasts
// and drops them unincluded; the first of them can never land after that
// (its window ended, as the soak's bid reveal of job 91): the node
// refuses its bytes from then on.
type deadRPC struct {
	rpcclient.Client
	mu    sync.Mutex
	lose  int
	alive bool   // the first lost transaction can still land
	dead  []byte // the hash of the transaction that can no longer land
	// busyFee, if set, refuses new transactions under nonce 0 (the
	// filler) paying less, as a mempool busy with spam does.
	busyFee *uint256.Int
}

func (r *deadRPC) BroadcastTxSync(ctx context.Context, tx cmttypes.Tx) (*ctypes.ResultBroadcastTx, error) {
	r.mu.Lock()
	if r.lose > 0 {
		r.lose--
		if r.dead == nil && !r.alive {
			r.dead = tx.Hash()
		}
		r.mu.Unlock()
		return &ctypes.ResultBroadcastTx{Hash: tx.Hash()}, nil
	}
	dead := string(tx.Hash()) == string(r.dead)
	busy := r.busyFee
	r.mu.Unlock()
	if dec, err := types.DecodeTx(tx); busy != nil && !dead && err == nil && dec.Body.Nonce == 0 && dec.Body.Fee.Lt(busy) {
		return &ctypes.ResultBroadcastTx{Hash: tx.Hash(), Code: types.ErrFeeTooLow.Code, Log: "the mempool is busy: pay more"}, nil
	}
	if dead {
		return &ctypes.ResultBroadcastTx{Hash: tx.Hash(), Code: types.ErrWrongPhase.Code, Log: "the reveal window ended at height 1035"}, nil
	}
	return r.Client.BroadcastTxSync(ctx, tx)
}

// postTwoLost posts transfers 0 and 1 through a node that takes both and
// drops them unincluded; the first can still land if alive, else never.
func postTwoLost(t *testing.T, rpc *deadRPC) (*testChain, context.Context, *Sender, *Pending, *Pending) {
	t.Helper()
	tc := startTestChain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	rpc.Client, rpc.lose = tc.local.RPC, 2
	s := NewSender(&Client{RPC: rpc}, tc.keys[0])
	s.RebroadcastEvery = 200 * time.Millisecond
	var ps [2]*Pending
	for i := range ps {
		p, err := s.Post(ctx, transfer(i))
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	return tc, ctx, s, ps[0], ps[1]
}

// wantLanded checks the sender's account nonce and what recipients 0, 1,
// ... hold, in base units.
func wantLanded(t *testing.T, tc *testChain, ctx context.Context, s *Sender, nonce uint64, held ...uint64) {
	t.Helper()
	for i, want := range held {
		if acct, err := tc.local.Account(ctx, recipient(i)); err != nil || acct.Balance.Uint64() != want {
			t.Fatalf("recipient %d holds %v, %v; want %d base units", i, acct, err, want)
		}
	}
	if acct, err := tc.local.Account(ctx, s.Address()); err != nil || acct.Nonce != nonce {
		t.Fatalf("the sender's account: %+v, %v; want nonce %d", acct, err, nonce)
	}
}

// TestSendFillsTheGapOfADeadTransaction is the soak's job 87: a
// provider's bid reveal (nonce n) and result reveal (n+1) were both in its
// node's mempool; the bid reveal's window ended before a block took it, the
// recheck dropped it, and the result reveal, ahead of the account's nonce
// from then on, could never land: its Send waited forever, inside the
// provider's block loop, and the provider did nothing more (slashed as a
// no-show). The Sender now fills the gap: the result reveal lands with the
// nonce it was signed with, the dead one never, and the filler moves one
// base unit from the sender to itself.
func TestSendFillsTheGapOfADeadTransaction(t *testing.T) {
	tc, ctx, s, dead, held := postTwoLost(t, &deadRPC{})
	res, err := held.Wait(ctx)
	if err != nil {
		t.Fatalf("the transaction behind a dead one: %v", err)
	}
	if got := txNonce(t, res); got != 1 {
		t.Fatalf("it landed with nonce %d, want the nonce it was signed with, 1", got)
	}
	var te *TxError
	if _, err := dead.Wait(ctx); !errors.As(err, &te) || te.Code != types.ErrWrongPhase.Code {
		t.Fatalf("the dead transaction's wait: %v, want its refusal", err)
	}
	wantLanded(t, tc, ctx, s, 2, 0, 1001) // the filler and the transfer
	// The next transaction follows at nonce 2.
	if res, err := s.Send(ctx, transfer(2)); err != nil || txNonce(t, res) != 2 {
		t.Fatalf("the next transfer: %v", err)
	}
}

// TestSendRefillsAGapWithItsOwnBytes: the node dropped nonce n, which can
// still land, and holds n+1 back; waiting on n+1 hands n's own bytes to
// the node again: both land, once each, and no filler is spent.
func TestSendRefillsAGapWithItsOwnBytes(t *testing.T) {
	tc, ctx, s, _, held := postTwoLost(t, &deadRPC{alive: true})
	if res, err := held.Wait(ctx); err != nil || txNonce(t, res) != 1 {
		t.Fatalf("the transaction behind a dropped one: %v", err)
	}
	wantLanded(t, tc, ctx, s, 2, 1000, 1001) // both transfers, once each, no filler
}

// TestFillPaysMoreWhileTheMempoolIsBusy: a spammer at the minimum fee
// keeps the mempool busy, so a filler at the minimum fee is refused; the
// filler doubles its fee until it gets in (here at 4x), and the
// transaction held behind the gap lands.
func TestFillPaysMoreWhileTheMempoolIsBusy(t *testing.T) {
	rpc := &deadRPC{}
	tc, ctx, s, dead, held := postTwoLost(t, rpc)
	tx, err := types.DecodeTx(dead.bz)
	if err != nil {
		t.Fatal(err)
	}
	before, err := tc.local.Account(ctx, s.Address())
	if err != nil {
		t.Fatal(err)
	}
	min := RequiredFee(s.params, &types.Tx{Body: types.TxBody{ChainID: tx.Body.ChainID, From: s.Address(),
		Msgs: []types.RawMsg{(&escrow.MsgSend{To: s.Address(), Amount: uint256.NewInt(1)}).Raw()}}})
	rpc.mu.Lock()
	rpc.busyFee = new(uint256.Int).Mul(min, uint256.NewInt(3))
	rpc.mu.Unlock()
	if res, err := held.Wait(ctx); err != nil || txNonce(t, res) != 1 {
		t.Fatalf("the transaction behind the gap: %v", err)
	}
	after, err := tc.local.Account(ctx, s.Address())
	if err != nil {
		t.Fatal(err)
	}
	spent := new(uint256.Int).Sub(before.Balance, after.Balance)
	// The transfer of 1001 and its fee, plus the filler's 4x fee.
	transfer := new(uint256.Int).Add(uint256.NewInt(1001), RequiredFee(s.params, &types.Tx{Body: types.TxBody{ChainID: tx.Body.ChainID, From: s.Address(), Nonce: 1, Msgs: []types.RawMsg{transfer(1)}}}))
	if want := new(uint256.Int).Add(transfer, new(uint256.Int).Mul(min, uint256.NewInt(4))); !spent.Eq(want) {
		t.Fatalf("the sender spent %s, want %s (the transfer, its fee and a filler at 4x the minimum fee %s)", spent, want, min)
	}
}
