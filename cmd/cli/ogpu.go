package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/wallet"
)

// PasswordEnv is the environment variable a key's password may come from.
const PasswordEnv = "OGPU_PASSWORD"

// NewOgpuCommand returns the ogpu root command.
func NewOgpuCommand() *cobra.Command {
	v := viper.New()
	root := &cobra.Command{
		Use:   "ogpu",
		Short: "oGPU wallet and client: keys, transactions and queries",
		Long: `oGPU wallet and client. Keys are go-ethereum keystore files under
HOME/keystore (the same key works on Ethereum for the bridge). Settings come
from flags, then OGPU_* environment variables (OGPU_NODE, OGPU_CHAIN_ID,
OGPU_OUTPUT, OGPU_PASSWORD, OGPU_PASSWORD_FILE, OGPU_HOME, OGPU_BROADCAST),
then HOME/config.toml (keys node, chain-id, output, password-file,
broadcast: a list).`,
		SilenceUsage: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			home, _ := cmd.Flags().GetString("home")
			if env := os.Getenv("OGPU_HOME"); env != "" && !cmd.Flags().Changed("home") {
				home = env
				if err := cmd.Flags().Set("home", env); err != nil {
					return err
				}
			}
			home = expandHome(home)
			if err := bindViper(cmd, v, filepath.Join(home, "config.toml")); err != nil {
				return err
			}
			// Flags not set on the command line take the env/config value.
			for _, name := range []string{"node", "chain-id", "output", "password-file"} {
				if f := cmd.Flags().Lookup(name); f != nil && !f.Changed && v.IsSet(name) {
					if err := f.Value.Set(v.GetString(name)); err != nil {
						return fmt.Errorf("invalid %s: %w", name, err)
					}
				}
			}
			if f := cmd.Flags().Lookup("broadcast"); f != nil && !f.Changed && v.IsSet("broadcast") {
				for _, a := range v.GetStringSlice("broadcast") {
					if err := f.Value.Set(a); err != nil {
						return fmt.Errorf("invalid broadcast: %w", err)
					}
				}
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.String("home", "~/.ogpu", "wallet home: keystore and config.toml")
	pf.String("node", "http://127.0.0.1:26657", "RPC address of the node to talk to")
	addBroadcastFlag(pf, "--node")
	pf.String("chain-id", "", "chain id for signing (default: ask the node)")
	pf.StringP("output", "o", "text", "output format: text or json")
	pf.String("password-file", "", "read the key password from this file (first line)")
	pf.Bool("lightkdf", false, "new keys use light scrypt parameters (faster, weaker; as geth's --lightkdf)")
	root.AddCommand(newKeysCmd(), newTxCmd(), newQueryCmd(), newStatusCmd(), newJobCmd(), newHECmd(), newModelCmd(), newBridgeCmd(), newGatewayCmd(), newClientConsoleCmd())
	return root
}

func openWallet(cmd *cobra.Command) (*wallet.Store, error) {
	h, _ := cmd.Flags().GetString("home")
	var opts []wallet.Option
	if light, _ := cmd.Flags().GetBool("lightkdf"); light {
		opts = append(opts, wallet.WithLightScrypt())
	}
	return wallet.Open(filepath.Join(expandHome(h), "keystore"), opts...)
}

func password(cmd *cobra.Command, prompt string, confirm bool) (string, error) {
	file, _ := cmd.Flags().GetString("password-file")
	return wallet.ReadPassword(file, PasswordEnv, prompt, confirm, cmd.ErrOrStderr())
}

// dialNode connects to --node, handing every transaction also to the
// nodes of --broadcast where the command has that flag.
func dialNode(cmd *cobra.Command) (*node.Client, error) {
	addr, _ := cmd.Flags().GetString("node")
	also, _ := cmd.Flags().GetStringArray("broadcast")
	return node.DialAll(append([]string{addr}, also...))
}

// addBroadcastFlag adds --broadcast to f; mine names the node the command
// otherwise talks to.
func addBroadcastFlag(f *pflag.FlagSet, mine string) {
	f.StringArray("broadcast", nil, "also hand every transaction to this node's RPC address (repeatable; queries still go to "+mine+"): a reveal or a vote lands in its window while "+mine+" is down, paused or cut off")
}

// resolveAddress accepts a 0x address or the name of a key in the wallet.
func resolveAddress(cmd *cobra.Command, s string) (types.Address, error) {
	if addr, err := types.ParseAddress(s); err == nil {
		return addr, nil
	}
	w, err := openWallet(cmd)
	if err != nil {
		return types.Address{}, err
	}
	k, err := w.Get(s)
	if err != nil {
		return types.Address{}, fmt.Errorf("%q is neither a 0x address nor a key in the wallet: %w", s, err)
	}
	return k.Address, nil
}

// connect dials --node and returns a context bounded by --timeout and Ctrl-C.
func connect(cmd *cobra.Command) (context.Context, *node.Client, context.CancelFunc, error) {
	c, err := dialNode(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := cmdContext(cmd)
	return ctx, c, cancel, nil
}

func cmdContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx, stop := waitCtx(cmd)
	t, _ := cmd.Flags().GetDuration("timeout")
	if t <= 0 {
		t = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	return ctx, func() { cancel(); stop() }
}
