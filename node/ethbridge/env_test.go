package ethbridge

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"math/big"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
)

var _ Client = simulated.Client(nil)

// oGPU amounts in the token's smallest unit (18 decimals).
func ogpu(n uint64) *uint256.Int {
	return new(uint256.Int).Mul(uint256.NewInt(n), uint256.NewInt(1_000_000_000_000_000_000))
}

type account struct {
	key  *ecdsa.PrivateKey
	addr common.Address
}

func newAccount(t testing.TB) account {
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return account{k, crypto.PubkeyToAddress(k.PublicKey)}
}

// mineClient is the simulated backend's client that mines every
// transaction sent through it at once, in a block of its own, as a node
// with an instant block producer would. beforeSend, when set, runs just
// before the transaction enters the pool (a test uses it to get another
// transaction into the same block).
type mineClient struct {
	simulated.Client
	sim        *simulated.Backend
	mu         sync.Mutex
	beforeSend func()
}

func (m *mineClient) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	m.mu.Lock()
	hook := m.beforeSend
	m.beforeSend = nil
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err := m.Client.SendTransaction(ctx, tx); err != nil {
		return err
	}
	m.sim.Commit()
	return nil
}

// Test bridge limits: a 100 oGPU outflow bucket, withdrawals of 50 oGPU or
// more wait a day, a valset update moving more than 1/3 waits two days.
var testLimits = Limits{OutflowCap: ogpu(100), LargeWithdrawal: ogpu(50), WithdrawalDelay: 24 * time.Hour, ValsetDelay: 48 * time.Hour}

const testAppChain = "ogpu-test-1"

// env is an OGPUToken and an OGPUBridge deployed with this package's
// helpers on a fresh simulated chain (go-ethereum's EVM, every fork through
// Osaka; the simulated beacon finalizes in 32-block epochs: with the head
// at h, the finalized block is h when h is a multiple of 32, else the last
// multiple of 32 below h).
type env struct {
	t                                                            testing.TB
	ctx                                                          context.Context
	sim                                                          *simulated.Backend
	c                                                            *mineClient
	deployer, holder, treasury, guardian, alice, bob, carol, rel account
	vals                                                         []account // the validators' bridge keys, sorted by address
	set                                                          bridge.Valset
	token, bridge                                                common.Address
	start                                                        uint64 // the bridge's deployment block
}

func newEnv(t testing.TB, powers ...uint32) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background()}
	alloc := types.GenesisAlloc{}
	eth := new(big.Int).Mul(big.NewInt(100), big.NewInt(1e18))
	for _, a := range []*account{&e.deployer, &e.holder, &e.treasury, &e.guardian, &e.alice, &e.bob, &e.carol, &e.rel} {
		*a = newAccount(t)
		alloc[a.addr] = types.Account{Balance: eth}
	}
	e.sim = simulated.NewBackend(alloc, osakaRules)
	t.Cleanup(func() { e.sim.Close() })
	e.c = &mineClient{Client: e.sim.Client(), sim: e.sim}
	e.vals, e.set = newValset(t, 0, powers...)
	var err error
	if e.token, err = DeployToken(e.ctx, e.c, e.deployer.key, e.holder.addr, e.treasury.addr); err != nil {
		t.Fatalf("deploy token: %v", err)
	}
	if e.bridge, e.start, err = DeployBridge(e.ctx, e.c, e.deployer.key, e.token, testAppChain, e.set, e.guardian.addr, testLimits); err != nil {
		t.Fatalf("deploy bridge: %v", err)
	}
	e.tokenTx(e.holder, tokenABI.PackTransfer(e.alice.addr, ogpu(10_000).ToBig()))
	e.tokenTx(e.alice, tokenABI.PackApprove(e.bridge, ogpu(10_000).ToBig())) // each deposit of alice's is one transaction
	return e
}

// osakaRules runs the simulated chain on mainnet's current rules (Osaka)
// rather than the dev default, which also activates the next fork's gas
// repricing (EIP-8037/8038 state gas) and inflates every figure.
func osakaRules(_ *node.Config, c *ethconfig.Config) {
	cfg := *c.Genesis.Config
	cfg.BogotaTime = nil
	c.Genesis.Config = &cfg
}

