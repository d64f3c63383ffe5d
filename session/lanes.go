package session

import (
	"encoding/binary"
	"fmt"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Lanes: one per (session, provider).
//
// A session's money is the escrow its auction locked under the session's
// id: the lanes' budgets plus a validator-fee reserve. Redeeming a voucher
// pays min(cumulative, budget) − paid to the lane's provider and raises
// paid by what was transferred (protocol-threats S2, S7: never per voucher,
// never "used"; an older or equal voucher pays nothing, an over-budget one
// pays up to the budget and the rest after a top-up), and moves the fee
// share (fee_bps of it) from the reserve to the fee pool. The payee is
// inside the signed voucher, so whoever sends the redemption, the provider
// is paid (S20). Redemptions are open until Expiry + Grace; a close by the
// client moves Expiry to its block, and only after the grace does the
// end-block refund what no voucher claimed (S6), from a per-height queue
// worked at most MaxSettlePerBlock sessions per block (S19).

// Store key prefixes owned by this package.
const (
	prefixSession  byte = 0x50 // 0x50 | id(8) -> rlp(Session)
	prefixSchedule byte = 0x51 // 0x51 | height(8) | id(8) -> 0x01: refund due at height
	// Disputes (dispute.go).
	prefixDispute    byte = 0x52 // 0x52 | session(8) | index(8) -> rlp(Dispute)
	prefixDisputeDue byte = 0x53 // 0x53 | deadline(8) | session(8) | index(8) -> 0x01: votes end at height
	prefixAccused    byte = 0x54 // 0x54 | session(8) | provider(20) | seq(8) | accuser(20) -> index(8): receipts each party disputed
	prefixConvicted  byte = 0x55 // 0x55 | session(8) | provider(20) | seq(8) -> index(8): receipts proven wrong or equivocal
	prefixSealed     byte = 0x56 // 0x56 | session(8) | index(8) | validator(20) -> commitment(32)
	prefixOpened     byte = 0x57 // 0x57 | session(8) | index(8) | validator(20) -> verdict(1)
	// Lane caps (S22).
	prefixOpenBudget byte = 0x58 // 0x58 | provider(20) -> uint256: budgets of its lanes in unsettled sessions
)

// MaxSettlePerBlock bounds the sessions one end-block settles; the rest
// wait for the next block.
const MaxSettlePerBlock = 64

// Lane is one provider's share of a session.
type Lane struct {
	Provider types.Address `json:"provider"`
	Budget   *uint256.Int  `json:"budget"`
	Paid     *uint256.Int  `json:"paid"`
}

// Session is a lease: its client, prices per token, lanes and deadlines.
type Session struct {
	ID       uint64        `json:"id"`
	Client   types.Address `json:"client"`
	PriceIn  *uint256.Int  `json:"price_in"`
	PriceOut *uint256.Int  `json:"price_out"`
	// Expiry is the last height requests may be served (a close moves it
	// to the close's height); Grace the blocks after it open to
	// redemptions only.
	Expiry uint64 `json:"expiry"`
	Grace  uint64 `json:"grace"`
	Lanes  []Lane `json:"lanes"`
	// Fee is the validator-fee reserve left; FeeBps its share of each
	// redemption.
	Fee     *uint256.Int `json:"fee"`
	FeeBps  uint64       `json:"fee_bps"`
	FeePaid *uint256.Int `json:"fee_paid"`
	Closed  bool         `json:"closed"`
	Settled bool         `json:"settled"`
	// Reservation is what each lane's provider was paid at the award,
	// out of its budget, for keeping the model warm (S21; Budget is what
	// is left for vouchers).
	Reservation *uint256.Int `json:"reservation" rlp:"optional"`
	// NextDispute numbers the session's disputes; OpenDisputes are those
	// still voting, whose Bonds the escrow holds beside the lanes.
	NextDispute  uint64       `json:"next_dispute" rlp:"optional"`
	OpenDisputes uint64       `json:"open_disputes" rlp:"optional"`
	Bonds        *uint256.Int `json:"bonds" rlp:"optional"`
}

// reservation is s.Reservation, nil as zero.
func (s *Session) reservation() *uint256.Int {
	if s.Reservation == nil {
		return new(uint256.Int)
	}
	return s.Reservation
}

// bonds is s.Bonds, nil as zero.
func (s *Session) bonds() *uint256.Int {
	if s.Bonds == nil {
		return new(uint256.Int)
	}
	return s.Bonds
}

// Due is the height the end-block refunds the session at.
func (s *Session) Due() uint64 { return s.Expiry + s.Grace + 1 }

// Lane returns provider's lane.
func (s *Session) Lane(provider types.Address) (*Lane, bool) {
	for i := range s.Lanes {
		if s.Lanes[i].Provider == provider {
			return &s.Lanes[i], true
		}
	}
	return nil, false
}

// Owed is what the session's escrow must hold: every lane's unpaid budget
// and the fee reserve (until it settles), and the bonds of its open
// disputes (which may outlive the refund).
func (s *Session) Owed() *uint256.Int {
	return new(uint256.Int).Add(s.unspent(), s.bonds())
}

// unspent is what the settlement refunds: the lanes' unpaid budgets and
// the fee reserve (nothing once settled).
func (s *Session) unspent() *uint256.Int {
	out := new(uint256.Int)
	if s.Settled {
		return out
	}
	for _, l := range s.Lanes {
		out.Add(out, new(uint256.Int).Sub(l.Budget, l.Paid))
	}
	return out.Add(out, s.Fee)
}

// Context is what the keeper knows of the block it runs in.
type Context struct {
	KV      store.KV
	ChainID string
	Height  uint64
	Events  *types.Events
	// Params are the chain's parameters: disputes read the market's
	// (dispute_blocks, slashes, the bond) and staking's (validator power).
	Params genesis.Params
	// Fraud, if set, records that provider was proven to have signed a
	// wrong or equivocal receipt: the market jails and tombstones it like
	// a job fraud (package market owns provider records and imports this
	// one, so it is handed in).
	Fraud func(provider types.Address, reason string)
	// Pruned, if set, reports whether job id (the session's id) ended and
	// was pruned from the state with its session (package market, prune
	// PruneSession): a message naming it is told so rather than "no
	// session".
	Pruned func(id uint64) bool
}

// Keeper runs the lane rules. Its methods either succeed completely or
// return an error having written nothing.
type Keeper struct {
	ctx Context
	esc escrow.Keeper
}

// NewKeeper returns a keeper for ctx.
func NewKeeper(ctx Context) *Keeper {
	if ctx.Events == nil {
		ctx.Events = &types.Events{}
	}
	return &Keeper{ctx: ctx, esc: escrow.NewKeeper(ctx.KV)}
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func sessionKey(id uint64) []byte { return append([]byte{prefixSession}, be64(id)...) }
func scheduleKey(h, id uint64) []byte {
	return append(append([]byte{prefixSchedule}, be64(h)...), be64(id)...)
}

// Get returns session id.
func Get(r store.Reader, id uint64) (*Session, bool) {
	bz := r.Get(sessionKey(id))
	if bz == nil {
		return nil, false
	}
	var s Session
	if err := rlp.DecodeBytes(bz, &s); err != nil {
		panic(fmt.Errorf("session: stored session %d unreadable: %w", id, err))
	}
	return &s, true
}

func (k *Keeper) set(s *Session) {
	bz, err := rlp.EncodeToBytes(s)
	if err != nil {
		panic(err)
	}
	k.ctx.KV.Set(sessionKey(s.ID), bz)
}

// Open starts session s (its lanes' Paid zero), whose escrow (locked under
// s.ID) already holds exactly s.Owed(). The auction calls it at the award.
func (k *Keeper) Open(s *Session) error {
	if _, exists := Get(k.ctx.KV, s.ID); exists {
		return fmt.Errorf("session %d exists", s.ID)
	}
	if len(s.Lanes) == 0 || s.Expiry < k.ctx.Height {
		return fmt.Errorf("session %d: no lanes, or expired at %d", s.ID, s.Expiry)
	}
	for i := range s.Lanes {
		s.Lanes[i].Paid = new(uint256.Int)
	}
	s.FeePaid = new(uint256.Int)
	if have := k.esc.Locked(s.ID); !have.Eq(s.Owed()) {
		return fmt.Errorf("session %d: escrow holds %s, the lanes and fee need %s", s.ID, types.FormatAmount(have), types.FormatAmount(s.Owed()))
	}
	k.set(s)
	k.ctx.KV.Set(scheduleKey(s.Due(), s.ID), []byte{1})
	for _, l := range s.Lanes {
		k.addOpenBudget(l.Provider, l.Budget, true)
	}
	k.ctx.Events.Emit(EventOpened{Session: s.ID, Client: s.Client, Lanes: uint64(len(s.Lanes)), PriceIn: s.PriceIn, PriceOut: s.PriceOut, Expiry: s.Expiry, Reservation: s.reservation()})
	return nil
}

// Redeem pays voucher v (signed sig by the session's client) to its lane's
// provider. Anyone may send it.
func (k *Keeper) Redeem(v *Voucher, sig []byte) (*uint256.Int, error) {
	// Cheap checks first; the recovery last.
	if v.ChainID != k.ctx.ChainID {
		return nil, types.ErrWrongChainID.Wrapf("voucher is for chain %q, this is %q", v.ChainID, k.ctx.ChainID)
	}
	s, ok := Get(k.ctx.KV, v.Session)
	if !ok {
		return nil, k.noSession(v.Session)
	}
	if s.Settled || k.ctx.Height >= s.Due() {
		return nil, types.ErrWrongPhase.Wrapf("session %d took redemptions until height %d (now %d): it is settled", s.ID, s.Due()-1, k.ctx.Height)
	}
	lane, ok := s.Lane(v.Provider)
	if !ok {
		return nil, types.ErrInvalidMsg.Wrapf("%s holds no lane of session %d", v.Provider, s.ID)
	}
	claim := v.Cumulative
	if claim.Gt(lane.Budget) {
		claim = lane.Budget
	}
	if !claim.Gt(lane.Paid) {
		return nil, types.ErrInvalidMsg.Wrapf("voucher %d of session %d pays nothing more: cumulative %s, already paid %s", v.Seq, s.ID, types.FormatAmount(v.Cumulative), types.FormatAmount(lane.Paid))
	}
	signer, err := Signer(v.Hash(), sig)
	if err != nil {
		return nil, types.ErrUnauthorized.Wrapf("voucher signature: %v", err)
	}
	if signer != s.Client {
		return nil, types.ErrUnauthorized.Wrapf("voucher is signed by %s, session %d's client is %s", signer, s.ID, s.Client)
	}
	pay := new(uint256.Int).Sub(claim, lane.Paid)
	k.esc.Release(s.ID, v.Provider, pay)
	fee := new(uint256.Int).Mul(pay, uint256.NewInt(s.FeeBps))
	fee.Div(fee, uint256.NewInt(10_000))
	if fee.Gt(s.Fee) {
		fee = s.Fee.Clone()
	}
	if !fee.IsZero() {
		k.esc.ReleaseToFeePool(s.ID, fee)
		s.Fee = new(uint256.Int).Sub(s.Fee, fee)
		s.FeePaid = new(uint256.Int).Add(s.FeePaid, fee)
	}
	lane.Paid = claim.Clone()
	k.set(s)
	k.ctx.Events.Emit(EventRedeemed{Session: s.ID, Provider: v.Provider, Seq: v.Seq, Paid: pay, Total: lane.Paid})
	return pay, nil
}

// Close ends session id early: no request after this block, redemptions
// for Grace blocks more, then the refund. Only its client may.
func (k *Keeper) Close(from types.Address, id uint64) error {
	s, ok := Get(k.ctx.KV, id)
	if !ok {
		return k.noSession(id)
	}
	if from != s.Client {
		return types.ErrUnauthorized.Wrapf("only session %d's client %s may close it", id, s.Client)
	}
	if s.Closed || s.Settled || k.ctx.Height >= s.Expiry {
		return types.ErrWrongPhase.Wrapf("session %d is already closed or expired (expiry %d, now %d)", id, s.Expiry, k.ctx.Height)
	}
	k.ctx.KV.Delete(scheduleKey(s.Due(), id))
	s.Expiry, s.Closed = k.ctx.Height, true
	k.ctx.KV.Set(scheduleKey(s.Due(), id), []byte{1})
	k.set(s)
	k.ctx.Events.Emit(EventClosed{Session: id, Refund: s.Due()})
	return nil
}

// Settled is a session the end-block settled: what its lanes were paid in
// all and what went back to the client.
type Settled struct {
	ID                      uint64
	Paid, Refunded, FeePaid *uint256.Int
}

// EndBlock decides the session disputes whose votes ended (at most
// MaxDisputesPerBlock), then refunds the sessions due at or before this
// height, at most MaxSettlePerBlock of them (oldest first; the rest next
// block).
func (k *Keeper) EndBlock() []Settled {
	k.endDisputes()
	var out []Settled
	var due [][]byte
	end := append([]byte{prefixSchedule}, be64(k.ctx.Height+1)...)
	k.ctx.KV.Iterate([]byte{prefixSchedule}, end, func(key, _ []byte) bool {
		due = append(due, append([]byte(nil), key...))
		return len(due) >= MaxSettlePerBlock
	})
	for _, key := range due {
		k.ctx.KV.Delete(key)
		s, ok := Get(k.ctx.KV, binary.BigEndian.Uint64(key[9:]))
		if !ok || s.Settled {
			continue
		}
		refund := s.unspent()
		if !refund.IsZero() {
			k.esc.Release(s.ID, s.Client, refund)
		}
		for _, l := range s.Lanes {
			k.addOpenBudget(l.Provider, l.Budget, false)
		}
		s.Settled = true
		k.set(s)
		paid := new(uint256.Int)
		for _, l := range s.Lanes {
			paid.Add(paid, l.Paid)
		}
		out = append(out, Settled{ID: s.ID, Paid: paid, Refunded: refund, FeePaid: s.FeePaid.Clone()})
		k.ctx.Events.Emit(EventSettled{Session: s.ID, Refunded: refund})
	}
	return out
}

// Invariant checks every session's escrow against its lanes, fee reserve
// and open dispute bonds, its lanes' sanity (paid never above budget), its
// open disputes (each counted, its bond counted, its deadline queued), and
// every provider's open lane budget (S22) against the unsettled sessions.
func Invariant(r store.KV) error {
	esc := escrow.NewKeeper(r)
	var bad error
	open := map[types.Address]*uint256.Int{} // looked up only, never ranged over
	store.IteratePrefix(r, []byte{prefixSession}, func(_, value []byte) bool {
		var s Session
		if err := rlp.DecodeBytes(value, &s); err != nil {
			bad = err
			return true
		}
		if bad = disputeInvariant(r, &s); bad != nil {
			return true
		}
		if !s.Settled {
			for _, l := range s.Lanes {
				if open[l.Provider] == nil {
					open[l.Provider] = new(uint256.Int)
				}
				open[l.Provider].Add(open[l.Provider], l.Budget)
			}
		}
		for _, l := range s.Lanes {
			if l.Paid.Gt(l.Budget) {
				bad = fmt.Errorf("session invariant broken: session %d lane %s paid %s of a %s budget", s.ID, l.Provider, l.Paid.Dec(), l.Budget.Dec())
				return true
			}
		}
		if have := esc.Locked(s.ID); !have.Eq(s.Owed()) {
			bad = fmt.Errorf("session invariant broken: session %d holds %s, owes %s", s.ID, have.Dec(), s.Owed().Dec())
			return true
		}
		return false
	})
	if bad != nil {
		return bad
	}
	seen := 0
	store.IteratePrefix(r, []byte{prefixOpenBudget}, func(key, value []byte) bool {
		p := types.BytesToAddress(key[1:])
		if want := open[p]; want == nil || !want.Eq(new(uint256.Int).SetBytes(value)) {
			bad = fmt.Errorf("session invariant broken: provider %s's open lane budget is recorded as %s, its unsettled lanes hold %v", p, new(uint256.Int).SetBytes(value).Dec(), want)
			return true
		}
		seen++
		return false
	})
	if bad == nil && seen != len(open) {
		bad = fmt.Errorf("session invariant broken: %d providers hold lanes in unsettled sessions, %d open lane budgets are recorded", len(open), seen)
	}
	return bad
}

// disputeInvariant checks s's disputes: numbered 0..NextDispute-1, the
// open ones counted in OpenDisputes, their bonds summing to Bonds, each
// with its deadline queued; a decided one holds no bond in the session.
func disputeInvariant(r store.KV, s *Session) error {
	var n, open uint64
	bonds := new(uint256.Int)
	for _, d := range Disputes(r, s.ID) {
		if d.Index != n {
			return fmt.Errorf("session invariant broken: session %d dispute %d found where %d was expected", s.ID, d.Index, n)
		}
		n++
		if d.Status == DisputeOpen {
			open++
			bonds.Add(bonds, d.Bond)
			if r.Get(disputeDueKey(d.Deadline, s.ID, d.Index)) == nil {
				return fmt.Errorf("session invariant broken: session %d dispute %d is open without its deadline %d queued", s.ID, d.Index, d.Deadline)
			}
		}
	}
	if n != s.NextDispute || open != s.OpenDisputes || !bonds.Eq(s.bonds()) {
		return fmt.Errorf("session invariant broken: session %d counts %d disputes (%d open, bonds %s), the store holds %d (%d open, bonds %s)",
			s.ID, s.NextDispute, s.OpenDisputes, s.bonds().Dec(), n, open, bonds.Dec())
	}
	return nil
}

// noSession is the error about a session not in the state.
func (k *Keeper) noSession(id uint64) error {
	if k.ctx.Pruned != nil && k.ctx.Pruned(id) {
		return types.ErrNotFound.Wrapf("session %d: %s", id, PrunedError(id))
	}
	return types.ErrNotFound.Wrapf("no session %d", id)
}

// PrunedError says that job id, and its session if it had one, were pruned.
func PrunedError(id uint64) string {
	return fmt.Sprintf("job %d ended and was pruned from the state, with its session if it was a session job (params.market.retain_blocks after its end, and after its session's last dispute): its history is in the block events and the indexer", id)
}

// PruneSession deletes session id and its disputes, accusations,
// convictions and dispute votes, if it is settled and no dispute is open
// (the market prunes a session job only once its dispute window is over:
// market prune.go); it reports whether it did. Keys are fixed-width, so
// session 1's prefixes are no prefix of session 10's or 256's.
func PruneSession(kv store.KV, id uint64) bool {
	s, ok := Get(kv, id)
	if !ok || !s.Settled || s.OpenDisputes != 0 {
		return false
	}
	var keys [][]byte
	for _, p := range []byte{prefixDispute, prefixAccused, prefixConvicted, prefixSealed, prefixOpened} {
		store.IteratePrefix(kv, append([]byte{p}, be64(id)...), func(key, _ []byte) bool {
			keys = append(keys, append([]byte(nil), key...))
			return false
		})
	}
	keys = append(keys, sessionKey(id))
	for _, key := range keys {
		kv.Delete(key)
	}
	return true
}
