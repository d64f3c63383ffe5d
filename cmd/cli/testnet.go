package cli

import (
	"encoding/hex"
	"fmt"
	"os"
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
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node"
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

func newTestnetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "testnet",
		Short: "Generate homes for a multi-validator network on loopback",
		Long: `Generate one home per validator under --output, sharing one genesis, with
persistent peers between them on loopback ports. Start each with
  ogpud start --home DIR/nodeI`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, _ := cmd.Flags().GetInt("validators")
			out, _ := cmd.Flags().GetString("output")
			chainID, _ := cmd.Flags().GetString("chain-id")
			port, _ := cmd.Flags().GetInt("starting-port")
			accounts, _ := cmd.Flags().GetStringArray("account")
			commit, _ := cmd.Flags().GetDuration("timeout-commit")
			if n < 1 || n > 64 {
				return fmt.Errorf("--validators %d: want 1..64", n)
			}
			out = expandHome(out)
			if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
				return fmt.Errorf("%s is not empty: choose another --output or remove it", out)
			}
			doc := genesis.Default()
			for _, a := range accounts {
				addrS, amtS, ok := strings.Cut(a, "=")
				if !ok {
					return fmt.Errorf("--account %q: want ADDRESS=AMOUNT", a)
				}
				addr, err := types.ParseAddress(addrS)
				if err != nil {
					return err
				}
				amt, err := types.ParseAmount(amtS)
				if err != nil {
					return err
				}
				if err := doc.AddAccount(addr, amt); err != nil {
					return err
				}
			}
			nodes, err := GenerateTestnet(out, chainID, n, port, commit, doc)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "testnet %s: %d validators in %s\n", chainID, n, out)
			for _, nd := range nodes {
				fmt.Fprintf(w, "  ogpud start --home %s    # %s, rpc %s\n", nd.Home, nd.Moniker, nd.RPC)
			}
			return nil
		},
	}
	cmd.Flags().Int("validators", 4, "number of validators")
	cmd.Flags().String("output", "./testnet", "directory for the validator homes")
	cmd.Flags().String("chain-id", "ogpu-testnet", "chain id")
	cmd.Flags().Int("starting-port", 26656, "node i uses P2P port starting-port+10i and RPC port starting-port+10i+1")
	cmd.Flags().StringArray("account", nil, "genesis allocation ADDRESS=AMOUNT (repeatable)")
	cmd.Flags().Duration("timeout-commit", 500*time.Millisecond, "time between blocks")
	return cmd
}

// genTxFee pays for a create-validator genesis transaction (about 35,000
// gas at the default 1 gwei).
var genTxFee = types.OGPU(1)

// GenerateTestnet writes n validator homes under out that share one genesis
// with app_state doc and peer with each other on loopback.
func GenerateTestnet(out, chainID string, n, port int, commit time.Duration, doc *genesis.Doc) ([]TestnetNode, error) {
	var (
		nodes []TestnetNode
		confs []*cmtcfg.Config
	)
	for i := 0; i < n; i++ {
		home := filepath.Join(out, fmt.Sprintf("node%d", i))
		conf := node.DefaultConfig(home)
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
		if err := os.WriteFile(node.OperatorKeyFile(home), []byte(hex.EncodeToString(crypto.FromECDSA(opKey))+"\n"), 0o600); err != nil {
			return nil, err
		}
		op := crypto.PubkeyToAddress(opKey.PublicKey)
		bond := new(uint256.Int).Mul(doc.Params.Staking.MinValidatorStake, uint256.NewInt(10))
		if err := doc.AddAccount(op, new(uint256.Int).Add(bond, node.OperatorFunds)); err != nil {
			return nil, err
		}
		msg := &escrow.MsgCreateValidator{Name: conf.Moniker, PubKey: pub.Bytes(), SelfBond: bond}
		tx := &types.Tx{Body: types.TxBody{ChainID: chainID, Nonce: 0, Fee: genTxFee, Msgs: []types.RawMsg{msg.Raw()}}}
		if err := tx.Sign(opKey); err != nil {
			return nil, err
		}
		bz, err := tx.Encode()
		if err != nil {
			return nil, err
		}
		doc.GenTxs = append(doc.GenTxs, bz)
		confs = append(confs, conf)
		nodes = append(nodes, TestnetNode{Home: home, Moniker: conf.Moniker, NodeID: string(nk.ID()), P2P: conf.P2P.ListenAddress, RPC: conf.RPC.ListenAddress})
	}
	gen := &cmttypes.GenesisDoc{
		GenesisTime:     cmttime.Now(),
		ChainID:         chainID,
		InitialHeight:   1,
		ConsensusParams: node.DefaultConsensusParams(),
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
		if err := node.WriteGenesis(conf.GenesisFile(), &g, doc); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}
