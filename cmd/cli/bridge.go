package cli

import (
	"fmt"
	"io"
	"strconv"

	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node/ethbridge"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/wallet"
)

// newBridgeCmd is `ogpu bridge`: moving oGPU between the app-chain and
// Ethereum (package bridge has the rules, node/ethbridge the Ethereum side).
func newBridgeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bridge", Short: "Move oGPU between this chain and Ethereum"}
	cmd.PersistentFlags().Duration("timeout", 0, "how long to wait (default 30s)")
	cmd.AddCommand(newBridgeWithdrawCmd(), newBridgeStatusCmd("status"), newBridgeDepositCmd())
	return cmd
}

// WithdrawOutput is what `ogpu bridge withdraw` prints.
type WithdrawOutput struct {
	TxOutput
	Nonce  uint64         `json:"nonce"`
	To     common.Address `json:"to"`
	Amount string         `json:"amount"`
}

func newBridgeWithdrawCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "withdraw ETH_ADDRESS AMOUNT",
		Short: "Send AMOUNT to ETH_ADDRESS on Ethereum (debited now; it cannot be cancelled)",
		Long: `Debit AMOUNT from --from at once into the bridge's outbound escrow. The
validators sign the withdrawal in their next blocks; any relayer (ogpud bridge
relay) then submits it to the Ethereum contract, which pays ETH_ADDRESS. Large
withdrawals wait out the contract's delay. Follow it with
  ogpu bridge status NONCE`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !common.IsHexAddress(args[0]) {
				return fmt.Errorf("%q is not an Ethereum address (0x and 40 hex digits)", args[0])
			}
			to := common.HexToAddress(args[0])
			amt, err := types.ParseAmount(args[1])
			if err != nil {
				return err
			}
			msg := &bridge.MsgBridgeWithdraw{To: to, Amount: amt}
			return signAndSendMsgs(cmd, []types.RawMsg{msg.Raw()}, func(res *ctypes.ResultTx, out TxOutput) (any, func(w io.Writer)) {
				o := WithdrawOutput{TxOutput: out, To: to, Amount: types.FormatAmount(amt)}
				for _, ev := range res.TxResult.Events {
					var w bridge.EventWithdrawal
					if ev.Type == w.EventType() && types.DecodeEvent(ev, &w) == nil {
						o.Nonce = w.Nonce
					}
				}
				return o, func(w io.Writer) {
					fmt.Fprintf(w, "withdrawal %d: %s to %s on Ethereum, in the outbound escrow until paid\n", o.Nonce, o.Amount, to)
					fmt.Fprintf(w, "follow it with `ogpu bridge status %d`\n", o.Nonce)
				}
			})
		},
	}
	addSignFlags(cmd)
	return cmd
}

func newBridgeStatusCmd(use string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " [WITHDRAWAL_NONCE]",
		Short: "Show the bridge (reserve, outbound, nonces, valset), or one withdrawal and its signatures",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, cancel, err := connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			if len(args) == 1 {
				n, err := strconv.ParseUint(args[0], 10, 64)
				if err != nil {
					return fmt.Errorf("withdrawal nonce %q: want a number", args[0])
				}
				w, err := c.BridgeWithdrawal(ctx, n)
				if err != nil {
					return err
				}
				return output(cmd, w, func(out io.Writer) { printWithdrawal(out, w) })
			}
			b, err := c.Bridge(ctx)
			if err != nil {
				return err
			}
			return output(cmd, b, func(w io.Writer) { printBridge(w, b) })
		},
	}
}

func printWithdrawal(w io.Writer, v *chain.WithdrawalView) {
	state := "waiting for validator signatures"
	switch {
	case v.Executed != 0:
		state = fmt.Sprintf("paid on Ethereum (attested at height %d)", v.Executed)
	case v.Signed:
		state = "signed: ready to relay (ogpud bridge relay), or paid and waiting for attestation"
	}
	fmt.Fprintf(w, "withdrawal %d: %s from %s to %s (block %d)\n", v.Nonce, types.FormatAmount(v.Amount), v.From, v.To, v.Height)
	fmt.Fprintf(w, "  %s\n", state)
	if v.Executed == 0 {
		fmt.Fprintf(w, "  signatures: %d, power %d of %d (more than 2/3 needed)\n", len(v.Signatures), v.SignedPower, v.Total)
	}
}

