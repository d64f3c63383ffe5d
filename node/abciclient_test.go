package node_test

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	abcicli "github.com/cometbft/cometbft/abci/client"
	abci "github.com/cometbft/cometbft/abci/types"
	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// serialApp answers CheckTx with the transaction as its log, counts calls
// that overlap (there must be none: the mempool connection runs the app's
// CheckTx one at a time) and panics on "panic".
type serialApp struct {
	abci.BaseApplication
	inside, overlaps, calls atomic.Int64
}

func (a *serialApp) CheckTx(_ context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	if a.inside.Add(1) > 1 {
		a.overlaps.Add(1)
	}
	defer a.inside.Add(-1)
	a.calls.Add(1)
	if string(req.Tx) == "panic" {
		panic("the app panicked")
	}
	return &abci.CheckTxResponse{Log: string(req.Tx)}, nil
}

// The mempool connection's CheckTx (a combiner, node/abciclient.go): from
// 16 goroutines at once, every call gets its own answer, the app's CheckTx
// never runs beside itself, pre runs once per check, and the ReqRes it
// returns is answered, so the mempool's
// callback, set after the call returns, runs at once (CListMempool adds
// the transaction there). A panicking CheckTx fails its own call only:
// calls queued behind it are answered, and later calls still run.
func TestMempoolClientCombines(t *testing.T) {
	app := new(serialApp)
	var pres atomic.Int64
	cli, err := node.NewClientCreator(app, func([]byte) { pres.Add(1) }).NewABCIMempoolClient()
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 16, 300
	var wg sync.WaitGroup
	errc := make(chan error, goroutines+1)
	var callbacks atomic.Int64
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				tx := fmt.Sprintf("tx %d/%d", g, i)
				rr, err := cli.CheckTxAsync(context.Background(), &abci.CheckTxRequest{Tx: []byte(tx), Type: abci.CHECK_TX_TYPE_CHECK})
				if err != nil {
					errc <- err
					return
				}
				var got string
				rr.SetCallback(func(res *abci.Response) error {
					got = res.GetCheckTx().Log
					callbacks.Add(1)
					return nil
				})
				if got != tx {
					errc <- fmt.Errorf("%s: answered %q", tx, got)
					return
				}
			}
		})
	}
	// One caller's app panics while the others run.
	wg.Go(func() {
		if _, err := cli.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: []byte("panic")}); err == nil {
			errc <- fmt.Errorf("a panicking CheckTx returned no error")
		}
	})
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if n := app.overlaps.Load(); n != 0 {
		t.Errorf("the app's CheckTx ran beside itself %d times", n)
	}
	if n, want := callbacks.Load(), int64(goroutines*each); n != want {
		t.Errorf("%d callbacks ran, want %d", n, want)
	}
	if n, want := pres.Load(), int64(goroutines*each+1); n != want {
		t.Errorf("pre ran %d times, want %d", n, want)
	}
	// The combiner role was left free: one more call still runs.
	res, err := cli.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: []byte("after")})
	if err != nil || res.Log != "after" {
		t.Fatalf("a call after the others: %v, %v", res, err)
	}
	var _ abcicli.Client = cli
}

// gatedApp answers CheckTx at once but for the call named "gate", which
// says it entered and waits for release; it counts the calls it answered.
type gatedApp struct {
	abci.BaseApplication
	entered, release chan struct{}
	calls            atomic.Int64
}

func (a *gatedApp) CheckTx(_ context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	if string(req.Tx) == "gate" {
		close(a.entered)
		<-a.release
	}
	a.calls.Add(1)
	return &abci.CheckTxResponse{}, nil
}

