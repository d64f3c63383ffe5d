package escrow

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Bps is the basis-point denominator.
const Bps = 10_000

// MulBps returns a × bps / 10,000, rounded down. a × bps cannot overflow:
// amounts are below 2^75 (the supply) and bps at most 10,000.
func MulBps(a *uint256.Int, bps uint64) *uint256.Int {
	out := new(uint256.Int).Mul(a, uint256.NewInt(bps))
	return out.Div(out, uint256.NewInt(Bps))
}

func (k Keeper) addTotal(kind byte, amt *uint256.Int) {
	setAmount(k.kv, totalKey(kind), new(uint256.Int).Add(getAmount(k.kv, totalKey(kind)), amt))
}

func (k Keeper) subTotal(kind byte, amt *uint256.Int) {
	t := getAmount(k.kv, totalKey(kind))
	if t.Lt(amt) {
		panic(fmt.Sprintf("escrow: total %d would go negative", kind)) // an accounting bug, caught by tests
	}
	setAmount(k.kv, totalKey(kind), new(uint256.Int).Sub(t, amt))
}

// TotalBonded, TotalUnbonding and TotalLocked are the running totals.
func (k Keeper) TotalBonded() *uint256.Int    { return getAmount(k.kv, totalKey(totalBonded)) }
func (k Keeper) TotalUnbonding() *uint256.Int { return getAmount(k.kv, totalKey(totalUnbonding)) }
func (k Keeper) TotalLocked() *uint256.Int    { return getAmount(k.kv, totalKey(totalLocked)) }

// ---- job escrow ----

// Locked returns the funds held for job.
func (k Keeper) Locked(job uint64) *uint256.Int { return getAmount(k.kv, LockedKey(job)) }

// Lock moves amt from an account into job's escrow.
func (k Keeper) Lock(from types.Address, job uint64, amt *uint256.Int) error {
	if err := k.sub(from, amt); err != nil {
		return err
	}
	setAmount(k.kv, LockedKey(job), new(uint256.Int).Add(k.Locked(job), amt))
	k.addTotal(totalLocked, amt)
	return nil
}

func (k Keeper) unlock(job uint64, amt *uint256.Int) {
	held := k.Locked(job)
	if held.Lt(amt) {
		panic(fmt.Sprintf("escrow: job %d holds %s, cannot release %s", job, held.Dec(), amt.Dec()))
	}
	setAmount(k.kv, LockedKey(job), new(uint256.Int).Sub(held, amt))
	k.subTotal(totalLocked, amt)
}

// Release pays amt from job's escrow to an account. Releasing more than the
// job holds is a bug in the caller and panics: the market computes every
// payout from what it locked.
func (k Keeper) Release(job uint64, to types.Address, amt *uint256.Int) {
	if amt.IsZero() {
		return
	}
	k.unlock(job, amt)
	k.add(to, amt)
}

// ReleaseToFeePool pays amt from job's escrow to the validators' fee pool.
func (k Keeper) ReleaseToFeePool(job uint64, amt *uint256.Int) {
	if amt.IsZero() {
		return
	}
	k.unlock(job, amt)
	setAmount(k.kv, FeePoolKey(), new(uint256.Int).Add(k.FeePool(), amt))
}

// BurnLocked destroys amt of job's escrow (a forfeited bid deposit).
func (k Keeper) BurnLocked(job uint64, amt *uint256.Int) {
	if amt.IsZero() {
		return
	}
	k.unlock(job, amt)
	k.burn(amt)
}

func (k Keeper) burn(amt *uint256.Int) {
	setAmount(k.kv, BurnedKey(), new(uint256.Int).Add(k.Burned(), amt))
}

// IterateLocked calls fn for every job holding funds, in job order.
func (k Keeper) IterateLocked(fn func(job uint64, amt *uint256.Int) (stop bool)) {
	store.IteratePrefix(k.kv, []byte{prefixLocked}, func(key, value []byte) bool {
		return fn(binary.BigEndian.Uint64(key[1:]), new(uint256.Int).SetBytes(value))
	})
}

// ---- stake ----

// Bonded returns addr's bonded stake.
func (k Keeper) Bonded(addr types.Address) *uint256.Int { return getAmount(k.kv, BondedKey(addr)) }

