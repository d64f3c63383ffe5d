package escrow

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// stakeKV returns a tree where alice, bob and carol hold 10,000 oGPU each
// and the bridge reserve the rest of the supply.
func stakeKV(t *testing.T) (*store.Tree, Keeper) {
	t.Helper()
	tree := store.NewMemTree()
	k := NewKeeper(tree)
	for _, a := range []types.Address{alice, bob, carol} {
		k.SetGenesisBalance(a, types.OGPU(10_000))
	}
	k.SetGenesisTotals(new(uint256.Int), new(uint256.Int), new(uint256.Int).Sub(types.MaxSupply, types.OGPU(30_000)))
	checkStake(t, tree)
	return tree, k
}

func checkStake(t *testing.T, r store.KV) {
	t.Helper()
	if err := SupplyInvariant(r); err != nil {
		t.Fatal(err)
	}
	if err := StakeInvariant(r, genesis.DefaultStakingParams()); err != nil {
		t.Fatal(err)
	}
}

func consKey(name string) []byte {
	h := sha256.Sum256([]byte("consensus " + name))
	return h[:]
}

func eq(t *testing.T, what string, got, want *uint256.Int) {
	t.Helper()
	if !got.Eq(want) {
		t.Errorf("%s = %s, want %s", what, got.Dec(), want.Dec())
	}
}

func u(n uint64) *uint256.Int { return uint256.NewInt(n) }

func TestSlashBondedThenUnbondingEarliestFirst(t *testing.T) {
	tree, k := stakeKV(t)
	if err := k.Bond(alice, types.OGPU(100)); err != nil {
		t.Fatal(err)
	}
	// Two unbondings, the later one started first: 30 maturing at 50,
	// then 20 maturing at 40. 50 stays bonded.
	if err := k.Unbond(alice, types.OGPU(30), 50); err != nil {
		t.Fatal(err)
	}
	if err := k.Unbond(alice, types.OGPU(20), 40); err != nil {
		t.Fatal(err)
	}
	ub := k.Unbondings(alice)
	if len(ub) != 2 || ub[0].Matures != 40 || ub[1].Matures != 50 {
		t.Fatalf("unbondings %+v, want earliest first", ub)
	}
	burned := k.Burned()
	// 60% of 100 = 60: all 50 bonded, then 10 of the entry maturing at 40.
	res := k.Slash(alice, 6_000, bob, 5_000)
	eq(t, "slashed", res.Slashed, types.OGPU(60))
	eq(t, "compensation", res.Compensation, types.OGPU(30))
	eq(t, "burned", res.Burned, types.OGPU(30))
	eq(t, "bonded", k.Bonded(alice), new(uint256.Int))
	ub = k.Unbondings(alice)
	if len(ub) != 2 || ub[0].Matures != 40 || !ub[0].Amount.Eq(types.OGPU(10)) || ub[1].Matures != 50 || !ub[1].Amount.Eq(types.OGPU(30)) {
		t.Errorf("unbondings after the slash %+v, want 10 at 40 and 30 at 50", ub)
	}
	eq(t, "bob (the beneficiary)", k.Balance(bob), types.OGPU(10_030))
	eq(t, "total burned", k.Burned(), new(uint256.Int).Add(burned, types.OGPU(30)))
	eq(t, "total unbonding", k.TotalUnbonding(), types.OGPU(40))
	checkStake(t, tree)

	// A slash larger than the first entry reaches the second.
	res = k.Slash(alice, 10_000, types.Address{}, 5_000) // everything, nobody compensated
	eq(t, "slashed", res.Slashed, types.OGPU(40))
	eq(t, "compensation without a beneficiary", res.Compensation, new(uint256.Int))
	eq(t, "burned", res.Burned, types.OGPU(40))
	if ub = k.Unbondings(alice); len(ub) != 0 {
		t.Errorf("unbondings after a full slash: %+v, want none left", ub)
	}
	eq(t, "total unbonding", k.TotalUnbonding(), new(uint256.Int))
	checkStake(t, tree)

	// Nothing left: a slash takes nothing and moves nothing.
	before := dump(tree)
	res = k.Slash(alice, 10_000, bob, 5_000)
	if !res.Slashed.IsZero() || dump(tree) != before {
		t.Errorf("slashing an empty stake took %s or changed the state", res.Slashed.Dec())
	}
}

