package chain

import (
	"crypto/sha256"
	"strconv"

	abci "github.com/cometbft/cometbft/abci/types"
	cmttypes "github.com/cometbft/cometbft/api/cometbft/types/v1"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// consAddress is CometBFT's validator address: sha256(pubkey)[:20].
func consAddress(pubKey []byte) [20]byte {
	h := sha256.Sum256(pubKey)
	var a [20]byte
	copy(a[:], h[:20])
	return a
}

// operatorsByConsAddress maps CometBFT validator addresses to operators.
// The map is only looked up, never ranged over.
func operatorsByConsAddress(k escrow.Keeper) map[[20]byte]types.Address {
	out := map[[20]byte]types.Address{}
	k.IterateValidators(func(op types.Address, v *escrow.Validator) bool {
		out[consAddress(v.PubKey)] = op
		return false
	})
	return out
}

// beginBlock punishes what CometBFT reports before the block's transactions
// run: equivocation (slash and tombstone) and downtime (a validator that
// missed downtime_blocks consecutive blocks is slashed lightly and jailed).
func beginBlock(kv store.KV, p genesis.Params, env blockEnv, req *abci.FinalizeBlockRequest, evs *types.Events) {
	k := escrow.NewKeeper(kv)
	if len(req.Misbehavior) == 0 && len(req.DecidedLastCommit.Votes) == 0 {
		return
	}
	ops := operatorsByConsAddress(k)
	for _, m := range req.Misbehavior {
		op, ok := ops[[20]byte(padAddr(m.Validator.Address))]
		if !ok {
			continue
		}
		v, _ := k.GetValidator(op)
		if v.Tombstoned {
			continue // punished once per validator
		}
		res := k.SlashFrom(op, p.Staking.DoubleSignSlashBps, types.Address{}, 0, slashableFrom(p.Staking, m.Height))
		k.Jail(op, ^uint64(0), true)
		evs.Emit(escrow.EventValidatorJailed{Operator: op, Until: ^uint64(0), Tombstoned: true, Reason: "double signing", Slashed: res.Slashed})
	}
	for _, vote := range req.DecidedLastCommit.Votes {
		op, ok := ops[[20]byte(padAddr(vote.Validator.Address))]
		if !ok {
			continue
		}
		v, _ := k.GetValidator(op)
		if v.Jailed {
			continue
		}
		if vote.BlockIdFlag != cmttypes.BlockIDFlagAbsent {
			if v.Missed != 0 {
				v.Missed = 0
				k.SetValidator(op, v)
			}
			continue
		}
		v.Missed++
		k.SetValidator(op, v)
		if v.Missed >= p.Staking.DowntimeBlocks {
			res := k.Slash(op, p.Staking.DowntimeSlashBps, types.Address{}, 0)
			until := env.height + p.Staking.ValidatorJailBlocks
			k.Jail(op, until, false)
			evs.Emit(escrow.EventValidatorJailed{Operator: op, Until: until, Reason: "missed " + strconv.FormatUint(v.Missed, 10) + " blocks in a row", Slashed: res.Slashed})
		}
	}
}

// slashableFrom is the earliest maturity of an unbonding entry that backed
// an infraction at height infraction. An entry maturing at m started
// unbonding in block m - unbonding_blocks; CometBFT applies the power
// changes of block s from height s+2, so that stake still backed the
// validator's power at s+1. Entries that started unbonding before
// infraction-1 had left its power already: they are not slashed. Later
// ones are, however late the evidence lands (genesis keeps the evidence
// max age below unbonding_blocks, so they have not matured).
func slashableFrom(p genesis.StakingParams, infraction int64) uint64 {
	if infraction < 1 {
		return 0
	}
	return uint64(infraction) - 1 + p.UnbondingBlocks
}

func padAddr(b []byte) []byte {
	out := make([]byte, 20)
	copy(out, b)
	return out
}

// endBlock runs the deadlines due at this height (auction closes, result
// windows, disputes), pays out matured unbondings, computes the validator
// power changes for CometBFT, and pays the fee pool to validators by power.
func endBlock(kv store.KV, p genesis.Params, env blockEnv, evs *types.Events) []escrow.PowerUpdate {
	chainID := string(kv.Get(ChainIDKey()))
	// The beacon first: the market's audits draw from its final values.
	ek := escrow.NewKeeper(kv)
	beacon.NewKeeper(kv, evs).Finalize(env.height, func(op types.Address) bool {
		v, ok := ek.GetValidator(op)
		return ok && !v.Jailed && !v.Tombstoned && ek.Power(p.Staking, op, v) > 0 && ek.ReportedPower(v.PubKey) > 0
	})
	mk := market.NewKeeper(market.Context{KV: kv, Height: env.height, BlockHash: env.hash, Params: p, Events: evs, ChainID: chainID})
	mk.EndBlock()
	for _, s := range session.NewKeeper(sessionContext(kv, env, evs)).EndBlock() {
		mk.SessionSettled(s.ID, s.Paid, s.Refunded, s.FeePaid)
	}
	bridge.NewKeeper(bridge.Context{KV: kv, Params: p, ChainID: string(kv.Get(ChainIDKey())), Height: env.height, Events: evs}).EndBlock()
	k := escrow.NewKeeper(kv)
	for _, m := range k.MatureUnbondings(env.height) {
		evs.Emit(escrow.EventUnbonded{Account: m.Addr, Amount: m.Amount})
	}
	updates, removed := k.EndBlockPower(p.Staking, env.height)
	for _, u := range updates {
		evs.Emit(escrow.EventPowerChanged{Operator: u.Operator, Name: u.Name, Power: uint64(u.Power)})
	}
	for _, r := range removed {
		evs.Emit(escrow.EventValidatorRemoved{Operator: r.Operator, Name: r.Name})
	}
	if paid := k.DistributeFees(); !paid.IsZero() {
		evs.Emit(escrow.EventFeesDistributed{Amount: paid})
	}
	return updates
}