// Bond moves amt from addr's balance into its bonded stake.
func (k Keeper) Bond(addr types.Address, amt *uint256.Int) error {
	if err := k.sub(addr, amt); err != nil {
		return err
	}
	k.addBonded(addr, amt)
	return nil
}

func (k Keeper) addBonded(addr types.Address, amt *uint256.Int) {
	setAmount(k.kv, BondedKey(addr), new(uint256.Int).Add(k.Bonded(addr), amt))
	k.addTotal(totalBonded, amt)
}

// Unbonding is stake on its way out: still slashable until Matures.
type Unbonding struct {
	Matures uint64
	Amount  *uint256.Int
}

// Unbondings returns addr's unbonding entries, earliest first.
func (k Keeper) Unbondings(addr types.Address) []Unbonding {
	var out []Unbonding
	pfx := append([]byte{prefixUnbonding}, addr.Bytes()...)
	store.IteratePrefix(k.kv, pfx, func(key, value []byte) bool {
		out = append(out, Unbonding{Matures: binary.BigEndian.Uint64(key[len(pfx):]), Amount: new(uint256.Int).SetBytes(value)})
		return false
	})
	return out
}

// UnbondingTotal is the sum of addr's unbonding entries.
func (k Keeper) UnbondingTotal(addr types.Address) *uint256.Int {
	total := new(uint256.Int)
	for _, u := range k.Unbondings(addr) {
		total.Add(total, u.Amount)
	}
	return total
}

// Unbond starts unbonding amt of addr's stake; it matures at height
// matures and stays slashable until then.
func (k Keeper) Unbond(addr types.Address, amt *uint256.Int, matures uint64) error {
	bonded := k.Bonded(addr)
	if bonded.Lt(amt) {
		return types.ErrInsufficientStake.Wrapf("%s has %s bonded, cannot unbond %s", addr, types.FormatAmount(bonded), types.FormatAmount(amt))
	}
	setAmount(k.kv, BondedKey(addr), new(uint256.Int).Sub(bonded, amt))
	k.subTotal(totalBonded, amt)
	key := UnbondingKey(addr, matures)
	setAmount(k.kv, key, new(uint256.Int).Add(getAmount(k.kv, key), amt))
	k.kv.Set(unbondQueueKey(matures, addr), present)
	k.addTotal(totalUnbonding, amt)
	return nil
}

// MatureUnbondings pays out every unbonding entry maturing at or before
// height, in (height, address) order, and returns them.
func (k Keeper) MatureUnbondings(height uint64) []Matured {
	var due [][]byte
	store.IteratePrefix(k.kv, []byte{prefixUnbondQ}, func(key, _ []byte) bool {
		if binary.BigEndian.Uint64(key[1:9]) > height {
			return true
		}
		due = append(due, bytes.Clone(key))
		return false
	})
	var out []Matured
	for _, qk := range due {
		matures := binary.BigEndian.Uint64(qk[1:9])
		addr := types.BytesToAddress(qk[9:])
		key := UnbondingKey(addr, matures)
		amt := getAmount(k.kv, key)
		k.kv.Delete(qk)
		k.kv.Delete(key)
		if amt.IsZero() {
			continue // slashed to nothing
		}
		k.subTotal(totalUnbonding, amt)
		k.add(addr, amt)
		out = append(out, Matured{Addr: addr, Amount: amt})
	}
	return out
}

// Matured is an unbonding paid out.
type Matured struct {
	Addr   types.Address
	Amount *uint256.Int
}

// SlashResult says where a slash went.
type SlashResult struct {
	Slashed      *uint256.Int // taken from stake, bonded first, then unbonding
	Compensation *uint256.Int // paid to the beneficiary
	Burned       *uint256.Int // destroyed
}

// Slash takes bps of addr's stake (bonded plus unbonding, since unbonding
// stake stays answerable), bonded first and then the unbonding entries
// earliest first. compBps of it is paid to beneficiary (if not the zero
// address) and the rest burned.
func (k Keeper) Slash(addr types.Address, bps uint64, beneficiary types.Address, compBps uint64) SlashResult {
	return k.SlashFrom(addr, bps, beneficiary, compBps, 0)
}

// SlashFrom is Slash counting only the unbonding entries that mature at or
// after minMatures: an entry maturing earlier started unbonding before the
// stake it held could back what is punished (an equivocation at a past
// height), so it is neither part of the base nor taken.
func (k Keeper) SlashFrom(addr types.Address, bps uint64, beneficiary types.Address, compBps uint64, minMatures uint64) SlashResult {
	return k.slash(addr, bps, nil, beneficiary, compBps, nil, minMatures)
}

