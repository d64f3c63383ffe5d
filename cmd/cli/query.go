package cli

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/holiman/uint256"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/types"
)

func newQueryCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "query", Aliases: []string{"q"}, Short: "Query the chain"}
	cmd.PersistentFlags().Duration("timeout", 0, "request timeout (default 30s)")
	cmd.AddCommand(newQueryBalanceCmd(), newQueryAccountCmd(), newQueryTxCmd(), newQueryBlockCmd(), newQueryParamsCmd(), newQuerySupplyCmd(), newBridgeStatusCmd("bridge"))
	cmd.AddCommand(marketQueryCmds()...)
	return cmd
}

// BalanceOutput is what `query balance` prints.
type BalanceOutput struct {
	Address string       `json:"address"`
	Balance *uint256.Int `json:"balance"`
	Display string       `json:"display"`
	Height  int64        `json:"height"`
	Proven  bool         `json:"proven"`
}

func newQueryBalanceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "balance ADDRESS|NAME",
		Short: "Show an account's balance; --prove verifies it against a block's app hash",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := resolveAddress(cmd, args[0])
			if err != nil {
				return err
			}
			ctx, c, cancel, err := connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			prove, _ := cmd.Flags().GetBool("prove")
			height, _ := cmd.Flags().GetInt64("height")
			res, err := c.Query(ctx, chain.QueryStore, escrow.BalanceKey(addr), height, prove)
			if err != nil {
				return err
			}
			out := BalanceOutput{Address: addr.Hex(), Balance: new(uint256.Int).SetBytes(res.Value), Height: res.Height}
			out.Display = types.FormatAmount(out.Balance)
			if prove {
				// The app hash after height H is in the header of block H+1.
				next := res.Height + 1
				if err := c.WaitHeight(ctx, next); err != nil {
					return err
				}
				blk, err := c.RPC.Block(ctx, &next)
				if err != nil {
					return err
				}
				if err := chain.VerifyStoreProof(res, blk.Block.AppHash); err != nil {
					return fmt.Errorf("the node's answer does not verify: %w", err)
				}
				out.Proven = true
			}
			return output(cmd, out, func(w io.Writer) {
				fmt.Fprintf(w, "%s at height %d\n", out.Display, out.Height)
				if out.Proven {
					fmt.Fprintf(w, "verified against the app hash in block %d\n", out.Height+1)
				}
			})
		},
	}
	cmd.Flags().Bool("prove", false, "verify a Merkle proof of the balance against the block header")
	cmd.Flags().Int64("height", 0, "query at this height (0: latest)")
	return cmd
}

func newQueryAccountCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "account ADDRESS|NAME",
		Short: "Show an account's balance and next nonce",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := resolveAddress(cmd, args[0])
			if err != nil {
				return err
			}
			ctx, c, cancel, err := connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			v, err := c.Account(ctx, addr)
			if err != nil {
				return err
			}
			return output(cmd, v, func(w io.Writer) {
				fmt.Fprintf(w, "address: %s\nbalance: %s\nnonce:   %d\n", v.Address.Hex(), types.FormatAmount(v.Balance), v.Nonce)
			})
		},
	}
}

// TxQueryOutput is what `query tx` prints.
type TxQueryOutput struct {
	Hash    string        `json:"hash"`
	Height  int64         `json:"height"`
	Code    uint32        `json:"code"`
	Log     string        `json:"log,omitempty"`
	GasUsed int64         `json:"gas_used"`
	Tx      *types.TxBody `json:"tx,omitempty"`
	Events  []EventOutput `json:"events"`
}

// EventOutput is one event of a transaction.
type EventOutput struct {
	Type       string            `json:"type"`
	Attributes map[string]string `json:"attributes"`
}

func newQueryTxCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "tx HASH",
		Short: "Show a transaction by hash",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hash, err := hex.DecodeString(strings.TrimPrefix(args[0], "0x"))
			if err != nil || len(hash) != 32 {
				return fmt.Errorf("invalid tx hash %q: want 64 hex digits", args[0])
			}
			ctx, c, cancel, err := connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			res, err := c.RPC.Tx(ctx, hash, false)
			if err != nil {
				return fmt.Errorf("transaction %X not found: %w", hash, err)
			}
			out := TxQueryOutput{Hash: fmt.Sprintf("%X", hash), Height: res.Height, Code: res.TxResult.Code, Log: res.TxResult.Log, GasUsed: res.TxResult.GasUsed}
			if tx, err := types.DecodeTx(res.Tx); err == nil {
				out.Tx = &tx.Body
			}
			for _, ev := range res.TxResult.Events {
				e := EventOutput{Type: ev.Type, Attributes: map[string]string{}}
				for _, a := range ev.Attributes {
					e.Attributes[a.Key] = a.Value
				}
				out.Events = append(out.Events, e)
			}
			return output(cmd, out, func(w io.Writer) {
				fmt.Fprintf(w, "tx %s in block %d, code %d, gas %d\n", out.Hash, out.Height, out.Code, out.GasUsed)
				if out.Log != "" {
					fmt.Fprintf(w, "log: %s\n", out.Log)
				}
				if out.Tx != nil {
					fmt.Fprintf(w, "%s\n", out.Tx.String())
				}
				for _, e := range res.TxResult.Events {
					fmt.Fprintf(w, "event %s:", e.Type)
					for _, a := range e.Attributes {
						fmt.Fprintf(w, " %s=%s", a.Key, a.Value)
					}
					fmt.Fprintln(w)
				}
			})
		},
	}
}

