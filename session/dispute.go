package session

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Disputes over receipts (protocol-threats S11–S15, S18; rules 6–8).
//
// A receipt is a provider's signed account of one response (signed.go). The
// session's client, or a provider holding a lane of the session, may claim
// that receipts are wrong, with MsgDisputeSession: each receipt with the
// client-signed request it answers. One receipt is an audit (validators
// judge the output itself, S13); two receipts from two providers for the
// same request content with different outputs are a comparison (S11); two
// receipts from one provider for the same seq that differ are an
// equivocation (S15), fraud without re-execution, decided in the
// transaction. The prompt and outputs never go on chain: the accuser names
// where validators fetch them (Addrs), and missing data never counts
// against the accused (S12).
//
// The accuser locks a bond (params.market.session_dispute_bond) in the
// session's escrow. Validators active at the opening (minus the parties:
// the accused providers and the accuser, S18) seal a verdict until SealBy
// and open it until Deadline: a bit mask, bit i set when receipt i is
// wrong, or VerdictNoData. More than half of the voter set's power
// decides:
//
//   - a mask with bits set: each wrong receipt's provider is slashed
//     fraud_slash_bps and tombstoned; the client is compensated from the
//     slash, at most compensation_bps of it and at most the receipt's
//     charge (NIn·PriceIn + NOut·PriceOut, rule 8), the rest is burned; the
//     bond returns to the accuser;
//   - mask 0 (every receipt valid, S14's near-ties): nobody is slashed, the
//     bond goes to the fee pool (it paid the validators' work);
//   - VerdictNoData: dismissed, the bond goes to the fee pool (S12);
//   - no majority: nobody is at fault, the bond returns.
//
// Voters that sealed nothing, did not open, or opened against a decided
// verdict lose vote_slash_bps (burned).

// Dispute bounds.
const (
	// MaxOpenDisputes bounds the disputes open at once per session.
	MaxOpenDisputes = 8
	// MaxDisputeAddrs bounds the accuser's multiaddrs, MaxDisputeAddrLen
	// each one's length.
	MaxDisputeAddrs   = 8
	MaxDisputeAddrLen = 256
	// MaxDisputesPerBlock bounds the dispute deadlines one end-block works;
	// the rest wait for the next block.
	MaxDisputesPerBlock = 16
)

// VerdictNoData is the verdict of a validator that could not fetch the
// dispute's data or found it not matching the hashes on chain.
const VerdictNoData uint8 = 0xFF

// SessionVoteTag starts every session vote commitment.
const SessionVoteTag = "ogpu/svote/v1"

// SignedRequest is a request with the session client's signature over
// Request.Hash().
type SignedRequest struct {
	Request Request
	Sig     []byte
}

// SignedReceipt is a receipt with its provider's signature over
// Receipt.Hash().
type SignedReceipt struct {
	Receipt Receipt
	Sig     []byte
}

// Charge is what the request of r costs at the session's prices:
// NIn·PriceIn + NOut·PriceOut.
func (s *Session) Charge(r *Receipt) *uint256.Int {
	in := new(uint256.Int).Mul(uint256.NewInt(r.NIn), s.PriceIn)
	out := new(uint256.Int).Mul(uint256.NewInt(r.NOut), s.PriceOut)
	return in.Add(in, out)
}

// MsgDisputeSession claims that receipts of a session are wrong.
// Receipts[i] answers Requests[i]. Addrs are the accuser's libp2p
// multiaddrs where validators fetch the prompts and outputs.
type MsgDisputeSession struct {
	Session  uint64
	Requests []SignedRequest
	Receipts []SignedReceipt
	Addrs    []string
}

// Raw encodes the message.
func (m *MsgDisputeSession) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeDisputeSession, m)
}

