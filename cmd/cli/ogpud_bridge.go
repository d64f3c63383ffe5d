package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/ethbridge"
)

// newOgpudBridgeCmd is `ogpud bridge`: a validator's bridge key and the
// permissionless relay.
func newOgpudBridgeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bridge", Short: "The Ethereum bridge: register a validator's bridge key, relay signed withdrawals"}
	cmd.AddCommand(newRelayCmd(), newRegisterKeyCmd())
	return cmd
}

func newRelayCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Submit the validators' signed valset updates and withdrawals to the Ethereum contract",
		Long: `Watch the app-chain (--node) for valset updates and withdrawals signed by more
than 2/3 of the validators and submit them to the bridge contract on Ethereum
(--eth-rpc), paying gas with --eth-key (a hex secp256k1 key file). Anyone can
relay: the contract checks every signature. Runs until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			addr, _ := cmd.Flags().GetString("node")
			c, err := node.Dial(addr)
			if err != nil {
				return err
			}
			keyFile, _ := cmd.Flags().GetString("eth-key")
			key, err := node.ReadHexKey(keyFile)
			if err != nil {
				return fmt.Errorf("--eth-key: %w", err)
			}
			level, _ := cmd.Flags().GetString("log_level")
			logger, err := newLogger(cmd.ErrOrStderr(), level)
			if err != nil {
				return err
			}
			rpcURL, _ := cmd.Flags().GetString("eth-rpc")
			every, _ := cmd.Flags().GetDuration("interval")
			relay, p, closeEth, err := ethbridge.DialRelay(ctx, c, rpcURL, key, every, logger)
			if err != nil {
				return err
			}
			defer closeEth()
			fmt.Fprintf(cmd.OutOrStdout(), "relaying for contract %s on Ethereum chain %d, gas paid by %s, every %s\n",
				p.Contract, p.EthChainID, crypto.PubkeyToAddress(key.PublicKey), every)
			return relay.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.String("node", "tcp://127.0.0.1:26657", "app-chain node RPC")
	f.String("eth-rpc", "http://127.0.0.1:8545", "Ethereum JSON-RPC URL")
	f.String("eth-key", "", "file with the hex secp256k1 key that pays the gas (required)")
	f.Duration("interval", 5*time.Second, "time between relay rounds")
	f.String("log_level", "info", "log level")
	_ = cmd.MarkFlagRequired("eth-key")
	return cmd
}

func newRegisterKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "register-key",
		Short: "Create this validator's bridge key (if absent) and register it with its operator key",
		Long: `Create HOME/config/bridge_key.hex (a secp256k1 key used only to sign for the
bridge: never the operator key) unless it exists, and send MsgSetBridgeKey
signed by the operator key (HOME/config/operator_key.hex) with the bridge
key's proof of possession. Registering a new key rotates the old one out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home := homeFlag(cmd)
			addr, _ := cmd.Flags().GetString("node")
			c, err := node.Dial(addr)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			key, height, err := ethbridge.RegisterKey(ctx, c, home)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bridge key %s (%s) registered for this validator in block %d\n", key, node.BridgeKeyFile(home), height)
			return nil
		},
	}
	cmd.Flags().String("node", "tcp://127.0.0.1:26657", "node RPC")
	return cmd
}
