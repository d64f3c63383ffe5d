package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	cmtcfg "github.com/cometbft/cometbft/config"
	cmtflags "github.com/cometbft/cometbft/libs/cli/flags"
	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/console"
	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/ethbridge"
	"github.com/ogpu-network/ogpu/node/statesync"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// NewOgpudCommand returns the ogpud root command.
func NewOgpudCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "ogpud",
		Short:         "oGPU node: the chain, node homes, testnets and the devnet",
		SilenceUsage:  true,
		SilenceErrors: false,
		Version:       chain.Version,
	}
	root.PersistentFlags().String("home", "~/.ogpud", "node home directory")
	root.AddCommand(newInitCmd(), newGenesisCmd(), newStartCmd(), newExportCmd(), newTestnetCmd(), newDevnetCmd(), newProviderCmd(), newOgpudBridgeCmd(), newConsoleCmd(), newLoadgenCmd())
	return root
}

func homeFlag(cmd *cobra.Command) string {
	h, _ := cmd.Flags().GetString("home")
	return expandHome(h)
}

func newInitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a node home: config.toml, node and validator keys, genesis.json",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			chainID, _ := cmd.Flags().GetString("chain-id")
			moniker, _ := cmd.Flags().GetString("moniker")
			home := homeFlag(cmd)
			opts := node.InitOptions{Home: home, ChainID: chainID, Moniker: moniker}
			if op, _ := cmd.Flags().GetString("operator"); op != "" {
				addr, err := types.ParseAddress(op)
				if err != nil {
					return fmt.Errorf("--operator: %w (give the 0x address of the validator operator's key, from `ogpu keys show NAME`)", err)
				}
				opts.Operator = addr
			}
			if b, _ := cmd.Flags().GetString("self-bond"); b != "" {
				amt, err := types.ParseAmount(b)
				if err != nil {
					return fmt.Errorf("--self-bond: %w", err)
				}
				opts.SelfBond = amt
			}
			conf, err := node.InitHome(opts)
			if err != nil {
				return err
			}
			res := map[string]string{"home": home, "chain_id": chainID, "moniker": conf.Moniker, "genesis": conf.GenesisFile()}
			keyFile := node.OperatorKeyFile(home)
			generated := false
			if _, err := os.Stat(keyFile); err == nil && opts.Operator == (types.Address{}) {
				generated = true
				res["operator_key_file"] = keyFile
			}
			return output(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "initialized node %q for chain %s in %s\n", conf.Moniker, chainID, home)
				if generated {
					fmt.Fprintf(w, "the genesis validator's operator key was generated in %s (funded for fees)\n", keyFile)
					fmt.Fprintf(w, "import it into the wallet with: ogpu keys import validator %s --private-key\n", keyFile)
				}
				fmt.Fprintf(w, "next: ogpud genesis add-account ADDRESS AMOUNT --home %s; ogpud start --home %s\n", home, home)
			})
		},
	}
	cmd.Flags().String("chain-id", "", "chain id (required)")
	cmd.Flags().StringP("output", "o", "text", "output format: text or json")
	cmd.Flags().String("moniker", "ogpu-node", "node name")
	cmd.Flags().String("operator", "", "operator address of the genesis validator (default: generate a key in config/operator_key.hex)")
	cmd.Flags().String("self-bond", "", "stake of the genesis validator, e.g. 10000ogpu (default: 10 × params.staking.min_validator_stake)")
	_ = cmd.MarkFlagRequired("chain-id")
	return cmd
}

func newGenesisCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "genesis", Short: "Edit the genesis file of a node home"}
	add := &cobra.Command{
		Use:   "add-account ADDRESS AMOUNT",
		Short: "Allocate AMOUNT (e.g. 1000ogpu) to ADDRESS in genesis.json",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := types.ParseAddress(args[0])
			if err != nil {
				return err
			}
			amt, err := types.ParseAmount(args[1])
			if err != nil {
				return err
			}
			path := filepath.Join(homeFlag(cmd), "config", "genesis.json")
			gen, doc, err := node.ReadGenesis(path)
			if err != nil {
				return err
			}
			if err := doc.AddAccount(addr, amt); err != nil {
				return err
			}
			if err := node.WriteGenesis(path, gen, doc); err != nil {
				return err
			}
			return output(cmd, map[string]string{"address": addr.Hex(), "added": amt.Dec()}, func(w io.Writer) {
				fmt.Fprintf(w, "added %s to %s in %s\n", types.FormatAmount(amt), addr.Hex(), path)
			})
		},
	}
	add.Flags().StringP("output", "o", "text", "output format: text or json")
	cmd.AddCommand(add)
	return cmd
}