// SlashAtLeast is Slash taking at least floor (all of the stake, bonded
// and unbonding, if that is less): a fraud slash that grows with the
// price of the lie (market/deterrence.go).
func (k Keeper) SlashAtLeast(addr types.Address, bps uint64, floor *uint256.Int, beneficiary types.Address, compBps uint64) SlashResult {
	return k.slash(addr, bps, floor, beneficiary, compBps, nil, 0)
}

// SlashCapped is Slash paying the beneficiary at most maxComp (compBps of
// the slash, or maxComp if less); the rest is burned. A session dispute
// compensates a client at most the disproven request's charge
// (protocol-threats rule 8).
func (k Keeper) SlashCapped(addr types.Address, bps uint64, beneficiary types.Address, compBps uint64, maxComp *uint256.Int) SlashResult {
	return k.slash(addr, bps, nil, beneficiary, compBps, maxComp, 0)
}

func (k Keeper) slash(addr types.Address, bps uint64, floor *uint256.Int, beneficiary types.Address, compBps uint64, maxComp *uint256.Int, minMatures uint64) SlashResult {
	bonded := k.Bonded(addr)
	var unbondings []Unbonding
	for _, u := range k.Unbondings(addr) {
		if u.Matures >= minMatures {
			unbondings = append(unbondings, u)
		}
	}
	base := bonded.Clone()
	for _, u := range unbondings {
		base.Add(base, u.Amount)
	}
	amount := MulBps(base, bps)
	if floor != nil && amount.Lt(floor) {
		amount = floor.Clone()
		if amount.Gt(base) {
			amount = base.Clone()
		}
	}
	left := amount.Clone()
	take := func(have *uint256.Int) *uint256.Int {
		t := have.Clone()
		if left.Lt(t) {
			t.Set(left)
		}
		left.Sub(left, t)
		return t
	}
	if t := take(bonded); !t.IsZero() {
		setAmount(k.kv, BondedKey(addr), new(uint256.Int).Sub(bonded, t))
		k.subTotal(totalBonded, t)
	}
	for _, u := range unbondings {
		if left.IsZero() {
			break
		}
		t := take(u.Amount)
		setAmount(k.kv, UnbondingKey(addr, u.Matures), new(uint256.Int).Sub(u.Amount, t))
		k.subTotal(totalUnbonding, t)
	}
	res := SlashResult{Slashed: amount, Compensation: new(uint256.Int), Burned: amount.Clone()}
	if beneficiary != (types.Address{}) {
		res.Compensation = MulBps(amount, compBps)
		if maxComp != nil && res.Compensation.Gt(maxComp) {
			res.Compensation = maxComp.Clone()
		}
		res.Burned.Sub(amount, res.Compensation)
		if !res.Compensation.IsZero() {
			k.add(beneficiary, res.Compensation)
		}
	}
	if !res.Burned.IsZero() {
		k.burn(res.Burned)
	}
	return res
}

// SetGenesisBond writes a bonded stake at genesis (part of the allocations).
func (k Keeper) SetGenesisBond(addr types.Address, amt *uint256.Int) {
	k.addBonded(addr, amt)
}

// IterateBonded calls fn for every non-zero bonded stake in address order.
func (k Keeper) IterateBonded(fn func(addr types.Address, amt *uint256.Int) (stop bool)) {
	store.IteratePrefix(k.kv, []byte{prefixBonded}, func(key, value []byte) bool {
		return fn(types.BytesToAddress(key[1:]), new(uint256.Int).SetBytes(value))
	})
}

// IterateUnbonding calls fn for every unbonding entry in (address, height) order.
func (k Keeper) IterateUnbonding(fn func(addr types.Address, u Unbonding) (stop bool)) {
	store.IteratePrefix(k.kv, []byte{prefixUnbonding}, func(key, value []byte) bool {
		return fn(types.BytesToAddress(key[1:21]), Unbonding{Matures: binary.BigEndian.Uint64(key[21:]), Amount: new(uint256.Int).SetBytes(value)})
	})
}

// ---- validators ----

