package contracts

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
)

// The Uniswap V2 contracts are GPL-licensed, so nothing of them is
// committed: the tests read the compiled artifacts (abi + bytecode) that the
// pinned npm packages @uniswap/v2-core and @uniswap/v2-periphery ship, from
// contracts/node_modules, and skip without them.
const uniswapModules = "node_modules/@uniswap"

// uniArtifact is one compiled Uniswap contract from the npm build folder.
type uniArtifact struct {
	abi abi.ABI
	bin []byte
}

func loadUniArtifact(t *testing.T, rel string) uniArtifact {
	t.Helper()
	p := filepath.Join(uniswapModules, rel)
	raw, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("Uniswap V2 artifacts missing (%s): run `cd contracts && npm ci` to install them", p)
	}
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		ABI      json.RawMessage `json:"abi"`
		Bytecode string          `json:"bytecode"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	a, err := abi.JSON(strings.NewReader(string(j.ABI)))
	if err != nil {
		t.Fatalf("%s abi: %v", p, err)
	}
	bin := common.FromHex(j.Bytecode)
	if len(bin) == 0 {
		t.Fatalf("%s has no bytecode", p)
	}
	return uniArtifact{a, bin}
}

// uniContract is a deployed Uniswap contract driven through its parsed ABI.
type uniContract struct {
	abi abi.ABI
	c   *bind.BoundContract
}

func (u uniContract) pack(t *testing.T, method string, args ...any) []byte {
	t.Helper()
	data, err := u.abi.Pack(method, args...)
	if err != nil {
		t.Fatalf("pack %s: %v", method, err)
	}
	return data
}

// uniEnv is OGPUToken plus a real Uniswap V2 factory, WETH9 and Router02 and
// the token/WETH pair, registered with setPair and seeded by the (exempt)
// holder with 1,000,000 oGPU and 50 ETH.
type uniEnv struct {
	*tokenEnv
	factory, weth, router, pair uniContract
	pairAddr, wethAddr          common.Address
	routerAddr                  common.Address
}

var deadline = new(big.Int).SetUint64(1 << 40)

func newUniEnv(t *testing.T) *uniEnv {
	t.Helper()
	factoryArt := loadUniArtifact(t, "v2-core/build/UniswapV2Factory.json")
	pairArt := loadUniArtifact(t, "v2-core/build/UniswapV2Pair.json")
	wethArt := loadUniArtifact(t, "v2-periphery/build/WETH9.json")
	routerArt := loadUniArtifact(t, "v2-periphery/build/UniswapV2Router02.json")

	u := &uniEnv{tokenEnv: newTokenEnv(t)}
	var factoryAddr common.Address
	u.factory, factoryAddr = u.deploy(factoryArt, u.owner.addr) // feeToSetter
	u.weth, u.wethAddr = u.deploy(wethArt)
	u.router, u.routerAddr = u.deploy(routerArt, factoryAddr, u.wethAddr)

	u.uniSend(u.owner, u.factory, nil, "createPair", u.addr, u.wethAddr)
	u.pairAddr = u.uniCall(u.factory, "getPair", u.addr, u.wethAddr)[0].(common.Address)
	if u.pairAddr == (common.Address{}) {
		t.Fatal("factory has no pair after createPair")
	}
	u.pair = uniContract{pairArt.abi, bind.NewBoundContract(u.pairAddr, pairArt.abi, u.sim.Client(), u.sim.Client(), u.sim.Client())}
	u.send(u.owner, u.tok.PackSetPair(u.pairAddr, true))

	// The holder is exempt: its liquidity reaches the pair untaxed.
	tokens, eth := ogpu(1_000_000), ogpu(50)
	t0 := u.balance(u.treasury.addr)
	u.send(u.holder, u.tok.PackApprove(u.routerAddr, tokens))
	u.uniSend(u.holder, u.router, eth, "addLiquidityETH", u.addr, tokens, tokens, eth, u.holder.addr, deadline)
	if b := u.balance(u.pairAddr); b.Cmp(tokens) != 0 {
		t.Fatalf("pair holds %s oGPU after the exempt holder's addLiquidityETH, want %s", b, tokens)
	}
	if d := new(big.Int).Sub(u.balance(u.treasury.addr), t0); d.Sign() != 0 {
		t.Fatalf("treasury gained %s on the exempt holder's liquidity, want 0", d)
	}
	// Give alice (a plain, non-exempt wallet) tokens to sell; wallet transfers are untaxed.
	u.transfer(u.holder, u.alice, ogpu(10_000), ogpu(10_000), new(big.Int))
	return u
}

func (u *uniEnv) deploy(a uniArtifact, args ...any) (uniContract, common.Address) {
	u.t.Helper()
	in, err := a.abi.Pack("", args...)
	if err != nil {
		u.t.Fatalf("pack constructor: %v", err)
	}
	addr, tx, err := bind.DeployContract(u.opts(u.owner), a.bin, u.sim.Client(), in)
	if err != nil {
		u.t.Fatalf("deploy: %v", err)
	}
	u.mined(tx)
	return uniContract{a.abi, bind.NewBoundContract(addr, a.abi, u.sim.Client(), u.sim.Client(), u.sim.Client())}, addr
}

// uniTx sends a call to a Uniswap contract with value wei attached; gas 0
// means estimate it.
func (u *uniEnv) uniTx(from account, c uniContract, value *big.Int, gas uint64, method string, args ...any) (*types.Transaction, error) {
	u.t.Helper()
	opts := u.opts(from)
	opts.Value = value
	opts.GasLimit = gas
	return bind.Transact(c.c, opts, c.pack(u.t, method, args...))
}

// uniSend requires success and returns the receipt. It sets a fixed,
// generous gas limit instead of estimating: the estimate for a plain
// swapExactETHForTokens came out short here (the mined tx failed at 173,200
// gas used of an estimated 174,613 and passes with more gas; the cause was
// not investigated), and createPair alone needs more than 3,000,000.
func (u *uniEnv) uniSend(from account, c uniContract, value *big.Int, method string, args ...any) *types.Receipt {
	u.t.Helper()
	tx, err := u.uniTx(from, c, value, 10_000_000, method, args...)
	if err != nil {
		u.t.Fatalf("%s from %s: %v", method, from.addr, revertString(err))
	}
	return u.mined(tx)
}

// uniRefused requires a revert (at gas estimation, so nothing is mined) and
// returns its reason string.
func (u *uniEnv) uniRefused(from account, c uniContract, value *big.Int, method string, args ...any) string {
	u.t.Helper()
	_, err := u.uniTx(from, c, value, 0, method, args...)
	if err == nil {
		u.sim.Commit()
		u.t.Fatalf("%s from %s succeeded, want a revert", method, from.addr)
	}
	return revertString(err)
}

// revertString is the Error(string) reason of a revert, or the error text.
func revertString(err error) string {
	var de rpc.DataError
	if errors.As(err, &de) {
		if s, ok := de.ErrorData().(string); ok {
			if raw, derr := hexutil.Decode(s); derr == nil {
				if r, uerr := abi.UnpackRevert(raw); uerr == nil {
					return r
				}
			}
		}
	}
	return err.Error()
}

func (u *uniEnv) uniCall(c uniContract, method string, args ...any) []any {
	u.t.Helper()
	out, err := bind.Call(c.c, nil, c.pack(u.t, method, args...), func(b []byte) ([]any, error) {
		return c.abi.Unpack(method, b)
	})
	if err != nil {
		u.t.Fatalf("call %s: %v", method, err)
	}
	return out
}

func (u *uniEnv) ethBalance(a common.Address) *big.Int {
	u.t.Helper()
	b, err := u.sim.Client().BalanceAt(context.Background(), a, nil)
	if err != nil {
		u.t.Fatal(err)
	}
	return b
}

// reserves returns the pair's (oGPU, WETH) reserves.
func (u *uniEnv) reserves() (tok, weth *big.Int) {
	u.t.Helper()
	r := u.uniCall(u.pair, "getReserves")
	r0, r1 := r[0].(*big.Int), r[1].(*big.Int)
	if strings.EqualFold(u.uniCall(u.pair, "token0")[0].(common.Address).Hex(), u.addr.Hex()) {
		return r0, r1
	}
	return r1, r0
}

// quote is the router's output for amountIn against the given reserves.
func (u *uniEnv) quote(amountIn, reserveIn, reserveOut *big.Int) *big.Int {
	u.t.Helper()
	return u.uniCall(u.router, "getAmountOut", amountIn, reserveIn, reserveOut)[0].(*big.Int)
}

func tax5(v *big.Int) *big.Int {
	return new(big.Int).Div(new(big.Int).Mul(v, big.NewInt(500)), big.NewInt(10_000))
}

func gasPaid(r *types.Receipt) *big.Int {
	return new(big.Int).Mul(new(big.Int).SetUint64(r.GasUsed), r.EffectiveGasPrice)
}

// buy has buyer spend eth on oGPU through method and checks that the pair
// sent exactly the router's quote, the treasury got wantTax of it and the
// buyer the rest.
func (u *uniEnv) buy(buyer account, method string, eth, minOut *big.Int, taxed bool) {
	u.t.Helper()
	rt, rw := u.reserves()
	quoted := u.quote(eth, rw, rt)
	p0, b0, t0 := u.balance(u.pairAddr), u.balance(buyer.addr), u.balance(u.treasury.addr)
	u.uniSend(buyer, u.router, eth, method, minOut, []common.Address{u.wethAddr, u.addr}, buyer.addr, deadline)
	p1, b1, t1 := u.balance(u.pairAddr), u.balance(buyer.addr), u.balance(u.treasury.addr)
	sent := new(big.Int).Sub(p0, p1)
	if sent.Cmp(quoted) != 0 || sent.Sign() <= 0 {
		u.t.Fatalf("%s: pair sent %s oGPU, want the quote %s", method, sent, quoted)
	}
	wantTax := new(big.Int)
	if taxed {
		wantTax = tax5(sent)
	}
	if d := new(big.Int).Sub(t1, t0); d.Cmp(wantTax) != 0 {
		u.t.Errorf("%s: treasury got %s of %s, want %s", method, d, sent, wantTax)
	}
	if d, want := new(big.Int).Sub(b1, b0), new(big.Int).Sub(sent, wantTax); d.Cmp(want) != 0 {
		u.t.Errorf("%s: buyer got %s of %s, want %s", method, d, sent, want)
	}
}

// sell has seller sell amount oGPU through method and checks that the
// seller paid amount, the treasury got wantTax, the pair the rest, and the
// seller exactly the ETH that the pair's price gives for what it received.
func (u *uniEnv) sell(seller account, method string, amount *big.Int, taxed bool) {
	u.t.Helper()
	u.send(seller, u.tok.PackApprove(u.routerAddr, amount))
	rt, rw := u.reserves()
	wantTax := new(big.Int)
	if taxed {
		wantTax = tax5(amount)
	}
	arrives := new(big.Int).Sub(amount, wantTax)
	wantETH := u.quote(arrives, rt, rw)
	p0, s0, t0, e0 := u.balance(u.pairAddr), u.balance(seller.addr), u.balance(u.treasury.addr), u.ethBalance(seller.addr)
	r := u.uniSend(seller, u.router, nil, method, amount, big.NewInt(1), []common.Address{u.addr, u.wethAddr}, seller.addr, deadline)
	p1, s1, t1, e1 := u.balance(u.pairAddr), u.balance(seller.addr), u.balance(u.treasury.addr), u.ethBalance(seller.addr)
	if d := new(big.Int).Sub(s0, s1); d.Cmp(amount) != 0 {
		u.t.Errorf("%s: seller paid %s oGPU, want %s", method, d, amount)
	}
	if d := new(big.Int).Sub(t1, t0); d.Cmp(wantTax) != 0 {
		u.t.Errorf("%s: treasury got %s of %s, want %s", method, d, amount, wantTax)
	}
	if d := new(big.Int).Sub(p1, p0); d.Cmp(arrives) != 0 {
		u.t.Errorf("%s: pair received %s of %s, want %s", method, d, amount, arrives)
	}
	gotETH := new(big.Int).Sub(e1, e0)
	gotETH.Add(gotETH, gasPaid(r))
	if gotETH.Cmp(wantETH) != 0 || gotETH.Sign() <= 0 {
		u.t.Errorf("%s: seller got %s wei, want %s", method, gotETH, wantETH)
	}
}

// TestUniswapBuyTaxed: a buy through a real Router02 from a real V2 pair
// pays exactly 5.00% of what the pair sent to the treasury, with either buy
// function. The fee-on-transfer variant checks amountOutMin against what
// the buyer actually received, so a minimum at the untaxed quote reverts
// and buyers need at least 5% slippage tolerance; the plain function checks
// the pre-tax quote and silently delivers 95% of it.
func TestUniswapBuyTaxed(t *testing.T) {
	u := newUniEnv(t)
	u.buy(u.alice, "swapExactETHForTokensSupportingFeeOnTransferTokens", ogpu(1), big.NewInt(1), true)

	rt, rw := u.reserves()
	quoted := u.quote(ogpu(1), rw, rt)
	if r := u.uniRefused(u.alice, u.router, ogpu(1), "swapExactETHForTokensSupportingFeeOnTransferTokens",
		quoted, []common.Address{u.wethAddr, u.addr}, u.alice.addr, deadline); !strings.Contains(r, "INSUFFICIENT_OUTPUT_AMOUNT") {
		t.Errorf("buy with amountOutMin at the untaxed quote: %q, want UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT", r)
	}
	withSlippage := new(big.Int).Sub(quoted, tax5(quoted)) // exactly 5% below the quote
	u.buy(u.alice, "swapExactETHForTokensSupportingFeeOnTransferTokens", ogpu(1), withSlippage, true)

	rt, rw = u.reserves()
	quoted = u.quote(ogpu(2), rw, rt)
	u.buy(u.bob, "swapExactETHForTokens", ogpu(2), quoted, true) // min = full quote, buyer still gets 95%
}

// TestUniswapSellTaxed: a sell with
// swapExactTokensForETHSupportingFeeOnTransferTokens pays exactly 5.00% to
// the treasury; the pair receives 95% and prices the ETH out on that.
func TestUniswapSellTaxed(t *testing.T) {
	u := newUniEnv(t)
	u.sell(u.alice, "swapExactTokensForETHSupportingFeeOnTransferTokens", ogpu(1_000), true)
	u.sell(u.alice, "swapExactTokensForETHSupportingFeeOnTransferTokens", big.NewInt(123_456_789), true) // rounding down
}

// TestUniswapPlainSellReverts: the plain swapExactTokensForETH sell of a
// taxed account reverts with "UniswapV2: K" (the router computes the output
// from the full input, the pair receives 95%), and nothing moves. The same
// call by an exempt account succeeds, so the tax is the cause.
func TestUniswapPlainSellReverts(t *testing.T) {
	u := newUniEnv(t)
	amount := ogpu(1_000)
	u.send(u.alice, u.tok.PackApprove(u.routerAddr, amount))
	a0, p0 := u.balance(u.alice.addr), u.balance(u.pairAddr)
	r := u.uniRefused(u.alice, u.router, nil, "swapExactTokensForETH", amount, big.NewInt(1),
		[]common.Address{u.addr, u.wethAddr}, u.alice.addr, deadline)
	if !strings.Contains(r, "UniswapV2: K") {
		t.Fatalf("plain sell: %q, want UniswapV2: K", r)
	}
	if u.balance(u.alice.addr).Cmp(a0) != 0 || u.balance(u.pairAddr).Cmp(p0) != 0 {
		t.Fatal("balances moved on a reverted sell")
	}
	u.send(u.owner, u.tok.PackSetExempt(u.alice.addr, true))
	u.sell(u.alice, "swapExactTokensForETH", amount, false)
}

// TestUniswapExemptUntaxed: an exempt account buys and sells through the
// router with no tax: the treasury gains nothing and the buyer gets all the
// pair sent, the pair all the seller paid.
func TestUniswapExemptUntaxed(t *testing.T) {
	u := newUniEnv(t)
	u.send(u.owner, u.tok.PackSetExempt(u.bob.addr, true))
	u.buy(u.bob, "swapExactETHForTokensSupportingFeeOnTransferTokens", ogpu(1), big.NewInt(1), false)
	u.buy(u.bob, "swapExactETHForTokens", ogpu(1), big.NewInt(1), false)
	u.sell(u.bob, "swapExactTokensForETHSupportingFeeOnTransferTokens", ogpu(1_000), false)
	// Un-exempted, the same account pays the tax again.
	u.send(u.owner, u.tok.PackSetExempt(u.bob.addr, false))
	u.sell(u.bob, "swapExactTokensForETHSupportingFeeOnTransferTokens", ogpu(1_000), true)
}

// TestUniswapWalletTransfersUntaxed: with a live pair registered, transfers
// between wallets (neither is a pair) stay untaxed, including tokens that
// were just bought from the pair.
func TestUniswapWalletTransfersUntaxed(t *testing.T) {
	u := newUniEnv(t)
	u.buy(u.bob, "swapExactETHForTokensSupportingFeeOnTransferTokens", ogpu(1), big.NewInt(1), true)
	v := u.balance(u.bob.addr)
	u.transfer(u.bob, u.x, v, v, new(big.Int))
	u.transfer(u.alice, u.bob, ogpu(5_000), ogpu(5_000), new(big.Int))
}
