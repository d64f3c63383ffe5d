package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/wallet"
)

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Manage keys (go-ethereum keystore files)"}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "add NAME",
			Short: "Create a new key",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				w, err := openWallet(cmd)
				if err != nil {
					return err
				}
				if err := wallet.ValidName(args[0]); err != nil {
					return err
				}
				pw, err := password(cmd, "Password for the new key: ", true)
				if err != nil {
					return err
				}
				k, err := w.Add(args[0], pw)
				if err != nil {
					return err
				}
				return output(cmd, k, func(out io.Writer) {
					fmt.Fprintf(out, "created key %s: %s\nkeystore file: %s\n", k.Name, k.Address.Hex(), k.Path)
				})
			},
		},
		&cobra.Command{
			Use:   "list",
			Short: "List keys",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				w, err := openWallet(cmd)
				if err != nil {
					return err
				}
				keys, err := w.List()
				if err != nil {
					return err
				}
				return output(cmd, keys, func(out io.Writer) {
					if len(keys) == 0 {
						fmt.Fprintln(out, "no keys: create one with `ogpu keys add NAME`")
					}
					for _, k := range keys {
						fmt.Fprintf(out, "%-20s %s\n", k.Name, k.Address.Hex())
					}
				})
			},
		},
		&cobra.Command{
			Use:   "show NAME",
			Short: "Show a key's address",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				w, err := openWallet(cmd)
				if err != nil {
					return err
				}
				k, err := w.Find(args[0])
				if err != nil {
					return err
				}
				return output(cmd, k, func(out io.Writer) { fmt.Fprintln(out, k.Address.Hex()) })
			},
		},
		newKeysImportCmd(),
		newKeysExportCmd(),
		newKeysDeleteCmd(),
	)
	return cmd
}

func newKeysImportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import NAME FILE",
		Short: "Import a keystore JSON file (geth, MetaMask) or, with --private-key, a hex key from FILE",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := openWallet(cmd)
			if err != nil {
				return err
			}
			bz, err := os.ReadFile(args[1])
			if err != nil {
				return fmt.Errorf("cannot read key file: %w", err)
			}
			var k wallet.Key
			if raw, _ := cmd.Flags().GetBool("private-key"); raw {
				pw, err := password(cmd, "Password to encrypt the key with: ", true)
				if err != nil {
					return err
				}
				k, err = w.ImportPrivateKey(args[0], string(bz), pw)
				if err != nil {
					return err
				}
			} else {
				pw, err := password(cmd, "Password of the keystore file: ", false)
				if err != nil {
					return err
				}
				if k, err = w.Import(args[0], bz, pw, ""); err != nil {
					return err
				}
			}
			return output(cmd, k, func(out io.Writer) { fmt.Fprintf(out, "imported key %s: %s\n", k.Name, k.Address.Hex()) })
		},
	}
	cmd.Flags().Bool("private-key", false, "FILE holds a hex secp256k1 private key, not keystore JSON")
	return cmd
}

func newKeysExportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export NAME",
		Short: "Write a key's keystore JSON (importable by geth and MetaMask) to stdout or --out",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := openWallet(cmd)
			if err != nil {
				return err
			}
			pw, err := password(cmd, "Password of the key: ", false)
			if err != nil {
				return err
			}
			bz, err := w.Export(args[0], pw)
			if err != nil {
				return err
			}
			if out, _ := cmd.Flags().GetString("out"); out != "" {
				if err := os.WriteFile(out, bz, 0o600); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "exported %s to %s\n", args[0], out)
				return nil
			}
			_, err = cmd.OutOrStdout().Write(append(bz, '\n'))
			return err
		},
	}
	cmd.Flags().String("out", "", "write to this file (mode 0600) instead of stdout")
	return cmd
}

func newKeysDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a key (asks for its password)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := openWallet(cmd)
			if err != nil {
				return err
			}
			if yes, _ := cmd.Flags().GetBool("yes"); !yes {
				return fmt.Errorf("deleting %s cannot be undone without a backup: pass --yes to confirm (export it first with `ogpu keys export %s`)", args[0], args[0])
			}
			pw, err := password(cmd, "Password of the key: ", false)
			if err != nil {
				return err
			}
			if err := w.Delete(args[0], pw); err != nil {
				return err
			}
			return output(cmd, map[string]string{"deleted": args[0]}, func(out io.Writer) { fmt.Fprintf(out, "deleted key %s\n", args[0]) })
		},
	}
	cmd.Flags().Bool("yes", false, "confirm deletion")
	return cmd
}
