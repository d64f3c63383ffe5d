package node

import (
	"crypto/ecdsa"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	cmtcfg "github.com/cometbft/cometbft/config"
	cmtcrypto "github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	cmttypes "github.com/cometbft/cometbft/types"
	cmttime "github.com/cometbft/cometbft/types/time"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
)

// TestnetNode describes one validator home of a generated testnet.
type TestnetNode struct {
	Home    string `json:"home"`
	Moniker string `json:"moniker"`
	NodeID  string `json:"node_id"`
	P2P     string `json:"p2p_laddr"`
	RPC     string `json:"rpc_laddr"`
}

// genTxFee pays for a create-validator genesis transaction (about 35,000
// gas at the default 1 gwei).
var genTxFee = types.OGPU(1)

// TestnetOptions describe a testnet to generate.
type TestnetOptions struct {
	Out, ChainID string
	Validators   int
	// Port: node i uses P2P port Port+10i and RPC port Port+10i+1.
	Port   int
	Commit time.Duration
	// MaxBlockGas, when not 0, is genesis.json's
	// consensus_params.block.max_gas (-1: the app's MaxBlockGas), for a
	// load testnet whose blocks should hold more than the default.
	MaxBlockGas int64
	// Genesis is the app_state to start from (accounts, params); the
	// validators are added to it.
	Genesis *genesis.Doc
	// Bridge, when set, is called once the validators' keys exist with
	// the valset the chain will compute at genesis (every validator gets a
	// bridge key, registered by a genesis transaction): it deploys the
	// Ethereum contract with that set and returns the params naming it.
	// onAppChain is what the genesis allocates outside the bridge
	// reserve: the amount to lock in the contract before launch.
	Bridge func(valset0 *bridge.Valset, onAppChain *uint256.Int) (*genesis.BridgeParams, error)
}

// BridgeKeyFile is where a validator's bridge key (hex secp256k1) lives.
func BridgeKeyFile(home string) string { return filepath.Join(home, "config", "bridge_key.hex") }

// LoadBridgeKey reads the validator's bridge key.
func LoadBridgeKey(home string) (*ecdsa.PrivateKey, error) { return ReadHexKey(BridgeKeyFile(home)) }

