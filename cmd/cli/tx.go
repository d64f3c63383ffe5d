package cli

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/wallet"
)

// TxOutput is what tx commands print.
type TxOutput struct {
	Hash    string `json:"hash"`
	Height  int64  `json:"height,omitempty"`
	Code    uint32 `json:"code"`
	Log     string `json:"log,omitempty"`
	GasUsed int64  `json:"gas_used,omitempty"`
}

func newTxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tx", Short: "Sign and broadcast transactions"}
	cmd.PersistentFlags().Duration("timeout", 0, "how long to wait for inclusion (default 30s)")
	cmd.AddCommand(newSendCmd(), newBroadcastCmd())
	cmd.AddCommand(marketTxCmds()...)
	return cmd
}

func newSendCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "send TO AMOUNT",
		Short: "Send AMOUNT (12.5ogpu, or base units) to TO (an address or key name)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			to, err := resolveAddress(cmd, args[0])
			if err != nil {
				return err
			}
			amt, err := types.ParseAmount(args[1])
			if err != nil {
				return err
			}
			return signAndSend(cmd, []types.RawMsg{(&escrow.MsgSend{To: to, Amount: amt}).Raw()})
		},
	}
	addSignFlags(cmd)
	return cmd
}

func addSignFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("from", "", "name or address of the signing key (required)")
	f.String("fee", "", "fee to pay (default: the chain's required fee)")
	f.Int64("nonce", -1, "account nonce (default: ask the node)")
	f.String("memo", "", "note stored with the transaction")
	f.Bool("sign-only", false, "sign without broadcasting; write the signed tx to stdout or --out")
	f.String("out", "", "with --sign-only: write the signed tx to this file")
	_ = cmd.MarkFlagRequired("from")
}

// signAndSend signs msgs with --from and broadcasts them, or writes them
// with --sign-only.
func signAndSend(cmd *cobra.Command, msgs []types.RawMsg) error {
	ctx, cancel := cmdContext(cmd)
	defer cancel()
	w, err := openWallet(cmd)
	if err != nil {
		return err
	}
	from, _ := cmd.Flags().GetString("from")
	k, err := w.Find(from)
	if err != nil {
		return err
	}
	var o node.BuildOptions
	o.ChainID, _ = cmd.Flags().GetString("chain-id")
	o.Memo, _ = cmd.Flags().GetString("memo")
	if n, _ := cmd.Flags().GetInt64("nonce"); n >= 0 {
		o.Nonce = ptr(uint64(n))
	}
	if f, _ := cmd.Flags().GetString("fee"); f != "" {
		if o.Fee, err = types.ParseAmount(f); err != nil {
			return err
		}
	}
	pw, err := password(cmd, fmt.Sprintf("Password of %s: ", k.Name), false)
	if err != nil {
		return err
	}
	key, err := w.Unlock(k.Name, pw)
	if err != nil {
		return err
	}
	c, err := dialNode(cmd)
	if err != nil {
		wallet.Zero(key)
		return err
	}
	bz, tx, err := c.SignTx(ctx, key, msgs, o)
	wallet.Zero(key)
	if err != nil {
		return err
	}
	if signOnly, _ := cmd.Flags().GetBool("sign-only"); signOnly {
		enc := "0x" + hex.EncodeToString(bz) + "\n"
		if out, _ := cmd.Flags().GetString("out"); out != "" {
			if err := os.WriteFile(out, []byte(enc), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "signed %s, written to %s\n", tx.Body.String(), out)
			return nil
		}
		_, err := io.WriteString(cmd.OutOrStdout(), enc)
		return err
	}
	return broadcast(cmd, c, bz)
}

func broadcast(cmd *cobra.Command, c *node.Client, bz []byte) error {
	ctx, cancel := cmdContext(cmd)
	defer cancel()
	out := TxOutput{Hash: strings.ToUpper(hex.EncodeToString(types.TxHash(bz)))}
	res, err := c.BroadcastAndWait(ctx, bz)
	var txErr *node.TxError
	switch {
	case errors.As(err, &txErr):
		out.Code, out.Log, out.Height = txErr.Code, txErr.Log, txErr.Height
	case err != nil:
		return err
	default:
		out.Height, out.GasUsed = res.Height, res.TxResult.GasUsed
	}
	if perr := output(cmd, out, func(w io.Writer) {
		if out.Code == 0 {
			fmt.Fprintf(w, "tx %s included in block %d (code 0)\n", out.Hash, out.Height)
		}
	}); perr != nil {
		return perr
	}
	return err
}

func newBroadcastCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "broadcast FILE",
		Short: "Broadcast a transaction signed with --sign-only (FILE or - for stdin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bz, err := readTxFile(args[0])
			if err != nil {
				return err
			}
			c, err := dialNode(cmd)
			if err != nil {
				return err
			}
			return broadcast(cmd, c, bz)
		},
	}
}

// readTxFile reads a signed transaction: 0x-prefixed hex as written by
// --sign-only.
func readTxFile(path string) ([]byte, error) {
	var raw []byte
	var err error
	if path == "-" {
		raw, err = io.ReadAll(os.Stdin)
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read signed tx: %w", err)
	}
	s := strings.TrimPrefix(strings.TrimSpace(string(raw)), "0x")
	bz, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s is not a signed tx (want 0x-prefixed hex from `ogpu tx send --sign-only`): %w", path, err)
	}
	if _, err := types.DecodeTx(bz); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return bz, nil
}
