package devnet

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"sync/atomic"
	"time"

	"github.com/cometbft/cometbft/libs/log"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	ethtypes "github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	ethnode "github.com/ethereum/go-ethereum/node"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/contracts"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/ethbridge"
	"github.com/ogpu-network/ogpu/types"
)

// ethDevnet is the devnet's Ethereum: go-ethereum's simulated backend in
// this process (the same block production, EVM and finality rule as
// `geth --dev`: the finalized block is the last multiple of 32 at or below
// the head), a block every 100 ms, with the deployer (who deploys and
// owns the token and guards the bridge), dave (an Ethereum holder) and a
// relayer funded with ether.
type ethDevnet struct {
	sim                    *simulated.Backend
	c                      simulated.Client
	chainID                uint64
	deployer, dave, relays *ecdsa.PrivateKey
	bridgeKey              *ecdsa.PrivateKey // the validator's
	// predicted is where the deployer's second contract (the bridge)
	// lands: the genesis names it before it exists.
	predicted   common.Address
	token, addr common.Address
	observer    lateObserver
	stop        chan struct{}
	done        chan struct{}
	closeOnce   atomic.Bool
}

// lateObserver is the validator's Observer until the bridge exists: the
// chain starts (and asks for vote extensions) before the contract is
// deployed with the valset the chain computes.
type lateObserver struct {
	w atomic.Pointer[ethbridge.Watcher]
}

func (o *lateObserver) Observe(ctx context.Context, next uint64, max int, pending []uint64) (*bridge.Observation, error) {
	w := o.w.Load()
	if w == nil {
		return nil, errors.New("the bridge contract is not deployed yet")
	}
	return w.Observe(ctx, next, max, pending)
}

// startEthereum starts the simulated Ethereum and names the bridge in
// doc's params (at its predicted address); the validator's signer goes in
// the returned chain option.
func (d *devnet) startEthereum(doc *genesis.Doc) (chain.Option, error) {
	e := &ethDevnet{stop: make(chan struct{}), done: make(chan struct{})}
	keys := []**ecdsa.PrivateKey{&e.deployer, &e.dave, &e.relays, &e.bridgeKey}
	alloc := ethtypes.GenesisAlloc{}
	for _, k := range keys {
		key, err := crypto.GenerateKey()
		if err != nil {
			return nil, err
		}
		*k = key
		alloc[crypto.PubkeyToAddress(key.PublicKey)] = ethtypes.Account{Balance: new(big.Int).Mul(big.NewInt(100), big.NewInt(1e18))}
	}
	e.sim = simulated.NewBackend(alloc, func(_ *ethnode.Config, c *ethconfig.Config) {
		cfg := *c.Genesis.Config
		cfg.BogotaTime = nil // mainnet's current rules (Osaka), for realistic gas
		c.Genesis.Config = &cfg
	})
	e.c = e.sim.Client()
	id, err := e.c.ChainID(d.ctx)
	if err != nil {
		e.sim.Close()
		return nil, err
	}
	e.chainID = id.Uint64()
	e.predicted = crypto.CreateAddress(crypto.PubkeyToAddress(e.deployer.PublicKey), 1)
	go func() {
		defer close(e.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-t.C:
				e.sim.Commit()
			}
		}
	}()
	p := genesis.DefaultBridgeParams()
	p.EthChainID, p.Contract = e.chainID, e.predicted
	doc.Params.Bridge = &p
	d.eth = e
	signer := ethbridge.NewSigner(&e.observer, e.bridgeKey, log.NewNopLogger())
	return chain.WithExtender(signer), nil
}

func (e *ethDevnet) close() {
	if e == nil || e.closeOnce.Swap(true) {
		return
	}
	close(e.stop)
	<-e.done
	e.sim.Close()
}

func (e *ethDevnet) balanceOf(ctx context.Context, a common.Address) (*uint256.Int, error) {
	tok := contracts.NewOGPUToken()
	b, err := bind.Call(tok.Instance(e.c, e.token), &bind.CallOpts{Context: ctx}, tok.PackBalanceOf(a), tok.UnpackBalanceOf)
	if err != nil {
		return nil, err
	}
	v, _ := uint256.FromBig(b)
	return v, nil
}

// transfer sends amount of the token from key to to and waits for it.
func (e *ethDevnet) transfer(ctx context.Context, key *ecdsa.PrivateKey, to common.Address, amount *uint256.Int) error {
	tok := contracts.NewOGPUToken()
	opts := bind.NewKeyedTransactor(key, new(big.Int).SetUint64(e.chainID))
	opts.Context = ctx
	tx, err := bind.Transact(tok.Instance(e.c, e.token), opts, tok.PackTransfer(to, amount.ToBig()))
	if err != nil {
		return err
	}
	r, err := bind.WaitMined(ctx, e.c, tx.Hash())
	if err != nil {
		return err
	}
	if r.Status != ethtypes.ReceiptStatusSuccessful {
		return fmt.Errorf("token transfer %s reverted", tx.Hash())
	}
	return nil
}

