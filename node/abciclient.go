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
// connections (consensus, mempool, query, snapshot) behind one mutex: the
// app's state is not safe for concurrent use, and CheckTx reads it. The
// costliest part of CheckTx does not read it: the secp256k1 recovery of
// the transaction's signature (about 55 µs through cgo here, issue 17),
// which the app caches by the transaction's bytes (chain/sigcache.go).
//
// NewClientCreator keeps the one mutex and adds one step before the
// mempool connection takes it: pre(tx) verifies the signature into that
// cache. CometBFT's mempool calls CheckTx from every RPC and peer
// goroutine under a shared (read) lock, so these recoveries run on all
// cores, beside each other and beside a block being executed; the
// CheckTx under the mutex then finds the signature verified. pre reads no
// state and changes none: it can only make the app's later check cheaper,
// never change its answer (a bad signature is not cached and is refused
// under the mutex as before).

// NewClientCreator returns a ClientCreator for app in this process: one
// mutex over all its connections, as proxy.NewLocalClientCreator, with
// pre (nil: none) run on each mempool CheckTx's bytes before the mutex.
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
	if c.pre == nil {
		return c.local(), nil
	}
	return &mempoolClient{Client: c.local(), pre: c.pre}, nil
}

// mempoolClient is the local client with pre run before CheckTx takes
// the mutex. Rechecks (abci.CHECK_TX_TYPE_RECHECK) skip it: CometBFT runs
// them under its own exclusive lock after a block, one after another, and
// their signatures were verified when they entered.
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
