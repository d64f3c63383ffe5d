package cli

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/loadgen"
	"github.com/ogpu-network/ogpu/node"
)

func newLoadgenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "Send signed market transactions to loopback nodes at a target rate and report what was committed",
		Long: `Send a load of signed transactions to one or more nodes on this machine
(loopback only), bounded by --duration and --max-txs, and report each second
and at the end: sent, accepted by CheckTx, committed (counted from the
blocks), committed tx/s, block times, mempool size, errors by kind.

--mode market (the default): client accounts post one-stage auction jobs,
--bidders provider accounts commit sealed bids and reveal them, and the
client cancels the job before its reveal window ends (every deposit comes
back, nobody is awarded). --mode transfer: transfers, a baseline.

The accounts come from --seed; accounts short of funds get them from
--faucet-key (a funded hex key; ogpud loadgen faucet FILE makes one and
prints its address for ogpud testnet --account), and providers are bonded and
registered before the load starts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			var c loadgen.Config
			c.Endpoints, _ = f.GetStringArray("node")
			c.Mode, _ = f.GetString("mode")
			c.Rate, _ = f.GetInt("rate")
			c.Duration, _ = f.GetDuration("duration")
			c.MaxTxs, _ = f.GetInt("max-txs")
			c.Drain, _ = f.GetDuration("drain")
			c.Clients, _ = f.GetInt("clients")
			c.Providers, _ = f.GetInt("providers")
			c.Bidders, _ = f.GetInt("bidders")
			c.BidBlocks, _ = f.GetUint64("bid-blocks")
			c.RevealBlocks, _ = f.GetUint64("reveal-blocks")
			c.Seed, _ = f.GetString("seed")
			c.Report = cmd.OutOrStdout()
			if err := c.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			client, err := node.Dial(c.Endpoints[0])
			if err != nil {
				return err
			}
			accts := loadgen.AccountsFor(&c)
			var faucet *ecdsa.PrivateKey
			if path, _ := f.GetString("faucet-key"); path != "" {
				if faucet, err = node.ReadHexKey(expandHome(path)); err != nil {
					return fmt.Errorf("--faucet-key: %w", err)
				}
			}
			setupCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			res, err := loadgen.Setup(setupCtx, client, accts, faucet)
			cancel()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "setup: %d accounts funded, %d providers bonded and registered; sending %s load at %d tx/s for %s (at most %d txs)\n",
				res.Funded, res.Registered, c.Mode, c.Rate, c.Duration, c.MaxTxs)
			rep, err := loadgen.Run(ctx, &c, accts)
			if err != nil {
				return err
			}
			if path, _ := f.GetString("json"); path != "" {
				bz, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(path, bz, 0o644); err != nil {
					return fmt.Errorf("--json: %w", err)
				}
			}
			if rep.Accepted == 0 {
				return errors.New("no transaction was accepted: see the errors above")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArray("node", []string{"http://127.0.0.1:26657"}, "RPC address of a node on loopback (repeatable: accounts are spread over them; blocks are read from the first)")
	f.String("mode", loadgen.ModeMarket, "market (job posts, sealed bids, reveals, cancels) or transfer")
	f.Int("rate", 1000, "transactions sent per second")
	f.Duration("duration", time.Minute, "how long the load is sent (then the open jobs finish)")
	f.Int("max-txs", 100_000, "most transactions sent in all")
	f.Duration("drain", time.Minute, "longest wait after the load for open jobs and accepted transactions")
	f.Int("clients", 50, "client accounts (post jobs, send transfers)")
	f.Int("providers", 200, "provider accounts (bid)")
	f.Int("bidders", 4, "providers bidding on each job")
	f.Uint64("bid-blocks", 5, "each job's bid window in blocks")
	f.Uint64("reveal-blocks", 10, "each job's reveal window in blocks")
	f.String("seed", "ogpu-loadgen", "derives the load accounts: the same seed reuses them")
	f.String("faucet-key", "", "file with a funded hex key that funds the load accounts (not needed once they are funded)")
	f.String("json", "", "also write the final report as JSON to this file")
	cmd.AddCommand(newLoadgenFaucetCmd())
	return cmd
}

func newLoadgenFaucetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "faucet FILE",
		Short: "Write a new hex key to FILE (kept if it exists) and print its address, to fund in a testnet's genesis",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := expandHome(args[0])
			key, err := node.ReadHexKey(path)
			if errors.Is(err, os.ErrNotExist) {
				if key, err = crypto.GenerateKey(); err == nil {
					err = node.WriteHexKey(path, key)
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), crypto.PubkeyToAddress(key.PublicKey).Hex())
			return nil
		},
	}
}
