package finetune

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// The verdict vote (protocol-threats rule 3, cross-cutting rule 9).
//
// When a game comes down to one step, the validators active at that
// height, minus every slot of the game (a party never judges its own
// case, S18), form its voter set. Each fetches the agreed checkpoint
// θ_lo (checked against h_lo) and the step's batch, re-executes step hi
// in the job's class, and seals its h* (MsgSealGameVote: a commitment
// GameVoteCommitment(job, stage, h*, salt, validator)) until SealBy, then
// opens it (MsgOpenGameVote) until the deadline; opening starts once every
// voter sealed or the sealing is over, so nobody copies an opened h*. An h*
// holding more than two thirds of the voter set's power is the verdict
// (Decide); otherwise the game is a class failure and nobody is slashed.
// Voters that sealed nothing, did not open, or opened another h* than a
// decided verdict lose vote_slash_bps (burned). Once every voter opened,
// the game is decided in that transaction; otherwise at the deadline.

// Vote store prefixes.
const (
	prefixSealed byte = 0x62 // 0x62 | job(8) | stage(2) | match(2) | validator(20) -> commitment(32)
	prefixOpened byte = 0x63 // 0x63 | job(8) | stage(2) | match(2) | validator(20) -> h*(32)
)

// GameVoteTag starts every game vote commitment.
const GameVoteTag = "ogpu/ftvote/v1"

// GameVoteCommitment is sha256("ogpu/ftvote/v1" | job(8) | stage(2) |
// match(2) | h*(32) | salt(32) | validator(20)).
func GameVoteCommitment(job uint64, stage, match uint16, hStar, salt types.Hash, validator types.Address) types.Hash {
	h := sha256.New()
	h.Write([]byte(GameVoteTag))
	h.Write(binary.BigEndian.AppendUint64(nil, job))
	h.Write(binary.BigEndian.AppendUint16(nil, stage))
	h.Write(binary.BigEndian.AppendUint16(nil, match))
	h.Write(hStar[:])
	h.Write(salt[:])
	h.Write(validator[:])
	return types.Hash(h.Sum(nil))
}

// Voter is a member of a game's voter set, with its power when the game
// came down to one step.
type Voter struct {
	Validator types.Address `json:"validator"`
	Power     uint64        `json:"power"`
}

// MsgSealGameVote seals a validator's h* for the last step of a game.
type MsgSealGameVote struct {
	Job        uint64
	Stage      uint16
	Match      uint16
	Commitment types.Hash
}

// Raw encodes the message.
func (m *MsgSealGameVote) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeSealGameVote, m) }

// DecodeMsgSealGameVote parses a MsgSealGameVote payload.
func DecodeMsgSealGameVote(data []byte) (*MsgSealGameVote, error) {
	var m MsgSealGameVote
	if err := types.DecodeMsgPayload("seal game vote", data, &m); err != nil {
		return nil, err
	}
	if m.Commitment == (types.Hash{}) {
		return nil, types.ErrInvalidMsg.Wrapf("seal game vote: empty commitment")
	}
	return &m, nil
}

// MsgOpenGameVote opens a sealed h*.
type MsgOpenGameVote struct {
	Job   uint64
	Stage uint16
	Match uint16
	HStar types.Hash
	Salt  types.Hash
}

// Raw encodes the message.
func (m *MsgOpenGameVote) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeOpenGameVote, m) }

