package node

import (
	"context"

	abcicli "github.com/cometbft/cometbft/abci/client"
	abci "github.com/cometbft/cometbft/abci/types"
	cmtsync "github.com/cometbft/cometbft/libs/sync"
	"github.com/cometbft/cometbft/proxy"
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
	own := abcicli.NewLocalClient(new(cmtsync.Mutex), c.app)
	if c.pre == nil {
		return own, nil
	}
	return &mempoolClient{Client: own, pre: c.pre}, nil
}

// mempoolClient is the local client with pre run before CheckTx takes
// its mutex. Rechecks (abci.CHECK_TX_TYPE_RECHECK) skip it: their
// signatures were verified when they entered.
type mempoolClient struct {
	abcicli.Client
	pre func([]byte)
}

func (m *mempoolClient) CheckTx(ctx context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	if req.Type != abci.CHECK_TX_TYPE_RECHECK {
		m.pre(req.Tx)
	}
	return m.Client.CheckTx(ctx, req)
}

func (m *mempoolClient) CheckTxAsync(ctx context.Context, req *abci.CheckTxRequest) (*abcicli.ReqRes, error) {
	if req.Type != abci.CHECK_TX_TYPE_RECHECK {
		m.pre(req.Tx)
	}
	return m.Client.CheckTxAsync(ctx, req)
}
