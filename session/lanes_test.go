package session

import (
	"crypto/ecdsa"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

const chainID = "ogpu-test-1"

type party struct {
	key  *ecdsa.PrivateKey
	addr types.Address
}

func newParty(t *testing.T) party {
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return party{k, crypto.PubkeyToAddress(k.PublicKey)}
}

// lanesEnv is a store where the client has locked two 100 oGPU lanes and a
// 4 oGPU fee reserve (fee 2%) for session 7, expiring at 50 with 10 blocks
// of grace.
type lanesEnv struct {
	t            *testing.T
	kv           *store.Tree
	client, a, b party
	height       uint64
}

func newLanes(t *testing.T) *lanesEnv {
	e := &lanesEnv{t: t, kv: store.NewMemTree(), client: newParty(t), a: newParty(t), b: newParty(t), height: 10}
	esc := escrow.NewKeeper(e.kv)
	esc.SetGenesisBalance(e.client.addr, types.OGPU(1000))
	if err := esc.Lock(e.client.addr, 7, types.OGPU(204)); err != nil {
		t.Fatal(err)
	}
	s := &Session{ID: 7, Client: e.client.addr, PriceIn: types.OGPU(0), PriceOut: types.OGPU(1), Expiry: 50, Grace: 10,
		Lanes: []Lane{{Provider: e.a.addr, Budget: types.OGPU(100)}, {Provider: e.b.addr, Budget: types.OGPU(100)}},
		Fee:   types.OGPU(4), FeeBps: 200}
	if err := e.keeper().Open(s); err != nil {
		t.Fatal(err)
	}
	e.check()
	return e
}

func (e *lanesEnv) keeper() *Keeper {
	return NewKeeper(Context{KV: e.kv, ChainID: chainID, Height: e.height})
}

func (e *lanesEnv) check() {
	e.t.Helper()
	if err := Invariant(e.kv); err != nil {
		e.t.Fatal(err)
	}
}

func (e *lanesEnv) voucher(signer party, provider types.Address, cum *uint256.Int, seq uint64) (*Voucher, []byte) {
	v := &Voucher{ChainID: chainID, Session: 7, Provider: provider, Cumulative: cum, Seq: seq}
	sig, err := Sign(signer.key, v.Hash())
	if err != nil {
		e.t.Fatal(err)
	}
	return v, sig
}

func (e *lanesEnv) balance(p types.Address) *uint256.Int { return escrow.NewKeeper(e.kv).Balance(p) }

// TestRedeemIsCumulative: a lane pays cumulative − paid; an older or equal
// voucher pays nothing (S2), a later one the difference, an over-budget one
// up to the budget (S7), and each redemption moves its fee share to the fee
// pool. Whoever sends it, the voucher's provider is paid (S20).
func TestRedeemIsCumulative(t *testing.T) {
	e := newLanes(t)
	k := e.keeper()
	v3, s3 := e.voucher(e.client, e.a.addr, types.OGPU(5), 3)
	if pay, err := k.Redeem(v3, s3); err != nil || !pay.Eq(types.OGPU(5)) {
		t.Fatalf("first voucher paid %v, %v", pay, err)
	}
	v2, s2 := e.voucher(e.client, e.a.addr, types.OGPU(3), 2)
	for _, x := range []struct {
		v *Voucher
		s []byte
	}{{v3, s3}, {v2, s2}} {
		if _, err := k.Redeem(x.v, x.s); err == nil || !strings.Contains(err.Error(), "pays nothing more") {
			t.Fatalf("replayed or older voucher %d: %v", x.v.Seq, err)
		}
	}
	v5, s5 := e.voucher(e.client, e.a.addr, types.OGPU(8), 5)
	if pay, err := k.Redeem(v5, s5); err != nil || !pay.Eq(types.OGPU(3)) {
		t.Fatalf("later voucher paid %v, %v; want the 3 oGPU difference", pay, err)
	}
	if !e.balance(e.a.addr).Eq(types.OGPU(8)) {
		t.Fatalf("provider a holds %s", types.FormatAmount(e.balance(e.a.addr)))
	}
	if fp := escrow.NewKeeper(e.kv).FeePool(); !fp.Eq(new(uint256.Int).Div(types.OGPU(16), uint256.NewInt(100))) {
		t.Fatalf("fee pool %s, want 2%% of 8", types.FormatAmount(fp))
	}
	e.check()
	// Over budget: pays up to the budget, and the lane is then full.
	vb, sb := e.voucher(e.client, e.b.addr, types.OGPU(150), 9)
	if pay, err := k.Redeem(vb, sb); err != nil || !pay.Eq(types.OGPU(100)) {
		t.Fatalf("over-budget voucher paid %v, %v", pay, err)
	}
	if _, err := k.Redeem(vb, sb); err == nil {
		t.Fatal("a full lane paid again")
	}
	e.check()
}

// TestRedeemRefusesForgeries: signed by anyone but the client, for another
// chain, session or provider, a high-s twin: refused, nothing moves.
func TestRedeemRefusesForgeries(t *testing.T) {
	e := newLanes(t)
	k := e.keeper()
	stranger := newParty(t)
	before := escrow.NewKeeper(e.kv).Locked(7)
	cases := map[string]func() (*Voucher, []byte){
		"signed by the provider": func() (*Voucher, []byte) { return e.voucher(e.a, e.a.addr, types.OGPU(5), 1) },
		"signed by a stranger":   func() (*Voucher, []byte) { return e.voucher(stranger, e.a.addr, types.OGPU(5), 1) },
		"another chain": func() (*Voucher, []byte) {
			v, _ := e.voucher(e.client, e.a.addr, types.OGPU(5), 1)
			v.ChainID = "other"
			sig, _ := Sign(e.client.key, v.Hash())
			return v, sig
		},
		"not a lane": func() (*Voucher, []byte) { return e.voucher(e.client, stranger.addr, types.OGPU(5), 1) },
		"payee swapped": func() (*Voucher, []byte) {
			v, sig := e.voucher(e.client, e.a.addr, types.OGPU(5), 1)
			v.Provider = e.b.addr // b sends a's voucher as its own
			return v, sig
		},
		"high s": func() (*Voucher, []byte) {
			v, sig := e.voucher(e.client, e.a.addr, types.OGPU(5), 1)
			n := crypto.S256().Params().N
			s := new(big.Int).Sub(n, new(big.Int).SetBytes(sig[32:64]))
			twin := append([]byte(nil), sig...)
			s.FillBytes(twin[32:64])
			twin[64] ^= 1
			return v, twin
		},
		"unknown session": func() (*Voucher, []byte) {
			v, _ := e.voucher(e.client, e.a.addr, types.OGPU(5), 1)
			v.Session = 8
			sig, _ := Sign(e.client.key, v.Hash())
			return v, sig
		},
	}
	for name, f := range cases {
		v, sig := f()
		if pay, err := k.Redeem(v, sig); err == nil {
			t.Errorf("%s: paid %s", name, pay)
		}
	}
	if !escrow.NewKeeper(e.kv).Locked(7).Eq(before) {
		t.Fatal("a refused voucher moved funds")
	}
	e.check()
}

// TestCloseGraceRefund: only the client closes; redemptions stay open for
// the grace after the close (a spammer cannot make the provider's
// redemption miss by filling one block, S6); then the end-block refunds
// exactly what no voucher claimed and the session takes nothing more.
func TestCloseGraceRefund(t *testing.T) {
	e := newLanes(t)
	if err := e.keeper().Close(e.a.addr, 7); err == nil {
		t.Fatal("a provider closed the session")
	}
	e.height = 20
	if err := e.keeper().Close(e.client.addr, 7); err != nil {
		t.Fatal(err)
	}
	v, sig := e.voucher(e.client, e.a.addr, types.OGPU(30), 4)
	e.height = 30 // inside the grace (20 + 10)
	e.keeper().EndBlock()
	if _, err := e.keeper().Redeem(v, sig); err != nil {
		t.Fatalf("redemption in the grace: %v", err)
	}
	client := e.balance(e.client.addr)
	e.height = 31
	k := e.keeper()
	if _, err := k.Redeem(v, sig); err == nil {
		t.Fatal("a redemption after the grace was taken")
	}
	k.EndBlock()
	s, _ := Get(e.kv, 7)
	// Refund: 200 − 30 of lanes, fee reserve 4 − 0.6.
	want := new(uint256.Int).Add(client, new(uint256.Int).Sub(types.OGPU(174), new(uint256.Int).Div(types.OGPU(60), uint256.NewInt(100))))
	if !s.Settled || !e.balance(e.client.addr).Eq(want) || !escrow.NewKeeper(e.kv).Locked(7).IsZero() {
		t.Fatalf("settled %v, client %s (want %s), escrow %s", s.Settled, types.FormatAmount(e.balance(e.client.addr)), types.FormatAmount(want), escrow.NewKeeper(e.kv).Locked(7))
	}
	e.check()
}

// TestSettleIsBounded: many sessions due at one height settle at most
// MaxSettlePerBlock per block, the rest in the next blocks (S19).
func TestSettleIsBounded(t *testing.T) {
	kv := store.NewMemTree()
	client := newParty(t)
	esc := escrow.NewKeeper(kv)
	n := MaxSettlePerBlock + 5
	esc.SetGenesisBalance(client.addr, types.OGPU(uint64(n)))
	for i := range n {
		id := uint64(100 + i)
		if err := esc.Lock(client.addr, id, types.OGPU(1)); err != nil {
			t.Fatal(err)
		}
		s := &Session{ID: id, Client: client.addr, PriceIn: new(uint256.Int), PriceOut: new(uint256.Int), Expiry: 5, Grace: 1,
			Lanes: []Lane{{Provider: client.addr, Budget: types.OGPU(1)}}, Fee: new(uint256.Int)}
		if err := NewKeeper(Context{KV: kv, ChainID: chainID, Height: 1}).Open(s); err != nil {
			t.Fatal(err)
		}
	}
	settled := func() int {
		c := 0
		for i := range n {
			if s, _ := Get(kv, uint64(100+i)); s.Settled {
				c++
			}
		}
		return c
	}
	NewKeeper(Context{KV: kv, ChainID: chainID, Height: 7}).EndBlock()
	if got := settled(); got != MaxSettlePerBlock {
		t.Fatalf("%d settled in the first block, want %d", got, MaxSettlePerBlock)
	}
	NewKeeper(Context{KV: kv, ChainID: chainID, Height: 8}).EndBlock()
	if got := settled(); got != n {
		t.Fatalf("%d settled after the second block, want %d", got, n)
	}
	if err := Invariant(kv); err != nil {
		t.Fatal(err)
	}
}

// TestSignedObjectsAreDomainSeparated: the same fields under another tag
// hash differently, so no signed object can be replayed as another.
func TestSignedObjectsAreDomainSeparated(t *testing.T) {
	q := &Request{ChainID: chainID, Session: 1, Seq: 2}
	r := &Receipt{ChainID: chainID, Session: 1, Seq: 2}
	if q.Hash() == r.Hash() || digest(VoucherTag, q) == q.Hash() {
		t.Fatal("tags do not separate the digests")
	}
	f := &Refusal{ChainID: chainID, Session: 1, Seq: 2}
	if f.Hash() == digest(ReceiptTag, f) || f.Hash() == digest(RequestTag, f) {
		t.Fatal("a refusal's digest is another object's")
	}
	if _, err := Signer(q.Hash(), make([]byte, 64)); err == nil {
		t.Fatal("a 64-byte signature was accepted")
	}
}
