package devnet

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

type devAccount struct {
	name string
	key  *ecdsa.PrivateKey
	addr types.Address
}

// RunDevnet runs the devnet script, printing to w: transfers, then two
// LLM jobs run by provider agents (an agreed job and a disputed one).
func RunDevnet(ctx context.Context, w io.Writer, opts DevnetOptions) (*DevnetReport, error) {
	keep := opts.Keep
	start := time.Now()
	home, err := os.MkdirTemp("", "ogpu-devnet-")
	if err != nil {
		return nil, err
	}
	if !keep {
		defer os.RemoveAll(home)
	}
	var accts []devAccount
	doc := genesis.Default()
	// No drawn canaries: the script runs the same every time. The validator
	// agent posts one canary for round 1's job through the path a drawn
	// one takes (Validator.PostCanary).
	doc.Params.Market.CanaryRateBps = 0
	for _, a := range []struct {
		name string
		fund uint64
	}{{"alice", 1000}, {"bob", 100}, {"carol", 0}, {"prov1", 500}, {"prov2", 500}, {"prov3", 500}} {
		key, err := crypto.GenerateKey()
		if err != nil {
			return nil, err
		}
		acct := devAccount{name: a.name, key: key, addr: crypto.PubkeyToAddress(key.PublicKey)}
		accts = append(accts, acct)
		if a.fund > 0 {
			if err := doc.AddAccount(acct.addr, types.OGPU(a.fund)); err != nil {
				return nil, err
			}
		}
	}
	conf, err := node.LocalConfig(home, 200*time.Millisecond)
	if err != nil {
		return nil, err
	}
	if _, err := node.InitHome(node.InitOptions{Home: home, ChainID: "ogpu-devnet", Moniker: "devnet-validator", Genesis: doc, Config: conf}); err != nil {
		return nil, err
	}
	opKey, err := node.LoadOperatorKey(home)
	if err != nil {
		return nil, err
	}
	validator := devAccount{name: "validator", key: opKey, addr: crypto.PubkeyToAddress(opKey.PublicKey)}
	accts = append(accts, validator)
	fmt.Fprintf(w, "== oGPU devnet: single validator, chain ogpu-devnet, home %s\n", home)
	n, err := node.StartChainNode(ctx, conf, log.NewNopLogger(), chain.WithInvariants())
	if err != nil {
		return nil, err
	}
	defer n.Close()
	c := &node.Client{RPC: local.New(n.Node)}
	if err := c.WaitHeight(ctx, 1); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "chain is producing blocks (node %s, validator operator %s)\n", n.NodeInfo().ID(), validator.addr.Hex())
	d := &devnet{ctx: ctx, w: w, c: c, accts: accts}

	if err := d.printBalances("before"); err != nil {
		return nil, err
	}
	fmt.Fprintln(w, "\n== transfers")
	alice, bob, carol := accts[0], accts[1], accts[2]
	for _, tr := range []struct {
		from, to devAccount
		amount   *uint256.Int
	}{{alice, bob, types.OGPU(10)}, {bob, carol, mustAmount("2.5ogpu")}} {
		res, err := d.tx(tr.from, (&escrow.MsgSend{To: tr.to.addr, Amount: tr.amount}).Raw())
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "send %s %s -> %s: tx %X in block %d\n", types.FormatAmount(tr.amount), tr.from.name, tr.to.name, res.Hash, res.Height)
	}
	// A replay of a used nonce is refused and changes nothing.
	bz, _, err := c.SignTx(ctx, alice.key, []types.RawMsg{(&escrow.MsgSend{To: bob.addr, Amount: types.OGPU(1)}).Raw()}, node.BuildOptions{Nonce: ptr(uint64(0))})
	if err != nil {
		return nil, err
	}
	if _, err := c.Broadcast(ctx, bz); err != nil {
		fmt.Fprintf(w, "replay of alice's nonce 0: %v\n", err)
	} else {
		return nil, fmt.Errorf("a replayed nonce was accepted")
	}

	report, err := d.llmRounds(home, opts)
	if err != nil {
		return nil, err
	}
	st, err := c.RPC.Status(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "\ndevnet done at height %d, app hash %X, in %s\n", st.SyncInfo.LatestBlockHeight, st.SyncInfo.LatestAppHash, time.Since(start).Round(time.Millisecond))
	if keep {
		fmt.Fprintf(w, "home kept at %s\n", home)
	}
	report.Height = st.SyncInfo.LatestBlockHeight
	return report, nil
}

type devnet struct {
	ctx   context.Context
	w     io.Writer
	c     *node.Client
	accts []devAccount
}

func (d *devnet) tx(from devAccount, msgs ...types.RawMsg) (*ctypes.ResultTx, error) {
	bz, _, err := d.c.SignTx(d.ctx, from.key, msgs, node.BuildOptions{})
	if err != nil {
		return nil, err
	}
	res, err := d.c.BroadcastAndWait(d.ctx, bz)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from.name, err)
	}
	return res, nil
}

func (d *devnet) printBalances(title string) error {
	fmt.Fprintf(d.w, "\n-- balances %s\n", title)
	for _, a := range d.accts {
		v, err := d.c.Account(d.ctx, a.addr)
		if err != nil {
			return err
		}
		st, err := d.c.Stake(d.ctx, a.addr)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("   %-9s %s  %s", a.name, a.addr.Hex(), types.FormatAmount(v.Balance))
		if !st.Bonded.IsZero() {
			line += fmt.Sprintf("  (bonded %s)", types.FormatAmount(st.Bonded))
		}
		fmt.Fprintln(d.w, line)
	}
	s, err := d.c.Supply(d.ctx)
	if err != nil {
		return err
	}
	total := s.Total()
	check := "= the cap"
	if !total.Eq(types.MaxSupply) {
		check = "!= the cap " + types.FormatAmount(types.MaxSupply)
	}
	fmt.Fprintf(d.w, "   accounts %s + bonded %s + unbonding %s + job escrow %s + fee pool %s + bridge reserve %s + burned %s = %s %s\n",
		types.FormatAmount(s.Circulating), types.FormatAmount(s.Bonded), types.FormatAmount(s.Unbonding), types.FormatAmount(s.Locked),
		types.FormatAmount(s.FeePool), types.FormatAmount(s.BridgeReserve), types.FormatAmount(s.Burned), types.FormatAmount(total), check)
	if !total.Eq(types.MaxSupply) {
		return fmt.Errorf("supply does not add up")
	}
	return nil
}

func (d *devnet) byAddr(a types.Address) devAccount {
	for _, x := range d.accts {
		if x.addr == a {
			return x
		}
	}
	return devAccount{name: a.Hex(), addr: a}
}

func (d *devnet) name(a types.Address) string { return d.byAddr(a).name }

func mustAmount(s string) *uint256.Int {
	a, err := types.ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

func ptr[T any](v T) *T { return &v }
