package devnet

import (
	"crypto/ecdsa"
	"fmt"
	"strings"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/rpc/client/local"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// account is a devnet account: its name in the transcript, and its key.
type account struct {
	name string
	key  *ecdsa.PrivateKey
	addr types.Address
}

// startChain funds the demo accounts in genesis, initializes the home and
// starts the single-validator chain. The caller closes the node. d.accts
// are then alice, bob, carol, prov1, prov2, prov3 (the LLM and pipeline
// rounds' providers), prov4 to prov7 (the split round's), prov8 and prov9
// (the fine-tune round's), prov10 and prov11 (the cartel of the audit
// round), prov12 (the lone bidder) and the validator's operator, in this
// order.
func (d *devnet) startChain() (*node.ChainNode, error) {
	doc := genesis.Default()
	// No drawn canaries: the script runs the same every time. The validator
	// agent posts one canary for round 1's job through the path a drawn
	// one takes (Validator.PostCanary).
	doc.Params.Market.CanaryRateBps = 0
	// Every agreed task is audited, so that the cartel round (audit.go)
	// shows a random audit every time: a network audits one in twenty
	// (genesis.DefaultMarketParams). The deterrence keeps a network's
	// stake rule: a caught lie costs at least 20 × its price, and a
	// provider holds open slots worth at most 1/20 of its stake.
	doc.Params.Market.AuditRateBps = devnetAuditRateBps
	doc.Params.Market.DeterrenceBps = devnetDeterrenceBps
	for _, a := range []struct {
		name string
		fund uint64
	}{{"alice", 1000}, {"bob", 100}, {"carol", 0}, {"prov1", 500}, {"prov2", 500}, {"prov3", 500},
		{"prov4", 500}, {"prov5", 500}, {"prov6", 500}, {"prov7", 500}, {"prov8", 500}, {"prov9", 500},
		{"prov10", 500}, {"prov11", 500}, {"prov12", 500}} {
		key, err := crypto.GenerateKey()
		if err != nil {
			return nil, err
		}
		acct := account{name: a.name, key: key, addr: crypto.PubkeyToAddress(key.PublicKey)}
		d.accts = append(d.accts, acct)
		if a.fund > 0 {
			if err := doc.AddAccount(acct.addr, types.OGPU(a.fund)); err != nil {
				return nil, err
			}
		}
	}
	// The bridge is on from genesis, at the address the bridge contract
	// will have once the bridge round deploys it (bridge.go).
	signer, err := d.startEthereum(doc)
	if err != nil {
		return nil, err
	}
	conf, err := node.LocalConfig(d.home, 200*time.Millisecond)
	if err != nil {
		return nil, err
	}
	if _, err := node.InitHome(node.InitOptions{Home: d.home, ChainID: "ogpu-devnet", Moniker: "devnet-validator", Genesis: doc, Config: conf}); err != nil {
		return nil, err
	}
	opKey, err := node.LoadOperatorKey(d.home)
	if err != nil {
		return nil, err
	}
	validator := account{name: "validator", key: opKey, addr: crypto.PubkeyToAddress(opKey.PublicKey)}
	d.accts = append(d.accts, validator)
	fmt.Fprintf(d.w, "== oGPU devnet: single validator, chain ogpu-devnet, home %s\n", d.home)
	if err := node.WriteHexKey(node.BridgeKeyFile(d.home), d.eth.bridgeKey); err != nil {
		return nil, err
	}
	// Its blocks are timed for ogpu_app_finalize_block_seconds (metrics.go).
	n, err := node.StartChainNodeWrapped(d.ctx, conf, log.NewNopLogger(), metrics.TimeFinalizeBlock, chain.WithInvariants(), signer)
	if err != nil {
		return nil, err
	}
	d.c = &node.Client{RPC: local.New(n.Node)}
	if err := d.c.WaitHeight(d.ctx, 1); err != nil {
		n.Close()
		return nil, err
	}
	fmt.Fprintf(d.w, "chain is producing blocks (node %s, validator operator %s)\n", n.NodeInfo().ID(), validator.addr.Hex())
	def := genesis.DefaultMarketParams()
	fmt.Fprintf(d.w, "audit_rate_bps %d: the validators audit EVERY agreed task here, so that you can watch one (a network audits 1 in %d: %d);\n"+
		"deterrence_bps %d: a caught lie still costs at least %d × its price in stake, as at a network's defaults (%d / %d)\n",
		devnetAuditRateBps, 10_000/def.AuditRateBps, def.AuditRateBps, devnetDeterrenceBps, devnetDeterrenceBps/devnetAuditRateBps, def.DeterrenceBps, def.AuditRateBps)
	return n, nil
}

// The devnet's audit parameters (startChain): every agreed task audited,
// and the stake at risk on a slot 20 × its price, as at the defaults.
const (
	devnetAuditRateBps  = 10_000
	devnetDeterrenceBps = 200_000
)

// validator is the validator's operator account.
func (d *devnet) validator() account { return d.accts[len(d.accts)-1] }

// tx signs msgs from an account, broadcasts them and waits for the block.
func (d *devnet) tx(from account, msgs ...types.RawMsg) (*ctypes.ResultTx, error) {
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

// printBalances prints every account's balance and bonded stake, and the
// supply check: the supply's parts add up to the cap, or it fails.
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
	return d.printSupply()
}

// printSupply prints the supply check: its parts add up to the cap, or it
// fails.
func (d *devnet) printSupply() error {
	s, err := d.c.Supply(d.ctx)
	if err != nil {
		return err
	}
	total := s.Total()
	check := "= the cap"
	if !total.Eq(types.MaxSupply) {
		check = "!= the cap " + types.FormatAmount(types.MaxSupply)
	}
	fmt.Fprintf(d.w, "   accounts %s + bonded %s + unbonding %s + job escrow %s + fee pool %s + bridge reserve %s + bridge out %s + burned %s = %s %s\n",
		types.FormatAmount(s.Circulating), types.FormatAmount(s.Bonded), types.FormatAmount(s.Unbonding), types.FormatAmount(s.Locked),
		types.FormatAmount(s.FeePool), types.FormatAmount(s.BridgeReserve), types.FormatAmount(s.BridgeOutbound), types.FormatAmount(s.Burned), types.FormatAmount(total), check)
	if !total.Eq(types.MaxSupply) {
		return fmt.Errorf("supply does not add up")
	}
	return nil
}

// name is the account name of an address (its hex if it is none of the
// devnet's).
func (d *devnet) name(a types.Address) string {
	for _, x := range d.accts {
		if x.addr == a {
			return x.name
		}
	}
	return a.Hex()
}

// names replaces every devnet address with its account name.
func (d *devnet) names() *strings.Replacer {
	var pairs []string
	for _, a := range d.accts {
		pairs = append(pairs, a.addr.Hex(), a.name)
	}
	return strings.NewReplacer(pairs...)
}
