package contracts

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/rpc"
)

// oGPU amounts in the token's smallest unit (18 decimals).
var oneOGPU = new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)

func ogpu(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), oneOGPU) }

// account is a funded key on the simulated chain.
type account struct {
	key  *ecdsa.PrivateKey
	addr common.Address
}

// tokenEnv is an OGPUToken deployed on a fresh simulated backend (a real
// EVM: go-ethereum's, every fork through Osaka active). pair is an EOA the
// owner registers as an AMM pair where a test needs one: the tax rule only
// looks at the registry, so an EOA exercises it exactly as a pair contract
// would (the real Uniswap V2 pair test is separate).
type tokenEnv struct {
	t                                            *testing.T
	sim                                          *simulated.Backend
	tok                                          *OGPUToken
	c                                            *bind.BoundContract
	addr                                         common.Address
	owner, holder, treasury, alice, bob, pair, x account
}

func newAccount(t *testing.T) account {
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return account{k, crypto.PubkeyToAddress(k.PublicKey)}
}

func newTokenEnv(t *testing.T) *tokenEnv {
	t.Helper()
	e := &tokenEnv{t: t, tok: NewOGPUToken()}
	accs := []*account{&e.owner, &e.holder, &e.treasury, &e.alice, &e.bob, &e.pair, &e.x}
	alloc := types.GenesisAlloc{}
	eth := new(big.Int).Mul(big.NewInt(100), oneOGPU) // 100 ETH each, for gas
	for _, a := range accs {
		*a = newAccount(t)
		alloc[a.addr] = types.Account{Balance: eth}
	}
	e.sim = simulated.NewBackend(alloc)
	t.Cleanup(func() { e.sim.Close() })
	addr, tx, err := bind.DeployContract(e.opts(e.owner), common.FromHex(OGPUTokenMetaData.Bin), e.sim.Client(),
		e.tok.PackConstructor(e.owner.addr, e.holder.addr, e.treasury.addr))
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	e.mined(tx)
	e.addr = addr
	e.c = e.tok.Instance(e.sim.Client(), addr)
	return e
}

func (e *tokenEnv) opts(a account) *bind.TransactOpts {
	id, err := e.sim.Client().ChainID(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return bind.NewKeyedTransactor(a.key, id)
}

func (e *tokenEnv) mined(tx *types.Transaction) *types.Receipt {
	e.t.Helper()
	e.sim.Commit()
	r, err := bind.WaitMined(context.Background(), e.sim.Client(), tx.Hash())
	if err != nil {
		e.t.Fatal(err)
	}
	if r.Status != types.ReceiptStatusSuccessful {
		e.t.Fatalf("tx %s reverted (gas used %d of %d)", tx.Hash(), r.GasUsed, tx.Gas())
	}
	return r
}

// send runs calldata from a and requires success.
func (e *tokenEnv) send(from account, data []byte) *types.Receipt {
	e.t.Helper()
	tx, err := bind.Transact(e.c, e.opts(from), data)
	if err != nil {
		e.t.Fatalf("tx from %s: %v", from.addr, e.revertReason(err))
	}
	return e.mined(tx)
}

// refused runs calldata from a, requires a revert and returns the decoded
// custom error (the revert surfaces at gas estimation, so nothing is mined).
func (e *tokenEnv) refused(from account, data []byte) any {
	e.t.Helper()
	_, err := bind.Transact(e.c, e.opts(from), data)
	if err == nil {
		e.sim.Commit()
		e.t.Fatalf("tx from %s succeeded, want a revert", from.addr)
	}
	return e.revertReason(err)
}

func (e *tokenEnv) revertReason(err error) any {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return err
	}
	s, ok := de.ErrorData().(string)
	if !ok {
		return err
	}
	raw, derr := hexutil.Decode(s)
	if derr != nil || len(raw) < 4 {
		return err
	}
	dec, uerr := e.tok.UnpackError(raw)
	if uerr != nil {
		return err
	}
	return dec
}

func (e *tokenEnv) balance(a common.Address) *big.Int {
	e.t.Helper()
	b, err := bind.Call(e.c, nil, e.tok.PackBalanceOf(a), e.tok.UnpackBalanceOf)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *tokenEnv) taxBps() int64 {
	e.t.Helper()
	b, err := bind.Call(e.c, nil, e.tok.PackTaxBps(), e.tok.UnpackTaxBps)
	if err != nil {
		e.t.Fatal(err)
	}
	return b.Int64()
}

