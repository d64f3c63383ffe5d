package escrow

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

var (
	alice = types.BytesToAddress([]byte{0xa1})
	bob   = types.BytesToAddress([]byte{0xb0})
	carol = types.BytesToAddress([]byte{0xc0})
)

// dump is every key and value in r, in order.
func dump(r store.Reader) string {
	var b strings.Builder
	r.Iterate(nil, nil, func(k, v []byte) bool {
		fmt.Fprintf(&b, "%x=%x\n", k, v)
		return false
	})
	return b.String()
}

// genesisKV returns a tree with alice 100, bob 50 and the totals that make
// the supply add up.
func genesisKV(t *testing.T) *store.Tree {
	t.Helper()
	tree := store.NewMemTree()
	k := NewKeeper(tree)
	k.SetGenesisBalance(alice, types.OGPU(100))
	k.SetGenesisBalance(bob, types.OGPU(50))
	feePool, burned := types.OGPU(3), types.OGPU(7)
	reserve := new(uint256.Int).Sub(types.MaxSupply, types.OGPU(160))
	k.SetGenesisTotals(feePool, burned, reserve)
	if err := SupplyInvariant(tree); err != nil {
		t.Fatalf("genesis: %v", err)
	}
	return tree
}

func TestSend(t *testing.T) {
	cases := []struct {
		name                 string
		from, to             types.Address
		amt                  *uint256.Int
		err                  error
		wantFrom, wantTo     *uint256.Int
		fromDeleted, toAdded bool
	}{
		{name: "part", from: alice, to: bob, amt: types.OGPU(30), wantFrom: types.OGPU(70), wantTo: types.OGPU(80)},
		{name: "one base unit", from: alice, to: bob, amt: uint256.NewInt(1),
			wantFrom: new(uint256.Int).Sub(types.OGPU(100), uint256.NewInt(1)), wantTo: new(uint256.Int).Add(types.OGPU(50), uint256.NewInt(1))},
		{name: "to a new account", from: alice, to: carol, amt: types.OGPU(1), wantFrom: types.OGPU(99), wantTo: types.OGPU(1), toAdded: true},
		{name: "everything deletes the sender's balance", from: bob, to: alice, amt: types.OGPU(50), wantFrom: new(uint256.Int), wantTo: types.OGPU(150), fromDeleted: true},
		{name: "to self", from: alice, to: alice, amt: types.OGPU(40), wantFrom: types.OGPU(100), wantTo: types.OGPU(100)},
		{name: "one unit too much", from: bob, to: alice, amt: new(uint256.Int).Add(types.OGPU(50), uint256.NewInt(1)), err: types.ErrInsufficientFunds},
		{name: "from an empty account", from: carol, to: alice, amt: uint256.NewInt(1), err: types.ErrInsufficientFunds},
		{name: "to self, too much", from: alice, to: alice, amt: types.OGPU(101), err: types.ErrInsufficientFunds},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tree := genesisKV(t)
			before := dump(tree)
			// Through a cache, as a transaction does: on error the cache
			// must hold no writes at all.
			c := store.NewCache(tree)
			k := NewKeeper(c)
			err := k.Send(tc.from, tc.to, tc.amt)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Send error = %v, want %v", err, tc.err)
				}
				if c.Len() != 0 {
					t.Fatalf("failed Send buffered %d writes", c.Len())
				}
				c.Write()
				if after := dump(tree); after != before {
					t.Fatalf("failed Send changed the store:\n%s\nwas\n%s", after, before)
				}
				return
			}
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			c.Write()
			k = NewKeeper(tree)
			if got := k.Balance(tc.from); !got.Eq(tc.wantFrom) {
				t.Fatalf("sender has %s, want %s", got.Dec(), tc.wantFrom.Dec())
			}
			if got := k.Balance(tc.to); !got.Eq(tc.wantTo) {
				t.Fatalf("recipient has %s, want %s", got.Dec(), tc.wantTo.Dec())
			}
			if present := tree.Get(BalanceKey(tc.from)) != nil; present == tc.fromDeleted {
				t.Fatalf("sender's balance key present = %v, want %v", present, !tc.fromDeleted)
			}
			if tc.toAdded && tree.Get(BalanceKey(tc.to)) == nil {
				t.Fatal("recipient's balance key not written")
			}
			if err := SupplyInvariant(tree); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestZeroBalancesAreNotStored(t *testing.T) {
	tree := store.NewMemTree()
	k := NewKeeper(tree)
	k.SetGenesisBalance(alice, new(uint256.Int))
	k.SetGenesisTotals(new(uint256.Int), new(uint256.Int), new(uint256.Int))
	if d := dump(tree); d != "" {
		t.Fatalf("zero amounts were stored:\n%s", d)
	}
	k.SetGenesisBalance(alice, uint256.NewInt(5))
	if err := k.Send(alice, bob, new(uint256.Int)); err != nil {
		t.Fatalf("zero send: %v", err)
	}
	if tree.Get(BalanceKey(bob)) != nil {
		t.Fatal("a zero send stored a zero balance for the recipient")
	}
	if err := k.Send(alice, bob, uint256.NewInt(5)); err != nil {
		t.Fatal(err)
	}
	if tree.Get(BalanceKey(alice)) != nil {
		t.Fatal("an emptied balance is still stored")
	}
	// Stored values are 32-byte big-endian.
	if got := tree.Get(BalanceKey(bob)); len(got) != 32 || got[31] != 5 {
		t.Fatalf("stored balance = %x, want 32 bytes ending in 05", got)
	}
}