// startFlags are CometBFT's usual node flags; each is also a key of
// config.toml and an OGPU_* environment variable.
func addStartFlags(cmd *cobra.Command) {
	d := cmtcfg.DefaultConfig()
	f := cmd.Flags()
	f.String("moniker", d.Moniker, "node name")
	f.String("log_level", "info", "log level, e.g. info, error, consensus:debug,*:error")
	f.String("rpc.laddr", d.RPC.ListenAddress, "RPC listen address")
	f.String("p2p.laddr", d.P2P.ListenAddress, "P2P listen address")
	f.String("p2p.external_address", "", "address to advertise to peers")
	f.String("p2p.seeds", "", "comma-separated ID@host:port seed nodes")
	f.String("p2p.persistent_peers", "", "comma-separated ID@host:port persistent peers")
	f.Bool("p2p.pex", d.P2P.PexReactor, "enable peer exchange")
	f.Bool("consensus.create_empty_blocks", d.Consensus.CreateEmptyBlocks, "produce blocks without transactions")
	f.Duration("consensus.timeout_commit", 0, "wait after a commit before the next height (0: keep the config file's)")
	f.String("proxy_app", "", "ignored: the application always runs in-process")
}

// loadNodeConfig reads HOME/config/config.toml and applies flags and OGPU_*
// environment variables on top.
func loadNodeConfig(cmd *cobra.Command, home string) (*cmtcfg.Config, error) {
	v := viper.New()
	path := filepath.Join(home, "config", "config.toml")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no config at %s: run `ogpud init --home %s --chain-id ID` first", path, home)
	}
	if err := bindViper(cmd, v, path); err != nil {
		return nil, err
	}
	conf := node.DefaultConfig(home)
	if err := v.Unmarshal(conf); err != nil {
		return nil, fmt.Errorf("invalid config %s: %w", path, err)
	}
	if d, _ := cmd.Flags().GetDuration("consensus.timeout_commit"); d > 0 {
		conf.Consensus.TimeoutCommit = d
	}
	conf.SetRoot(home)
	return conf, nil
}

func newLogger(w io.Writer, level string) (log.Logger, error) {
	logger := log.NewTMLogger(log.NewSyncWriter(w))
	return cmtflags.ParseLogLevel(level, logger, "info")
}

func newStartCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the node until interrupted (Ctrl-C stops it cleanly)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home := homeFlag(cmd)
			conf, err := loadNodeConfig(cmd, home)
			if err != nil {
				return err
			}
			logger, err := newLogger(cmd.ErrOrStderr(), conf.LogLevel)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ethRPC, _ := cmd.Flags().GetString("eth-rpc")
			opts, closeSidecar, err := ethbridge.ValidatorSidecar(home, conf.GenesisFile(), ethRPC, logger)
			if err != nil {
				return err
			}
			defer closeSidecar()
			metricsOn, err := metrics.StartCometBFT(conf, metricsAddr(cmd), cmd.Flags().Changed("metrics.laddr"), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var wrap node.AppWrapper
			if metricsOn {
				wrap = metrics.TimeFinalizeBlock
			}
			every, _ := cmd.Flags().GetUint64("snapshot-interval")
			keep, _ := cmd.Flags().GetInt("snapshot-keep")
			if recent, _ := cmd.Flags().GetInt64("pruning-keep-recent"); recent > 0 {
				opts = append(opts, chain.WithPruning(recent))
			}
			n, err := node.StartChainNodeWith(ctx, conf, logger, node.StartOptions{Wrap: wrap, Snapshots: statesync.Options{Interval: every, Keep: keep}}, opts...)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s started: chain %s, RPC %s, P2P %s, resuming after height %d\n",
				n.NodeInfo().ID(), n.GenesisDoc().ChainID, conf.RPC.ListenAddress, conf.P2P.ListenAddress, n.BlockStore().Height())
			c := &node.Client{RPC: local.New(n.Node)}
			also, _ := cmd.Flags().GetStringArray("broadcast")
			for _, a := range also { // the in-process agents' transactions
				o, err := node.Dial(a)
				if err != nil {
					_ = n.Close()
					return fmt.Errorf("--broadcast: %w", err)
				}
				c.Also = append(c.Also, o.RPC)
			}
			if metricsOn {
				app, err := metrics.NewApp(metrics.WithState(c))
				if err != nil {
					return err
				}
				followMetrics(ctx, cmd.ErrOrStderr(), c, app)
				fmt.Fprintf(cmd.OutOrStdout(), "metrics: http://%s/metrics\n", conf.Instrumentation.PrometheusListenAddr)
			}
			level, _ := cmd.Flags().GetString("log-level")
			alog, err := agentLogger(cmd.ErrOrStderr(), level)
			if err != nil {
				_ = n.Close()
				return err
			}
			// An agent waits for the chain (a fresh chain's first block, a
			// node catching up); one that returns while the node runs
			// stopped for good, and the node runs on without it: said
			// at error level, whatever the log level.
			agentDone := func(name string, err error) {
				if ctx.Err() != nil {
					return // the node is stopping, and so is the agent
				}
				if err == nil {
					err = errors.New("it returned while the node runs")
				}
				alog.Error("the node runs on WITHOUT its "+name+" agent: fix the cause (err) and restart ogpud", "agent", name, "err", err)
			}
			if on, _ := cmd.Flags().GetBool("provider"); on {
				// The agent serves --console itself, with its own page.
				go func() { agentDone("provider", runProviderAgent(ctx, cmd, c, home, false)) }()
			} else if err := startConsole(ctx, cmd, c, console.Options{}); err != nil {
				_ = n.Close()
				return err
			}
			if on, _ := cmd.Flags().GetBool("validator-agent"); on {
				if _, err := os.Stat(node.OperatorKeyFile(home)); err == nil {
					quietLlama(level)
					go func() { agentDone("validator", runValidatorAgent(ctx, cmd, c, home, alog)) }()
				}
			}
			<-ctx.Done()
			fmt.Fprintln(cmd.OutOrStdout(), "shutting down")
			h := n.BlockStore().Height()
			if err := n.Close(); err != nil {
				return fmt.Errorf("shutdown: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stopped at height %d\n", h)
			return nil
		},
	}
	addStartFlags(cmd)
	cmd.Flags().Bool("provider", false, "also run a provider agent in this process (flags as in `ogpud provider run`)")
	cmd.Flags().Bool("validator-agent", true, "re-check disputed LLM jobs and vote, if this node has an operator key")
	cmd.Flags().String("eth-rpc", "", "this validator's own Ethereum node (JSON-RPC URL): needed when the chain has the bridge on and HOME/config/bridge_key.hex exists")
	cmd.Flags().Uint64("snapshot-interval", 1000, "take a state sync snapshot every this many blocks, for new nodes to start from (0: none; see [statesync] in config.toml to start from one)")
	cmd.Flags().Int("snapshot-keep", statesync.DefaultKeep, "state sync snapshots kept")
	cmd.Flags().Int64("pruning-keep-recent", 0, "keep only this many recent versions of the state (0: all); queries at older heights are refused")
	addProviderFlags(cmd)
	addBroadcastFlag(cmd.Flags(), "this process's node")
	addMetricsFlag(cmd, metricsNodeListen)
	addConsoleFlag(cmd, "the explorer, read-only; with --provider, the agent's page and actions too")
	return cmd
}

func newExportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the state of a stopped node as a genesis.json for a new chain at the next height",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home := homeFlag(cmd)
			conf := node.DefaultConfig(home)
			gen, _, err := node.ReadGenesis(conf.GenesisFile())
			if err != nil {
				return err
			}
			tree, err := store.OpenTree(conf.DBDir(), node.StateDBName)
			if err != nil {
				return fmt.Errorf("%w (is the node still running? stop it first)", err)
			}
			defer tree.Close()
			height, _ := cmd.Flags().GetInt64("height")
			snap, err := tree.Snapshot(height)
			if err != nil {
				return err
			}
			if snap.Version() == 0 {
				return fmt.Errorf("the node has committed no block yet")
			}
			chainID, doc, err := chain.ExportGenesis(snap)
			if err != nil {
				return err
			}
			gen.ChainID = chainID
			gen.InitialHeight = snap.Version() + 1
			gen.AppHash = nil
			out, _ := cmd.Flags().GetString("out")
			if out == "" {
				out = filepath.Join(home, "config", fmt.Sprintf("genesis-export-%d.json", snap.Version()))
			}
			if err := node.WriteGenesis(out, gen, doc); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported height %d (app hash %X) to %s\n", snap.Version(), chain.AppHash(snap.Version(), snap.Hash()), out)
			return nil
		},
	}
	cmd.Flags().Int64("height", 0, "height to export (0: latest)")
	cmd.Flags().String("out", "", "output file (default HOME/config/genesis-export-HEIGHT.json)")
	return cmd
}

// waitCtx is the context of a command that may be interrupted.
func waitCtx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}
