package ethbridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cometbft/cometbft/libs/log"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node"
)

// Dialer is an Observer over an Ethereum JSON-RPC URL that connects on
// first use and again after a failure: a validator whose Ethereum node is
// down at start, or goes down later, keeps validating (its extensions are
// empty meanwhile) and resumes reporting when the node is back.
type Dialer struct {
	URL      string
	Contract common.Address
	Opts     WatcherOptions

	mu sync.Mutex
	c  *ethclient.Client
	w  *Watcher
}

// Observe implements Observer.
func (d *Dialer) Observe(ctx context.Context, nextDeposit uint64, maxDeposits int, pending []uint64) (*bridge.Observation, error) {
	w, err := d.watcher(ctx)
	if err != nil {
		return nil, err
	}
	obs, err := w.Observe(ctx, nextDeposit, maxDeposits, pending)
	if err != nil && !errors.Is(err, ErrFinalityLag) {
		d.drop()
	}
	return obs, err
}

func (d *Dialer) watcher(ctx context.Context) (*Watcher, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w != nil {
		return d.w, nil
	}
	c, err := ethclient.DialContext(ctx, d.URL)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the Ethereum node at %s: %w", d.URL, err)
	}
	w, err := NewWatcher(ctx, c, d.Contract, d.Opts)
	if err != nil {
		c.Close()
		return nil, err
	}
	d.c, d.w = c, w
	return w, nil
}

// drop forgets the connection after a failure (the watcher's caches are
// rebuilt on the next connection).
func (d *Dialer) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil {
		d.c.Close()
	}
	d.c, d.w = nil, nil
}

// Close closes the connection.
func (d *Dialer) Close() { d.drop() }

// ValidatorSidecar returns the chain option that makes a validator node
// sign for the bridge, when its chain has the bridge on and its home holds
// a bridge key (node.BridgeKeyFile): a Signer reading ethRPC. It returns
// no option (and says why in the log) when the chain has no bridge or the
// home no key, and an error when the bridge needs an Ethereum node that
// was not given.
func ValidatorSidecar(home, genesisFile, ethRPC string, logger log.Logger) ([]chain.Option, func(), error) {
	gen, doc, err := node.ReadGenesis(genesisFile)
	if err != nil {
		return nil, nil, err
	}
	bp := doc.Params.Bridge
	if bp == nil {
		return nil, func() {}, nil
	}
	if _, err := os.Stat(node.BridgeKeyFile(home)); err != nil {
		logger.Info("bridge on, but this node has no bridge key: it will not attest or sign", "key_file", node.BridgeKeyFile(home))
		return nil, func() {}, nil
	}
	if ethRPC == "" {
		return nil, nil, fmt.Errorf("this validator holds a bridge key (%s) and the chain has the bridge on: give its own Ethereum node with --eth-rpc URL", node.BridgeKeyFile(home))
	}
	key, err := node.LoadBridgeKey(home)
	if err != nil {
		return nil, nil, err
	}
	d := &Dialer{URL: ethRPC, Contract: bp.Contract, Opts: WatcherOptions{StartBlock: bp.StartBlock, ChainID: bp.EthChainID, AppChainID: gen.ChainID}}
	s := NewSigner(d, key, logger.With("module", "bridge"))
	logger.Info("bridge signer on", "key", s.Address(), "contract", bp.Contract, "eth_rpc", ethRPC)
	return []chain.Option{chain.WithExtender(s)}, d.Close, nil
}