// collectFee is what a transaction's fee does overall (chain.runTx):
// ChargeFee from the sender, then AddFee to the pool once it has run.
func collectFee(k Keeper, from types.Address, fee *uint256.Int) error {
	if err := k.ChargeFee(from, fee); err != nil {
		return err
	}
	k.AddFee(fee)
	return nil
}

func TestCollectFee(t *testing.T) {
	cases := []struct {
		name     string
		from     types.Address
		fee      *uint256.Int
		err      error
		wantFrom *uint256.Int
		wantPool *uint256.Int
	}{
		{name: "fee", from: alice, fee: types.OGPU(2), wantFrom: types.OGPU(98), wantPool: types.OGPU(5)},
		{name: "whole balance", from: bob, fee: types.OGPU(50), wantFrom: new(uint256.Int), wantPool: types.OGPU(53)},
		{name: "zero fee", from: carol, fee: new(uint256.Int), wantFrom: new(uint256.Int), wantPool: types.OGPU(3)},
		{name: "more than the balance", from: bob, fee: types.OGPU(51), err: types.ErrInsufficientFunds},
		{name: "empty account", from: carol, fee: uint256.NewInt(1), err: types.ErrInsufficientFunds},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tree := genesisKV(t)
			before := dump(tree)
			c := store.NewCache(tree)
			err := collectFee(NewKeeper(c), tc.from, tc.fee)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("CollectFee error = %v, want %v", err, tc.err)
				}
				c.Write()
				if after := dump(tree); after != before {
					t.Fatalf("failed CollectFee changed the store:\n%s\nwas\n%s", after, before)
				}
				return
			}
			if err != nil {
				t.Fatalf("CollectFee: %v", err)
			}
			c.Write()
			k := NewKeeper(tree)
			if got := k.Balance(tc.from); !got.Eq(tc.wantFrom) {
				t.Fatalf("payer has %s, want %s", got.Dec(), tc.wantFrom.Dec())
			}
			if got := k.FeePool(); !got.Eq(tc.wantPool) {
				t.Fatalf("fee pool = %s, want %s", got.Dec(), tc.wantPool.Dec())
			}
			if err := SupplyInvariant(tree); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestGenesisTotals(t *testing.T) {
	tree := genesisKV(t)
	k := NewKeeper(tree)
	if !k.FeePool().Eq(types.OGPU(3)) || !k.Burned().Eq(types.OGPU(7)) {
		t.Fatalf("fee pool %s burned %s", k.FeePool().Dec(), k.Burned().Dec())
	}
	if want := new(uint256.Int).Sub(types.MaxSupply, types.OGPU(160)); !k.BridgeReserve().Eq(want) {
		t.Fatalf("reserve %s, want %s", k.BridgeReserve().Dec(), want.Dec())
	}
	var seen []types.Address
	k.IterateBalances(func(a types.Address, _ *uint256.Int) bool { seen = append(seen, a); return false })
	if len(seen) != 2 || seen[0] != alice || seen[1] != bob {
		t.Fatalf("IterateBalances saw %v, want alice then bob", seen)
	}
	seen = nil
	k.IterateBalances(func(a types.Address, _ *uint256.Int) bool { seen = append(seen, a); return true })
	if len(seen) != 1 {
		t.Fatalf("IterateBalances did not stop: saw %d", len(seen))
	}
}

