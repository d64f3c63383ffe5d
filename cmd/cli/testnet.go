package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/node/ethbridge"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

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
			maxGas, _ := cmd.Flags().GetInt64("max-block-gas")
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
			o := node.TestnetOptions{Out: out, ChainID: chainID, Validators: n, Port: port, Commit: commit, Genesis: doc, MaxBlockGas: maxGas}
			ethRPC, _ := cmd.Flags().GetString("bridge-eth-rpc")
			launched := func() *ethbridge.Launch { return nil }
			if ethRPC != "" {
				keyFile, _ := cmd.Flags().GetString("bridge-deployer-key")
				key, err := node.ReadHexKey(keyFile)
				if err != nil {
					return fmt.Errorf("--bridge-deployer-key: %w", err)
				}
				hook, got, closeEth, err := ethbridge.TestnetLauncher(cmd.Context(), ethRPC, key, chainID)
				if err != nil {
					return err
				}
				defer closeEth()
				o.Bridge, launched = hook, got
			}
			nodes, err := node.GenerateTestnet(o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "testnet %s: %d validators in %s\n", chainID, n, out)
			if launch := launched(); launch != nil {
				fmt.Fprintf(w, "bridge: token %s, bridge %s (block %d) on Ethereum chain %d; valset 0 of %d bridge keys; start each validator with --eth-rpc URL\n",
					launch.Token, launch.Bridge, launch.Block, launch.Params.EthChainID, n)
			}
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
	cmd.Flags().Int64("max-block-gas", 0, fmt.Sprintf("genesis consensus_params.block.max_gas (0: the default, -1, which the app reads as %d); a load testnet may raise it", node.MaxBlockGas))
	cmd.Flags().String("bridge-eth-rpc", "", "deploy the oGPU token and bridge on this Ethereum node (JSON-RPC URL) and turn the bridge on; each validator gets a bridge key")
	cmd.Flags().String("bridge-deployer-key", "", "with --bridge-eth-rpc: file with the hex key that deploys, owns the token (holding the supply not locked in the bridge) and guards the bridge")
	return cmd
}
