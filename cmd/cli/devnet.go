package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

func newDevnetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devnet",
		Short: "Run a market round end to end on an in-process single-validator chain",
		Long: `Start a single-validator chain in a temporary home, fund demo accounts in
genesis, make transfers, register three providers, and run two market rounds:
a job whose two awarded providers agree and are paid, and a job where one
lies, a dispute is voted by the validator and the liar is slashed. Every step
is printed, with balances and the supply check before and after. Nothing
outside the temporary home is touched.`,
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

// RunDevnet runs the devnet script, printing to w: transfers, then two
// market rounds on chain (an agreed job and a disputed one).
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
	}{{"alice", 1000}, {"bob", 100}, {"carol", 0}, {"prov1", 500}, {"prov2", 500}, {"prov3", 500}} {
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
	opKey, err := node.LoadOperatorKey(home)
	if err != nil {
		return err
	}
	validator := devAccount{name: "validator", key: opKey, addr: crypto.PubkeyToAddress(opKey.PublicKey)}
	accts = append(accts, validator)
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
	fmt.Fprintf(w, "chain is producing blocks (node %s, validator operator %s)\n", n.NodeInfo().ID(), validator.addr.Hex())
	d := &devnet{ctx: ctx, w: w, c: c, accts: accts}

	if err := d.printBalances("before"); err != nil {
		return err
	}
	fmt.Fprintln(w, "\n== transfers")
	alice, bob, carol := accts[0], accts[1], accts[2]
	for _, tr := range []struct {
		from, to devAccount
		amount   *uint256.Int
	}{{alice, bob, types.OGPU(10)}, {bob, carol, mustAmount("2.5ogpu")}} {
		res, err := d.tx(tr.from, (&escrow.MsgSend{To: tr.to.addr, Amount: tr.amount}).Raw())
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "send %s %s -> %s: tx %X in block %d\n", types.FormatAmount(tr.amount), tr.from.name, tr.to.name, res.Hash, res.Height)
	}
	// A replay of a used nonce is refused and changes nothing.
	bz, _, err := c.SignTx(ctx, alice.key, []types.RawMsg{(&escrow.MsgSend{To: bob.addr, Amount: types.OGPU(1)}).Raw()}, node.BuildOptions{Nonce: ptr(uint64(0))})
	if err != nil {
		return err
	}
	if _, err := c.Broadcast(ctx, bz); err != nil {
		fmt.Fprintf(w, "replay of alice's nonce 0: %v\n", err)
	} else {
		return fmt.Errorf("a replayed nonce was accepted")
	}

	fmt.Fprintln(w, "\n== providers register and bond")
	for _, p := range accts[3:6] {
		info := market.ProviderInfo{
			PeerID:     "devnet-" + p.name,
			Attributes: []string{"gpu/vendor/nvidia/model/h100/ram/80Gi", "cpu/cores/16", "ram/64Gi"},
			Runtimes:   []string{"llama.cpp"},
			Class:      "devnet-class",
		}
		res, err := d.tx(p, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(200)}).Raw())
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s registered (gpu/vendor/nvidia/model/h100/ram/80Gi) and bonded 200ogpu in block %d\n", p.name, res.Height)
	}
	if err := d.printBalances("before the market rounds"); err != nil {
		return err
	}
	prov := accts[3:6]
	correct := sha256.Sum256([]byte("Once upon a time, there was a little girl named Lily."))
	if err := d.round(1, alice, prov, []string{"3ogpu", "4ogpu", "4.5ogpu"}, [2]types.Hash{correct, correct}, validator); err != nil {
		return err
	}
	if err := d.printBalances("after round 1"); err != nil {
		return err
	}
	wrong := sha256.Sum256([]byte("a made-up answer"))
	if err := d.round(2, alice, prov, []string{"3ogpu", "3.5ogpu", "4ogpu"}, [2]types.Hash{correct, wrong}, validator); err != nil {
		return err
	}
	if err := d.printBalances("after round 2"); err != nil {
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
	total := new(uint256.Int)
	for _, x := range []*uint256.Int{s.Circulating, s.Bonded, s.Unbonding, s.Locked, s.FeePool, s.BridgeReserve, s.Burned} {
		total.Add(total, x)
	}
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

// round posts a job (r=2), lets three providers bid, waits for the award,
// has the two winners commit and reveal results[0] and results[1], and,
// if they differ, has the validator vote for results[0].
func (d *devnet) round(num int, client devAccount, provs []devAccount, prices []string, results [2]types.Hash, validator devAccount) error {
	w := d.w
	fmt.Fprintf(w, "\n== round %d: %s posts an inference job, r=2, cap 5ogpu per replica\n", num, client.name)
	post := &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction,
		Model: sha256.Sum256([]byte("stories260K.gguf")), ModelSize: 1_185_376, Stages: 1, Redundancy: 2,
		MaxPrice: types.OGPU(5),
		Req:      market.Requirements{MinStake: types.OGPU(100), Attributes: []string{"gpu/vendor/nvidia", "ram>=32Gi"}, Runtime: "llama.cpp", Class: "devnet-class"},
		Input:    sha256.Sum256([]byte("Once upon a time")),
		Windows:  market.Windows{Bid: 3, Reveal: 3, Execute: 5, Verify: 5},
	}
	res, err := d.tx(client, post.Raw())
	if err != nil {
		return err
	}
	var posted market.EventJobPosted
	if err := node.FindEvent(res, &posted); err != nil {
		return err
	}
	id := posted.Job
	fmt.Fprintf(w, "job %d posted in block %d: %s locked in escrow (2 x 5ogpu + validator fee); sealed bids until %d, reveals until %d\n",
		id, res.Height, types.FormatAmount(posted.Locked), posted.BidEnd, posted.RevealEnd)
	salts := make([]types.Hash, len(provs))
	amounts := make([]*uint256.Int, len(provs))
	for i, p := range provs {
		amounts[i] = mustAmount(prices[i])
		salts[i] = sha256.Sum256([]byte(fmt.Sprintf("devnet salt %d %d", num, i)))
		commit := market.BidCommitment(id, 0, amounts[i], salts[i], p.addr)
		if _, err := d.tx(p, (&market.MsgCommitBid{Job: id, Stage: 0, Commitment: commit}).Raw()); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s sealed a bid (commitment %x..., deposit locked)\n", p.name, commit[:6])
	}
	if err := d.c.WaitHeight(d.ctx, int64(posted.BidEnd)); err != nil {
		return err
	}
	for i, p := range provs {
		if _, err := d.tx(p, (&market.MsgRevealBid{Job: id, Stage: 0, Price: amounts[i], Salt: salts[i]}).Raw()); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s revealed %s\n", p.name, types.FormatAmount(amounts[i]))
	}
	if err := d.c.WaitHeight(d.ctx, int64(posted.RevealEnd)); err != nil {
		return err
	}
	job, err := d.c.Job(d.ctx, id)
	if err != nil {
		return err
	}
	if len(job.Tasks) == 0 {
		return fmt.Errorf("job %d was not awarded: %s", id, job.Phase)
	}
	task := job.Tasks[0]
	fmt.Fprintf(w, "award at the end of block %d (no tx): ", posted.RevealEnd)
	for i, s := range task.Slots {
		if i > 0 {
			fmt.Fprint(w, " and ")
		}
		fmt.Fprint(w, d.name(s.Provider))
	}
	fmt.Fprintf(w, " win, each paid the third-lowest price %s (uniform price)\n", types.FormatAmount(task.Price))
	winners := make([]devAccount, len(task.Slots))
	for i, s := range task.Slots {
		winners[i] = d.byAddr(s.Provider)
	}
	rsalts := make([]types.Hash, len(winners))
	for i, p := range winners {
		rsalts[i] = sha256.Sum256([]byte(fmt.Sprintf("devnet result salt %d %d", num, i)))
		c := verifier.ResultCommitment(results[i], rsalts[i], p.addr)
		if _, err := d.tx(p, (&verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: c}).Raw()); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s committed its result hash (hidden)\n", p.name)
	}
	var last *ctypes.ResultTx
	for i, p := range winners {
		if last, err = d.tx(p, (&verifier.MsgRevealResult{Job: id, Stage: 0, Result: results[i], Salt: rsalts[i]}).Raw()); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s revealed result %x...\n", p.name, results[i][:6])
	}
	if results[0] != results[1] {
		var opened market.EventDisputeOpened
		if err := node.FindEvent(last, &opened); err != nil {
			return err
		}
		fmt.Fprintf(w, "the results differ: dispute opened, validators vote until height %d\n", opened.Deadline)
		res, err := d.tx(validator, (&verifier.MsgVoteDispute{Job: id, Stage: 0, Result: results[0]}).Raw())
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "validator re-executed the task and voted %x... with all the voting power (> 2/3)\n", results[0][:6])
		last = res
		var sl market.EventSlashed
		if err := node.FindEvent(res, &sl); err == nil {
			fmt.Fprintf(w, "%s slashed %s (%s to %s as compensation, %s burned) and jailed for good: %s\n",
				d.name(sl.Account), types.FormatAmount(sl.Amount), types.FormatAmount(sl.Compensation), client.name, types.FormatAmount(sl.Burned), sl.Reason)
		}
	}
	var settled market.EventTaskSettled
	if err := node.FindEvent(last, &settled); err != nil {
		return err
	}
	var done market.EventJobCompleted
	if err := node.FindEvent(last, &done); err != nil {
		return err
	}
	fmt.Fprintf(w, "settled (%s): providers paid %s, %s refunded to %s, validator fee %s to the fee pool (paid out to validators by power)\n",
		settled.Outcome, types.FormatAmount(done.Paid), types.FormatAmount(done.Refunded), client.name, types.FormatAmount(done.ValidatorFee))
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