// DecodeMsgDisputeSession parses a MsgDisputeSession payload and checks
// its shape (the state checks are the keeper's).
func DecodeMsgDisputeSession(data []byte) (*MsgDisputeSession, error) {
	var m MsgDisputeSession
	if err := types.DecodeMsgPayload("dispute session", data, &m); err != nil {
		return nil, err
	}
	n := len(m.Receipts)
	switch {
	case n < 1 || n > 2:
		return nil, types.ErrInvalidMsg.Wrapf("dispute session: %d receipts: dispute one receipt (an audit) or two (a comparison or an equivocation)", n)
	case len(m.Requests) != n:
		return nil, types.ErrInvalidMsg.Wrapf("dispute session: %d requests for %d receipts: give each receipt's signed request, in the same order", len(m.Requests), n)
	case len(m.Addrs) == 0 || len(m.Addrs) > MaxDisputeAddrs:
		return nil, types.ErrInvalidMsg.Wrapf("dispute session: %d addresses: give 1 to %d multiaddrs where validators fetch the data", len(m.Addrs), MaxDisputeAddrs)
	}
	for i := range n {
		if len(m.Requests[i].Sig) != 65 || len(m.Receipts[i].Sig) != 65 {
			return nil, types.ErrInvalidMsg.Wrapf("dispute session: request and receipt %d: signatures are 65 bytes", i)
		}
	}
	for i, a := range m.Addrs {
		if a == "" || len(a) > MaxDisputeAddrLen || !types.Printable(a) {
			return nil, types.ErrInvalidMsg.Wrapf("dispute session: address %d: want a printable multiaddr of 1 to %d bytes", i, MaxDisputeAddrLen)
		}
	}
	return &m, nil
}

// MsgSealSessionVote seals a validator's verdict on a session dispute:
// Commitment = SessionVoteCommitment(session, dispute, verdict, salt,
// validator).
type MsgSealSessionVote struct {
	Session    uint64
	Dispute    uint64
	Commitment types.Hash
}

// Raw encodes the message.
func (m *MsgSealSessionVote) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeSealSessionVote, m)
}

// DecodeMsgSealSessionVote parses a MsgSealSessionVote payload.
func DecodeMsgSealSessionVote(data []byte) (*MsgSealSessionVote, error) {
	var m MsgSealSessionVote
	if err := types.DecodeMsgPayload("seal session vote", data, &m); err != nil {
		return nil, err
	}
	if m.Commitment == (types.Hash{}) {
		return nil, types.ErrInvalidMsg.Wrapf("seal session vote: empty commitment")
	}
	return &m, nil
}

// MsgOpenSessionVote opens a sealed verdict.
type MsgOpenSessionVote struct {
	Session uint64
	Dispute uint64
	Verdict uint8
	Salt    types.Hash
}

// Raw encodes the message.
func (m *MsgOpenSessionVote) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeOpenSessionVote, m)
}

// DecodeMsgOpenSessionVote parses a MsgOpenSessionVote payload.
func DecodeMsgOpenSessionVote(data []byte) (*MsgOpenSessionVote, error) {
	var m MsgOpenSessionVote
	if err := types.DecodeMsgPayload("open session vote", data, &m); err != nil {
		return nil, err
	}
	if m.Verdict > 3 && m.Verdict != VerdictNoData {
		return nil, types.ErrInvalidMsg.Wrapf("open session vote: verdict %d: want a mask of the invalid receipts (0 to 3) or %d (no data)", m.Verdict, VerdictNoData)
	}
	return &m, nil
}

// SessionVoteCommitment is sha256("ogpu/svote/v1" | session(8) |
// dispute(8) | verdict(1) | salt(32) | validator(20)).
func SessionVoteCommitment(session, dispute uint64, verdict uint8, salt types.Hash, validator types.Address) types.Hash {
	h := sha256.New()
	h.Write([]byte(SessionVoteTag))
	h.Write(binary.BigEndian.AppendUint64(nil, session))
	h.Write(binary.BigEndian.AppendUint64(nil, dispute))
	h.Write([]byte{verdict})
	h.Write(salt[:])
	h.Write(validator[:])
	return types.Hash(h.Sum(nil))
}

// DisputeStatus is where a dispute is.
type DisputeStatus uint8

const (
	// DisputeOpen: validators vote.
	DisputeOpen DisputeStatus = 1
	// DisputeDecided: a verdict mask won (bits set: those receipts' providers
	// were slashed; 0: every receipt was valid).
	DisputeDecided DisputeStatus = 2
	// DisputeDismissed: the validators could not get the data (VerdictNoData).
	DisputeDismissed DisputeStatus = 3
	// DisputeEquivocation: two differing receipts of one provider for one
	// seq, decided in the transaction that showed them.
	DisputeEquivocation DisputeStatus = 4
	// DisputeUnresolved: no verdict had more than half of the voter set's
	// power at the deadline; nobody is at fault.
	DisputeUnresolved DisputeStatus = 5
)

