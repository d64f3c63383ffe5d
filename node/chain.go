// Package node is the off-chain side of an oGPU node: it embeds CometBFT with
// the chain application in-process, lays out node home directories, and
// (in later work) runs the provider, client and validator agents.
package node

import (
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtcfg "github.com/cometbft/cometbft/config"
	cmtcrypto "github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/libs/log"
	nm "github.com/cometbft/cometbft/node"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	cmttypes "github.com/cometbft/cometbft/types"
	cmttime "github.com/cometbft/cometbft/types/time"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node/statesync"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// StateDBName is the application state database under the node's data dir.
const StateDBName = "ogpu-state"

// DefaultConfig is CometBFT's default node configuration with the block
// timing oGPU uses: a block about every second.
func DefaultConfig(home string) *cmtcfg.Config {
	c := cmtcfg.DefaultConfig()
	c.SetRoot(home)
	c.Consensus.TimeoutPropose = time.Second
	c.Consensus.TimeoutCommit = 500 * time.Millisecond
	c.P2P.AllowDuplicateIP = true // several validators on one host (testnet)
	c.P2P.AddrBookStrict = false
	c.LogLevel = "error"
	return c
}

// InitOptions describe a new node home.
type InitOptions struct {
	Home    string
	ChainID string
	Moniker string
	// Genesis is the app_state; nil means genesis.Default().
	Genesis *genesis.Doc
	// Config overrides DefaultConfig when set; its root is set to Home.
	Config *cmtcfg.Config
	// When Genesis has no validators and no gen_txs, InitHome makes this
	// node the genesis validator: Operator is its operator account (zero:
	// generate a key, fund it with OperatorFunds for fees, and write it to
	// OperatorKeyFile for `ogpu keys import NAME FILE --private-key`), and
	// SelfBond its stake (nil: 10 × params.staking.min_validator_stake).
	Operator types.Address
	SelfBond *uint256.Int
}

// OperatorFunds is the balance InitHome gives a generated operator key.
var OperatorFunds = types.OGPU(100)

// OperatorKeyFile is where InitHome writes a generated operator key.
func OperatorKeyFile(home string) string { return filepath.Join(home, "config", "operator_key.hex") }

// LoadOperatorKey reads the operator key InitHome generated.
func LoadOperatorKey(home string) (*ecdsa.PrivateKey, error) {
	return ReadHexKey(OperatorKeyFile(home))
}

// ReadHexKey reads a file holding a hex secp256k1 private key (operator,
// bridge, relayer and deployer keys are kept so).
func ReadHexKey(path string) (*ecdsa.PrivateKey, error) {
	bz, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := crypto.HexToECDSA(strings.TrimSpace(string(bz)))
	if err != nil {
		return nil, fmt.Errorf("%s: not a hex secp256k1 key: %w", path, err)
	}
	return k, nil
}

// WriteHexKey writes key to path (0600) as ReadHexKey reads it.
func WriteHexKey(path string, key *ecdsa.PrivateKey) error {
	return os.WriteFile(path, []byte(hex.EncodeToString(crypto.FromECDSA(key))+"\n"), 0o600)
}

// InitHome writes a node home: config/config.toml, the node key, the
// validator key and a genesis.json in which this node is the sole validator.
// It refuses to overwrite an existing genesis.
func InitHome(o InitOptions) (*cmtcfg.Config, error) {
	if o.ChainID == "" {
		return nil, errors.New("chain id is empty: pass --chain-id")
	}
	conf := o.Config
	if conf == nil {
		conf = DefaultConfig(o.Home)
	}
	conf.SetRoot(o.Home)
	if o.Moniker != "" {
		conf.Moniker = o.Moniker
	}
	if _, err := os.Stat(conf.GenesisFile()); err == nil {
		return nil, fmt.Errorf("%s already exists: choose another --home or remove it", conf.GenesisFile())
	}
	cmtcfg.EnsureRoot(o.Home)
	cmtcfg.WriteConfigFile(filepath.Join(o.Home, "config", "config.toml"), conf)
	if _, err := p2p.LoadOrGenNodeKey(conf.NodeKeyFile()); err != nil {
		return nil, fmt.Errorf("cannot create node key: %w", err)
	}
	pv, err := privval.LoadOrGenFilePV(conf.PrivValidatorKeyFile(), conf.PrivValidatorStateFile(), func() (cmtcrypto.PrivKey, error) { return ed25519.GenPrivKey(), nil })
	if err != nil {
		return nil, fmt.Errorf("cannot create validator key: %w", err)
	}
	pub, err := pv.GetPubKey()
	if err != nil {
		return nil, err
	}
	doc := o.Genesis
	if doc == nil {
		doc = genesis.Default()
	}
	if len(doc.Validators) == 0 && len(doc.GenTxs) == 0 {
		operator := o.Operator
		if operator == (types.Address{}) {
			key, err := crypto.GenerateKey()
			if err != nil {
				return nil, err
			}
			if err := WriteHexKey(OperatorKeyFile(o.Home), key); err != nil {
				return nil, fmt.Errorf("cannot write the operator key: %w", err)
			}
			operator = crypto.PubkeyToAddress(key.PublicKey)
			if err := doc.AddAccount(operator, OperatorFunds); err != nil {
				return nil, err
			}
		}
		bond := o.SelfBond
		if bond == nil {
			bond = new(uint256.Int).Mul(doc.Params.Staking.MinValidatorStake, uint256.NewInt(10))
		}
		doc.Validators = append(doc.Validators, genesis.Validator{Name: conf.Moniker, Operator: operator, PubKey: pub.Bytes(), Stake: bond})
	}
	// The validator set follows from the app_state's stakes: InitChain
	// returns it, so genesis.json lists none.
	gen := &cmttypes.GenesisDoc{
		GenesisTime:     cmttime.Now(),
		ChainID:         o.ChainID,
		InitialHeight:   1,
		ConsensusParams: DefaultConsensusParams(),
	}
	if err := WriteGenesis(conf.GenesisFile(), gen, doc); err != nil {
		return nil, err
	}
	return conf, nil
}

// ReadGenesis reads genesis.json and its app_state.
func ReadGenesis(path string) (*cmttypes.GenesisDoc, *genesis.Doc, error) {
	gen, err := cmttypes.GenesisDocFromFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read genesis: %w", err)
	}
	doc, err := genesis.Parse(gen.AppState)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return gen, doc, nil
}

