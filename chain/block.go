package chain

import (
	"crypto/sha256"
	"strconv"

	abci "github.com/cometbft/cometbft/abci/types"
	cmttypes "github.com/cometbft/cometbft/api/cometbft/types/v1"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
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
		res := k.Slash(op, p.Staking.DoubleSignSlashBps, types.Address{}, 0)
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

func padAddr(b []byte) []byte {
	out := make([]byte, 20)
	copy(out, b)
	return out
}

// endBlock runs the deadlines due at this height (auction closes, result
// windows, disputes), pays out matured unbondings, computes the validator
// power changes for CometBFT, and pays the fee pool to validators by power.
func endBlock(kv store.KV, p genesis.Params, env blockEnv, evs *types.Events) []escrow.PowerUpdate {
	market.NewKeeper(market.Context{KV: kv, Height: env.height, BlockHash: env.hash, Params: p, Events: evs}).EndBlock()
	k := escrow.NewKeeper(kv)
	for _, m := range k.MatureUnbondings(env.height) {
		evs.Emit(escrow.EventUnbonded{Account: m.Addr, Amount: m.Amount})
	}
	updates := k.PowerUpdates(p.Staking)
	for _, u := range updates {
		evs.Emit(escrow.EventPowerChanged{Operator: u.Operator, Name: u.Name, Power: uint64(u.Power)})
	}
	if paid := k.DistributeFees(); !paid.IsZero() {
		evs.Emit(escrow.EventFeesDistributed{Amount: paid})
	}
	return updates
}
