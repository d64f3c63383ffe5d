package market

import (
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Session leases in the market.
//
// A session is posted as a job of kind "session" (MsgPostJob with
// SessionTerms): one stage, r replicas, sealed bids of a price per output
// token at most MaxPrice, the usual uniform clearing (the (r+1)-th lowest
// eligible bid, else the cap). Posting locks r × Budget plus the validator
// fee on it. At the close the winners get one lane each (package session)
// with the budget, for Blocks blocks from the award; input tokens cost
// price × InputPriceBps / 10,000. Unawarded lanes and their fee share
// return to the client at once. The job stays running while the session
// lives and completes when the session settles (SessionSettled); the
// market's escrow invariant delegates to the session's books meanwhile.
// Requests, receipts and vouchers never touch the chain.

// SessionTerms are a session's terms, fixed at posting.
type SessionTerms struct {
	// Budget is each lane's budget: what one provider can be paid at most.
	Budget *uint256.Int
	// InputPriceBps prices an input token as a share of an output token.
	InputPriceBps uint64
	// Blocks is how long the awarded providers serve (keep the model
	// loaded) from the award; Grace the blocks after it open to
	// redemptions only.
	Blocks, Grace uint64
}

// Session bounds.
const (
	MaxSessionBlocks = 100_000
	MinSessionGrace  = 5
	MaxSessionGrace  = 10_000
)

func validateSessionPost(m *MsgPostJob) error {
	t := m.Session
	switch {
	case m.Stages != 1:
		return fmt.Errorf("a session has one stage")
	case m.Mode != ModeAuction:
		return fmt.Errorf("a session is sold by auction")
	case m.Redundancy > 16:
		return fmt.Errorf("a session has at most 16 lanes")
	case t.Budget == nil || t.Budget.IsZero() || t.Budget.Gt(types.MaxSupply):
		return fmt.Errorf("session budget per lane must be positive")
	case t.Budget.Lt(m.MaxPrice):
		return fmt.Errorf("session budget per lane (%s) is below the price of one output token (%s)", types.FormatAmount(t.Budget), types.FormatAmount(m.MaxPrice))
	case t.InputPriceBps > 10_000:
		return fmt.Errorf("input price bps %d: at most 10000 (an input token costs at most an output token)", t.InputPriceBps)
	case t.Blocks == 0 || t.Blocks > MaxSessionBlocks:
		return fmt.Errorf("session blocks %d: want 1..%d", t.Blocks, MaxSessionBlocks)
	case t.Grace < MinSessionGrace || t.Grace > MaxSessionGrace:
		return fmt.Errorf("session grace %d: want %d..%d blocks (providers redeem their last vouchers in it)", t.Grace, MinSessionGrace, MaxSessionGrace)
	case m.Kind == KindSession && (m.MaxTokens != 0 || m.Input != (types.Hash{})):
		return fmt.Errorf("a session has no input or max tokens: each request carries its own")
	}
	return nil
}

// openSession awards session job j to the winners at price: lanes, the
// refund of unawarded lanes, and the session's opening. The job stays
// running until the session settles.
func (k *Keeper) openSession(j *Job, a stageAward) {
	t := j.Session
	n := uint64(len(a.winners))
	// Keep n lanes and their share of the fee; the rest goes back now.
	fee := new(uint256.Int).Mul(j.ValidatorFee, uint256.NewInt(n))
	fee.Div(fee, uint256.NewInt(uint64(j.Redundancy)))
	keep := new(uint256.Int).Mul(t.Budget, uint256.NewInt(n))
	refund := new(uint256.Int).Sub(k.esc.Locked(j.ID), new(uint256.Int).Add(keep, fee))
	if !refund.IsZero() {
		k.esc.Release(j.ID, j.Client, refund)
		j.Refunded.Add(j.Refunded, refund)
	}
	s := &session.Session{ID: j.ID, Client: j.Client, PriceOut: a.price.Clone(),
		PriceIn: new(uint256.Int).Div(new(uint256.Int).Mul(a.price, uint256.NewInt(t.InputPriceBps)), uint256.NewInt(10_000)),
		Expiry:  k.ctx.Height + t.Blocks, Grace: t.Grace, Fee: fee, FeeBps: k.p.ValidatorFeeBps,
		Reservation: ReservationFee(k.p, t)}
	names := make([]string, n)
	for i, w := range a.winners {
		// The reservation (S21) is paid now, out of the lane's budget.
		if !s.Reservation.IsZero() {
			k.esc.Release(j.ID, w.provider, s.Reservation)
			j.Paid.Add(j.Paid, s.Reservation)
			k.emit(EventProviderPaid{Provider: w.provider, Job: j.ID, Stage: 0, Amount: s.Reservation.Clone(), Via: PaidViaReservation})
		}
		s.Lanes = append(s.Lanes, session.Lane{Provider: w.provider, Budget: new(uint256.Int).Sub(t.Budget, s.Reservation)})
		k.kv.Set(byProviderKey(w.provider, j.ID), present)
		names[i] = w.provider.Hex()
	}
	j.Prices[0] = a.price.Clone()
	k.setState(j, JobRunning)
	k.setJob(j)
	if err := session.NewKeeper(session.Context{KV: k.kv, ChainID: k.ctx.ChainID, Height: k.ctx.Height, Events: k.ctx.Events}).Open(s); err != nil {
		panic(fmt.Errorf("market: session %d cannot open: %w", j.ID, err)) // the escrow is computed above
	}
	k.emit(EventJobAwarded{Job: j.ID, Stage: 0, Providers: names, Price: a.price, CommitDeadline: s.Expiry, RevealDeadline: s.Due() - 1})
}

// SessionSettled completes session job id once its session settled: the
// session paid the lanes and refunded the rest from the job's escrow.
func (k *Keeper) SessionSettled(id uint64, paid, refunded, fee *uint256.Int) {
	j, err := k.job(id)
	if err != nil || j.Kind != KindSession || j.State != JobRunning {
		return
	}
	j.Paid.Add(j.Paid, paid)
	j.Refunded.Add(j.Refunded, refunded)
	j.FeeSpent = fee.Clone()
	j.FeePaid = true
	k.setState(j, JobCompleted)
	k.setJob(j)
	k.emit(EventJobCompleted{Job: j.ID, Paid: j.Paid, Refunded: j.Refunded, Compensated: j.Compensated, ValidatorFee: j.feeSpent()})
}

// checkSessionLife bounds a session by the stake behind it: a provider's
// bond must stay slashable while its lane lives and any dispute about it
// can land (protocol-threats S22).
func (k *Keeper) checkSessionLife(m *MsgPostJob) error {
	w, t := m.Windows, m.Session
	if w.Bid > k.p.MaxJobBlocks || w.Reveal > k.p.MaxJobBlocks {
		return types.ErrInvalidMsg.Wrapf("post-job: bid and reveal windows are at most %d blocks each", k.p.MaxJobBlocks)
	}
	if life := t.Blocks + t.Grace + k.p.DisputeBlocks; life >= k.ctx.Params.Staking.UnbondingBlocks {
		return types.ErrInvalidMsg.Wrapf("post-job: session blocks + grace + %d dispute blocks = %d must stay below unbonding_blocks (%d), so that the providers' stake answers for the whole session",
			k.p.DisputeBlocks, life, k.ctx.Params.Staking.UnbondingBlocks)
	}
	return nil
}

// ReservationFee is what each lane's provider is paid at the award for
// keeping its model loaded for the session (S21): session_reservation_bps
// of the lane's budget per 1,000 session blocks, rounded down. Genesis
// bounds the rate (at most 50) and the market the blocks (at most
// MaxSessionBlocks), so it is at most half the budget. A client that
// never sends a request still pays it; one that does pays it on top of
// its vouchers, which draw on what is left of the budget. It goes to the
// providers, not to the fee pool: they bear the cost of capacity they
// cannot sell elsewhere, and the validators do no work for it.
func ReservationFee(p genesis.MarketParams, t *SessionTerms) *uint256.Int {
	fee := new(uint256.Int).Mul(t.Budget, uint256.NewInt(p.SessionReservationBps))
	fee.Mul(fee, uint256.NewInt(t.Blocks))
	return fee.Div(fee, uint256.NewInt(10_000*1_000))
}

// laneCap refuses a session bidder whose lane budgets in unsettled
// sessions, plus the lane this job would give it, pass
// session_lane_cap_bps of its bonded stake (S22: a provider can cheat on
// at most that much at once before a dispute lands; docs/economics.md
// limit 2).
func laneCap(r store.KV, params genesis.Params, addr types.Address, j *Job) error {
	bps := params.Market.SessionLaneCapBps
	if bps == 0 {
		return nil
	}
	bonded := escrow.NewKeeper(r).Bonded(addr)
	limit := escrow.MulBps(bonded, bps)
	open := session.OpenBudget(r, addr)
	if want := new(uint256.Int).Add(open, j.Session.Budget); want.Gt(limit) {
		return types.ErrNotEligible.Wrapf("provider %s holds %s of lane budgets in open sessions; session %d's lane of %s would pass its cap of %s (session_lane_cap_bps %d of %s bonded): bond more or wait for a session to settle",
			addr, types.FormatAmount(open), j.ID, types.FormatAmount(j.Session.Budget), types.FormatAmount(limit), bps, types.FormatAmount(bonded))
	}
	return nil
}