// DefaultConsensusParams are CometBFT's defaults with the evidence max age
// below the default unbonding period (genesis.CheckEvidenceAge): evidence
// must not outlive the stake it would slash. Block max_gas is -1: CometBFT
// then hands the proposer its whole mempool (up to max_bytes) instead of a
// first-come prefix, and the app enforces MaxBlockGas itself, taking
// deadline messages and higher fees first (S1, chain/mempool.go).
func DefaultConsensusParams() *cmttypes.ConsensusParams {
	p := cmttypes.DefaultConsensusParams()
	p.Evidence.MaxAgeNumBlocks = genesis.DefaultEvidenceMaxAgeBlocks
	p.Evidence.MaxAgeDuration = genesis.DefaultEvidenceMaxAgeDuration
	p.Block.MaxGas = -1
	return p
}

// MaxBlockGas is the block gas limit the app enforces (PrepareProposal,
// ProcessProposal) when genesis.json's consensus_params.block.max_gas is -1,
// as DefaultConsensusParams writes: CometBFT's former default.
const MaxBlockGas = 10_000_000

// blockSpaceOptions configure the app's block-space policies (S1) from the
// node's mempool config and the genesis block limits: the admission policy
// for a mempool of conf's size, and the block gas limit (genesis max_gas
// when set, which CometBFT then also applies first-come, else MaxBlockGas).
func blockSpaceOptions(conf *cmtcfg.Config) ([]chain.Option, error) {
	gen, err := cmttypes.GenesisDocFromFile(conf.GenesisFile())
	if err != nil {
		return nil, fmt.Errorf("cannot read genesis: %w", err)
	}
	block := cmttypes.DefaultConsensusParams().Block
	if gen.ConsensusParams != nil {
		block = gen.ConsensusParams.Block
	}
	reap := conf.Mempool.MaxTxsBytes
	if block.MaxBytes > 0 {
		reap = min(reap, block.MaxBytes)
	}
	gas := uint64(MaxBlockGas)
	if block.MaxGas > 0 {
		gas = uint64(block.MaxGas)
	}
	return []chain.Option{
		chain.WithMempool(chain.MempoolLimits{Txs: conf.Mempool.Size, Bytes: reap}),
		chain.WithMaxBlockGas(gas),
		ProposalBudget(conf),
	}, nil
}