// GenerateTestnet writes validator homes that share one genesis and peer
// with each other on loopback.
func GenerateTestnet(o TestnetOptions) ([]TestnetNode, error) {
	var (
		nodes []TestnetNode
		confs []*cmtcfg.Config
		ws    []bridge.Weighted
	)
	out, chainID, n, port, commit, doc := o.Out, o.ChainID, o.Validators, o.Port, o.Commit, o.Genesis
	if o.MaxBlockGas < -1 {
		return nil, fmt.Errorf("max block gas %d: want -1 (the default of %d) or a positive limit", o.MaxBlockGas, MaxBlockGas)
	}
	for i := 0; i < n; i++ {
		home := filepath.Join(out, fmt.Sprintf("node%d", i))
		conf := DefaultConfig(home)
		conf.Moniker = fmt.Sprintf("node%d", i)
		conf.P2P.ListenAddress = fmt.Sprintf("tcp://127.0.0.1:%d", port+10*i)
		conf.RPC.ListenAddress = fmt.Sprintf("tcp://127.0.0.1:%d", port+10*i+1)
		conf.Consensus.TimeoutCommit = commit
		cmtcfg.EnsureRoot(home)
		nk, err := p2p.LoadOrGenNodeKey(conf.NodeKeyFile())
		if err != nil {
			return nil, err
		}
		pv, err := privval.GenFilePV(conf.PrivValidatorKeyFile(), conf.PrivValidatorStateFile(), func() (cmtcrypto.PrivKey, error) { return ed25519.GenPrivKey(), nil })
		if err != nil {
			return nil, err
		}
		pv.Save()
		pub, err := pv.GetPubKey()
		if err != nil {
			return nil, err
		}
		// Each validator gets an operator key, funds for its self-bond and
		// fees, and a signed create-validator genesis transaction: the
		// validator set is what those transactions bond.
		opKey, err := crypto.GenerateKey()
		if err != nil {
			return nil, err
		}
		if err := WriteHexKey(OperatorKeyFile(home), opKey); err != nil {
			return nil, err
		}
		op := crypto.PubkeyToAddress(opKey.PublicKey)
		bond := new(uint256.Int).Mul(doc.Params.Staking.MinValidatorStake, uint256.NewInt(10))
		if err := doc.AddAccount(op, new(uint256.Int).Add(bond, OperatorFunds)); err != nil {
			return nil, err
		}
		msg := &escrow.MsgCreateValidator{Name: conf.Moniker, PubKey: pub.Bytes(), SelfBond: bond}
		if err := addGenTx(doc, opKey, chainID, 0, msg.Raw()); err != nil {
			return nil, err
		}
		if o.Bridge != nil {
			bk, err := crypto.GenerateKey()
			if err != nil {
				return nil, err
			}
			if err := WriteHexKey(BridgeKeyFile(home), bk); err != nil {
				return nil, err
			}
			baddr := crypto.PubkeyToAddress(bk.PublicKey)
			proof, err := bridge.ProveKey(bk, chainID, op)
			if err != nil {
				return nil, err
			}
			if err := addGenTx(doc, opKey, chainID, 1, (&bridge.MsgSetBridgeKey{Key: baddr, Proof: proof}).Raw()); err != nil {
				return nil, err
			}
			ws = append(ws, bridge.Weighted{Addr: baddr, Power: uint64(doc.Params.Staking.Power(bond))})
		}
		confs = append(confs, conf)
		nodes = append(nodes, TestnetNode{Home: home, Moniker: conf.Moniker, NodeID: string(nk.ID()), P2P: conf.P2P.ListenAddress, RPC: conf.RPC.ListenAddress})
	}
	if o.Bridge != nil {
		vs, _ := bridge.NewValset(0, ws)
		reserve, err := doc.BridgeReserve()
		if err != nil {
			return nil, err
		}
		bp, err := o.Bridge(vs, new(uint256.Int).Sub(types.MaxSupply, reserve))
		if err != nil {
			return nil, fmt.Errorf("bridge: %w", err)
		}
		doc.Params.Bridge = bp
	}
	gen := &cmttypes.GenesisDoc{
		GenesisTime:     cmttime.Now(),
		ChainID:         chainID,
		InitialHeight:   1,
		ConsensusParams: DefaultConsensusParams(),
	}
	if o.MaxBlockGas != 0 {
		gen.ConsensusParams.Block.MaxGas = o.MaxBlockGas
	}
	for i, conf := range confs {
		var peers []string
		for j, nd := range nodes {
			if j != i {
				peers = append(peers, fmt.Sprintf("%s@127.0.0.1:%d", nd.NodeID, port+10*j))
			}
		}
		conf.P2P.PersistentPeers = strings.Join(peers, ",")
		cmtcfg.WriteConfigFile(filepath.Join(conf.RootDir, "config", "config.toml"), conf)
		g := *gen
		if err := WriteGenesis(conf.GenesisFile(), &g, doc); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// addGenTx signs msg from key with nonce and appends it to doc's gen_txs.
func addGenTx(doc *genesis.Doc, key *ecdsa.PrivateKey, chainID string, nonce uint64, msg types.RawMsg) error {
	tx := &types.Tx{Body: types.TxBody{ChainID: chainID, Nonce: nonce, Fee: genTxFee, Msgs: []types.RawMsg{msg}}}
	if err := tx.Sign(key); err != nil {
		return err
	}
	bz, err := tx.Encode()
	if err != nil {
		return err
	}
	doc.GenTxs = append(doc.GenTxs, bz)
	return nil
}
