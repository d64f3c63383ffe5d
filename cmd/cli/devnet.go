package cli

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

func newDevnetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devnet",
		Short: "Run a market round end to end on an in-process single-validator chain",
		Long: `Start a single-validator chain in a temporary home, fund demo accounts in
genesis, make transfers and print every step with the balances before and
after. Nothing outside the temporary home is touched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keep, _ := cmd.Flags().GetBool("keep")
			ctx, stop := waitCtx(cmd)
			defer stop()
			return RunDevnet(ctx, cmd.OutOrStdout(), keep)
		},
	}
	cmd.Flags().Bool("keep", false, "keep the temporary home afterwards and print its path")
	return cmd
}

type devAccount struct {
	name string
	key  *ecdsa.PrivateKey
	addr types.Address
}

// RunDevnet runs the devnet script, printing to w.
func RunDevnet(ctx context.Context, w io.Writer, keep bool) error {
	start := time.Now()
	home, err := os.MkdirTemp("", "ogpu-devnet-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(home)
	}
	var accts []devAccount
	doc := genesis.Default()
	for _, a := range []struct {
		name string
		fund uint64
	}{{"alice", 1000}, {"bob", 100}, {"carol", 0}} {
		key, err := crypto.GenerateKey()
		if err != nil {
			return err
		}
		acct := devAccount{name: a.name, key: key, addr: crypto.PubkeyToAddress(key.PublicKey)}
		accts = append(accts, acct)
		if a.fund > 0 {
			if err := doc.AddAccount(acct.addr, types.OGPU(a.fund)); err != nil {
				return err
			}
		}
	}
	conf, err := node.LocalConfig(home, 200*time.Millisecond)
	if err != nil {
		return err
	}
	if _, err := node.InitHome(node.InitOptions{Home: home, ChainID: "ogpu-devnet", Moniker: "devnet-validator", Genesis: doc, Config: conf}); err != nil {
		return err
	}
	fmt.Fprintf(w, "== oGPU devnet: single validator, chain ogpu-devnet, home %s\n", home)
	n, err := node.StartChainNode(ctx, conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		return err
	}
	defer n.Close()
	c := &node.Client{RPC: local.New(n.Node)}
	if err := c.WaitHeight(ctx, 1); err != nil {
		return err
	}
	fmt.Fprintf(w, "chain is producing blocks (validator %s)\n", n.NodeInfo().ID())

	printBalances := func(title string) error {
		fmt.Fprintf(w, "\n-- balances %s\n", title)
		for _, a := range accts {
			v, err := c.Account(ctx, a.addr)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "   %-6s %s  %s (nonce %d)\n", a.name, a.addr.Hex(), types.FormatAmount(v.Balance), v.Nonce)
		}
		s, err := c.Supply(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "   fee pool %s, bridge reserve %s, burned %s\n", types.FormatAmount(s.FeePool), types.FormatAmount(s.BridgeReserve), types.FormatAmount(s.Burned))
		return nil
	}
	if err := printBalances("before"); err != nil {
		return err
	}
	fmt.Fprintln(w)
	transfers := []struct {
		from, to int
		amount   *uint256.Int
	}{
		{0, 1, types.OGPU(10)},
		{1, 2, mustAmount("2.5ogpu")},
		{0, 2, types.OGPU(1)},
	}
	for _, tr := range transfers {
		from, to := accts[tr.from], accts[tr.to]
		bz, tx, err := c.SignTx(ctx, from.key, []types.RawMsg{(&escrow.MsgSend{To: to.addr, Amount: tr.amount}).Raw()}, node.BuildOptions{})
		if err != nil {
			return err
		}
		res, err := c.BroadcastAndWait(ctx, bz)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "send %s %s -> %s: tx %X in block %d, fee %s\n", types.FormatAmount(tr.amount), from.name, to.name, res.Hash, res.Height, types.FormatAmount(tx.Body.Fee))
	}
	// A replay of a used nonce is refused and changes nothing.
	bz, _, err := c.SignTx(ctx, accts[0].key, []types.RawMsg{(&escrow.MsgSend{To: accts[1].addr, Amount: types.OGPU(1)}).Raw()}, node.BuildOptions{Nonce: ptr(uint64(0))})
	if err != nil {
		return err
	}
	if _, err := c.Broadcast(ctx, bz); err != nil {
		fmt.Fprintf(w, "replay of alice's nonce 0: %v\n", err)
	} else {
		return fmt.Errorf("a replayed nonce was accepted")
	}
	if err := printBalances("after"); err != nil {
		return err
	}
	st, err := c.RPC.Status(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndevnet done at height %d, app hash %X, in %s\n", st.SyncInfo.LatestBlockHeight, st.SyncInfo.LatestAppHash, time.Since(start).Round(time.Millisecond))
	if keep {
		fmt.Fprintf(w, "home kept at %s\n", home)
	}
	return nil
}

func mustAmount(s string) *uint256.Int {
	a, err := types.ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

func ptr[T any](v T) *T { return &v }