// ProposalBudget is the app's PrepareProposal time budget for conf: half
// of timeout_propose, so that the proposal leaves in time with the rest
// of the round's work (chain.WithProposalBudget).
func ProposalBudget(conf *cmtcfg.Config) chain.Option {
	return chain.WithProposalBudget(conf.Consensus.TimeoutPropose/2, time.Now)
}

// WriteGenesis validates doc and writes it as gen's app_state to path.
func WriteGenesis(path string, gen *cmttypes.GenesisDoc, doc *genesis.Doc) error {
	if err := doc.Validate(); err != nil {
		return err
	}
	if gen.ConsensusParams == nil {
		gen.ConsensusParams = DefaultConsensusParams()
	}
	// The beacon's reveals and the bridge's attestations travel in vote
	// extensions (chain/voteext.go): on from the first height.
	if gen.ConsensusParams.Feature.VoteExtensionsEnableHeight == 0 {
		gen.ConsensusParams.Feature.VoteExtensionsEnableHeight = max(gen.InitialHeight, 1)
	}
	if err := doc.Params.Staking.CheckEvidenceAge(gen.ConsensusParams.Evidence.MaxAgeNumBlocks); err != nil {
		return err
	}
	bz, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	gen.AppState = bz
	if err := gen.ValidateAndComplete(); err != nil {
		return fmt.Errorf("invalid genesis: %w", err)
	}
	return gen.SaveAs(path)
}

// ChainNode is a running CometBFT node with the oGPU app in-process.
type ChainNode struct {
	*nm.Node
	App   *chain.App
	tree  *store.Tree
	snaps *statesync.Store
}

// StartChainNode opens the app state under conf's data dir and starts
// CometBFT with the app behind a local client. CometBFT's handshake replays
// any blocks the app missed, so a node stopped at any point resumes.
func StartChainNode(ctx context.Context, conf *cmtcfg.Config, logger log.Logger, opts ...chain.Option) (*ChainNode, error) {
	return StartChainNodeWrapped(ctx, conf, logger, nil, opts...)
}

// AppWrapper wraps the application CometBFT calls, outside the state
// machine: it may time calls (metrics.TimeFinalizeBlock), it must pass
// every request and answer through unchanged.
type AppWrapper func(abci.Application) abci.Application

// StartChainNodeWrapped is StartChainNode with wrap (nil: none) between
// CometBFT and the app. ChainNode.App stays the app itself.
func StartChainNodeWrapped(ctx context.Context, conf *cmtcfg.Config, logger log.Logger, wrap AppWrapper, opts ...chain.Option) (*ChainNode, error) {
	return StartChainNodeWith(ctx, conf, logger, StartOptions{Wrap: wrap}, opts...)
}

// StartOptions are what a node runs beside the app.
type StartOptions struct {
	// Wrap (nil: none) sits between CometBFT and the app.
	Wrap AppWrapper
	// Snapshots: when the node takes state sync snapshots, under
	// data/snapshots (Interval 0: none taken; those on disk are served).
	Snapshots statesync.Options
}