// DecodeMsgOpenGameVote parses a MsgOpenGameVote payload.
func DecodeMsgOpenGameVote(data []byte) (*MsgOpenGameVote, error) {
	var m MsgOpenGameVote
	if err := types.DecodeMsgPayload("open game vote", data, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// EventVoteSealed: a voter sealed its h*.
type EventVoteSealed struct {
	Job       uint64        `event:"job,index"`
	Stage     uint16        `event:"stage"`
	Match     uint16        `event:"match"`
	Validator types.Address `event:"validator,index"`
}

func (EventVoteSealed) EventType() string { return "finetune_vote_sealed" }

// EventVoteOpened: a voter opened its h*.
type EventVoteOpened struct {
	Job       uint64        `event:"job,index"`
	Stage     uint16        `event:"stage"`
	Match     uint16        `event:"match"`
	Validator types.Address `event:"validator,index"`
	HStar     types.Hash    `event:"h_star"`
	Power     uint64        `event:"power"`
}

func (EventVoteOpened) EventType() string { return "finetune_vote_opened" }

// EventVoterSlashed: a voter lost vote_slash_bps for a missed or contrary
// vote.
type EventVoterSlashed struct {
	Job       uint64        `event:"job,index"`
	Stage     uint16        `event:"stage"`
	Match     uint16        `event:"match"`
	Validator types.Address `event:"validator,index"`
	Amount    *uint256.Int  `event:"amount"`
	Reason    string        `event:"reason"`
}

func (EventVoterSlashed) EventType() string { return "finetune_voter_slashed" }

func votePrefix(prefix byte, job uint64, stage, match uint16) []byte {
	return append(append(append([]byte{prefix}, be64(job)...), be16(stage)...), be16(match)...)
}

func voteKey(prefix byte, job uint64, stage, match uint16, v types.Address) []byte {
	return append(votePrefix(prefix, job, stage, match), v.Bytes()...)
}

// OpenVote is a voter's opened h*.
type OpenVote struct {
	Validator types.Address `json:"validator"`
	HStar     types.Hash    `json:"h_star"`
}

// SealedVoters lists the voters that sealed a vote on a game, in address
// order.
func SealedVoters(r store.Reader, job uint64, stage, match uint16) []types.Address {
	var out []types.Address
	pfx := votePrefix(prefixSealed, job, stage, match)
	store.IteratePrefix(r, pfx, func(key, _ []byte) bool {
		out = append(out, types.BytesToAddress(key[len(pfx):]))
		return false
	})
	return out
}

// OpenedVotes lists the opened votes on a game, in address order.
func OpenedVotes(r store.Reader, job uint64, stage, match uint16) []OpenVote {
	var out []OpenVote
	pfx := votePrefix(prefixOpened, job, stage, match)
	store.IteratePrefix(r, pfx, func(key, value []byte) bool {
		out = append(out, OpenVote{Validator: types.BytesToAddress(key[len(pfx):]), HStar: types.BytesToHash(value)})
		return false
	})
	return out
}

// VoterPower is validator's power in g's voter set (0: not in it).
func (g *Game) VoterPower(validator types.Address) uint64 {
	for _, v := range g.Voters {
		if v.Validator == validator {
			return v.Power
		}
	}
	return 0
}

// voters is the voter set of g: the active validators (a record, not
// jailed or tombstoned, stake at least the minimum, power reported to
// CometBFT), without any slot of the game, in operator order.
func (k *Keeper) voters(g *Game) []Voter {
	esc := escrow.NewKeeper(k.ctx.KV)
	var parties []types.Address
	for _, gr := range g.Groups {
		parties = append(parties, gr.Slots...)
	}
	var out []Voter
	esc.IterateValidators(func(op types.Address, v *escrow.Validator) bool {
		if slices.Contains(parties, op) || v.Jailed || v.Tombstoned || esc.Power(k.ctx.Chain.Staking, op, v) == 0 {
			return false
		}
		if p := esc.ReportedPower(v.PubKey); p > 0 {
			out = append(out, Voter{Validator: op, Power: uint64(p)})
		}
		return false
	})
	return out
}

// awaitVerdict moves g, down to one step, to the vote.
func (k *Keeper) awaitVerdict(g *Game) {
	g.Status = StatusReexecute
	g.Voters = k.voters(g)
	g.SealBy = k.ctx.Height + max(1, k.ctx.Params.VerdictBlocks/2)
	k.schedule(g, k.ctx.Height+k.ctx.Params.VerdictBlocks)
}

// votingGame returns a game awaiting its verdict, for a vote from from.
func (k *Keeper) votingGame(job uint64, stage, match uint16, from types.Address) (*Game, error) {
	g, ok := GetGame(k.ctx.KV, job, stage, match)
	switch {
	case !ok:
		return nil, types.ErrUnknownJob.Wrapf("no fine-tune game for job %d stage %d match %d", job, stage, match)
	case g.Status != StatusReexecute:
		return nil, types.ErrWrongPhase.Wrapf("the game of job %d stage %d is %s: votes come once it is down to one step", job, stage, g.Status)
	case g.VoterPower(from) == 0:
		return nil, types.ErrUnauthorized.Wrapf("%s is not in the voter set of the game of job %d stage %d: the active validators when it came down to one step, without its slots, vote", from, job, stage)
	}
	return g, nil
}

// SealVote records a voter's sealed h*.
func (k *Keeper) SealVote(from types.Address, m *MsgSealGameVote) error {
	g, err := k.votingGame(m.Job, m.Stage, m.Match, from)
	if err != nil {
		return err
	}
	if k.ctx.Height > g.SealBy {
		return types.ErrWrongPhase.Wrapf("sealed votes on the game of job %d stage %d closed at height %d (now %d)", g.Job, g.Stage, g.SealBy, k.ctx.Height)
	}
	key := voteKey(prefixSealed, g.Job, g.Stage, g.Match, from)
	if k.ctx.KV.Get(key) != nil {
		return types.ErrDuplicate.Wrapf("%s already sealed a vote on the game of job %d stage %d", from, g.Job, g.Stage)
	}
	k.ctx.KV.Set(key, m.Commitment.Bytes())
	k.ctx.Events.Emit(EventVoteSealed{Job: g.Job, Stage: g.Stage, Match: g.Match, Validator: from})
	return nil
}

// OpenVote opens a voter's sealed h*, once every voter sealed or the
// sealing is over. When every voter has opened, the game is decided.
func (k *Keeper) OpenVote(from types.Address, m *MsgOpenGameVote) (*Decided, error) {
	g, err := k.votingGame(m.Job, m.Stage, m.Match, from)
	if err != nil {
		return nil, err
	}
	sealed := k.ctx.KV.Get(voteKey(prefixSealed, g.Job, g.Stage, g.Match, from))
	openedKey := voteKey(prefixOpened, g.Job, g.Stage, g.Match, from)
	switch {
	case k.ctx.Height > g.Deadline:
		return nil, types.ErrWrongPhase.Wrapf("voting on the game of job %d stage %d closed at height %d", g.Job, g.Stage, g.Deadline)
	case k.ctx.Height <= g.SealBy && len(SealedVoters(k.ctx.KV, g.Job, g.Stage, g.Match)) < len(g.Voters):
		return nil, types.ErrWrongPhase.Wrapf("votes on the game of job %d stage %d are opened once every voter has sealed one or after height %d", g.Job, g.Stage, g.SealBy)
	case sealed == nil:
		return nil, types.ErrWrongPhase.Wrapf("%s sealed no vote on the game of job %d stage %d: only sealed votes are opened", from, g.Job, g.Stage)
	case k.ctx.KV.Get(openedKey) != nil:
		return nil, types.ErrDuplicate.Wrapf("%s already opened its vote on the game of job %d stage %d", from, g.Job, g.Stage)
	case GameVoteCommitment(g.Job, g.Stage, g.Match, m.HStar, m.Salt, from) != types.BytesToHash(sealed):
		return nil, types.ErrCommitMismatch.Wrapf("hash(job %d, stage %d, h*, salt, %s) is not the sealed vote", g.Job, g.Stage, from)
	}
	k.ctx.KV.Set(openedKey, m.HStar.Bytes())
	k.ctx.Events.Emit(EventVoteOpened{Job: g.Job, Stage: g.Stage, Match: g.Match, Validator: from, HStar: m.HStar, Power: g.VoterPower(from)})
	if len(OpenedVotes(k.ctx.KV, g.Job, g.Stage, g.Match)) < len(g.Voters) {
		return nil, nil
	}
	k.ctx.KV.Delete(DueKey(g.Deadline, g.Job, g.Stage, g.Match))
	return k.endVote(g), nil
}

// endVote decides g from its opened votes: an h* with more than two
// thirds of the voter set's power is the verdict, otherwise a class
// failure. Voters that opened nothing, or another h* than a decided
// verdict, lose vote_slash_bps.
func (k *Keeper) endVote(g *Game) *Decided {
	votes := OpenedVotes(k.ctx.KV, g.Job, g.Stage, g.Match)
	var total uint64
	for _, v := range g.Voters {
		total += v.Power
	}
	var hs []types.Hash
	var sums []uint64
	for _, v := range votes {
		i := slices.Index(hs, v.HStar)
		if i < 0 {
			hs, sums, i = append(hs, v.HStar), append(sums, 0), len(hs)
		}
		sums[i] += g.VoterPower(v.Validator)
	}
	var verdict Verdict
	for i, s := range sums {
		if 3*s > 2*total {
			verdict = Verdict{Agreed: true, HStar: hs[i]}
		}
	}
	esc := escrow.NewKeeper(k.ctx.KV)
	where := "the game of job " + strconv.FormatUint(g.Job, 10) + " stage " + strconv.FormatUint(uint64(g.Stage), 10) + " match " + strconv.FormatUint(uint64(g.Match), 10)
	for _, v := range g.Voters {
		i := slices.IndexFunc(votes, func(o OpenVote) bool { return o.Validator == v.Validator })
		reason := ""
		switch {
		case i < 0:
			reason = "missed the vote on " + where
		case verdict.Agreed && votes[i].HStar != verdict.HStar:
			reason = "voted against the verdict on " + where
		default:
			continue
		}
		res := esc.Slash(v.Validator, k.ctx.Chain.Market.VoteSlashBps, types.Address{}, 0)
		k.ctx.Events.Emit(EventVoterSlashed{Job: g.Job, Stage: g.Stage, Match: g.Match, Validator: v.Validator, Amount: res.Slashed, Reason: reason})
	}
	return k.verdict(g, verdict)
}