func TestSlashRounding(t *testing.T) {
	cases := []struct {
		name                        string
		stake                       uint64 // base units
		bps, compBps                uint64
		slashed, compensation, burn uint64
	}{
		{"rounds the slash down", 7, 5_000, 5_000, 3, 1, 2},
		{"compensation rounds down, the burn takes the rest", 9, 10_000, 3_333, 9, 2, 7},
		{"too small to slash", 1, 9_999, 5_000, 0, 0, 0},
		{"all to the beneficiary", 100, 500, 10_000, 5, 5, 0},
		{"nothing to the beneficiary", 100, 500, 0, 5, 0, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tree, k := stakeKV(t)
			if err := k.Bond(alice, u(tc.stake)); err != nil {
				t.Fatal(err)
			}
			res := k.Slash(alice, tc.bps, bob, tc.compBps)
			eq(t, "slashed", res.Slashed, u(tc.slashed))
			eq(t, "compensation", res.Compensation, u(tc.compensation))
			eq(t, "burned", res.Burned, u(tc.burn))
			eq(t, "stake left", k.Bonded(alice), u(tc.stake-tc.slashed))
			eq(t, "bob", k.Balance(bob), new(uint256.Int).Add(types.OGPU(10_000), u(tc.compensation)))
			checkStake(t, tree)
		})
	}
}

func TestUnbondRefusals(t *testing.T) {
	tree, k := stakeKV(t)
	if err := k.Bond(alice, types.OGPU(10)); err != nil {
		t.Fatal(err)
	}
	before := dump(tree)
	err := k.Unbond(alice, types.OGPU(11), 100)
	if !errors.Is(err, types.ErrInsufficientStake) || !strings.Contains(err.Error(), "has 10ogpu bonded, cannot unbond 11ogpu") {
		t.Fatalf("unbond more than bonded: %v", err)
	}
	if err := k.Bond(bob, types.OGPU(10_001)); !errors.Is(err, types.ErrInsufficientFunds) {
		t.Fatalf("bond more than the balance: %v", err)
	}
	if dump(tree) != before {
		t.Error("a refused bond or unbond changed the state")
	}
	// Two unbondings maturing at the same height merge.
	for i := 0; i < 2; i++ {
		if err := k.Unbond(alice, types.OGPU(3), 100); err != nil {
			t.Fatal(err)
		}
	}
	if ub := k.Unbondings(alice); len(ub) != 1 || !ub[0].Amount.Eq(types.OGPU(6)) {
		t.Errorf("unbondings %+v, want one of 6 at 100", ub)
	}
	checkStake(t, tree)
}