// Validator is a validator's stored record, keyed by its operator account.
// Its stake is the operator's bonded stake.
type Validator struct {
	Name   string
	PubKey []byte // ed25519, 32 bytes
	// Jailed validators have no power until they unjail, at or after
	// JailedUntil. A tombstoned validator can never unjail.
	Jailed      bool
	JailedUntil uint64
	Tombstoned  bool
	// Missed counts consecutive blocks the validator did not sign.
	Missed uint64
	// PowerLost is the height at whose end CometBFT was last told this
	// validator's power is 0 (0: never). A record without power for
	// unbonding_blocks (longer than the evidence max age) can answer for
	// nothing any more and is removed; see RemovableValidator.
	PowerLost uint64 `rlp:"optional"`
}

// GetValidator returns operator's validator record.
func (k Keeper) GetValidator(operator types.Address) (*Validator, bool) {
	bz := k.kv.Get(ValidatorKey(operator))
	if bz == nil {
		return nil, false
	}
	var v Validator
	if err := rlp.DecodeBytes(bz, &v); err != nil {
		panic(fmt.Errorf("escrow: stored validator unreadable: %w", err))
	}
	return &v, true
}

// SetValidator writes operator's validator record.
func (k Keeper) SetValidator(operator types.Address, v *Validator) {
	bz, err := rlp.EncodeToBytes(v)
	if err != nil {
		panic(err)
	}
	k.kv.Set(ValidatorKey(operator), bz)
}

// OperatorOf returns the operator of a consensus key.
func (k Keeper) OperatorOf(pubKey []byte) (types.Address, bool) {
	bz := k.kv.Get(ConsKeyKey(pubKey))
	if bz == nil {
		return types.Address{}, false
	}
	return types.BytesToAddress(bz), true
}

// IsValidator reports whether addr operates a validator.
func (k Keeper) IsValidator(addr types.Address) bool { return k.kv.Get(ValidatorKey(addr)) != nil }

// CreateValidator registers operator as a validator with consensus key
// pubKey and bonds selfBond from its balance.
func (k Keeper) CreateValidator(p genesis.StakingParams, operator types.Address, name string, pubKey []byte, selfBond *uint256.Int) error {
	if k.IsValidator(operator) {
		return types.ErrDuplicate.Wrapf("%s already operates a validator", operator)
	}
	if _, used := k.OperatorOf(pubKey); used {
		return types.ErrDuplicate.Wrapf("consensus key %X is already used by a validator", pubKey)
	}
	if total := new(uint256.Int).Add(k.Bonded(operator), selfBond); total.Lt(p.MinValidatorStake) {
		return types.ErrInsufficientStake.Wrapf("a validator needs at least %s bonded; %s would have %s", types.FormatAmount(p.MinValidatorStake), operator, types.FormatAmount(total))
	}
	if held := k.HeldSlots(p); held >= p.MaxValidators {
		return types.ErrInvalidMsg.Wrapf("the validator set is full: %d validators hold at least %s bonded (max_validators %d); a slot frees when one unbonds below the minimum",
			held, types.FormatAmount(p.MinValidatorStake), p.MaxValidators)
	}
	if !selfBond.IsZero() {
		if err := k.Bond(operator, selfBond); err != nil {
			return err
		}
	}
	k.SetValidator(operator, &Validator{Name: name, PubKey: bytes.Clone(pubKey)})
	k.kv.Set(ConsKeyKey(pubKey), operator.Bytes())
	return nil
}

// holdsSlot reports whether a record occupies one of max_validators slots:
// it has the minimum stake bonded and can still return to the set
// (tombstoned records never can). Jailed records with the stake keep
// their slot: they may unjail.
func (k Keeper) holdsSlot(p genesis.StakingParams, op types.Address, v *Validator) bool {
	return !v.Tombstoned && !k.Bonded(op).Lt(p.MinValidatorStake)
}

// HeldSlots counts the validator records that occupy a slot (holdsSlot).
// Records below the minimum stake do not: they cannot have power, so
// squatters that unbond free their slot at once.
func (k Keeper) HeldSlots(p genesis.StakingParams) uint64 {
	var n uint64
	k.IterateValidators(func(op types.Address, v *Validator) bool {
		if k.holdsSlot(p, op, v) {
			n++
		}
		return false
	})
	return n
}