func TestSupplyInvariant(t *testing.T) {
	big := new(uint256.Int).Lsh(uint256.NewInt(1), 255)
	cases := []struct {
		name  string
		alter func(kv store.KV)
		ok    bool
	}{
		{"genesis", func(store.KV) {}, true},
		{"after moves", func(kv store.KV) {
			k := NewKeeper(kv)
			if err := k.Send(alice, carol, types.OGPU(10)); err != nil {
				panic(err)
			}
			if err := collectFee(k, bob, types.OGPU(1)); err != nil {
				panic(err)
			}
		}, true},
		{"balance raised directly", func(kv store.KV) { NewKeeper(kv).SetGenesisBalance(alice, types.OGPU(101)) }, false},
		{"balance lowered by one unit", func(kv store.KV) {
			NewKeeper(kv).SetGenesisBalance(bob, new(uint256.Int).Sub(types.OGPU(50), uint256.NewInt(1)))
		}, false},
		{"balance deleted", func(kv store.KV) { kv.Delete(BalanceKey(alice)) }, false},
		{"new balance from nothing", func(kv store.KV) { NewKeeper(kv).SetGenesisBalance(carol, uint256.NewInt(1)) }, false},
		{"fee pool altered", func(kv store.KV) {
			k := NewKeeper(kv)
			k.SetGenesisTotals(types.OGPU(4), k.Burned(), k.BridgeReserve())
		}, false},
		{"burned altered", func(kv store.KV) {
			k := NewKeeper(kv)
			k.SetGenesisTotals(k.FeePool(), types.OGPU(8), k.BridgeReserve())
		}, false},
		{"moved between totals", func(kv store.KV) {
			k := NewKeeper(kv)
			k.SetGenesisTotals(types.OGPU(2), types.OGPU(8), k.BridgeReserve())
		}, true},
		// Sums that wrap around 2^256 back to MaxSupply must not pass.
		{"overflow wrapping to the cap", func(kv store.KV) {
			k := NewKeeper(kv)
			k.SetGenesisBalance(carol, big)
			k.SetGenesisBalance(types.BytesToAddress([]byte{0xd0}), big)
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tree := genesisKV(t)
			tc.alter(tree)
			err := SupplyInvariant(tree)
			if tc.ok && err != nil {
				t.Fatalf("SupplyInvariant: %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "supply invariant broken")) {
				t.Fatalf("SupplyInvariant = %v, want it broken", err)
			}
		})
	}
}

func TestBalanceKey(t *testing.T) {
	for _, addr := range []types.Address{{}, alice, types.BytesToAddress(bytes.Repeat([]byte{0xff}, 20))} {
		key := BalanceKey(addr)
		if len(key) != 21 || key[0] != 0x10 {
			t.Fatalf("BalanceKey(%s) = %x", addr, key)
		}
		got, err := ParseBalanceKey(key)
		if err != nil || got != addr {
			t.Fatalf("ParseBalanceKey(BalanceKey(%s)) = %s, %v", addr, got, err)
		}
	}
	// Keys sort by address: iteration order is address order.
	if bytes.Compare(BalanceKey(alice), BalanceKey(bob)) >= 0 {
		t.Fatal("balance keys do not sort by address")
	}
	// The singletons and the balance prefix are distinct.
	keys := map[string]bool{}
	for _, k := range [][]byte{FeePoolKey(), BurnedKey(), BridgeReserveKey(), {BalanceKey(alice)[0]}} {
		if keys[string(k)] {
			t.Fatalf("key %x used twice", k)
		}
		keys[string(k)] = true
	}

	valid := BalanceKey(alice)
	cases := []struct {
		name string
		key  []byte
	}{
		{"nil", nil},
		{"prefix only", []byte{0x10}},
		{"one byte short", valid[:20]},
		{"one byte long", append(bytes.Clone(valid), 0)},
		{"wrong prefix", append([]byte{0x11}, valid[1:]...)},
		{"nonce-like prefix", append([]byte{0x01}, valid[1:]...)},
		{"fee pool key", FeePoolKey()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if addr, err := ParseBalanceKey(tc.key); err == nil {
				t.Fatalf("ParseBalanceKey(%x) = %s, want an error", tc.key, addr)
			}
		})
	}
}

func TestMsgSendRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		msg  MsgSend
	}{
		{"one unit", MsgSend{To: bob, Amount: uint256.NewInt(1)}},
		{"max supply", MsgSend{To: alice, Amount: types.MaxSupply}},
		{"max uint256", MsgSend{To: alice, Amount: new(uint256.Int).SetAllOne()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.msg.Raw()
			if raw.Type != types.MsgTypeSend {
				t.Fatalf("Raw type = %d", raw.Type)
			}
			got, err := DecodeMsgSend(raw.Data)
			if err != nil {
				t.Fatalf("DecodeMsgSend: %v", err)
			}
			if got.To != tc.msg.To || !got.Amount.Eq(tc.msg.Amount) {
				t.Fatalf("decoded %+v, want %+v", got, tc.msg)
			}
		})
	}
}

func TestDecodeMsgSendRejects(t *testing.T) {
	valid := (&MsgSend{To: bob, Amount: uint256.NewInt(5)}).Raw().Data
	encode := func(v any) []byte {
		bz, err := rlp.EncodeToBytes(v)
		if err != nil {
			t.Fatal(err)
		}
		return bz
	}
	cases := []struct {
		name string
		data []byte
		log  string
	}{
		{"zero amount", (&MsgSend{To: bob, Amount: new(uint256.Int)}).Raw().Data, "positive"},
		{"nil amount", (&MsgSend{To: bob}).Raw().Data, "positive"},
		{"zero address", (&MsgSend{Amount: uint256.NewInt(5)}).Raw().Data, "zero address"},
		{"empty", nil, "send:"},
		{"garbage", []byte("garbage"), "send:"},
		{"empty list", []byte{0xc0}, "send:"},
		{"trailing bytes", append(bytes.Clone(valid), 0x01), "send:"},
		{"truncated", valid[:len(valid)-1], "send:"},
		{"extra field", encode([]any{bob, uint256.NewInt(5), uint64(1)}), "send:"},
		{"short address", encode([]any{bob[:19], uint256.NewInt(5)}), "send:"},
		{"amount with leading zero", encode([]any{bob, []byte{0x00, 0x05}}), "send:"},
		{"amount over 256 bits", encode([]any{bob, bytes.Repeat([]byte{1}, 33)}), "send:"},
		{"amount is a list", encode([]any{bob, []any{}}), "send:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMsgSend(tc.data)
			if err == nil {
				t.Fatalf("DecodeMsgSend(%x) = %+v, want an error", tc.data, m)
			}
			if !errors.Is(err, types.ErrInvalidMsg) {
				t.Fatalf("error %v is not ErrInvalidMsg", err)
			}
			if !strings.Contains(err.Error(), tc.log) {
				t.Fatalf("error %q does not mention %q", err, tc.log)
			}
		})
	}
}