func (s DisputeStatus) String() string {
	switch s {
	case DisputeOpen:
		return "open"
	case DisputeDecided:
		return "decided"
	case DisputeDismissed:
		return "dismissed"
	case DisputeEquivocation:
		return "equivocation"
	case DisputeUnresolved:
		return "unresolved"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// MarshalText prints the status by name in JSON.
func (s DisputeStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a status printed by MarshalText.
func (s *DisputeStatus) UnmarshalText(b []byte) error {
	for v := DisputeOpen; v <= DisputeUnresolved; v++ {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("unknown dispute status %q", b)
}

// Dispute kinds.
const (
	KindAudit        = "audit"
	KindComparison   = "comparison"
	KindEquivocation = "equivocation"
)

// Voter is a member of a dispute's voter set, with its power at the opening.
type Voter struct {
	Validator types.Address `json:"validator"`
	Power     uint64        `json:"power"`
}

// Dispute is one dispute of a session, numbered from 0 per session.
type Dispute struct {
	Session  uint64          `json:"session"`
	Index    uint64          `json:"index"`
	Kind     string          `json:"kind"`
	Accuser  types.Address   `json:"accuser"`
	Requests []SignedRequest `json:"requests"`
	Receipts []SignedReceipt `json:"receipts"`
	Addrs    []string        `json:"addrs"`
	Bond     *uint256.Int    `json:"bond"`
	// Opened is the height of the dispute; sealed votes are taken until
	// SealBy, opened until Deadline.
	Opened   uint64        `json:"opened"`
	SealBy   uint64        `json:"seal_by"`
	Deadline uint64        `json:"deadline"`
	Status   DisputeStatus `json:"status"`
	// Verdict is the decided mask (bit i: receipt i invalid) or
	// VerdictNoData; meaningless while open or unresolved.
	Verdict uint8 `json:"verdict"`
	// Voters is the voter set, in address order.
	Voters []Voter `json:"voters"`
	// Slashed and Compensated: what the decision took from the accused
	// providers and paid the client.
	Slashed     *uint256.Int `json:"slashed"`
	Compensated *uint256.Int `json:"compensated"`
}

// Providers are the accused providers, in receipt order, without repeats.
func (d *Dispute) Providers() []types.Address {
	var out []types.Address
	for i := range d.Receipts {
		p := d.Receipts[i].Receipt.Provider
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// VoterPower is validator's power in the voter set (0: not in it).
func (d *Dispute) VoterPower(validator types.Address) uint64 {
	for _, v := range d.Voters {
		if v.Validator == validator {
			return v.Power
		}
	}
	return 0
}

// OpenVote is a voter's opened verdict.
type OpenVote struct {
	Validator types.Address `json:"validator"`
	Verdict   uint8         `json:"verdict"`
}

// ---- store ----

func disputeKey(session, index uint64) []byte {
	return append(append([]byte{prefixDispute}, be64(session)...), be64(index)...)
}

func disputeDueKey(h, session, index uint64) []byte {
	return append(append(append([]byte{prefixDisputeDue}, be64(h)...), be64(session)...), be64(index)...)
}

func accusedKey(session uint64, provider types.Address, seq uint64, accuser types.Address) []byte {
	k := append(append([]byte{prefixAccused}, be64(session)...), provider.Bytes()...)
	return append(append(k, be64(seq)...), accuser.Bytes()...)
}

func convictedKey(session uint64, provider types.Address, seq uint64) []byte {
	k := append(append([]byte{prefixConvicted}, be64(session)...), provider.Bytes()...)
	return append(k, be64(seq)...)
}

func votePrefix(prefix byte, session, index uint64) []byte {
	return append(append([]byte{prefix}, be64(session)...), be64(index)...)
}

func openBudgetKey(provider types.Address) []byte {
	return append([]byte{prefixOpenBudget}, provider.Bytes()...)
}

// GetDispute returns dispute index of session.
func GetDispute(r store.Reader, session, index uint64) (*Dispute, bool) {
	bz := r.Get(disputeKey(session, index))
	if bz == nil {
		return nil, false
	}
	var d Dispute
	if err := rlp.DecodeBytes(bz, &d); err != nil {
		panic(fmt.Errorf("session: stored dispute %d/%d unreadable: %w", session, index, err))
	}
	return &d, true
}

// Disputes returns every dispute of session, oldest first.
func Disputes(r store.KV, session uint64) []*Dispute {
	var out []*Dispute
	store.IteratePrefix(r, append([]byte{prefixDispute}, be64(session)...), func(_, value []byte) bool {
		var d Dispute
		if err := rlp.DecodeBytes(value, &d); err != nil {
			panic(fmt.Errorf("session: stored dispute of session %d unreadable: %w", session, err))
		}
		out = append(out, &d)
		return false
	})
	return out
}

func (k *Keeper) setDispute(d *Dispute) {
	bz, err := rlp.EncodeToBytes(d)
	if err != nil {
		panic(err)
	}
	k.ctx.KV.Set(disputeKey(d.Session, d.Index), bz)
}

// SealedVoters lists the voters that sealed a vote on a dispute, in
// address order.
func SealedVoters(r store.KV, session, index uint64) []types.Address {
	var out []types.Address
	pfx := votePrefix(prefixSealed, session, index)
	store.IteratePrefix(r, pfx, func(key, _ []byte) bool {
		out = append(out, types.BytesToAddress(key[len(pfx):]))
		return false
	})
	return out
}

// OpenedVotes lists the opened verdicts of a dispute, in address order.
func OpenedVotes(r store.KV, session, index uint64) []OpenVote {
	var out []OpenVote
	pfx := votePrefix(prefixOpened, session, index)
	store.IteratePrefix(r, pfx, func(key, value []byte) bool {
		out = append(out, OpenVote{Validator: types.BytesToAddress(key[len(pfx):]), Verdict: value[0]})
		return false
	})
	return out
}

// OpenBudget is the sum of provider's lane budgets in sessions not yet
// settled (S22).
func OpenBudget(r store.Reader, provider types.Address) *uint256.Int {
	bz := r.Get(openBudgetKey(provider))
	return new(uint256.Int).SetBytes(bz)
}

func (k *Keeper) addOpenBudget(provider types.Address, amt *uint256.Int, add bool) {
	have := OpenBudget(k.ctx.KV, provider)
	if add {
		have.Add(have, amt)
	} else {
		have.Sub(have, amt)
	}
	if have.IsZero() {
		k.ctx.KV.Delete(openBudgetKey(provider))
		return
	}
	k.ctx.KV.Set(openBudgetKey(provider), have.Bytes())
}

// ---- opening ----

// Dispute opens a dispute of receipts of session m.Session, accused by
// from. An equivocation is decided at once. It either succeeds completely
// or returns an error having written nothing.
func (k *Keeper) Dispute(from types.Address, m *MsgDisputeSession) (*Dispute, error) {
	mp := k.ctx.Params.Market
	// Cheap checks first; the recoveries last.
	s, ok := Get(k.ctx.KV, m.Session)
	if !ok {
		return nil, k.noSession(m.Session)
	}
	if last := s.Expiry + s.Grace + mp.DisputeBlocks; k.ctx.Height > last {
		return nil, types.ErrWrongPhase.Wrapf("session %d took disputes until height %d (expiry %d + grace %d + %d dispute blocks); now %d", s.ID, last, s.Expiry, s.Grace, mp.DisputeBlocks, k.ctx.Height)
	}
	if _, lane := s.Lane(from); from != s.Client && !lane {
		return nil, types.ErrUnauthorized.Wrapf("%s is neither session %d's client nor a provider of one of its lanes: only they may dispute its receipts", from, s.ID)
	}
	if s.OpenDisputes >= MaxOpenDisputes {
		return nil, types.ErrWrongPhase.Wrapf("session %d has %d disputes open, the most there may be: wait for one to end", s.ID, s.OpenDisputes)
	}
	n := len(m.Receipts)
	if n < 1 || n > 2 || len(m.Requests) != n {
		return nil, types.ErrInvalidMsg.Wrapf("dispute one or two receipts, each with its request")
	}
	for i := range n {
		q, r := &m.Requests[i].Request, &m.Receipts[i].Receipt
		switch {
		case r.ChainID != k.ctx.ChainID || q.ChainID != k.ctx.ChainID:
			return nil, types.ErrWrongChainID.Wrapf("receipt %d or its request is for chain %q/%q, this is %q", i, r.ChainID, q.ChainID, k.ctx.ChainID)
		case r.Session != s.ID || q.Session != s.ID:
			return nil, types.ErrInvalidMsg.Wrapf("receipt %d or its request is for session %d/%d, not %d", i, r.Session, q.Session, s.ID)
		case q.Provider != r.Provider:
			return nil, types.ErrInvalidMsg.Wrapf("receipt %d is %s's but its request was sent to %s", i, r.Provider, q.Provider)
		case q.Seq != r.Seq:
			return nil, types.ErrInvalidMsg.Wrapf("receipt %d answers seq %d but its request is seq %d", i, r.Seq, q.Seq)
		}
		if _, ok := s.Lane(r.Provider); !ok {
			return nil, types.ErrInvalidMsg.Wrapf("receipt %d is signed for %s, which holds no lane of session %d", i, r.Provider, s.ID)
		}
		if q.Hash() != r.Request {
			return nil, types.ErrInvalidMsg.Wrapf("receipt %d does not answer the request given with it (its request hash %x is not the request's %x)", i, r.Request, q.Hash())
		}
	}
	kind := KindAudit
	if n == 2 {
		a, b := &m.Receipts[0].Receipt, &m.Receipts[1].Receipt
		qa, qb := &m.Requests[0].Request, &m.Requests[1].Request
		switch {
		case a.Provider == b.Provider && a.Seq != b.Seq:
			return nil, types.ErrInvalidMsg.Wrapf("two receipts of %s for seqs %d and %d: two receipts of one provider must be for one seq (an equivocation); dispute each on its own", a.Provider, a.Seq, b.Seq)
		case a.Provider == b.Provider && a.Request == b.Request && a.Output == b.Output:
			return nil, types.ErrInvalidMsg.Wrapf("the two receipts of %s for seq %d have the same request and output: no equivocation", a.Provider, a.Seq)
		case a.Provider == b.Provider:
			kind = KindEquivocation
		case qa.Prompt != qb.Prompt || qa.MaxTokens != qb.MaxTokens || qa.Params != qb.Params:
			return nil, types.ErrInvalidMsg.Wrapf("the two requests differ in prompt, max tokens or parameters: only answers to the same request can be compared (S11)")
		case a.Output == b.Output:
			return nil, types.ErrInvalidMsg.Wrapf("the two receipts have the same output: nothing to compare; audit one receipt on its own")
		default:
			kind = KindComparison
		}
	}
	for i := range n {
		r := &m.Receipts[i].Receipt
		if k.ctx.KV.Get(convictedKey(s.ID, r.Provider, r.Seq)) != nil {
			return nil, types.ErrDuplicate.Wrapf("%s's receipt for seq %d of session %d was already proven wrong", r.Provider, r.Seq, s.ID)
		}
		if kind != KindEquivocation && k.ctx.KV.Get(accusedKey(s.ID, r.Provider, r.Seq, from)) != nil {
			return nil, types.ErrDuplicate.Wrapf("%s already disputed %s's receipt for seq %d of session %d", from, r.Provider, r.Seq, s.ID)
		}
	}
	bond := mp.SessionDisputeBond
	if kind != KindEquivocation {
		if bond == nil || bond.IsZero() {
			return nil, types.ErrInvalidMsg.Wrapf("params.market.session_dispute_bond is not set: session disputes are off on this chain")
		}
		if have := k.esc.Balance(from); have.Lt(bond) {
			return nil, types.ErrInsufficientFunds.Wrapf("a session dispute locks a bond of %s; %s holds %s", types.FormatAmount(bond), from, types.FormatAmount(have))
		}
	}
	for i := range n {
		q, r := &m.Requests[i], &m.Receipts[i]
		signer, err := Signer(q.Request.Hash(), q.Sig)
		if err != nil {
			return nil, types.ErrUnauthorized.Wrapf("request %d signature: %v", i, err)
		}
		if signer != s.Client {
			return nil, types.ErrUnauthorized.Wrapf("request %d is signed by %s, session %d's client is %s", i, signer, s.ID, s.Client)
		}
		if signer, err = Signer(r.Receipt.Hash(), r.Sig); err != nil {
			return nil, types.ErrUnauthorized.Wrapf("receipt %d signature: %v", i, err)
		}
		if signer != r.Receipt.Provider {
			return nil, types.ErrUnauthorized.Wrapf("receipt %d is signed by %s, not by its provider %s", i, signer, r.Receipt.Provider)
		}
	}

	d := &Dispute{Session: s.ID, Index: s.NextDispute, Kind: kind, Accuser: from, Requests: m.Requests, Receipts: m.Receipts,
		Addrs: m.Addrs, Bond: new(uint256.Int), Opened: k.ctx.Height, Status: DisputeOpen, Slashed: new(uint256.Int), Compensated: new(uint256.Int)}
	s.NextDispute++
	seqs := make([]string, n)
	for i := range n {
		seqs[i] = strconv.FormatUint(m.Receipts[i].Receipt.Seq, 10)
	}
	names := make([]string, 0, 2)
	for _, p := range d.Providers() {
		names = append(names, p.Hex())
	}
	if kind == KindEquivocation {
		k.set(s)
		d.SealBy, d.Deadline = k.ctx.Height, k.ctx.Height
		k.ctx.Events.Emit(EventDisputeOpened{Session: s.ID, Dispute: d.Index, Accuser: from, Providers: names, Seqs: strings.Join(seqs, ","), SealBy: d.SealBy, Deadline: d.Deadline, Kind: kind})
		k.decide(s, d, DisputeEquivocation, 3)
		return d, nil
	}
	if err := k.esc.Lock(from, s.ID, bond); err != nil {
		return nil, err // checked above; Lock writes nothing when it fails
	}
	d.Bond = bond.Clone()
	s.Bonds = new(uint256.Int).Add(s.bonds(), bond)
	s.OpenDisputes++
	k.set(s)
	for i := range n {
		r := &m.Receipts[i].Receipt
		k.ctx.KV.Set(accusedKey(s.ID, r.Provider, r.Seq, from), be64(d.Index))
	}
	d.SealBy = k.ctx.Height + max(1, mp.DisputeBlocks/2)
	d.Deadline = k.ctx.Height + mp.DisputeBlocks
	d.Voters = k.voters(append(d.Providers(), from))
	k.setDispute(d)
	k.ctx.KV.Set(disputeDueKey(d.Deadline, s.ID, d.Index), []byte{1})
	k.ctx.Events.Emit(EventDisputeOpened{Session: s.ID, Dispute: d.Index, Accuser: from, Providers: names, Seqs: strings.Join(seqs, ","), SealBy: d.SealBy, Deadline: d.Deadline, Kind: kind})
	return d, nil
}

// voters is the voter set of a new dispute: the active validators (a
// record, not jailed or tombstoned, stake at least the minimum, power
// reported to CometBFT), without the parties to the case (S18), in
// operator order.
func (k *Keeper) voters(parties []types.Address) []Voter {
	var out []Voter
	var ops []types.Address
	k.esc.IterateValidators(func(op types.Address, _ *escrow.Validator) bool { ops = append(ops, op); return false })
	for _, op := range ops {
		if slices.Contains(parties, op) {
			continue
		}
		v, _ := k.esc.GetValidator(op)
		if v.Jailed || v.Tombstoned || k.esc.Power(k.ctx.Params.Staking, op, v) == 0 {
			continue
		}
		if p := k.esc.ReportedPower(v.PubKey); p > 0 {
			out = append(out, Voter{Validator: op, Power: uint64(p)})
		}
	}
	return out
}

// ---- votes ----

// openDispute returns a dispute still voting.
func (k *Keeper) openDispute(session, index uint64) (*Dispute, error) {
	d, ok := GetDispute(k.ctx.KV, session, index)
	if !ok && k.ctx.Pruned != nil && k.ctx.Pruned(session) {
		return nil, k.noSession(session)
	}
	if !ok {
		return nil, types.ErrNotFound.Wrapf("session %d has no dispute %d", session, index)
	}
	if d.Status != DisputeOpen {
		return nil, types.ErrWrongPhase.Wrapf("dispute %d of session %d is %s: no more votes", index, session, d.Status)
	}
	return d, nil
}

// SealVote records a voter's sealed verdict.
func (k *Keeper) SealVote(from types.Address, m *MsgSealSessionVote) error {
	d, err := k.openDispute(m.Session, m.Dispute)
	if err != nil {
		return err
	}
	switch {
	case d.VoterPower(from) == 0:
		return types.ErrUnauthorized.Wrapf("%s is not in the voter set of dispute %d of session %d: the active validators at its opening, without the parties, vote", from, d.Index, d.Session)
	case k.ctx.Height > d.SealBy:
		return types.ErrWrongPhase.Wrapf("sealed votes on dispute %d of session %d closed at height %d (now %d)", d.Index, d.Session, d.SealBy, k.ctx.Height)
	}
	key := append(votePrefix(prefixSealed, d.Session, d.Index), from.Bytes()...)
	if k.ctx.KV.Get(key) != nil {
		return types.ErrDuplicate.Wrapf("%s already sealed a vote on dispute %d of session %d", from, d.Index, d.Session)
	}
	k.ctx.KV.Set(key, m.Commitment.Bytes())
	k.ctx.Events.Emit(EventVoteSealed{Session: d.Session, Dispute: d.Index, Validator: from})
	return nil
}

// OpenVote opens a voter's sealed verdict, once every voter sealed or the
// sealing is over. When every voter has opened, the dispute is decided at
// once; otherwise at its deadline.
func (k *Keeper) OpenVote(from types.Address, m *MsgOpenSessionVote) error {
	d, err := k.openDispute(m.Session, m.Dispute)
	if err != nil {
		return err
	}
	sealedKey := append(votePrefix(prefixSealed, d.Session, d.Index), from.Bytes()...)
	openedKey := append(votePrefix(prefixOpened, d.Session, d.Index), from.Bytes()...)
	sealed := k.ctx.KV.Get(sealedKey)
	switch {
	case d.VoterPower(from) == 0:
		return types.ErrUnauthorized.Wrapf("%s is not in the voter set of dispute %d of session %d", from, d.Index, d.Session)
	case k.ctx.Height > d.Deadline:
		return types.ErrWrongPhase.Wrapf("voting on dispute %d of session %d closed at height %d", d.Index, d.Session, d.Deadline)
	case k.ctx.Height <= d.SealBy && len(SealedVoters(k.ctx.KV, d.Session, d.Index)) < len(d.Voters):
		return types.ErrWrongPhase.Wrapf("votes on dispute %d of session %d are opened once every voter has sealed one or after height %d", d.Index, d.Session, d.SealBy)
	case sealed == nil:
		return types.ErrWrongPhase.Wrapf("%s sealed no vote on dispute %d of session %d: only sealed votes are opened", from, d.Index, d.Session)
	case k.ctx.KV.Get(openedKey) != nil:
		return types.ErrDuplicate.Wrapf("%s already opened its vote on dispute %d of session %d", from, d.Index, d.Session)
	case SessionVoteCommitment(d.Session, d.Index, m.Verdict, m.Salt, from) != types.BytesToHash(sealed):
		return types.ErrCommitMismatch.Wrapf("hash(session %d, dispute %d, verdict %d, salt, %s) is not the sealed vote", d.Session, d.Index, m.Verdict, from)
	case m.Verdict != VerdictNoData && m.Verdict>>len(d.Receipts) != 0:
		return types.ErrInvalidMsg.Wrapf("verdict %d: dispute %d of session %d has %d receipts (a mask below %d, or %d for no data)", m.Verdict, d.Index, d.Session, len(d.Receipts), 1<<len(d.Receipts), VerdictNoData)
	}
	k.ctx.KV.Set(openedKey, []byte{m.Verdict})
	k.ctx.Events.Emit(EventVoteOpened{Session: d.Session, Dispute: d.Index, Validator: from, Verdict: uint64(m.Verdict), Power: d.VoterPower(from)})
	if len(OpenedVotes(k.ctx.KV, d.Session, d.Index)) == len(d.Voters) {
		k.ctx.KV.Delete(disputeDueKey(d.Deadline, d.Session, d.Index))
		k.endVote(d)
	}
	return nil
}

// endVote decides a dispute from its opened votes: the verdict with more
// than half of the voter set's power wins. Voters that opened nothing, or
// opened against a decided verdict, lose vote_slash_bps.
func (k *Keeper) endVote(d *Dispute) {
	votes := OpenedVotes(k.ctx.KV, d.Session, d.Index)
	var total uint64
	var verdicts []uint8
	var sums []uint64
	for _, v := range d.Voters {
		total += v.Power
	}
	for _, v := range votes {
		i := slices.Index(verdicts, v.Verdict)
		if i < 0 {
			verdicts, sums, i = append(verdicts, v.Verdict), append(sums, 0), len(verdicts)
		}
		sums[i] += d.VoterPower(v.Validator)
	}
	verdict, decided := uint8(0), false
	for i, sum := range sums {
		if 2*sum > total {
			verdict, decided = verdicts[i], true
		}
	}
	for _, v := range d.Voters {
		i := slices.IndexFunc(votes, func(o OpenVote) bool { return o.Validator == v.Validator })
		switch {
		case i < 0:
			k.slashVoter(d, v.Validator, "missed the vote on dispute "+strconv.FormatUint(d.Index, 10)+" of session "+strconv.FormatUint(d.Session, 10))
		case decided && votes[i].Verdict != verdict:
			k.slashVoter(d, v.Validator, "voted against the verdict of dispute "+strconv.FormatUint(d.Index, 10)+" of session "+strconv.FormatUint(d.Session, 10))
		}
	}
	s, _ := Get(k.ctx.KV, d.Session)
	switch {
	case !decided:
		k.decide(s, d, DisputeUnresolved, 0)
	case verdict == VerdictNoData:
		k.decide(s, d, DisputeDismissed, verdict)
	default:
		k.decide(s, d, DisputeDecided, verdict)
	}
}

func (k *Keeper) slashVoter(d *Dispute, op types.Address, reason string) {
	res := k.esc.Slash(op, k.ctx.Params.Market.VoteSlashBps, types.Address{}, 0)
	k.ctx.Events.Emit(EventSlashed{Session: d.Session, Dispute: d.Index, Account: op, Amount: res.Slashed, Compensation: res.Compensation, Burned: res.Burned, Reason: reason})
}

// decide ends dispute d of session s with status and verdict: slashes the
// providers of the receipts the verdict finds wrong (an equivocation: the
// one provider, compensating at most the larger charge), pays the client
// at most each receipt's charge from its slash, and returns the bond or
// pays it to the fee pool.
func (k *Keeper) decide(s *Session, d *Dispute, status DisputeStatus, verdict uint8) {
	mp := k.ctx.Params.Market
	d.Status, d.Verdict = status, verdict
	var outcome string
	convict := func(i int, charge *uint256.Int, reason string) {
		r := &d.Receipts[i].Receipt
		res := k.esc.SlashCapped(r.Provider, mp.FraudSlashBps, s.Client, mp.CompensationBps, charge)
		d.Slashed.Add(d.Slashed, res.Slashed)
		d.Compensated.Add(d.Compensated, res.Compensation)
		k.ctx.KV.Set(convictedKey(s.ID, r.Provider, r.Seq), be64(d.Index))
		k.ctx.Events.Emit(EventSlashed{Session: s.ID, Dispute: d.Index, Account: r.Provider, Amount: res.Slashed, Compensation: res.Compensation, Burned: res.Burned, Reason: reason})
		verifier.NewKeeper(k.ctx.KV).UpdateReputation(r.Provider, func(rep *verifier.Reputation) { rep.Lost++ })
		if k.ctx.Fraud != nil {
			k.ctx.Fraud(r.Provider, reason)
		}
	}
	where := "session " + strconv.FormatUint(s.ID, 10) + " seq "
	toAccuser := true
	switch status {
	case DisputeEquivocation:
		a, b := s.Charge(&d.Receipts[0].Receipt), s.Charge(&d.Receipts[1].Receipt)
		if b.Gt(a) {
			a = b
		}
		convict(0, a, "equivocation: two receipts for "+where+strconv.FormatUint(d.Receipts[0].Receipt.Seq, 10))
		outcome = "equivocation: the provider signed two receipts for one seq"
	case DisputeDecided:
		for i := range d.Receipts {
			if verdict&(1<<i) != 0 {
				convict(i, s.Charge(&d.Receipts[i].Receipt), "wrong receipt for "+where+strconv.FormatUint(d.Receipts[i].Receipt.Seq, 10))
			}
		}
		if verdict == 0 {
			outcome, toAccuser = "valid: every receipt is valid; the bond goes to the fee pool", false
		} else {
			outcome = "invalid: the providers of the wrong receipts are slashed; the bond returns"
		}
	case DisputeDismissed:
		outcome, toAccuser = "no_data: the data was not available; the bond goes to the fee pool", false
	default:
		outcome = "unresolved: no verdict had a majority; the bond returns"
	}
	if !d.Bond.IsZero() {
		if toAccuser {
			k.esc.Release(s.ID, d.Accuser, d.Bond)
		} else {
			k.esc.ReleaseToFeePool(s.ID, d.Bond)
		}
		s.Bonds = new(uint256.Int).Sub(s.bonds(), d.Bond)
		s.OpenDisputes--
		k.set(s)
	}
	k.setDispute(d)
	k.ctx.Events.Emit(EventDisputeDecided{Session: s.ID, Dispute: d.Index, Verdict: uint64(verdict), Outcome: outcome, Slashed: d.Slashed, Compensated: d.Compensated})
}

// endDisputes decides the disputes whose deadline is at or before this
// height, at most MaxDisputesPerBlock (oldest deadline first; the rest
// next block).
func (k *Keeper) endDisputes() {
	var due [][]byte
	end := append([]byte{prefixDisputeDue}, be64(k.ctx.Height+1)...)
	k.ctx.KV.Iterate([]byte{prefixDisputeDue}, end, func(key, _ []byte) bool {
		due = append(due, append([]byte(nil), key...))
		return len(due) >= MaxDisputesPerBlock
	})
	for _, key := range due {
		k.ctx.KV.Delete(key)
		d, ok := GetDispute(k.ctx.KV, binary.BigEndian.Uint64(key[9:17]), binary.BigEndian.Uint64(key[17:25]))
		if !ok || d.Status != DisputeOpen {
			continue
		}
		k.endVote(d)
	}
}
