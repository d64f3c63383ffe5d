package node

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	abcicli "github.com/cometbft/cometbft/abci/client"
	abci "github.com/cometbft/cometbft/abci/types"
	cmtsync "github.com/cometbft/cometbft/libs/sync"
	"github.com/cometbft/cometbft/proxy"

	"github.com/ogpu-network/ogpu/types"
)

// The ABCI connections between CometBFT and the in-process app.
//
// CometBFT's local client creator serializes every ABCI call of the four
// connections (consensus, mempool, query, snapshot) behind one mutex, so
// the mempool's CheckTx waits for each block's PrepareProposal,
// FinalizeBlock and Commit, and they for it: on the 2-core machine of
// issue 17 the app used about one core while transfers queued.
//
// NewClientCreator gives the mempool connection a mutex of its own, for an
// app whose CheckTx is safe beside its other calls (chain.App: CheckTx
// reads the state through a reader of its own, see its doc), and keeps one
// mutex over the other three. CometBFT itself orders Commit against
// CheckTx (its mempool lock is held through Commit and the recheck that
// follows). It also runs pre before the mempool's mutex: chain.App's
// PreverifyTx, the secp256k1 recovery of the transaction's signature
// (about 55 µs through cgo here) into the app's signature cache. The
// mempool calls CheckTx from every RPC and peer goroutine under a shared
// lock, so these recoveries run on all cores. pre reads no state and
// changes none: it can only make the app's later check cheaper, never
// change its answer (a bad signature is not cached and is refused as
// before).

// NewClientCreator returns a ClientCreator for app in this process: the
// consensus, query and snapshot connections share one mutex; the mempool
// connection has its own and runs pre (nil: none) on each CheckTx's bytes
// first. app's CheckTx must be safe beside its other calls.
func NewClientCreator(app abci.Application, pre func(tx []byte)) proxy.ClientCreator {
	return &clientCreator{mtx: new(cmtsync.Mutex), app: app, pre: pre}
}

type clientCreator struct {
	mtx *cmtsync.Mutex
	app abci.Application
	pre func([]byte)
}

func (c *clientCreator) local() abcicli.Client { return abcicli.NewLocalClient(c.mtx, c.app) }

func (c *clientCreator) NewABCIConsensusClient() (abcicli.Client, error) { return c.local(), nil }
func (c *clientCreator) NewABCIQueryClient() (abcicli.Client, error)     { return c.local(), nil }
func (c *clientCreator) NewABCISnapshotClient() (abcicli.Client, error)  { return c.local(), nil }

func (c *clientCreator) NewABCIMempoolClient() (abcicli.Client, error) {
	mtx := new(cmtsync.Mutex)
	return &mempoolClient{Client: abcicli.NewLocalClient(mtx, c.app), app: c.app, mtx: mtx, pre: c.pre}, nil
}

// mempoolClient is the mempool connection: the local client for every
// call but CheckTx, which runs pre (unless nil) on the caller's goroutine
// and then the app's CheckTx through a combiner (check).
//
// Why a combiner: the app's CheckTx is the serial part of admitting a
// transaction (about 20 µs for a transfer), and each caller used to take
// the connection's mutex for its own, handing it from goroutine to
// goroutine while others spent 40 µs each in a cgo secp256k1 recovery
// (pre). Now the goroutine that finds no combiner running becomes it and
// runs every queued CheckTx back to back under the mutex, waking each
// caller with its answer; after combineMax answers it hands the role to
// the oldest waiter, so no caller serves others for long. Answers and
// their order are the same as one at a time: calls are queued in arrival
// order and run one after another. Measured (issue 17, docs/benchmarks.md,
// "admission in parallel"): alone it changed nothing; with PreverifyTx's
// cheap checks off the app's lock, 2,000 transfers were admitted within
// one 100 ms block interval in 3 runs of 3, against 3 of 6 without it.
type mempoolClient struct {
	abcicli.Client
	app abci.Application
	mtx *cmtsync.Mutex // the local client's, held through each run of queued CheckTxs
	pre func([]byte)

	qmu       sync.Mutex
	queue     []*checkCall
	combining bool // a goroutine is running the queue

	rmu      sync.Mutex
	rechecks []*checkCall // a recheck's res is its ReqRes's, answered at Flush
}

// combineMax is how many CheckTx answers a combiner gives before it hands
// the role on: it bounds the wait of the caller that is combining to about
// a millisecond of others' transfers.
const combineMax = 64

type checkCall struct {
	ctx  context.Context
	req  *abci.CheckTxRequest
	res  *abci.CheckTxResponse
	err  error
	done chan bool       // false: answered; true: run the queue (the combiner role)
	rr   *abcicli.ReqRes // a recheck's, answered by Flush
}

func (m *mempoolClient) CheckTx(ctx context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	if m.pre != nil && req.Type != abci.CHECK_TX_TYPE_RECHECK {
		m.pre(req.Tx)
	}
	return m.check(ctx, req)
}