// CheckBondSlot refuses a bond of amt that would bring a validator record
// below the minimum stake back to it while every slot is held: without it
// the set could grow past max_validators.
func (k Keeper) CheckBondSlot(p genesis.StakingParams, addr types.Address, amt *uint256.Int) error {
	v, ok := k.GetValidator(addr)
	if !ok || k.holdsSlot(p, addr, v) || v.Tombstoned {
		return nil
	}
	if new(uint256.Int).Add(k.Bonded(addr), amt).Lt(p.MinValidatorStake) {
		return nil
	}
	if held := k.HeldSlots(p); held >= p.MaxValidators {
		return types.ErrInvalidMsg.Wrapf("validator %s is below the minimum stake and the validator set is full (%d of %d): bond below %s, or wait for a slot",
			v.Name, held, p.MaxValidators, types.FormatAmount(p.MinValidatorStake))
	}
	return nil
}

// IsActiveValidator reports whether addr operates a validator that may act
// as one (post canaries, vote on disputes, read job data): its record
// exists, it is neither jailed nor tombstoned, it has at least the minimum
// stake bonded, and so voting power.
func (k Keeper) IsActiveValidator(p genesis.StakingParams, addr types.Address) bool {
	v, ok := k.GetValidator(addr)
	if !ok || v.Jailed || v.Tombstoned || k.Bonded(addr).Lt(p.MinValidatorStake) {
		return false
	}
	return k.Power(p, addr, v) > 0
}

// IterateValidators calls fn for every validator in operator order.
func (k Keeper) IterateValidators(fn func(operator types.Address, v *Validator) (stop bool)) {
	store.IteratePrefix(k.kv, []byte{prefixValidator}, func(key, value []byte) bool {
		var v Validator
		if err := rlp.DecodeBytes(value, &v); err != nil {
			panic(fmt.Errorf("escrow: stored validator unreadable: %w", err))
		}
		return fn(types.BytesToAddress(key[1:]), &v)
	})
}

// Power is the voting power operator's validator should have now: zero if
// jailed or below the minimum stake, else stake / power_reduction.
func (k Keeper) Power(p genesis.StakingParams, operator types.Address, v *Validator) int64 {
	if v.Jailed || v.Tombstoned {
		return 0
	}
	bonded := k.Bonded(operator)
	if bonded.Lt(p.MinValidatorStake) {
		return 0
	}
	return p.Power(bonded)
}

// ReportedPower is the power last sent to CometBFT for a consensus key.
func (k Keeper) ReportedPower(pubKey []byte) int64 {
	bz := k.kv.Get(powerKey(pubKey))
	if len(bz) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(bz))
}

// PowerUpdate is a change of a validator's voting power for CometBFT.
type PowerUpdate struct {
	Operator types.Address
	Name     string
	PubKey   []byte
	Power    int64
}

// PowerUpdates compares every validator's power with what CometBFT was last
// told, records the new values, and returns the changes in operator order.
// It is EndBlockPower at height 0 without removals (genesis, tests).
func (k Keeper) PowerUpdates(p genesis.StakingParams) []PowerUpdate {
	ups, _ := k.powerUpdates(p, 0, false)
	return ups
}

// EndBlockPower is PowerUpdates at the end of block height, which also
// removes the records RemovableValidator allows and returns them.
//
// It never empties the set: if no validator would have power, it changes
// nothing and returns no update, so CometBFT keeps its last set (an empty
// set halts every node). The chain goes on with those validators until
// one of them, or a new one, has power again; StakeInvariant allows
// exactly this case.
func (k Keeper) EndBlockPower(p genesis.StakingParams, height uint64) ([]PowerUpdate, []Removed) {
	return k.powerUpdates(p, height, true)
}

// Removed is a validator record deleted for having no stake to answer with.
type Removed struct {
	Operator types.Address
	Name     string
}

