package ethbridge

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// Launch is a bridge deployed for a new app-chain.
type Launch struct {
	Token, Bridge common.Address
	// Block is the bridge's deployment block (the watchers' StartBlock).
	Block uint64
	// Params name the deployment in the app-chain's genesis.
	Params *genesis.BridgeParams
}

// DefaultLimits suit a devnet or testnet: 1M oGPU may leave per 24 h at
// once, withdrawals of 100,000 oGPU or more wait an hour, valset updates
// moving more than a third of the power wait a day.
func DefaultLimits() Limits {
	return Limits{OutflowCap: types.OGPU(1_000_000), LargeWithdrawal: types.OGPU(100_000), WithdrawalDelay: time.Hour, ValsetDelay: 24 * time.Hour}
}

// LaunchBridge deploys the token (the whole supply to key's account) and
// the bridge for app-chain appChainID with valset0 (the set the chain will
// compute at genesis: bridge.NewValset over the genesis validators' bridge
// keys), then does the genesis reconciliation: it moves onAppChain, every
// oGPU the app-chain's genesis allocates outside its bridge reserve, into
// the bridge with a plain transfer (no deposit: nothing to credit), so
// that no token is counted on both chains. key owns the token and is the
// guardian; a real launch hands both to a multisig afterwards.
func LaunchBridge(ctx context.Context, c Client, key *ecdsa.PrivateKey, appChainID string, valset0 *bridge.Valset, onAppChain *uint256.Int, limits Limits) (*Launch, error) {
	me := crypto.PubkeyToAddress(key.PublicKey)
	id, err := c.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	token, err := DeployToken(ctx, c, key, me, me)
	if err != nil {
		return nil, err
	}
	addr, block, err := DeployBridge(ctx, c, key, token, appChainID, *valset0, me, limits)
	if err != nil {
		return nil, err
	}
	if onAppChain.Sign() > 0 {
		s, err := newSender(ctx, c, 0, 0)
		if err != nil {
			return nil, err
		}
		if _, err := s.send(ctx, key, &token, "transfer", tokenABI.PackTransfer(addr, onAppChain.ToBig())); err != nil {
			return nil, fmt.Errorf("genesis reconciliation (lock %s in the bridge): %w", types.FormatAmount(onAppChain), err)
		}
	}
	p := genesis.DefaultBridgeParams()
	p.EthChainID, p.Contract, p.StartBlock = id.Uint64(), addr, block
	return &Launch{Token: token, Bridge: addr, Block: block, Params: &p}, nil
}