// bridgeRound: the validator registers its bridge key (valset 0), the
// contract is deployed with that set and locks what the genesis allocated
// on the app-chain; dave deposits 50 oGPU on Ethereum for carol, who had
// none; once the deposit's block is final the validator attests it and
// carol is credited; carol pays an LLM job with it; she withdraws 20 oGPU
// to her Ethereum address; the validator signs, a relayer pays it on
// Ethereum, and the Withdrawn event, once final, closes it on the
// app-chain. Both chains' balances and the cross-chain supply are printed.
func (d *devnet) bridgeRound(report *Report) error {
	e, w := d.eth, d.w
	n := d.beginRound("the Ethereum bridge: deposit, a job paid with bridged oGPU, a withdrawal")
	val := d.validator()
	baddr := crypto.PubkeyToAddress(e.bridgeKey.PublicKey)
	proof, err := bridge.ProveKey(e.bridgeKey, "ogpu-devnet", val.addr)
	if err != nil {
		return err
	}
	if _, err := d.tx(val, (&bridge.MsgSetBridgeKey{Key: baddr, Proof: proof}).Raw()); err != nil {
		return err
	}
	b, err := d.c.Bridge(d.ctx)
	if err != nil {
		return err
	}
	if b.Valset == nil {
		return errors.New("no valset 0 after the validator registered its bridge key")
	}
	fmt.Fprintf(w, "validator: ogpud bridge register-key -> bridge key %s; valset 0 = %d member(s), power %d of 2^32-1\n", baddr.Hex(), len(b.Valset.Members), b.Valset.Total())
	onAppChain := new(uint256.Int).Sub(types.MaxSupply, b.Reserve)
	launch, err := ethbridge.LaunchBridge(d.ctx, e.c, e.deployer, "ogpu-devnet", &b.Valset.Valset, onAppChain, ethbridge.DefaultLimits())
	if err != nil {
		return err
	}
	if launch.Bridge != e.predicted {
		return fmt.Errorf("bridge deployed at %s, the genesis names %s", launch.Bridge, e.predicted)
	}
	e.token, e.addr = launch.Token, launch.Bridge
	fmt.Fprintf(w, "ethereum (simulated, chain %d): OGPUToken %s (21,000,000 minted once), OGPUBridge %s (block %d, exempt from the tax)\n",
		e.chainID, e.token.Hex(), e.addr.Hex(), launch.Block)
	fmt.Fprintf(w, "genesis reconciliation: %s, everything the app-chain's genesis allocated outside its bridge reserve, locked in the bridge\n", types.FormatAmount(onAppChain))
	watcher, err := ethbridge.NewWatcher(d.ctx, e.c, e.addr, ethbridge.WatcherOptions{StartBlock: launch.Block, ChainID: e.chainID, AppChainID: "ogpu-devnet"})
	if err != nil {
		return err
	}
	e.observer.w.Store(watcher)
	relayer, err := ethbridge.NewRelayer(d.ctx, e.c, e.addr, ethbridge.RelayerOptions{PollInterval: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	relay := &ethbridge.Relay{App: d.c, Eth: e.c, Watcher: watcher, Relayer: relayer, Key: e.relays, Interval: 300 * time.Millisecond,
		Logger: log.NewTMLogger(log.NewSyncWriter(prefixWriter{d.w, "   [relayer] "})).With("module", "relay")}
	ctx, stopRelay := context.WithCancel(d.ctx)
	defer stopRelay()
	d.goAgent(func() { _ = relay.Run(ctx) })

	// dave, an Ethereum holder, deposits for carol.
	dave, carol := crypto.PubkeyToAddress(e.dave.PublicKey), d.accts[2]
	if err := e.transfer(d.ctx, e.deployer, dave, types.OGPU(1000)); err != nil {
		return err
	}
	before, err := d.c.Account(d.ctx, carol.addr)
	if err != nil {
		return err
	}
	start := time.Now()
	nonce, err := ethbridge.Deposit(d.ctx, e.c, e.dave, e.addr, carol.addr, types.OGPU(50))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "dave (ethereum %s): ogpu bridge deposit 50ogpu --to carol -> deposit nonce %d on Ethereum\n", dave.Hex(), nonce)
	if err := d.waitBridge(func(b *chain.BridgeView) bool { return b.LastDeposit >= nonce }); err != nil {
		return fmt.Errorf("deposit %d never credited: %w", nonce, err)
	}
	after, err := d.c.Account(d.ctx, carol.addr)
	if err != nil {
		return err
	}
	credited := new(uint256.Int).Sub(after.Balance, before.Balance)
	fmt.Fprintf(w, "-> deposit %d credited to carol: %s, %s after the deposit (its block had to be finalized, then the validator attested it in a vote extension)\n",
		nonce, types.FormatAmount(credited), time.Since(start).Round(100*time.Millisecond))
	if !credited.Eq(types.OGPU(50)) {
		return fmt.Errorf("carol was credited %s, want 50ogpu", types.FormatAmount(credited))
	}

	// carol pays a job with bridged oGPU.
	cAccess := agent.NewAccess(d.c)
	cHost, cStore, err := d.newHost("carol", carol.key, cAccess, d.boot)
	if err != nil {
		return err
	}
	d.onStop(func() { cHost.Close() })
	client := agent.NewClient(d.c, carol.key, cHost, cStore, cAccess)
	client.Logger = d.logger("carol")
	job := d.storyJob()
	fmt.Fprintf(w, "carol: ogpu job run --prompt %q --max-tokens %d --redundancy 2 --max-price 5ogpu (paid with bridged oGPU)\n", job.Prompt, job.MaxTokens)
	names := d.names()
	res, err := client.RunLLM(d.ctx, job, func(f string, a ...any) { fmt.Fprintln(w, "-> "+names.Replace(fmt.Sprintf(f, a...))) }, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "job %d %s: %q; providers paid %s, carol refunded %s\n", res.Job, res.Outcome, res.Text, types.FormatAmount(res.Paid), types.FormatAmount(res.Refunded))

	// carol withdraws 20 oGPU to her Ethereum address (the same key).
	out := types.OGPU(20)
	txr, err := d.tx(carol, (&bridge.MsgBridgeWithdraw{To: carol.addr, Amount: out}).Raw())
	if err != nil {
		return err
	}
	var wd bridge.EventWithdrawal
	for _, ev := range txr.TxResult.Events {
		if ev.Type == wd.EventType() {
			if err := types.DecodeEvent(ev, &wd); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(w, "carol: ogpu bridge withdraw %s 20ogpu -> withdrawal %d, debited at once into the outbound escrow (no cancel)\n", carol.addr.Hex(), wd.Nonce)
	if err := d.printSupply(); err != nil {
		return err
	}
	start = time.Now()
	if err := d.waitBridge(func(b *chain.BridgeView) bool { return b.Pending == 0 }); err != nil {
		return fmt.Errorf("withdrawal %d never closed: %w", wd.Nonce, err)
	}
	v, err := d.c.BridgeWithdrawal(d.ctx, wd.Nonce)
	if err != nil {
		return err
	}
	paid, err := e.balanceOf(d.ctx, carol.addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "-> withdrawal %d: signed by the validator, relayed, paid on Ethereum (carol holds %s there), Withdrawn attested at height %d, %s after the request\n",
		wd.Nonce, types.FormatAmount(paid), v.Executed, time.Since(start).Round(100*time.Millisecond))
	if !paid.Eq(out) {
		return fmt.Errorf("carol holds %s on Ethereum, want %s", types.FormatAmount(paid), types.FormatAmount(out))
	}

	// Both chains' books.
	locked, err := e.balanceOf(d.ctx, e.addr)
	if err != nil {
		return err
	}
	if b, err = d.c.Bridge(d.ctx); err != nil {
		return err
	}
	check := "equal"
	if !locked.Eq(b.OnEthereum) {
		check = "DIFFER"
	}
	fmt.Fprintf(w, "cross-chain supply: locked in the Ethereum bridge %s; app-chain 21,000,000 - reserve %s = %s: %s\n",
		types.FormatAmount(locked), types.FormatAmount(b.Reserve), types.FormatAmount(b.OnEthereum), check)
	report.Bridge = &BridgeReport{Deposit: nonce, Credited: credited, Job: res, Withdrawal: wd.Nonce, PaidOnEthereum: paid, Locked: locked, OnEthereum: b.OnEthereum}
	if check != "equal" {
		return errors.New("the cross-chain supply does not add up")
	}
	return d.printBalances(fmt.Sprintf("after round %d", n))
}

// BridgeReport is what the bridge round did.
type BridgeReport struct {
	Deposit        uint64
	Credited       *uint256.Int
	Job            *agent.LLMResult
	Withdrawal     uint64
	PaidOnEthereum *uint256.Int
	// Locked is the bridge's token balance on Ethereum at the end;
	// OnEthereum what the app-chain's books say it must be.
	Locked, OnEthereum *uint256.Int
}

// waitBridge polls the bridge's state until ok or a minute passes.
func (d *devnet) waitBridge(ok func(*chain.BridgeView) bool) error {
	ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
	defer cancel()
	for {
		b, err := d.c.Bridge(ctx)
		if err == nil && ok(b) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// prefixWriter prefixes every write (one log line each) with p.
type prefixWriter struct {
	w interface{ Write([]byte) (int, error) }
	p string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := p.w.Write(append([]byte(p.p), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}