func TestMatureUnbondings(t *testing.T) {
	tree, k := stakeKV(t)
	for _, a := range []types.Address{alice, bob, carol} {
		if err := k.Bond(a, types.OGPU(100)); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(k.Unbond(carol, types.OGPU(10), 20))
	must(k.Unbond(alice, types.OGPU(20), 20))
	must(k.Unbond(alice, types.OGPU(30), 10))
	must(k.Unbond(bob, types.OGPU(40), 30))
	// bob's entry is slashed to nothing before it matures.
	k.Slash(bob, 10_000, types.Address{}, 0)

	if got := k.MatureUnbondings(9); len(got) != 0 {
		t.Fatalf("matured at 9: %+v, want none", got)
	}
	got := k.MatureUnbondings(10)
	if len(got) != 1 || got[0].Addr != alice || !got[0].Amount.Eq(types.OGPU(30)) {
		t.Fatalf("matured at 10: %+v, want alice's 30", got)
	}
	eq(t, "alice", k.Balance(alice), types.OGPU(9_930))
	checkStake(t, tree)
	if got := k.MatureUnbondings(10); len(got) != 0 {
		t.Fatalf("paid twice: %+v", got)
	}
	// Height 25 catches up with everything due at 20, in address order;
	// bob's emptied entry at 30 is not due yet.
	got = k.MatureUnbondings(25)
	if len(got) != 2 {
		t.Fatalf("matured at 25: %+v, want two", got)
	}
	first, second := alice, carol
	if string(carol[:]) < string(alice[:]) {
		first, second = carol, alice
	}
	if got[0].Addr != first || got[1].Addr != second {
		t.Errorf("matured at 25 in order %s, %s; want address order", got[0].Addr, got[1].Addr)
	}
	eq(t, "alice", k.Balance(alice), types.OGPU(9_950))
	eq(t, "carol", k.Balance(carol), types.OGPU(9_910))
	got = k.MatureUnbondings(1_000)
	if len(got) != 0 {
		t.Errorf("a slashed-away entry was paid: %+v", got)
	}
	if len(k.Unbondings(bob)) != 0 || !k.TotalUnbonding().IsZero() {
		t.Errorf("entries left after maturity: bob %+v, total %s", k.Unbondings(bob), k.TotalUnbonding().Dec())
	}
	checkStake(t, tree)
}

// validators makes alice (1,000 oGPU), bob (2,000) and carol (3,000)
// validators and reports their power.
func validators(t *testing.T) (*store.Tree, Keeper, genesis.StakingParams) {
	t.Helper()
	tree, k := stakeKV(t)
	p := genesis.DefaultStakingParams()
	for i, a := range []types.Address{alice, bob, carol} {
		if err := k.CreateValidator(p, a, string(rune('a'+i)), consKey(string(rune('a'+i))), types.OGPU(uint64(i+1)*1_000)); err != nil {
			t.Fatal(err)
		}
	}
	if ups := k.PowerUpdates(p); len(ups) != 3 {
		t.Fatalf("first power updates %+v, want all three", ups)
	}
	checkStake(t, tree)
	return tree, k, p
}

func TestCreateValidatorRefusals(t *testing.T) {
	tree, k, p := validators(t)
	dave := types.BytesToAddress([]byte{0xda})
	if err := k.Send(carol, dave, types.OGPU(5_000)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		op   types.Address
		key  []byte
		bond *uint256.Int
		want error
		text string
	}{
		{"operator already a validator", alice, consKey("new"), types.OGPU(1_000), types.ErrDuplicate, "already operates a validator"},
		{"key already used", dave, consKey("a"), types.OGPU(1_000), types.ErrDuplicate, "is already used"},
		{"below the minimum", dave, consKey("d"), types.OGPU(999), types.ErrInsufficientStake, "needs at least 1000ogpu"},
		{"more than the balance", dave, consKey("d"), types.OGPU(5_001), types.ErrInsufficientFunds, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(tree)
			err := k.CreateValidator(p, tc.op, "d", tc.key, tc.bond)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %v, want %v saying %q", err, tc.want, tc.text)
			}
			if dump(tree) != before {
				t.Error("a refused validator changed the state")
			}
		})
	}
	full := p
	full.MaxValidators = 3
	if err := k.CreateValidator(full, dave, "d", consKey("d"), types.OGPU(1_000)); !errors.Is(err, types.ErrInvalidMsg) || !strings.Contains(err.Error(), "set is full: 3 validators") {
		t.Errorf("a fourth validator in a set of three: %v", err)
	}
	// Stake already bonded counts towards the minimum.
	if err := k.Bond(dave, types.OGPU(600)); err != nil {
		t.Fatal(err)
	}
	if err := k.CreateValidator(p, dave, "d", consKey("d"), types.OGPU(400)); err != nil {
		t.Errorf("600 bonded + 400: %v", err)
	}
}