// BlockOutput is what `query block` prints.
type BlockOutput struct {
	Height   int64    `json:"height"`
	Hash     string   `json:"hash"`
	Time     string   `json:"time"`
	AppHash  string   `json:"app_hash"`
	Proposer string   `json:"proposer"`
	Txs      []string `json:"txs"`
}

func newQueryBlockCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "block [HEIGHT]",
		Short: "Show a block (default: the latest)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var hp *int64
			if len(args) == 1 {
				h, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || h <= 0 {
					return fmt.Errorf("invalid height %q", args[0])
				}
				hp = &h
			}
			ctx, c, cancel, err := connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			res, err := c.RPC.Block(ctx, hp)
			if err != nil {
				return err
			}
			b := res.Block
			out := BlockOutput{Height: b.Height, Hash: res.BlockID.Hash.String(), Time: b.Time.UTC().Format("2006-01-02T15:04:05.000Z"), AppHash: b.AppHash.String(), Proposer: b.ProposerAddress.String(), Txs: []string{}}
			for _, tx := range b.Txs {
				if chain.IsInjected(tx) {
					continue // the validators' vote extensions, not a transaction
				}
				out.Txs = append(out.Txs, fmt.Sprintf("%X", tx.Hash()))
			}
			return output(cmd, out, func(w io.Writer) {
				fmt.Fprintf(w, "block %d %s at %s\napp hash %s, proposer %s, %d txs\n", out.Height, out.Hash, out.Time, out.AppHash, out.Proposer, len(out.Txs))
				for _, h := range out.Txs {
					fmt.Fprintf(w, "  %s\n", h)
				}
			})
		},
	}
}

func newQueryParamsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "params",
		Short: "Show the chain's transaction parameters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, c, cancel, err := connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			p, err := c.Params(ctx)
			if err != nil {
				return err
			}
			return output(cmd, p, func(w io.Writer) {
				fmt.Fprintf(w, "min gas price: %s base units\ntx base gas:   %d\ntx byte gas:   %d\nmsg gas:       %d\nmax tx bytes:  %d\nmax msgs:      %d\n",
					p.MinGasPrice.Dec(), p.TxBaseGas, p.TxByteGas, p.MsgGas, p.MaxTxBytes, p.MaxMsgs)
			})
		},
	}
}

func newQuerySupplyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "supply",
		Short: "Show where every oGPU is: accounts, stake, job escrow, fee pool, bridge reserve, burned",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, c, cancel, err := connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			s, err := c.Supply(ctx)
			if err != nil {
				return err
			}
			return output(cmd, s, func(w io.Writer) {
				fmt.Fprintf(w, "max supply:     %s\naccounts:       %s\nbonded:         %s\nunbonding:      %s\njob escrow:     %s\nfee pool:       %s\nbridge reserve: %s\nbridge out:     %s\nburned:         %s\n",
					types.FormatAmount(s.MaxSupply), types.FormatAmount(s.Circulating), types.FormatAmount(s.Bonded), types.FormatAmount(s.Unbonding),
					types.FormatAmount(s.Locked), types.FormatAmount(s.FeePool), types.FormatAmount(s.BridgeReserve), types.FormatAmount(s.BridgeOutbound), types.FormatAmount(s.Burned))
				total := s.Total()
				verdict := "equals the cap"
				if !total.Eq(s.MaxSupply) {
					verdict = "DOES NOT equal the cap"
				}
				fmt.Fprintf(w, "total:          %s (%s)\n", types.FormatAmount(total), verdict)
			})
		},
	}
}

// StatusOutput is what `ogpu status` prints.
type StatusOutput struct {
	ChainID    string `json:"chain_id"`
	Moniker    string `json:"moniker"`
	NodeID     string `json:"node_id"`
	Height     int64  `json:"latest_block_height"`
	Earliest   int64  `json:"earliest_block_height"`
	AppHash    string `json:"latest_app_hash"`
	BlockTime  string `json:"latest_block_time"`
	CatchingUp bool   `json:"catching_up"`
}

func newStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the node's chain, height and app hash",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, c, cancel, err := connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			st, err := c.RPC.Status(ctx)
			if err != nil {
				return c.Unreachable(err)
			}
			out := StatusOutput{ChainID: st.NodeInfo.Network, Moniker: st.NodeInfo.Moniker, NodeID: string(st.NodeInfo.ID()), Height: st.SyncInfo.LatestBlockHeight,
				Earliest: st.SyncInfo.EarliestBlockHeight, AppHash: st.SyncInfo.LatestAppHash.String(), BlockTime: st.SyncInfo.LatestBlockTime.UTC().Format("2006-01-02T15:04:05.000Z"), CatchingUp: st.SyncInfo.CatchingUp}
			return output(cmd, out, func(w io.Writer) {
				fmt.Fprintf(w, "chain %s, node %s (%s)\nheight %d at %s, app hash %s\n", out.ChainID, out.Moniker, out.NodeID, out.Height, out.BlockTime, out.AppHash)
				if out.Earliest > 1 {
					fmt.Fprintf(w, "blocks from height %d (the state before it came from a snapshot, or was pruned)\n", out.Earliest)
				}
			})
		},
	}
	cmd.Flags().Duration("timeout", 0, "request timeout (default 30s)")
	return cmd
}