// A flood of CheckTx callers (a peer's gossip, a spammer's RPC calls)
// cannot make the caller that is combining serve them all: it answers at
// most 64 calls, its own among them, and hands the role on. Without the
// per-batch budget it served the whole queue that built up behind its own
// slow call (300 here) before it could return.
func TestMempoolClientCombinerServesInTurns(t *testing.T) {
	app := &gatedApp{entered: make(chan struct{}), release: make(chan struct{})}
	cli, err := node.NewClientCreator(app, nil).NewABCIMempoolClient()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan int64, 1)
	go func() {
		if _, err := cli.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: []byte("gate")}); err != nil {
			t.Error(err)
		}
		served <- app.calls.Load()
	}()
	<-app.entered // the gate's caller is combining, inside the app
	const flood = 300
	var wg sync.WaitGroup
	for i := range flood {
		wg.Go(func() {
			if _, err := cli.CheckTx(context.Background(), &abci.CheckTxRequest{Tx: []byte(fmt.Sprint("flood ", i))}); err != nil {
				t.Error(err)
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); node.QueuedChecks(cli) < flood; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls queued", node.QueuedChecks(cli), flood)
		}
	}
	close(app.release)
	n := <-served
	wg.Wait()
	if n > 64 {
		t.Fatalf("the combining caller returned after %d answers, want at most 64", n)
	}
	if got := app.calls.Load(); got != flood+1 {
		t.Fatalf("%d calls answered, want %d", got, flood+1)
	}
}

// nonceApp accepts each sender's transactions in nonce order only, as the
// chain's check state does, and counts its calls.
type nonceApp struct {
	abci.BaseApplication
	next map[types.Address]uint64
}

func (a *nonceApp) CheckTx(_ context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	tx, err := types.DecodeTx(req.Tx)
	if err != nil {
		return &abci.CheckTxResponse{Code: 1, Log: err.Error()}, nil
	}
	if tx.Body.Nonce != a.next[tx.Body.From] {
		return &abci.CheckTxResponse{Code: 2, Log: fmt.Sprintf("nonce %d is ahead of %d", tx.Body.Nonce, a.next[tx.Body.From])}, nil
	}
	a.next[tx.Body.From]++
	return &abci.CheckTxResponse{}, nil
}

// TestMempoolClientRechecksInNonceOrder (soak finding 14): the mempool's
// list holds two senders' transactions out of nonce order (CometBFT adds
// a checked transaction when its caller returns, so two checked back to
// back can be added the other way round). Its recheck asks in list order;
// the app runs each sender's in nonce order, so none is refused as ahead,
// and the answers reach the mempool in its list order, at the Flush that
// follows the rechecks, never before. pre (the signature recovery) does
// not run for a recheck. Rechecked in list order, nonce 1 of the first
// sender was refused, and every later one of it with it.
func TestMempoolClientRechecksInNonceOrder(t *testing.T) {
	app := &nonceApp{next: map[types.Address]uint64{}}
	var pres atomic.Int64
	cli, err := node.NewClientCreator(app, func([]byte) { pres.Add(1) }).NewABCIMempoolClient()
	if err != nil {
		t.Fatal(err)
	}
	ka, _ := ethcrypto.GenerateKey()
	kb, _ := ethcrypto.GenerateKey()
	signed := func(k *ecdsa.PrivateKey, nonce uint64) []byte {
		tx := &types.Tx{Body: types.TxBody{ChainID: "c", From: ethcrypto.PubkeyToAddress(k.PublicKey), Nonce: nonce, Fee: uint256.NewInt(1),
			Msgs: []types.RawMsg{(&escrow.MsgSend{To: types.Address{1}, Amount: uint256.NewInt(1)}).Raw()}}}
		if err := tx.Sign(k); err != nil {
			t.Fatal(err)
		}
		bz, err := tx.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return bz
	}
	list := [][]byte{signed(ka, 1), signed(kb, 0), signed(ka, 0), signed(ka, 3), signed(kb, 1), signed(ka, 2)}
	var answered []int
	for i, tx := range list {
		rr, err := cli.CheckTxAsync(context.Background(), &abci.CheckTxRequest{Tx: tx, Type: abci.CHECK_TX_TYPE_RECHECK})
		if err != nil {
			t.Fatal(err)
		}
		rr.SetCallback(func(res *abci.Response) error {
			if c := res.GetCheckTx(); c.Code != 0 {
				t.Errorf("recheck %d refused: %s", i, c.Log)
			}
			answered = append(answered, i)
			return nil
		})
	}
	if len(answered) != 0 {
		t.Fatalf("rechecks %v answered before the Flush", answered)
	}
	if err := cli.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(answered) != "[0 1 2 3 4 5]" {
		t.Fatalf("rechecks answered in the order %v, want the mempool's", answered)
	}
	if n := pres.Load(); n != 0 {
		t.Errorf("pre ran %d times for rechecks", n)
	}
}