func (e *tokenEnv) totalSupply() *big.Int {
	e.t.Helper()
	s, err := bind.Call(e.c, nil, e.tok.PackTotalSupply(), e.tok.UnpackTotalSupply)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// transfer sends value from one account to another and checks what each of
// from, to and the treasury gained or lost, and that the supply is unchanged.
func (e *tokenEnv) transfer(from, to account, value, wantReceived, wantTax *big.Int) {
	e.t.Helper()
	f0, r0, t0 := e.balance(from.addr), e.balance(to.addr), e.balance(e.treasury.addr)
	e.send(from, e.tok.PackTransfer(to.addr, value))
	f1, r1, t1 := e.balance(from.addr), e.balance(to.addr), e.balance(e.treasury.addr)
	if d := new(big.Int).Sub(f0, f1); d.Cmp(value) != 0 {
		e.t.Errorf("sender paid %s, want %s", d, value)
	}
	if d := new(big.Int).Sub(r1, r0); d.Cmp(wantReceived) != 0 {
		e.t.Errorf("recipient got %s, want %s", d, wantReceived)
	}
	if d := new(big.Int).Sub(t1, t0); d.Cmp(wantTax) != 0 {
		e.t.Errorf("treasury got %s, want %s", d, wantTax)
	}
	if s := e.totalSupply(); s.Cmp(totalSupply) != 0 {
		e.t.Errorf("total supply %s after a transfer, want %s", s, totalSupply)
	}
}

var totalSupply = ogpu(21_000_000)

// TestTokenSupplyFixed: the whole 21,000,000 × 10^18 supply is minted once,
// to the holder, and the contract has no way to mint more.
func TestTokenSupplyFixed(t *testing.T) {
	e := newTokenEnv(t)
	if s := e.totalSupply(); s.Cmp(totalSupply) != 0 || s.String() != "21000000000000000000000000" {
		t.Fatalf("total supply %s, want 21000000000000000000000000", s)
	}
	if b := e.balance(e.holder.addr); b.Cmp(totalSupply) != 0 {
		t.Fatalf("holder has %s, want the whole supply", b)
	}
	name, _ := bind.Call(e.c, nil, e.tok.PackName(), e.tok.UnpackName)
	sym, _ := bind.Call(e.c, nil, e.tok.PackSymbol(), e.tok.UnpackSymbol)
	dec, _ := bind.Call(e.c, nil, e.tok.PackDecimals(), e.tok.UnpackDecimals)
	if name != "oGPU" || sym != "OGPU" || dec != 18 {
		t.Fatalf("name %q symbol %q decimals %d, want oGPU OGPU 18", name, sym, dec)
	}
	// No external function of the ABI can create tokens: only the ERC-20,
	// ownership and tax-management ones exist.
	allowed := "acceptOwnership allowance approve balanceOf decimals isExempt isPair lowerTax name owner pendingOwner " +
		"removeTaxForever renounceOwnership setExempt setPair setTreasury symbol taxBps taxRemovedForever totalSupply " +
		"transfer transferFrom transferOwnership treasury MAX_TAX_BPS TOTAL_SUPPLY"
	for name := range e.tok.GetABI().Methods {
		if !strings.Contains(" "+allowed+" ", " "+name+" ") {
			t.Errorf("unexpected external function %s: the supply must be fixed", name)
		}
	}
	if bps := e.taxBps(); bps != 500 {
		t.Fatalf("tax %d bps at deployment, want 500", bps)
	}
}

// TestTokenConstructorRefusesZero: a zero holder would burn the supply, a
// zero treasury would burn the tax.
func TestTokenConstructorRefusesZero(t *testing.T) {
	e := newTokenEnv(t)
	for _, args := range [][3]common.Address{
		{e.owner.addr, {}, e.treasury.addr},
		{e.owner.addr, e.holder.addr, {}},
		{{}, e.holder.addr, e.treasury.addr},
	} {
		_, _, err := bind.DeployContract(e.opts(e.owner), common.FromHex(OGPUTokenMetaData.Bin), e.sim.Client(),
			e.tok.PackConstructor(args[0], args[1], args[2]))
		if err == nil {
			t.Errorf("deploy with %v succeeded, want a revert", args)
		}
	}
}

// TestTokenWalletTransfersUntaxed: transfers between wallets (no pair on
// either side) move the full amount.
func TestTokenWalletTransfersUntaxed(t *testing.T) {
	e := newTokenEnv(t)
	e.send(e.owner, e.tok.PackSetPair(e.pair.addr, true)) // a pair exists, but not on these transfers
	e.transfer(e.holder, e.alice, ogpu(1000), ogpu(1000), big.NewInt(0))
	e.transfer(e.alice, e.bob, ogpu(100), ogpu(100), big.NewInt(0))
	e.transfer(e.bob, e.alice, big.NewInt(7), big.NewInt(7), big.NewInt(0))
}

// TestTokenPairTransfersTaxed: a buy (from the pair) and a sell (to the
// pair), direct or through transferFrom, pay exactly 5.00% to the treasury;
// the supply is unchanged.
func TestTokenPairTransfersTaxed(t *testing.T) {
	e := newTokenEnv(t)
	e.send(e.owner, e.tok.PackSetPair(e.pair.addr, true))
	// Seeding the pair from the exempt holder (the liquidity add) is untaxed.
	e.transfer(e.holder, e.pair, ogpu(10_000), ogpu(10_000), big.NewInt(0))
	// Buy: 1000 leave the pair, the buyer gets 950, the treasury 50.
	e.transfer(e.pair, e.alice, ogpu(1000), ogpu(950), ogpu(50))
	// Sell: 100 leave the seller, the pair gets 95, the treasury 5.
	e.transfer(e.alice, e.pair, ogpu(100), ogpu(95), ogpu(5))
	// Rounding is down, in the payer's favour: 19 wei pays 0, 20 wei pays 1.
	e.transfer(e.alice, e.pair, big.NewInt(19), big.NewInt(19), big.NewInt(0))
	e.transfer(e.alice, e.pair, big.NewInt(20), big.NewInt(19), big.NewInt(1))
	// A sell through transferFrom (how a router moves tokens) is taxed too.
	e.send(e.alice, e.tok.PackApprove(e.bob.addr, ogpu(200)))
	p0, t0 := e.balance(e.pair.addr), e.balance(e.treasury.addr)
	e.send(e.bob, e.tok.PackTransferFrom(e.alice.addr, e.pair.addr, ogpu(200)))
	if d := new(big.Int).Sub(e.balance(e.pair.addr), p0); d.Cmp(ogpu(190)) != 0 {
		t.Errorf("pair got %s through transferFrom, want 190 oGPU", d)
	}
	if d := new(big.Int).Sub(e.balance(e.treasury.addr), t0); d.Cmp(ogpu(10)) != 0 {
		t.Errorf("treasury got %s through transferFrom, want 10 oGPU", d)
	}
	// Unregistering the pair stops the tax.
	e.send(e.owner, e.tok.PackSetPair(e.pair.addr, false))
	e.transfer(e.alice, e.pair, ogpu(10), ogpu(10), big.NewInt(0))
}

// TestTokenExemptUntaxed: an exempt side on either end of a pair transfer
// means no tax; revoking the exemption brings the tax back.
func TestTokenExemptUntaxed(t *testing.T) {
	e := newTokenEnv(t)
	e.send(e.owner, e.tok.PackSetPair(e.pair.addr, true))
	e.transfer(e.holder, e.pair, ogpu(10_000), ogpu(10_000), big.NewInt(0))
	e.transfer(e.holder, e.alice, ogpu(1000), ogpu(1000), big.NewInt(0))

	e.send(e.owner, e.tok.PackSetExempt(e.alice.addr, true))
	e.transfer(e.pair, e.alice, ogpu(100), ogpu(100), big.NewInt(0)) // exempt buyer
	e.transfer(e.alice, e.pair, ogpu(100), ogpu(100), big.NewInt(0)) // exempt seller
	e.transfer(e.pair, e.holder, ogpu(20), ogpu(20), big.NewInt(0))  // the holder is exempt from deployment

	e.send(e.owner, e.tok.PackSetExempt(e.alice.addr, false))
	e.transfer(e.alice, e.pair, ogpu(100), ogpu(95), ogpu(5))

	// An exempt pair is a tax-free venue for everyone.
	e.send(e.owner, e.tok.PackSetExempt(e.pair.addr, true))
	e.transfer(e.pair, e.bob, ogpu(100), ogpu(100), big.NewInt(0))
}

// TestTokenTaxOnlyGoesDown: the owner cannot raise the tax (the honeypot
// attack: 100% on sells), not even back to a rate it had; lowering works
// and applies at once.
func TestTokenTaxOnlyGoesDown(t *testing.T) {
	e := newTokenEnv(t)
	e.send(e.owner, e.tok.PackSetPair(e.pair.addr, true))
	e.transfer(e.holder, e.pair, ogpu(10_000), ogpu(10_000), big.NewInt(0))

	for _, bps := range []int64{500, 501, 10_000, 1 << 62} {
		got := e.refused(e.owner, e.tok.PackLowerTax(big.NewInt(bps)))
		want := &OGPUTokenTaxCanOnlyGoDown{CurrentBps: big.NewInt(500), RequestedBps: big.NewInt(bps)}
		if g, ok := got.(*OGPUTokenTaxCanOnlyGoDown); !ok || g.CurrentBps.Cmp(want.CurrentBps) != 0 || g.RequestedBps.Cmp(want.RequestedBps) != 0 {
			t.Errorf("lowerTax(%d) = %#v, want TaxCanOnlyGoDown(500, %d)", bps, got, bps)
		}
	}
	// 2^256-1 would overflow value*bps if it were ever stored: refused as well.
	max := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	if _, ok := e.refused(e.owner, e.tok.PackLowerTax(max)).(*OGPUTokenTaxCanOnlyGoDown); !ok {
		t.Error("lowerTax(2^256-1) not refused with TaxCanOnlyGoDown")
	}

	e.send(e.owner, e.tok.PackLowerTax(big.NewInt(250)))
	if bps := e.taxBps(); bps != 250 {
		t.Fatalf("tax %d bps after lowerTax(250)", bps)
	}
	e.transfer(e.pair, e.alice, ogpu(1000), ogpu(975), ogpu(25))
	// Back up to the old rate, or sideways: refused.
	for _, bps := range []int64{500, 300, 250} {
		if _, ok := e.refused(e.owner, e.tok.PackLowerTax(big.NewInt(bps))).(*OGPUTokenTaxCanOnlyGoDown); !ok {
			t.Errorf("lowerTax(%d) after 250 not refused with TaxCanOnlyGoDown", bps)
		}
	}
	if bps := e.taxBps(); bps != 250 {
		t.Fatalf("tax %d bps after refused raises, want 250", bps)
	}
	// Lowering to zero is allowed and stops the tax; it can then go no lower.
	e.send(e.owner, e.tok.PackLowerTax(big.NewInt(0)))
	e.transfer(e.pair, e.alice, ogpu(1000), ogpu(1000), big.NewInt(0))
	if _, ok := e.refused(e.owner, e.tok.PackLowerTax(big.NewInt(0))).(*OGPUTokenTaxCanOnlyGoDown); !ok {
		t.Error("lowerTax(0) at 0 not refused")
	}
}

// TestTokenRemoveTaxForever: after removeTaxForever no call can bring the
// tax back, and pair transfers are untaxed whatever the registry says.
func TestTokenRemoveTaxForever(t *testing.T) {
	e := newTokenEnv(t)
	e.send(e.owner, e.tok.PackSetPair(e.pair.addr, true))
	e.transfer(e.holder, e.pair, ogpu(10_000), ogpu(10_000), big.NewInt(0))
	e.send(e.owner, e.tok.PackLowerTax(big.NewInt(100)))

	r := e.send(e.owner, e.tok.PackRemoveTaxForever())
	var sawEvent bool
	for _, l := range r.Logs {
		if _, err := e.tok.UnpackTaxRemovedForeverEvent(l); err == nil {
			sawEvent = true
		}
	}
	if !sawEvent {
		t.Error("no TaxRemovedForever event")
	}
	removed, _ := bind.Call(e.c, nil, e.tok.PackTaxRemovedForever(), e.tok.UnpackTaxRemovedForever)
	if bps := e.taxBps(); bps != 0 || !removed {
		t.Fatalf("after removeTaxForever: tax %d bps, removed %v", bps, removed)
	}
	for name, data := range map[string][]byte{
		"lowerTax(0)":        e.tok.PackLowerTax(big.NewInt(0)),
		"lowerTax(500)":      e.tok.PackLowerTax(big.NewInt(500)),
		"removeTaxForever()": e.tok.PackRemoveTaxForever(),
	} {
		if _, ok := e.refused(e.owner, data).(*OGPUTokenTaxIsRemovedForever); !ok {
			t.Errorf("%s after removeTaxForever not refused with TaxIsRemovedForever", name)
		}
	}
	// Registering more pairs or revoking exemptions changes nothing now.
	e.send(e.owner, e.tok.PackSetPair(e.bob.addr, true))
	e.send(e.owner, e.tok.PackSetExempt(e.holder.addr, false))
	e.transfer(e.pair, e.alice, ogpu(1000), ogpu(1000), big.NewInt(0))
	e.transfer(e.alice, e.pair, ogpu(500), ogpu(500), big.NewInt(0))
	e.transfer(e.holder, e.bob, ogpu(500), ogpu(500), big.NewInt(0))
	if bps := e.taxBps(); bps != 0 {
		t.Fatalf("tax %d bps", bps)
	}
}

// TestTokenNonOwnerRefused: nobody but the owner can change the tax, the
// pair registry, exemptions or the treasury: a trader cannot exempt itself,
// unregister a pair to trade tax-free, or redirect the tax.
func TestTokenNonOwnerRefused(t *testing.T) {
	e := newTokenEnv(t)
	e.send(e.owner, e.tok.PackSetPair(e.pair.addr, true))
	calls := map[string][]byte{
		"lowerTax":          e.tok.PackLowerTax(big.NewInt(0)),
		"removeTaxForever":  e.tok.PackRemoveTaxForever(),
		"setPair":           e.tok.PackSetPair(e.pair.addr, false),
		"setExempt":         e.tok.PackSetExempt(e.x.addr, true),
		"setTreasury":       e.tok.PackSetTreasury(e.x.addr),
		"transferOwnership": e.tok.PackTransferOwnership(e.x.addr),
		"renounceOwnership": e.tok.PackRenounceOwnership(),
	}
	for _, who := range []account{e.x, e.holder, e.treasury, e.pair} {
		for name, data := range calls {
			got := e.refused(who, data)
			if g, ok := got.(*OGPUTokenOwnableUnauthorizedAccount); !ok || g.Account != who.addr {
				t.Errorf("%s from %s = %#v, want OwnableUnauthorizedAccount(%s)", name, who.addr, got, who.addr)
			}
		}
	}
	isPair, _ := bind.Call(e.c, nil, e.tok.PackIsPair(e.pair.addr), e.tok.UnpackIsPair)
	isExempt, _ := bind.Call(e.c, nil, e.tok.PackIsExempt(e.x.addr), e.tok.UnpackIsExempt)
	treasury, _ := bind.Call(e.c, nil, e.tok.PackTreasury(), e.tok.UnpackTreasury)
	owner, _ := bind.Call(e.c, nil, e.tok.PackOwner(), e.tok.UnpackOwner)
	if !isPair || isExempt || treasury != e.treasury.addr || owner != e.owner.addr || e.taxBps() != 500 {
		t.Fatalf("state changed by refused calls: pair %v exempt %v treasury %s owner %s tax %d",
			isPair, isExempt, treasury, owner, e.taxBps())
	}
}

// TestTokenOwnershipTwoStep: a transfer of ownership takes effect only when
// the new owner accepts it; until then the old owner keeps control and the
// pending one has none.
func TestTokenOwnershipTwoStep(t *testing.T) {
	e := newTokenEnv(t)
	e.send(e.owner, e.tok.PackTransferOwnership(e.alice.addr))
	if _, ok := e.refused(e.alice, e.tok.PackLowerTax(big.NewInt(1))).(*OGPUTokenOwnableUnauthorizedAccount); !ok {
		t.Fatal("pending owner could act before accepting")
	}
	if _, ok := e.refused(e.bob, e.tok.PackAcceptOwnership()).(*OGPUTokenOwnableUnauthorizedAccount); !ok {
		t.Fatal("someone else accepted the ownership")
	}
	e.send(e.alice, e.tok.PackAcceptOwnership())
	e.send(e.alice, e.tok.PackLowerTax(big.NewInt(1)))
	if _, ok := e.refused(e.owner, e.tok.PackLowerTax(big.NewInt(0))).(*OGPUTokenOwnableUnauthorizedAccount); !ok {
		t.Fatal("old owner still in control")
	}
}

// TestTokenSetTreasury: the tax goes to the new treasury; the zero address
// is refused (it would burn the tax).
func TestTokenSetTreasury(t *testing.T) {
	e := newTokenEnv(t)
	e.send(e.owner, e.tok.PackSetPair(e.pair.addr, true))
	e.transfer(e.holder, e.pair, ogpu(10_000), ogpu(10_000), big.NewInt(0))
	if _, ok := e.refused(e.owner, e.tok.PackSetTreasury(common.Address{})).(*OGPUTokenZeroAddress); !ok {
		t.Fatal("zero treasury not refused with ZeroAddress")
	}
	if _, ok := e.refused(e.owner, e.tok.PackSetPair(common.Address{}, true)).(*OGPUTokenZeroAddress); !ok {
		t.Fatal("zero pair not refused with ZeroAddress")
	}
	old := e.treasury
	e.send(e.owner, e.tok.PackSetTreasury(e.bob.addr))
	e.treasury = e.bob
	o0 := e.balance(old.addr)
	e.transfer(e.pair, e.alice, ogpu(1000), ogpu(950), ogpu(50))
	if e.balance(old.addr).Cmp(o0) != 0 {
		t.Fatal("the old treasury still receives tax")
	}
}
