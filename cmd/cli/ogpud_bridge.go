package cli

import (
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/ethbridge"
	"github.com/ogpu-network/ogpu/types"
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
			key, err := readHexKey(keyFile)
			if err != nil {
				return fmt.Errorf("--eth-key: %w", err)
			}
			b, err := c.Bridge(ctx)
			if err != nil {
				return err
			}
			if b.Params == nil {
				return fmt.Errorf("the bridge is off on this chain (genesis params.bridge is absent)")
			}
			rpcURL, _ := cmd.Flags().GetString("eth-rpc")
			eth, err := ethclient.DialContext(ctx, rpcURL)
			if err != nil {
				return fmt.Errorf("cannot reach the Ethereum node at %s: %w", rpcURL, err)
			}
			defer eth.Close()
			chainID, err := c.ChainID(ctx)
			if err != nil {
				return err
			}
			w, err := ethbridge.NewWatcher(ctx, eth, b.Params.Contract, ethbridge.WatcherOptions{StartBlock: b.Params.StartBlock, ChainID: b.Params.EthChainID, AppChainID: chainID})
			if err != nil {
				return err
			}
			r, err := ethbridge.NewRelayer(ctx, eth, b.Params.Contract, ethbridge.RelayerOptions{})
			if err != nil {
				return err
			}
			level, _ := cmd.Flags().GetString("log_level")
			logger, err := newLogger(cmd.ErrOrStderr(), level)
			if err != nil {
				return err
			}
			every, _ := cmd.Flags().GetDuration("interval")
			fmt.Fprintf(cmd.OutOrStdout(), "relaying for contract %s on Ethereum chain %d, gas paid by %s, every %s\n",
				b.Params.Contract, b.Params.EthChainID, crypto.PubkeyToAddress(key.PublicKey), every)
			relay := &ethbridge.Relay{App: c, Eth: eth, Watcher: w, Relayer: r, Key: key, Interval: every, Logger: logger}
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
			op, err := node.LoadOperatorKey(home)
			if err != nil {
				return err
			}
			if _, err := os.Stat(node.BridgeKeyFile(home)); err != nil {
				k, err := crypto.GenerateKey()
				if err != nil {
					return err
				}
				if err := os.WriteFile(node.BridgeKeyFile(home), []byte(hex.EncodeToString(crypto.FromECDSA(k))+"\n"), 0o600); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "bridge key written to %s\n", node.BridgeKeyFile(home))
			}
			bk, err := node.LoadBridgeKey(home)
			if err != nil {
				return err
			}
			addr, _ := cmd.Flags().GetString("node")
			c, err := node.Dial(addr)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			chainID, err := c.ChainID(ctx)
			if err != nil {
				return err
			}
			operator := crypto.PubkeyToAddress(op.PublicKey)
			proof, err := bridge.ProveKey(bk, chainID, operator)
			if err != nil {
				return err
			}
			msg := &bridge.MsgSetBridgeKey{Key: crypto.PubkeyToAddress(bk.PublicKey), Proof: proof}
			bz, _, err := c.SignTx(ctx, op, []types.RawMsg{msg.Raw()}, node.BuildOptions{ChainID: chainID})
			if err != nil {
				return err
			}
			res, err := c.BroadcastAndWait(ctx, bz)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bridge key %s registered for validator %s in block %d\n", msg.Key, operator, res.Height)
			return nil
		},
	}
	cmd.Flags().String("node", "tcp://127.0.0.1:26657", "node RPC")
	return cmd
}

// readHexKey reads a file holding a hex secp256k1 private key.
func readHexKey(path string) (*ecdsa.PrivateKey, error) {
	bz, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := crypto.HexToECDSA(strings.TrimSpace(string(bz)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}