func printBridge(w io.Writer, b *chain.BridgeView) {
	if b.Params == nil {
		fmt.Fprintln(w, "the bridge is off on this chain (genesis params.bridge is absent)")
		return
	}
	fmt.Fprintf(w, "contract %s on Ethereum chain %d\n", b.Params.Contract, b.Params.EthChainID)
	fmt.Fprintf(w, "reserve:         %s\noutbound:        %s\non Ethereum:     %s (locked in the contract for this chain)\n",
		types.FormatAmount(b.Reserve), types.FormatAmount(b.Outbound), types.FormatAmount(b.OnEthereum))
	fmt.Fprintf(w, "deposits:        %d credited\nwithdrawals:     %d, %d pending\n", b.LastDeposit, b.LastWithdrawal, b.Pending)
	if b.Valset != nil {
		adopted := "adopted"
		if !b.Valset.Adopted {
			adopted = "waiting for signatures of the set before"
		}
		fmt.Fprintf(w, "valset %d:        %d members, %s\n", b.Valset.Nonce, len(b.Valset.Members), adopted)
	} else {
		fmt.Fprintln(w, "valset:          none yet (no validator has a bridge key)")
	}
}

// DepositOutput is what `ogpu bridge deposit` prints.
type DepositOutput struct {
	Nonce     uint64         `json:"nonce"`
	From      common.Address `json:"from"`
	Recipient types.Address  `json:"recipient"`
	Amount    string         `json:"amount"`
	Credited  bool           `json:"credited"`
}

func newBridgeDepositCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deposit AMOUNT",
		Short: "Lock AMOUNT oGPU in the Ethereum bridge for an account on this chain",
		Long: `Approve and deposit AMOUNT of the oGPU ERC-20 from the --from key's Ethereum
account (the wallet's keys are Ethereum keys) into the bridge named by this
chain's params, for --to (default: the same address). The deposit is credited
here once the validators see it in a finalized Ethereum block; with --wait the
command waits for that.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := types.ParseAmount(args[0])
			if err != nil {
				return err
			}
			s, err := openSession(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			b, err := s.c.Bridge(s.ctx)
			if err != nil {
				return err
			}
			if b.Params == nil {
				return fmt.Errorf("the bridge is off on this chain (genesis params.bridge is absent)")
			}
			to := s.from.Address
			if t, _ := cmd.Flags().GetString("to"); t != "" {
				if to, err = resolveAddress(cmd, t); err != nil {
					return err
				}
			}
			rpcURL, _ := cmd.Flags().GetString("eth-rpc")
			eth, err := ethclient.DialContext(s.ctx, rpcURL)
			if err != nil {
				return fmt.Errorf("cannot reach the Ethereum node at %s: %w", rpcURL, err)
			}
			defer eth.Close()
			pw, err := password(cmd, fmt.Sprintf("Password of %s: ", s.from.Name), false)
			if err != nil {
				return err
			}
			key, err := s.w.Unlock(s.from.Name, pw)
			if err != nil {
				return err
			}
			nonce, err := ethbridge.Deposit(s.ctx, eth, key, b.Params.Contract, to, amt)
			wallet.Zero(key)
			if err != nil {
				return err
			}
			out := DepositOutput{Nonce: nonce, From: s.from.Address, Recipient: to, Amount: types.FormatAmount(amt)}
			if wait, _ := cmd.Flags().GetBool("wait"); wait {
				if err := ethbridge.WaitCredited(s.ctx, s.c, nonce); err != nil {
					return err
				}
				out.Credited = true
			}
			return output(cmd, out, func(w io.Writer) {
				fmt.Fprintf(w, "deposit %d: %s locked on Ethereum for %s\n", nonce, out.Amount, to)
				if out.Credited {
					fmt.Fprintln(w, "credited on this chain")
				} else {
					fmt.Fprintln(w, "credited here once its Ethereum block is finalized (`ogpu query bridge` shows the last deposit credited)")
				}
			})
		},
	}
	f := cmd.Flags()
	f.String("from", "", "wallet key paying on Ethereum (required)")
	f.String("to", "", "account credited on this chain (default: the same address)")
	f.String("eth-rpc", "http://127.0.0.1:8545", "Ethereum JSON-RPC URL")
	f.Bool("wait", false, "wait until the deposit is credited (see --timeout)")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}