func TestPowerUpdatesOnlyChanges(t *testing.T) {
	tree, k, p := validators(t)
	if ups := k.PowerUpdates(p); len(ups) != 0 {
		t.Fatalf("nothing changed, yet %+v", ups)
	}
	for i, a := range []types.Address{alice, bob, carol} {
		v, _ := k.GetValidator(a)
		if got := k.ReportedPower(v.PubKey); got != int64(i+1)*1_000 {
			t.Errorf("%s reported power %d, want %d", v.Name, got, (i+1)*1_000)
		}
	}
	// Less than one unit of power more changes nothing.
	if err := k.Bond(bob, uint256.NewInt(999)); err != nil {
		t.Fatal(err)
	}
	if ups := k.PowerUpdates(p); len(ups) != 0 {
		t.Errorf("sub-unit bond reported %+v", ups)
	}
	// One whole oGPU more: bob alone.
	if err := k.Bond(bob, types.OGPU(1)); err != nil {
		t.Fatal(err)
	}
	ups := k.PowerUpdates(p)
	if len(ups) != 1 || ups[0].Operator != bob || ups[0].Power != 2_001 || ups[0].Name != "b" {
		t.Fatalf("after bob bonds 1 oGPU: %+v, want bob at 2001", ups)
	}
	// Jailed: power 0, reported once.
	k.Jail(carol, 50, false)
	ups = k.PowerUpdates(p)
	if len(ups) != 1 || ups[0].Operator != carol || ups[0].Power != 0 {
		t.Fatalf("after carol's jail: %+v, want carol at 0", ups)
	}
	if ups := k.PowerUpdates(p); len(ups) != 0 {
		t.Errorf("carol's zero reported twice: %+v", ups)
	}
	// Below the minimum stake: power 0.
	if err := k.Unbond(alice, types.OGPU(1), 100); err != nil {
		t.Fatal(err)
	}
	ups = k.PowerUpdates(p)
	if len(ups) != 1 || ups[0].Operator != alice || ups[0].Power != 0 {
		t.Fatalf("alice below the minimum: %+v, want alice at 0", ups)
	}
	checkStake(t, tree)
}

func TestDistributeFees(t *testing.T) {
	tree, k, p := validators(t)
	if paid := k.DistributeFees(); !paid.IsZero() {
		t.Fatalf("empty pool paid %s", paid.Dec())
	}
	// 10 base units over powers 1000, 2000, 3000: 1, 3, 5 (each rounded
	// down), 1 left in the pool.
	if err := collectFee(k, carol, u(10)); err != nil {
		t.Fatal(err)
	}
	bal := map[types.Address]*uint256.Int{alice: k.Balance(alice), bob: k.Balance(bob), carol: k.Balance(carol)}
	paid := k.DistributeFees()
	eq(t, "paid", paid, u(9))
	eq(t, "pool left", k.FeePool(), u(1))
	for a, want := range map[types.Address]uint64{alice: 1, bob: 3, carol: 5} {
		eq(t, "share of "+a.Hex(), new(uint256.Int).Sub(k.Balance(a), bal[a]), u(want))
	}
	checkStake(t, tree)

	// A jailed validator, once its zero power is reported, gets nothing;
	// the remainder carried over is shared with the next fees.
	k.Jail(carol, 50, false)
	k.PowerUpdates(p)
	if err := collectFee(k, carol, types.OGPU(3)); err != nil {
		t.Fatal(err)
	}
	pool := k.FeePool() // 3 oGPU + 1
	bal = map[types.Address]*uint256.Int{alice: k.Balance(alice), bob: k.Balance(bob), carol: k.Balance(carol)}
	paid = k.DistributeFees()
	wantA := new(uint256.Int).Div(pool, u(3))                             // power 1000 of 3000
	wantB := new(uint256.Int).Div(new(uint256.Int).Mul(pool, u(2)), u(3)) // 2000 of 3000
	eq(t, "alice's share", new(uint256.Int).Sub(k.Balance(alice), bal[alice]), wantA)
	eq(t, "bob's share", new(uint256.Int).Sub(k.Balance(bob), bal[bob]), wantB)
	eq(t, "jailed carol's share", new(uint256.Int).Sub(k.Balance(carol), bal[carol]), new(uint256.Int))
	eq(t, "paid", paid, new(uint256.Int).Add(wantA, wantB))
	eq(t, "pool left", k.FeePool(), new(uint256.Int).Sub(pool, paid))
	checkStake(t, tree)

	// Nobody with power: CometBFT keeps its last set (an empty one halts
	// the chain), so nothing is reported and the pool still goes to it.
	k.Jail(alice, 50, false)
	k.Jail(bob, 50, false)
	if ups := k.PowerUpdates(p); len(ups) != 0 {
		t.Errorf("updates that empty the set: %+v", ups)
	}
	if err := collectFee(k, carol, types.OGPU(3)); err != nil {
		t.Fatal(err)
	}
	if paid := k.DistributeFees(); paid.IsZero() {
		t.Errorf("the last set reported got nothing")
	}
	checkStake(t, tree)
}