// newValset makes len(powers) bridge keys sorted by address and the set
// with those powers in that order.
func newValset(t testing.TB, nonce uint64, powers ...uint32) ([]account, bridge.Valset) {
	vals := make([]account, len(powers))
	for i := range vals {
		vals[i] = newAccount(t)
	}
	return sortedSet(nonce, vals, powers...)
}

// sortedSet sorts vals by address and builds the set with powers in that
// order.
func sortedSet(nonce uint64, vals []account, powers ...uint32) ([]account, bridge.Valset) {
	vals = append([]account{}, vals...)
	sort.Slice(vals, func(i, j int) bool { return bytes.Compare(vals[i].addr[:], vals[j].addr[:]) < 0 })
	vs := bridge.Valset{Nonce: nonce}
	for i, v := range vals {
		vs.Members = append(vs.Members, bridge.Member{Addr: v.addr, Power: powers[i]})
	}
	return vals, vs
}

// tokenTx sends calldata to the token from a and requires success.
func (e *env) tokenTx(from account, data []byte) {
	e.t.Helper()
	s, err := newSender(e.ctx, e.c, 0, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := s.send(e.ctx, from.key, &e.token, "token call", data); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) head() uint64 {
	e.t.Helper()
	h, err := e.c.HeaderByNumber(e.ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return h.Number.Uint64()
}

func (e *env) finalized() uint64 {
	e.t.Helper()
	h, err := e.c.HeaderByNumber(e.ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err != nil {
		e.t.Fatal(err)
	}
	return h.Number.Uint64()
}

// commitTo mines empty blocks until the head is at least h.
func (e *env) commitTo(h uint64) {
	for e.head() < h {
		e.sim.Commit()
	}
}

// finalize mines empty blocks until block b is finalized.
func (e *env) finalize(b uint64) {
	e.t.Helper()
	for e.finalized() < b {
		e.sim.Commit()
	}
}

// deposit locks amount oGPU of from's for recipient and returns the
// deposit nonce and the block it landed in.
func (e *env) deposit(from account, recipient common.Address, amount *uint256.Int) (uint64, uint64) {
	e.t.Helper()
	n, err := Deposit(e.ctx, e.c, from.key, e.bridge, recipient, amount)
	if err != nil {
		e.t.Fatalf("deposit: %v", err)
	}
	return n, e.head()
}

func (e *env) watcher(opts WatcherOptions) *Watcher {
	e.t.Helper()
	if opts.StartBlock == 0 {
		opts.StartBlock = e.start
	}
	w, err := NewWatcher(e.ctx, e.c, e.bridge, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

func (e *env) relayer() *Relayer {
	e.t.Helper()
	r, err := NewRelayer(e.ctx, e.c, e.bridge, RelayerOptions{PollInterval: 10 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) domain() [32]byte {
	return bridge.Domain(1337, e.bridge, testAppChain)
}

// sigs signs digest with vals[i] for each i in signers, keyed by address.
func sigs(t testing.TB, digest [32]byte, vals []account, signers ...int) map[common.Address]bridge.Sig {
	t.Helper()
	out := map[common.Address]bridge.Sig{}
	for _, i := range signers {
		s, err := bridge.Sign(vals[i].key, digest)
		if err != nil {
			t.Fatal(err)
		}
		out[vals[i].addr] = s
	}
	return out
}

// balance is a's token balance at block (nil: latest).
func (e *env) balance(a common.Address, block *big.Int) *uint256.Int {
	e.t.Helper()
	b, err := bind.Call(tokenABI.Instance(e.c, e.token), &bind.CallOpts{BlockNumber: block}, tokenABI.PackBalanceOf(a), tokenABI.UnpackBalanceOf)
	if err != nil {
		e.t.Fatal(err)
	}
	return uint256.MustFromBig(b)
}

func (e *env) ethBalance(a common.Address) *big.Int {
	e.t.Helper()
	b, err := e.c.BalanceAt(e.ctx, a, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) nonceOf(a common.Address) uint64 {
	e.t.Helper()
	n, err := e.c.PendingNonceAt(e.ctx, a)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}