// CheckTxAsync answers a new transaction before it returns, as the local
// client's does: the mempool's callback, set on the returned ReqRes, then
// runs at once. A recheck is answered by the Flush that follows the
// mempool's rechecks (answerRechecks); rechecks skip pre: their
// signatures were verified when they entered.
func (m *mempoolClient) CheckTxAsync(ctx context.Context, req *abci.CheckTxRequest) (*abcicli.ReqRes, error) {
	if req.Type == abci.CHECK_TX_TYPE_RECHECK {
		rr := abcicli.NewReqRes(abci.ToCheckTxRequest(req))
		m.rmu.Lock()
		m.rechecks = append(m.rechecks, &checkCall{ctx: ctx, req: req, rr: rr})
		m.rmu.Unlock()
		return rr, nil
	}
	res, err := m.CheckTx(ctx, req)
	if err != nil {
		return nil, err
	}
	rr := abcicli.NewReqRes(abci.ToCheckTxRequest(req))
	rr.Response = abci.ToCheckTxResponse(res)
	rr.Done()
	// With no callback set yet this only marks the request answered, so
	// the mempool's SetCallback runs its callback at once.
	rr.InvokeCallback()
	return rr, nil
}

// check queues req and waits for its answer, running the queue itself
// when no other caller is.
func (m *mempoolClient) check(ctx context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	c := &checkCall{ctx: ctx, req: req, done: make(chan bool, 1)}
	m.qmu.Lock()
	m.queue = append(m.queue, c)
	run := !m.combining
	m.combining = true
	m.qmu.Unlock()
	if run || <-c.done {
		m.combine()
	}
	return c.res, c.err
}

// combine runs the queue until it is empty, or hands the role to the
// oldest waiter once it has given combineMax answers (never more). The caller's own
// call was queued before it took the role, so it is answered first.
func (m *mempoolClient) combine() {
	for served := 0; ; {
		m.qmu.Lock()
		if len(m.queue) == 0 {
			m.combining = false
			m.qmu.Unlock()
			return
		}
		if served >= combineMax {
			next := m.queue[0]
			m.qmu.Unlock()
			next.done <- true
			return
		}
		// At most what is left of the combiner's budget: a queue refilled
		// by a flood of callers (a peer's gossip) is served in turns.
		n := min(len(m.queue), combineMax-served)
		batch := m.queue[:n:n]
		m.queue = m.queue[n:]
		m.qmu.Unlock()
		m.mtx.Lock()
		for _, c := range batch {
			c.res, c.err = m.run(c)
		}
		m.mtx.Unlock()
		for _, c := range batch {
			c.done <- false
		}
		served += len(batch)
	}
}

// run is one CheckTx. A panic in the app becomes that call's error, so the
// callers queued behind it are still answered; the mempool then panics on
// the caller's goroutine, as it does when the local client's CheckTx fails.
func (m *mempoolClient) run(c *checkCall) (res *abci.CheckTxResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("app CheckTx panicked: %v", p)
		}
	}()
	return m.app.CheckTx(c.ctx, c.req)
}

// Flush answers the queued rechecks, then flushes the local client.
func (m *mempoolClient) Flush(ctx context.Context) error {
	m.answerRechecks()
	return m.Client.Flush(ctx)
}

// answerRechecks runs the queued rechecks, each sender's in nonce order,
// and answers them in the mempool's order.
//
// After each block the mempool rechecks what it holds in its list order,
// and the app's check state follows: a transaction whose nonce is ahead
// of it is refused and dropped. The list is not always in nonce order:
// the mempool adds a checked transaction when its caller returns, so two
// of one sender's transactions checked back to back (arriving from two
// peers, or from the sender and from another node it handed them to) can
// be added the other way round. Rechecked in that order, n+1 was dropped
// for being ahead, and every later transaction of the sender with it
// (soak finding 14: a provider's bids and reveals vanished from the
// mempools and their windows passed). The mempool takes recheck answers
// in its list order only; the order the app runs them in is free, so each
// sender's run in nonce order, in the places its transactions hold in the
// list (other senders' keep theirs: a transfer received before a spend of
// it still runs first).
func (m *mempoolClient) answerRechecks() {
	m.rmu.Lock()
	calls := m.rechecks
	m.rechecks = nil
	m.rmu.Unlock()
	if len(calls) == 0 {
		return
	}
	for _, c := range recheckOrder(calls) {
		c.res, c.err = m.check(c.ctx, c.req)
	}
	for _, c := range calls {
		if c.err != nil {
			// As the mempool does when the local client's CheckTx fails.
			panic(fmt.Errorf("recheck of a transaction failed: %w", c.err))
		}
		c.rr.Response = abci.ToCheckTxResponse(c.res)
		c.rr.Done()
		c.rr.InvokeCallback()
	}
}

// recheckOrder is calls with each sender's transactions sorted by nonce
// within the positions they hold; bytes that do not decode keep theirs.
func recheckOrder(calls []*checkCall) []*checkCall {
	type key struct {
		from  types.Address
		nonce uint64
	}
	keys := make([]key, len(calls))
	slots := make(map[types.Address][]int) // lookups only
	var senders []types.Address
	for i, c := range calls {
		tx, err := types.DecodeTx(c.req.Tx)
		if err != nil {
			continue
		}
		keys[i] = key{tx.Body.From, tx.Body.Nonce}
		if slots[tx.Body.From] == nil {
			senders = append(senders, tx.Body.From)
		}
		slots[tx.Body.From] = append(slots[tx.Body.From], i)
	}
	order := slices.Clone(calls)
	for _, from := range senders {
		pos := slots[from]
		byNonce := slices.Clone(pos)
		slices.SortStableFunc(byNonce, func(a, b int) int { return cmp.Compare(keys[a].nonce, keys[b].nonce) })
		for j, p := range pos {
			order[p] = calls[byNonce[j]]
		}
	}
	return order
}