func TestUnjail(t *testing.T) {
	tree, k, p := validators(t)
	dave := types.BytesToAddress([]byte{0xda})
	refuse := func(op types.Address, h uint64, want error, text string) {
		t.Helper()
		before := dump(tree)
		err := k.Unjail(p, op, h)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), text) {
			t.Fatalf("unjail %s at %d: %v, want %v saying %q", op, h, err, want, text)
		}
		if dump(tree) != before {
			t.Error("a refused unjail changed the state")
		}
	}
	refuse(dave, 10, types.ErrUnknownValidator, "operates no validator")
	refuse(alice, 10, types.ErrInvalidMsg, "validator a is not jailed")

	k.Jail(alice, 50, false)
	k.Jail(alice, 40, false) // a shorter jail does not shorten it
	if v, _ := k.GetValidator(alice); !v.Jailed || v.JailedUntil != 50 {
		t.Fatalf("after two jails: %+v, want jailed until 50", v)
	}
	refuse(alice, 49, types.ErrJailed, "jailed until height 50 (now 49)")
	if ups := k.PowerUpdates(p); len(ups) != 1 || ups[0].Operator != alice || ups[0].Power != 0 {
		t.Fatalf("after the jail: %+v, want alice at 0", ups)
	}
	if err := k.Unjail(p, alice, 50); err != nil {
		t.Fatalf("unjail at 50: %v", err)
	}
	if v, _ := k.GetValidator(alice); v.Jailed || v.JailedUntil != 50 {
		t.Errorf("after unjail: %+v", v)
	}
	if ups := k.PowerUpdates(p); len(ups) != 1 || ups[0].Operator != alice || ups[0].Power != 1_000 {
		t.Errorf("after unjail: %+v, want alice back at 1000", ups)
	}

	// Stake below the minimum: bond more first.
	k.Jail(bob, 60, false)
	if err := k.Unbond(bob, types.OGPU(1_500), 500); err != nil {
		t.Fatal(err)
	}
	refuse(bob, 60, types.ErrInsufficientStake, "has 500ogpu bonded, needs 1000ogpu to unjail")
	if err := k.Bond(bob, types.OGPU(500)); err != nil {
		t.Fatal(err)
	}
	if err := k.Unjail(p, bob, 60); err != nil {
		t.Errorf("unjail with the minimum bonded: %v", err)
	}

	// Tombstoned: never, however long after.
	k.Jail(carol, 70, true)
	k.Jail(carol, 80, false) // a later plain jail does not lift the tombstone
	refuse(carol, 1_000_000, types.ErrJailed, "tombstoned")
	k.PowerUpdates(p)
	checkStake(t, tree)
}