func (k Keeper) powerUpdates(p genesis.StakingParams, height uint64, remove bool) ([]PowerUpdate, []Removed) {
	type entry struct {
		op    types.Address
		v     *Validator
		power int64
	}
	var all []entry
	var total int64
	k.IterateValidators(func(op types.Address, v *Validator) bool {
		e := entry{op, v, k.Power(p, op, v)}
		total += e.power
		all = append(all, e)
		return false
	})
	if total == 0 {
		return nil, nil
	}
	var out []PowerUpdate
	var removed []Removed
	for _, e := range all {
		reported := k.ReportedPower(e.v.PubKey)
		if e.power == reported {
			if remove && e.power == 0 && k.RemovableValidator(p, e.op, e.v, height) {
				k.kv.Delete(ValidatorKey(e.op))
				k.kv.Delete(ConsKeyKey(e.v.PubKey))
				removed = append(removed, Removed{Operator: e.op, Name: e.v.Name})
			}
			continue
		}
		if e.power == 0 {
			k.kv.Delete(powerKey(e.v.PubKey))
			e.v.PowerLost = height
			k.SetValidator(e.op, e.v)
		} else {
			k.kv.Set(powerKey(e.v.PubKey), be64(uint64(e.power)))
		}
		out = append(out, PowerUpdate{Operator: e.op, Name: e.v.Name, PubKey: e.v.PubKey, Power: e.power})
	}
	return out, removed
}

// RemovableValidator reports whether a record with no power can be
// deleted at the end of block height, freeing its consensus key: it is
// below the minimum stake (so it holds no slot), not tombstoned (a
// tombstone is kept forever so that the key can never return), not
// serving a jail term, CometBFT was told its power is 0, and that was at
// least unbonding_blocks ago. Genesis keeps the evidence max age below
// unbonding_blocks, so no evidence of an infraction from when it had power
// can arrive after that. Any stake it keeps stays bonded to the operator
// as an ordinary bond.
func (k Keeper) RemovableValidator(p genesis.StakingParams, op types.Address, v *Validator, height uint64) bool {
	return !v.Tombstoned && height >= v.JailedUntil && k.ReportedPower(v.PubKey) == 0 &&
		k.Bonded(op).Lt(p.MinValidatorStake) && height >= v.PowerLost+p.UnbondingBlocks
}

// Jail takes operator's validator out of the set until height until.
func (k Keeper) Jail(operator types.Address, until uint64, tombstone bool) {
	v, ok := k.GetValidator(operator)
	if !ok {
		return
	}
	v.Jailed = true
	if until > v.JailedUntil {
		v.JailedUntil = until
	}
	v.Tombstoned = v.Tombstoned || tombstone
	v.Missed = 0
	k.SetValidator(operator, v)
}

// Unjail returns a jailed validator to the set once its jail time is over.
func (k Keeper) Unjail(p genesis.StakingParams, operator types.Address, height uint64) error {
	v, ok := k.GetValidator(operator)
	if !ok {
		return types.ErrUnknownValidator.Wrapf("%s operates no validator", operator)
	}
	switch {
	case !v.Jailed:
		return types.ErrInvalidMsg.Wrapf("validator %s is not jailed", v.Name)
	case v.Tombstoned:
		return types.ErrJailed.Wrapf("validator %s was tombstoned for double signing and can never unjail", v.Name)
	case height < v.JailedUntil:
		return types.ErrJailed.Wrapf("validator %s is jailed until height %d (now %d)", v.Name, v.JailedUntil, height)
	}
	if b := k.Bonded(operator); b.Lt(p.MinValidatorStake) {
		return types.ErrInsufficientStake.Wrapf("validator %s has %s bonded, needs %s to unjail: bond more first", v.Name, types.FormatAmount(b), types.FormatAmount(p.MinValidatorStake))
	}
	v.Jailed = false
	k.SetValidator(operator, v)
	return nil
}

// DistributeFees pays the fee pool to validators in proportion to their
// reported voting power, rounding down; the remainder stays in the pool.
// It returns the amount paid.
func (k Keeper) DistributeFees() *uint256.Int {
	pool := k.FeePool()
	paid := new(uint256.Int)
	if pool.IsZero() {
		return paid
	}
	type share struct {
		op    types.Address
		power uint64
	}
	var shares []share
	var total uint64
	k.IterateValidators(func(op types.Address, v *Validator) bool {
		if p := k.ReportedPower(v.PubKey); p > 0 {
			shares = append(shares, share{op, uint64(p)})
			total += uint64(p)
		}
		return false
	})
	if total == 0 {
		return paid
	}
	for _, s := range shares {
		amt := new(uint256.Int).Mul(pool, uint256.NewInt(s.power))
		amt.Div(amt, uint256.NewInt(total))
		if amt.IsZero() {
			continue
		}
		k.add(s.op, amt)
		paid.Add(paid, amt)
	}
	setAmount(k.kv, FeePoolKey(), new(uint256.Int).Sub(pool, paid))
	return paid
}
