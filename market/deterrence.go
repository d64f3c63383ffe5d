package market

import (
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Deterrence that grows with the price (AppVersion 8, issue 30, review 2's
// M-M1). A lie on a task paid P is caught with probability at least ρ =
// audit_rate_bps / 10,000 (a random audit; a short task is audited with
// certainty). For lying to lose money at every price, what a caught liar
// loses must exceed P / ρ. So:
//
//   - a caught lie costs each slot that revealed it at least
//     AtRisk(P) = P × deterrence_bps / audit_rate_bps of its stake (more if
//     fraud_slash_bps of the stake is more; all of it if it has less);
//   - a provider may hold open slots only while their AtRisk fits in its
//     stake: eligibility (a bid's reveal, a claim, the close) asks
//     AtRisk(exposure + the job's cap) ≤ bonded, where exposure is the sum
//     of the prices of its live slots in unsettled tasks (Exposure, kept
//     by setTask); and a close that would give one provider slots of
//     several stages keeps each only while the sum still fits
//     (capAwards), the stage left short of it then follows the client's
//     short-stage policy.
//
// A lone liar's expected profit per lie is then (1 − ρ)·P − ρ·AtRisk(P) =
// (1 − ρ − d)·P with d = deterrence_bps / 10,000 ≥ 1: negative at every
// price, for every member of a cartel holding all r slots alike (each is
// slashed). docs/economics.md tabulates it through this keeper.
// audit_rate_bps 0 turns random audits, the exposure cap and the floor
// off (fraud_slash_bps alone then).

// AtRisk is the stake that must back a slot paid price under p.
func AtRisk(p genesis.MarketParams, price *uint256.Int) *uint256.Int {
	if p.AuditRateBps == 0 {
		return new(uint256.Int)
	}
	r := new(uint256.Int).Mul(price, uint256.NewInt(p.DeterrenceBps))
	return r.Div(r, uint256.NewInt(p.AuditRateBps))
}

// Exposure is the sum of the prices of addr's live slots in unsettled
// tasks.
func Exposure(r store.Reader, addr types.Address) *uint256.Int {
	bz := r.Get(ExposureKey(addr))
	if bz == nil {
		return new(uint256.Int)
	}
	return new(uint256.Int).SetBytes(bz)
}

func (k *Keeper) addExposure(addr types.Address, price *uint256.Int, add bool) {
	have := Exposure(k.kv, addr)
	if add {
		have.Add(have, price)
	} else {
		if have.Lt(price) {
			panic("market: exposure of " + addr.Hex() + " below a slot it held")
		}
		have.Sub(have, price)
	}
	if have.IsZero() {
		k.kv.Delete(ExposureKey(addr))
		return
	}
	k.kv.Set(ExposureKey(addr), have.Bytes())
}

// exposed lists the providers of t's live slots while t is unsettled.
func exposed(t *verifier.Task) []types.Address {
	if t == nil || t.Status == verifier.TaskSettled {
		return nil
	}
	var out []types.Address
	for i := range t.Slots {
		if t.Slots[i].Live() {
			out = append(out, t.Slots[i].Provider)
		}
	}
	return out
}

// setTask writes stage's task of j and keeps every provider's Exposure
// exact: a provider gains the stage's price when it holds a live slot of
// the unsettled task and did not before, and loses it when it no longer
// does (no-show, settled on its own, replaced, task settled). Every task
// write of the market goes through it.
func (k *Keeper) setTask(j *Job, stage uint16, t *verifier.Task) {
	old, _ := k.ver.GetTask(j.ID, stage)
	before, after := exposed(old), exposed(t)
	price := j.Prices[stage]
	for _, a := range before {
		if !hasAddr(after, a) {
			k.addExposure(a, price, false)
		}
	}
	for _, a := range after {
		if !hasAddr(before, a) {
			k.addExposure(a, price, true)
		}
	}
	k.ver.SetTask(j.ID, stage, t)
}

func hasAddr(list []types.Address, a types.Address) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

// exposureCap refuses a provider whose stake cannot back one more slot of
// j at its cap with what it holds open. A probe without a cap (the
// requirement-matching query) asks nothing of it.
func exposureCap(r store.KV, params genesis.Params, addr types.Address, j *Job) error {
	if params.Market.AuditRateBps == 0 || j.Kind == KindSession || j.MaxPrice == nil {
		return nil
	}
	open := Exposure(r, addr)
	need := AtRisk(params.Market, new(uint256.Int).Add(open, j.MaxPrice))
	if have := escrow.NewKeeper(r).Bonded(addr); have.Lt(need) {
		return types.ErrNotEligible.Wrapf("provider %s has %s bonded; its open slots (%s) and job %d at its cap (%s) need %s at stake (price × %d / %d, so that a lie loses at every price): bond more (ogpu tx provider bond) or bid on cheaper jobs",
			addr, types.FormatAmount(have), types.FormatAmount(open), j.ID, types.FormatAmount(j.MaxPrice), types.FormatAmount(need),
			params.Market.DeterrenceBps, params.Market.AuditRateBps)
	}
	return nil
}

// capAwards goes through a close's awards in stage order and drops a
// winner whose stake no longer backs its open slots plus the ones this
// close already gave it (eligibility checked each stage alone).
func (k *Keeper) capAwards(j *Job, awards []stageAward, filled []bool) {
	if k.p.AuditRateBps == 0 || j.Kind == KindSession || j.Stages < 2 {
		return
	}
	var given []types.Address // in award order, with amounts beside
	var amounts []*uint256.Int
	pending := func(a types.Address) *uint256.Int {
		for i, g := range given {
			if g == a {
				return amounts[i]
			}
		}
		given, amounts = append(given, a), append(amounts, new(uint256.Int))
		return amounts[len(amounts)-1]
	}
	for s := range awards {
		if filled[s] {
			continue
		}
		a := &awards[s]
		var keep []ranked
		for _, w := range a.winners {
			p := pending(w.provider)
			total := new(uint256.Int).Add(Exposure(k.kv, w.provider), p)
			total.Add(total, a.price)
			if k.esc.Bonded(w.provider).Lt(AtRisk(k.p, total)) {
				k.emit(EventBidForfeited{Job: j.ID, Stage: uint16(s), Provider: w.provider, Deposit: new(uint256.Int),
					Reason: "its stake does not back this slot with the others it won in this close (deterrence): deposit returned"})
				continue
			}
			p.Add(p, a.price)
			keep = append(keep, w)
		}
		a.winners = keep
	}
}

// fraudSlash is what a provider that revealed a result the validators
// rejected loses: fraud_slash_bps of its stake, and at least AtRisk of
// the stage's price (all its stake if less); compensation_bps of it goes
// to the client (not for a canary), the rest is burned.
func (k *Keeper) fraudSlash(j *Job, stage uint16, addr types.Address, reason string) {
	to := j.Client
	if j.CanaryBy != (types.Address{}) {
		to = types.Address{}
	}
	res := k.esc.SlashAtLeast(addr, k.p.FraudSlashBps, AtRisk(k.p, j.Prices[stage]), to, k.p.CompensationBps)
	j.Compensated.Add(j.Compensated, res.Compensation)
	k.emit(EventSlashed{Account: addr, Job: j.ID, Stage: stage, Amount: res.Slashed, Compensation: res.Compensation, Burned: res.Burned, Reason: reason})
}

// ExposureInvariant checks every provider's Exposure against its live
// slots in unsettled tasks, exactly.
func ExposureInvariant(r store.KV) error {
	ver := verifier.NewKeeper(r)
	want := map[types.Address]*uint256.Int{} // looked up, then compared in store order
	store.IteratePrefix(r, []byte{prefixJob}, func(_, value []byte) bool {
		var j Job
		decode(value, &j, "job")
		for s := uint16(0); s < j.Stages; s++ {
			t, ok := ver.GetTask(j.ID, s)
			if !ok {
				continue
			}
			for _, a := range exposed(t) {
				if want[a] == nil {
					want[a] = new(uint256.Int)
				}
				want[a].Add(want[a], j.Prices[s])
			}
		}
		return false
	})
	var bad error
	store.IteratePrefix(r, []byte{prefixExposure}, func(key, value []byte) bool {
		a := types.BytesToAddress(key[1:])
		have := new(uint256.Int).SetBytes(value)
		w := want[a]
		if w == nil {
			w = new(uint256.Int)
		}
		if !have.Eq(w) {
			bad = fmt.Errorf("exposure invariant broken: %s holds %s, its open slots sum to %s", a, have.Dec(), w.Dec())
			return true
		}
		delete(want, a)
		return false
	})
	if bad != nil {
		return bad
	}
	for a, w := range want { // only to report: any entry left is a failure
		if !w.IsZero() {
			return fmt.Errorf("exposure invariant broken: %s has open slots worth %s and no exposure", a, w.Dec())
		}
	}
	return nil
}
