package cli

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/types"
)

// TxOutput is what tx commands print.
type TxOutput struct {
	Hash    string `json:"hash"`
	Height  int64  `json:"height,omitempty"`
	Code    uint32 `json:"code"`
	Log     string `json:"log,omitempty"`
	GasUsed int64  `json:"gas_used,omitempty"`
	// Fee is what the sender paid (from the block's tx event).
	Fee string `json:"fee,omitempty"`
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
	return signAndSendMsgs(cmd, msgs, nil)
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
			ctx, c, cancel, err := connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			return broadcast(cmd, ctx, c, bz, nil)
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