// StartChainNodeWith is StartChainNode with o.
func StartChainNodeWith(ctx context.Context, conf *cmtcfg.Config, logger log.Logger, o StartOptions, opts ...chain.Option) (*ChainNode, error) {
	if err := conf.ValidateBasic(); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	if _, err := os.Stat(conf.GenesisFile()); err != nil {
		return nil, fmt.Errorf("no genesis at %s: run `ogpud init --home %s` first", conf.GenesisFile(), conf.RootDir)
	}
	tree, err := store.OpenTree(conf.DBDir(), StateDBName)
	if err != nil {
		return nil, err
	}
	space, err := blockSpaceOptions(conf)
	if err != nil {
		tree.Close()
		return nil, err
	}
	snaps, err := statesync.Open(filepath.Join(conf.DBDir(), "snapshots"), tree, o.Snapshots, logger.With("module", "snapshots"))
	if err != nil {
		tree.Close()
		return nil, err
	}
	// The node's beacon seed, for its consensus key: used only while that
	// key is a validator's (package beacon).
	pv := privval.LoadFilePV(conf.PrivValidatorKeyFile(), conf.PrivValidatorStateFile())
	seed, err := OpenBeaconSeed(filepath.Join(conf.DBDir(), BeaconSeedFile), pv.Key.PubKey.Bytes(), logger.With("module", "beacon"))
	if err != nil {
		snaps.Close()
		tree.Close()
		return nil, err
	}
	opts = append(append([]chain.Option{chain.WithLogger(logger.With("module", "app")), chain.WithSnapshots(snaps), chain.WithBeacon(seed)}, space...), opts...)
	app := chain.NewApp(tree, opts...)
	fail := func(err error) (*ChainNode, error) {
		snaps.Close()
		tree.Close()
		return nil, err
	}
	nodeKey, err := p2p.LoadNodeKey(conf.NodeKeyFile())
	if err != nil {
		return fail(fmt.Errorf("cannot load node key: %w", err))
	}
	var served abci.Application = app
	if o.Wrap != nil {
		served = o.Wrap(app)
	}
	n, err := nm.NewNode(ctx, conf, pv, nodeKey, NewClientCreator(served, app.PreverifyTx),
		nm.DefaultGenesisDocProviderFunc(conf), cmtcfg.DefaultDBProvider,
		nm.DefaultMetricsProvider(conf.Instrumentation), logger)
	if err != nil {
		return fail(fmt.Errorf("cannot create node: %w", err))
	}
	if err := n.Start(); err != nil {
		return fail(fmt.Errorf("cannot start node: %w", err))
	}
	return &ChainNode{Node: n, App: app, tree: tree, snaps: snaps}, nil
}

// Close stops the node and closes the state database.
func (n *ChainNode) Close() error {
	var errs []error
	if n.Node.IsRunning() {
		if err := n.Node.Stop(); err != nil {
			errs = append(errs, err)
		}
		n.Node.Wait()
	}
	n.snaps.Close() // a snapshot being taken reads the tree
	errs = append(errs, n.tree.Close())
	return errors.Join(errs...)
}

// FreePort returns a TCP port free on loopback now. Another process may
// take it before the caller listens; callers use it for tests and devnets.
// It draws from below the kernel's ephemeral range (32768-60999 on Linux):
// a port the kernel hands out with ":0" is also what it hands the next
// outgoing connection, which took a node's RPC port from under it in
// parallel test runs ("bind: address already in use"). It falls back to
// the kernel's choice when the draws find nothing free.
func FreePort() (int, error) {
	for range 64 {
		port := freePortLow + rand.IntN(freePortSpan)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeTestnetBase returns a port p such that the ports `ogpud testnet
// --starting-port p` gives n nodes (node i: P2P p+10i, RPC p+10i+1) are
// all free on loopback now.
func FreeTestnetBase(n int) (int, error) {
	for range 50 {
		base, err := FreePort()
		if err != nil || base+10*n+2 > 65535 {
			continue
		}
		ok := true
		for i := 0; i < n && ok; i++ {
			for _, port := range []int{base + 10*i, base + 10*i + 1} {
				l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil {
					ok = false
					break
				}
				l.Close()
			}
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("no free range of testnet ports on loopback")
}

// FreePort draws from [freePortLow, freePortLow+freePortSpan).
const (
	freePortLow  = 20_000
	freePortSpan = 12_000
)

// LocalConfig returns DefaultConfig for a single-process node under home that
// listens on free loopback ports and makes blocks every blockTime.
func LocalConfig(home string, blockTime time.Duration) (*cmtcfg.Config, error) {
	conf := DefaultConfig(home)
	rpcPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	p2pPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	conf.RPC.ListenAddress = fmt.Sprintf("tcp://127.0.0.1:%d", rpcPort)
	conf.P2P.ListenAddress = fmt.Sprintf("tcp://127.0.0.1:%d", p2pPort)
	conf.Consensus.TimeoutPropose = 2 * blockTime
	conf.Consensus.TimeoutCommit = blockTime
	return conf, nil
}
