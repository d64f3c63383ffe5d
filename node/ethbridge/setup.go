package ethbridge

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"os"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// What the commands do, kept out of cmd/: set up a relay, register a
// validator's bridge key, wait for a deposit's credit, launch a testnet's
// bridge.

// DialRelay sets up a Relay for the chain c talks to: it reads the bridge's
// params from the chain, connects to the Ethereum node at rpcURL and
// checks that the contract there serves this chain. close releases the
// connection.
func DialRelay(ctx context.Context, c *node.Client, rpcURL string, key *ecdsa.PrivateKey, every time.Duration, logger log.Logger) (*Relay, *genesis.BridgeParams, func(), error) {
	b, err := c.Bridge(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if b.Params == nil {
		return nil, nil, nil, fmt.Errorf("the bridge is off on this chain (genesis params.bridge is absent)")
	}
	chainID, err := c.ChainID(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	eth, err := ethclient.DialContext(ctx, rpcURL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot reach the Ethereum node at %s: %w", rpcURL, err)
	}
	w, err := NewWatcher(ctx, eth, b.Params.Contract, WatcherOptions{StartBlock: b.Params.StartBlock, ChainID: b.Params.EthChainID, AppChainID: chainID})
	if err != nil {
		eth.Close()
		return nil, nil, nil, err
	}
	r, err := NewRelayer(ctx, eth, b.Params.Contract, RelayerOptions{})
	if err != nil {
		eth.Close()
		return nil, nil, nil, err
	}
	return &Relay{App: c, Eth: eth, Watcher: w, Relayer: r, Key: key, Interval: every, Logger: logger}, b.Params, eth.Close, nil
}

// RegisterKey makes sure home holds a bridge key (creating it if missing)
// and registers it for home's validator operator with its proof of
// possession. It returns the key's address and the block that took it.
func RegisterKey(ctx context.Context, c *node.Client, home string) (common.Address, int64, error) {
	op, err := node.LoadOperatorKey(home)
	if err != nil {
		return common.Address{}, 0, err
	}
	if _, err := os.Stat(node.BridgeKeyFile(home)); err != nil {
		k, err := crypto.GenerateKey()
		if err != nil {
			return common.Address{}, 0, err
		}
		if err := node.WriteHexKey(node.BridgeKeyFile(home), k); err != nil {
			return common.Address{}, 0, err
		}
	}
	bk, err := node.LoadBridgeKey(home)
	if err != nil {
		return common.Address{}, 0, err
	}
	chainID, err := c.ChainID(ctx)
	if err != nil {
		return common.Address{}, 0, err
	}
	proof, err := bridge.ProveKey(bk, chainID, crypto.PubkeyToAddress(op.PublicKey))
	if err != nil {
		return common.Address{}, 0, err
	}
	msg := &bridge.MsgSetBridgeKey{Key: crypto.PubkeyToAddress(bk.PublicKey), Proof: proof}
	bz, _, err := c.SignTx(ctx, op, []types.RawMsg{msg.Raw()}, node.BuildOptions{ChainID: chainID})
	if err != nil {
		return common.Address{}, 0, err
	}
	res, err := c.BroadcastAndWait(ctx, bz)
	if err != nil {
		return common.Address{}, 0, err
	}
	return msg.Key, res.Height, nil
}

// WaitCredited waits until the chain has credited deposit nonce (its
// Ethereum block must be finalized first) or ctx ends.
func WaitCredited(ctx context.Context, app AppChain, nonce uint64) error {
	for {
		b, err := app.Bridge(ctx)
		if err == nil && b.LastDeposit >= nonce {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deposit %d is on Ethereum but not credited yet (it needs a finalized block): check later with `ogpu query bridge`", nonce)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestnetLauncher returns a node.TestnetOptions.Bridge hook that launches
// the bridge on the Ethereum node at rpcURL with deployer (LaunchBridge,
// DefaultLimits), and the launch it made once the hook ran. close releases
// the connection.
func TestnetLauncher(ctx context.Context, rpcURL string, deployer *ecdsa.PrivateKey, chainID string) (func(*bridge.Valset, *uint256.Int) (*genesis.BridgeParams, error), func() *Launch, func(), error) {
	eth, err := ethclient.DialContext(ctx, rpcURL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cannot reach the Ethereum node at %s: %w", rpcURL, err)
	}
	var launch *Launch
	hook := func(vs *bridge.Valset, onAppChain *uint256.Int) (*genesis.BridgeParams, error) {
		l, err := LaunchBridge(ctx, eth, deployer, chainID, vs, onAppChain, DefaultLimits())
		if err != nil {
			return nil, err
		}
		launch = l
		return l.Params, nil
	}
	return hook, func() *Launch { return launch }, eth.Close, nil
}
