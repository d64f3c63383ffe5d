// Package verifier is the results half of the market: for every awarded
// task (a stage of a job) it holds the assigned providers' commitments to
// their result hashes, their reveals, the dispute votes of validators, and
// every provider's reputation. It decides nothing about money: the market
// asks it for a task's outcome and settles.
//
// Commit-then-reveal: a provider first commits hash(result_hash, salt,
// provider) and reveals only after every assigned provider has committed
// (or the commit window has closed), so a lazy provider cannot copy
// another's answer; binding the provider's address into the commitment
// stops it from copying the commitment itself.
//
// It is a pure state machine over a store.KV: no clock, no randomness, no
// map iteration reaching state.
package verifier

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Store key prefixes owned by this package: 0x30-0x3f.
const (
	prefixTask       byte = 0x30 // 0x30 | job(8) | stage(2) -> rlp(Task)
	prefixVote       byte = 0x31 // 0x31 | job(8) | stage(2) | validator(20) -> result hash(32)
	prefixReputation byte = 0x32 // 0x32 | provider(20) -> rlp(Reputation)
	prefixVoteCommit byte = 0x33 // 0x33 | job(8) | stage(2) | validator(20) -> vote commitment(32)
	prefixVoter      byte = 0x34 // 0x34 | job(8) | stage(2) | validator(20) -> power(8): the voter set of a vote
)

// TaskKey is the store key of a task.
func TaskKey(job uint64, stage uint16) []byte {
	k := append([]byte{prefixTask}, binary.BigEndian.AppendUint64(nil, job)...)
	return binary.BigEndian.AppendUint16(k, stage)
}

func votePrefix(job uint64, stage uint16) []byte {
	k := append([]byte{prefixVote}, binary.BigEndian.AppendUint64(nil, job)...)
	return binary.BigEndian.AppendUint16(k, stage)
}

// VoteKey is the store key of a validator's vote in a dispute.
func VoteKey(job uint64, stage uint16, validator types.Address) []byte {
	return append(votePrefix(job, stage), validator.Bytes()...)
}

func voteCommitPrefix(job uint64, stage uint16) []byte {
	k := append([]byte{prefixVoteCommit}, binary.BigEndian.AppendUint64(nil, job)...)
	return binary.BigEndian.AppendUint16(k, stage)
}

func voterPrefix(job uint64, stage uint16) []byte {
	k := append([]byte{prefixVoter}, binary.BigEndian.AppendUint64(nil, job)...)
	return binary.BigEndian.AppendUint16(k, stage)
}

// VoterKey is the store key of a validator's power in a vote's voter set.
func VoterKey(job uint64, stage uint16, validator types.Address) []byte {
	return append(voterPrefix(job, stage), validator.Bytes()...)
}

// VoteCommitKey is the store key of a validator's sealed vote.
func VoteCommitKey(job uint64, stage uint16, validator types.Address) []byte {
	return append(voteCommitPrefix(job, stage), validator.Bytes()...)
}

// ReputationKey is the store key of a provider's reputation.
func ReputationKey(provider types.Address) []byte {
	return append([]byte{prefixReputation}, provider.Bytes()...)
}

// ResultCommitment is sha256("ogpu/result/v1" | result_hash | salt | provider).
func ResultCommitment(result, salt types.Hash, provider types.Address) types.Hash {
	h := sha256.New()
	h.Write([]byte("ogpu/result/v1"))
	h.Write(result[:])
	h.Write(salt[:])
	h.Write(provider[:])
	return types.Hash(h.Sum(nil))
}

// VoteCommitment is sha256("ogpu/vote/v1" | job | stage | result | salt |
// validator): what a sealed dispute vote commits to. Votes are sealed
// first and opened after the commit phase, so a lazy validator cannot copy
// the first vote it sees; the job and stage stop a sealed vote from being
// replayed into another dispute.
func VoteCommitment(job uint64, stage uint16, result, salt types.Hash, validator types.Address) types.Hash {
	h := sha256.New()
	h.Write([]byte("ogpu/vote/v1"))
	h.Write(binary.BigEndian.AppendUint64(nil, job))
	h.Write(binary.BigEndian.AppendUint16(nil, stage))
	h.Write(result[:])
	h.Write(salt[:])
	h.Write(validator[:])
	return types.Hash(h.Sum(nil))
}

// The two answers of an input check (a provider reported that it could not
// get or use a task's input): validators vote InputAvailable when they
// fetched the input and it is what the job declares, InputBad when they
// could not fetch it or it is not.
var (
	InputAvailable = types.Hash(sha256.Sum256([]byte("ogpu/input/available/v1")))
	InputBad       = types.Hash(sha256.Sum256([]byte("ogpu/input/bad/v1")))
	// Abstain is a vote that counts as taking part (no missed-vote slash)
	// but for no result: for a validator that cannot check a task (its
	// model or input could not be fetched). It is never paid.
	Abstain = types.Hash(sha256.Sum256([]byte("ogpu/vote/abstain/v1")))
)

// Input report reasons: why a provider could not compute a task.
const (
	InputUnavailable uint8 = 1 // the input could not be fetched before the commit deadline
	InputTooLong     uint8 = 2 // longer than the job declares (prompt tokens) or the context allows
	InputInvalid     uint8 = 3 // not a valid input for the job (a ciphertext or key set that does not parse)
)

// InputReasonName names a report reason for events and errors.
func InputReasonName(r uint8) string {
	switch r {
	case InputUnavailable:
		return "unavailable"
	case InputTooLong:
		return "too_long"
	case InputInvalid:
		return "invalid"
	}
	return fmt.Sprintf("reason(%d)", r)
}

// TaskStatus is where a task is.
type TaskStatus uint8

const (
	// TaskExecuting: providers run the stage and commit, then reveal.
	TaskExecuting TaskStatus = 1
	// TaskDisputed: revealed results differ; validators vote.
	TaskDisputed TaskStatus = 2
	// TaskSettled: paid out (or refunded); nothing more happens.
	TaskSettled TaskStatus = 3
	// TaskWaiting: a pipeline stage after the first, awarded but not open:
	// its input is the previous stage's settled result, so it takes no
	// commitments (and has no deadlines) until that stage settles.
	TaskWaiting TaskStatus = 4
	// TaskConfirming: every live slot revealed and they agree; the task
	// settles on that result at ConfirmBy unless the poster of a canary
	// contests it with a different known answer (which opens a dispute).
	// Every agreed task passes through it, so canaries look like any job.
	TaskConfirming TaskStatus = 5
	// TaskInputCheck: a provider reported that it could not get or use the
	// input; validators fetch it and vote InputAvailable or InputBad.
	TaskInputCheck TaskStatus = 6
	// TaskGame: the revealed results of a fine-tune task differ; the
	// step-bisection games of package finetune decide who is paid.
	TaskGame TaskStatus = 7
	// TaskHeld: a split stage downstream of a disputed stage, held until
	// that stage's verdict says which replica chain computed on a true
	// input; its slots on that chain are then judged (market split.go).
	TaskHeld TaskStatus = 8
)

// Voting reports whether validators vote on the task (a dispute or an
// input check).
func (s TaskStatus) Voting() bool { return s == TaskDisputed || s == TaskInputCheck }

func (s TaskStatus) String() string {
	switch s {
	case TaskExecuting:
		return "executing"
	case TaskDisputed:
		return "disputed"
	case TaskSettled:
		return "settled"
	case TaskWaiting:
		return "waiting"
	case TaskConfirming:
		return "confirming"
	case TaskInputCheck:
		return "input_check"
	case TaskGame:
		return "game"
	case TaskHeld:
		return "held"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Slot is one assigned replica of a task.
type Slot struct {
	Provider types.Address
	// Committed/Revealed say how far the provider got.
	Committed  bool
	Commitment types.Hash
	Revealed   bool
	Result     types.Hash
	// NoShow: the provider missed its commit or reveal deadline; the slot
	// is dead (a reassigned replacement gets a new slot).
	NoShow bool
	// InputReport is why the provider reported that it could not get or
	// use the task's input (0: no report). A reported slot is not a
	// no-show; validators check the report (TaskInputCheck).
	InputReport uint8 `rlp:"optional"`
	// Checked: the slot's input report was decided (InputAvailable): the
	// input is served by the validators now, and a second report is refused.
	Checked bool `rlp:"optional"`
	// Split inference (market.KindSplit): slot i of every stage is replica
	// chain i. Result is Hout, the final running hash of what the slot
	// sent; Hin is that of what it received, Steps the number of frames.
	Hin   types.Hash `rlp:"optional"`
	Steps uint32     `rlp:"optional"`
	// Proven: the slot proved its input (Steps, Hin) with its upstream's
	// hand-off signature (market.MsgProveHandoff).
	Proven bool `rlp:"optional"`
	// Settled: the slot was paid, refunded or slashed on its own before its
	// task settled (a split slot outside the stage's compared group, or an
	// upstream caught equivocating). It no longer counts.
	Settled bool `rlp:"optional"`
	// Replaced lists the providers that held this split slot before its
	// current Provider, oldest first: each stopped before committing and
	// was replaced on the client's order (market.MsgReplaceStage), taking
	// a no-show's slash and jail. The slot (its chain index) is the same.
	Replaced []types.Address `rlp:"optional"`
}

// Live reports whether the slot still counts: neither a no-show nor
// settled on its own.
func (s *Slot) Live() bool { return !s.NoShow && !s.Settled }

// Task is one stage of a job as it executes.
type Task struct {
	Status TaskStatus
	Slots  []Slot
	// CommitDeadline is the last height a result commitment is accepted;
	// RevealDeadline the last height a reveal is.
	CommitDeadline uint64
	RevealDeadline uint64
	// DisputeDeadline is the last height a vote is accepted (disputed only).
	DisputeDeadline uint64
	// Verdict is the hash 2/3 of voting power agreed on (disputed tasks
	// once decided), or the agreed result of a settled task.
	Verdict types.Hash
	// Backups are the eligible revealed bids ranked after the winners, best
	// first: a no-show's slot goes to the first one still eligible.
	Backups []types.Address
	// ConfirmBy is the last height of a confirming task's canary window.
	ConfirmBy uint64 `rlp:"optional"`
	// VoteCommitEnd is the last height a sealed vote is accepted (voting
	// tasks); votes are opened from then (or once every active validator
	// has sealed) to DisputeDeadline.
	VoteCommitEnd uint64 `rlp:"optional"`
	// Canary and CanaryBy: a validator showed the job was its canary and
	// claimed this known answer for the stage. The claim is a result like a
	// provider's: the vote decides, and a false one costs its poster.
	Canary   types.Hash    `rlp:"optional"`
	CanaryBy types.Address `rlp:"optional"`
	// FeePaid: the stage's share of the job's validator fee was paid (to
	// the fee pool on agreement, to the voters of a decided vote).
	FeePaid bool `rlp:"optional"`
	// Audit says why a vote (TaskDisputed) is an audit, not a dispute
	// between differing results: AuditShort when fewer than r live slots
	// revealed the result it checks. Empty for a dispute. A decided audit
	// that upholds the result settles "audited" (market/short.go).
	Audit string `rlp:"optional"`
	// Outcome is how a settled task settled (the task_settled event's
	// outcome: agreed, verdict, audited, unverified, ...), for queries.
	Outcome string `rlp:"optional"`
	// DrawAt is the beacon height whose value decides whether a
	// confirming task is audited (market/audit.go): the height that
	// confirmed it, whose value is made after its block is decided.
	DrawAt uint64 `rlp:"optional"`
}

// Audit reasons (Task.Audit).
const (
	// AuditShort: the task has fewer than r agreeing results (fewer than
	// r eligible winners, or no-shows), so the validators re-execute it
	// before it is paid.
	AuditShort = "short"
	// AuditSplit: a split stage's slot has no other slot on the same
	// input to compare with (its partner chain was knocked out, no-showed
	// or is downstream of a lie), so the validators replay it.
	AuditSplit = "split"
	// AuditRandom: the task's r results agreed, and the randomness beacon
	// drew it for an audit (market/audit.go).
	AuditRandom = "random"
)

// Keeper reads and writes verification state.
type Keeper struct{ kv store.KV }

// NewKeeper returns a keeper over kv.
func NewKeeper(kv store.KV) Keeper { return Keeper{kv: kv} }

// GetTask returns a task.
func (k Keeper) GetTask(job uint64, stage uint16) (*Task, bool) {
	bz := k.kv.Get(TaskKey(job, stage))
	if bz == nil {
		return nil, false
	}
	var t Task
	if err := rlp.DecodeBytes(bz, &t); err != nil {
		panic(fmt.Errorf("verifier: stored task unreadable: %w", err))
	}
	return &t, true
}

// SetTask writes a task.
func (k Keeper) SetTask(job uint64, stage uint16, t *Task) {
	bz, err := rlp.EncodeToBytes(t)
	if err != nil {
		panic(err)
	}
	k.kv.Set(TaskKey(job, stage), bz)
}

// DeleteTask removes a task and its votes.
func (k Keeper) DeleteTask(job uint64, stage uint16) {
	k.kv.Delete(TaskKey(job, stage))
	k.ClearVotes(job, stage)
}

// SlotOf returns the index of provider's live slot in t, or -1.
func (t *Task) SlotOf(provider types.Address) int {
	for i := range t.Slots {
		if t.Slots[i].Provider == provider && t.Slots[i].Live() {
			return i
		}
	}
	return -1
}

// Assigned reports whether provider holds any slot (live or not) in t.
func (t *Task) Assigned(provider types.Address) bool {
	for i := range t.Slots {
		if t.Slots[i].Provider == provider {
			return true
		}
	}
	return false
}

// AllCommitted reports whether every live slot has committed.
func (t *Task) AllCommitted() bool {
	for i := range t.Slots {
		if t.Slots[i].Live() && !t.Slots[i].Committed {
			return false
		}
	}
	return true
}

// AllRevealed reports whether every live slot has revealed.
func (t *Task) AllRevealed() bool {
	for i := range t.Slots {
		if t.Slots[i].Live() && !t.Slots[i].Revealed {
			return false
		}
	}
	return true
}

// Revealed returns the distinct revealed result hashes in slot order.
func (t *Task) Revealed() []types.Hash {
	var out []types.Hash
	for i := range t.Slots {
		s := &t.Slots[i]
		if !s.Live() || !s.Revealed {
			continue
		}
		dup := false
		for _, h := range out {
			dup = dup || h == s.Result
		}
		if !dup {
			out = append(out, s.Result)
		}
	}
	return out
}

// Commit records provider's result commitment.
func (k Keeper) Commit(job uint64, stage uint16, provider types.Address, c types.Hash, height uint64) (*Task, error) {
	t, ok := k.GetTask(job, stage)
	if !ok {
		return nil, types.ErrUnknownJob.Wrapf("job %d stage %d has no task: it was not awarded", job, stage)
	}
	i := t.SlotOf(provider)
	switch {
	case t.Status == TaskWaiting:
		return nil, waitingErr(job, stage, "commit")
	case t.Status != TaskExecuting:
		return nil, types.ErrWrongPhase.Wrapf("job %d stage %d is %s, not taking results", job, stage, t.Status)
	case i < 0:
		return nil, types.ErrUnauthorized.Wrapf("%s is not assigned to job %d stage %d", provider, job, stage)
	case t.Slots[i].Committed:
		return nil, types.ErrDuplicate.Wrapf("%s already committed a result for job %d stage %d", provider, job, stage)
	case height > t.CommitDeadline:
		return nil, types.ErrWrongPhase.Wrapf("the commit window of job %d stage %d closed at height %d (now %d)", job, stage, t.CommitDeadline, height)
	case c == (types.Hash{}):
		return nil, types.ErrInvalidMsg.Wrapf("empty commitment")
	}
	t.Slots[i].Committed = true
	t.Slots[i].Commitment = c
	k.SetTask(job, stage, t)
	return t, nil
}

// waitingErr refuses a result for a pipeline stage that has not opened.
func waitingErr(job uint64, stage uint16, what string) error {
	if stage == 0 {
		// Stage 0 never waits; say so rather than name stage -1.
		return types.ErrWrongPhase.Wrapf("job %d stage 0 is waiting and not taking results", job)
	}
	return types.ErrWrongPhase.Wrapf("job %d stage %d opens when stage %d settles; %s after that", job, stage, stage-1, what)
}

// Reveal records provider's result, checking it against the commitment.
// Reveals open once every live slot has committed or the commit window has
// closed.
func (k Keeper) Reveal(job uint64, stage uint16, provider types.Address, result, salt types.Hash, height uint64) (*Task, error) {
	t, i, err := k.RevealSlot(job, stage, provider, height)
	if err != nil {
		return nil, err
	}
	if ResultCommitment(result, salt, provider) != t.Slots[i].Commitment {
		return nil, types.ErrCommitMismatch.Wrapf("hash(result %x, salt, %s) is not the commitment %x", result, provider, t.Slots[i].Commitment)
	}
	t.Slots[i].Revealed = true
	t.Slots[i].Result = result
	k.SetTask(job, stage, t)
	return t, nil
}

// RevealSlot checks that provider may reveal its commitment on a task now
// and returns the task and its slot index; the caller checks the opening
// against the commitment and records it. Reveals open once every live slot
// has committed or the commit window has closed.
func (k Keeper) RevealSlot(job uint64, stage uint16, provider types.Address, height uint64) (*Task, int, error) {
	t, ok := k.GetTask(job, stage)
	if !ok {
		return nil, -1, types.ErrUnknownJob.Wrapf("job %d stage %d has no task: it was not awarded", job, stage)
	}
	i := t.SlotOf(provider)
	switch {
	case t.Status == TaskWaiting:
		return nil, -1, waitingErr(job, stage, "commit and reveal")
	case t.Status != TaskExecuting:
		return nil, -1, types.ErrWrongPhase.Wrapf("job %d stage %d is %s, not taking reveals", job, stage, t.Status)
	case i < 0:
		return nil, -1, types.ErrUnauthorized.Wrapf("%s is not assigned to job %d stage %d", provider, job, stage)
	case !t.Slots[i].Committed:
		return nil, -1, types.ErrWrongPhase.Wrapf("%s has not committed a result for job %d stage %d: commit first", provider, job, stage)
	case t.Slots[i].Revealed:
		return nil, -1, types.ErrDuplicate.Wrapf("%s already revealed its result for job %d stage %d", provider, job, stage)
	case !t.AllCommitted() && height <= t.CommitDeadline:
		return nil, -1, types.ErrWrongPhase.Wrapf("job %d stage %d: reveals open when every provider has committed or after height %d", job, stage, t.CommitDeadline)
	case height > t.RevealDeadline:
		return nil, -1, types.ErrWrongPhase.Wrapf("the reveal window of job %d stage %d closed at height %d (now %d)", job, stage, t.RevealDeadline, height)
	}
	return t, i, nil
}

// SealVote stores validator's sealed vote on a voting task; a validator
// seals once. The caller checks the phase and the validator.
func (k Keeper) SealVote(job uint64, stage uint16, validator types.Address, c types.Hash) error {
	key := VoteCommitKey(job, stage, validator)
	if k.kv.Get(key) != nil {
		return types.ErrDuplicate.Wrapf("%s already sealed a vote on job %d stage %d", validator, job, stage)
	}
	k.kv.Set(key, c.Bytes())
	return nil
}

// VoteSealed reports whether validator sealed a vote on the task.
func (k Keeper) VoteSealed(job uint64, stage uint16, validator types.Address) bool {
	return k.kv.Get(VoteCommitKey(job, stage, validator)) != nil
}

// OpenVote checks an opened vote against validator's sealed one and
// records it.
func (k Keeper) OpenVote(job uint64, stage uint16, validator types.Address, result, salt types.Hash) error {
	bz := k.kv.Get(VoteCommitKey(job, stage, validator))
	switch {
	case bz == nil:
		return types.ErrWrongPhase.Wrapf("%s sealed no vote on job %d stage %d: only sealed votes are opened", validator, job, stage)
	case VoteCommitment(job, stage, result, salt, validator) != types.BytesToHash(bz):
		return types.ErrCommitMismatch.Wrapf("hash(job %d, stage %d, result %x, salt, %s) is not the sealed vote", job, stage, result, validator)
	}
	return k.RecordVote(job, stage, validator, result)
}

// RecordVote stores validator's vote; a validator votes once.
func (k Keeper) RecordVote(job uint64, stage uint16, validator types.Address, result types.Hash) error {
	key := VoteKey(job, stage, validator)
	if k.kv.Get(key) != nil {
		return types.ErrDuplicate.Wrapf("%s already voted on job %d stage %d", validator, job, stage)
	}
	k.kv.Set(key, result.Bytes())
	return nil
}

// Vote is one validator's vote in a dispute.
type Vote struct {
	Validator types.Address
	Result    types.Hash
}

// Votes returns the votes on a task in validator order.
func (k Keeper) Votes(job uint64, stage uint16) []Vote {
	var out []Vote
	pfx := votePrefix(job, stage)
	store.IteratePrefix(k.kv, pfx, func(key, value []byte) bool {
		out = append(out, Vote{Validator: types.BytesToAddress(key[len(pfx):]), Result: types.BytesToHash(value)})
		return false
	})
	return out
}

// SetVoters records a vote's voter set: the active validators, with their
// power, when the vote opened. Only they seal and open votes, their power
// decides, and only they answer for a missing vote: a validator that
// becomes active later cannot copy an opened vote into the tally.
func (k Keeper) SetVoters(job uint64, stage uint16, ops []types.Address, powers []int64) {
	for i, op := range ops {
		k.kv.Set(VoterKey(job, stage, op), binary.BigEndian.AppendUint64(nil, uint64(powers[i])))
	}
}

// Voters returns a vote's voter set in operator order, with the total power.
func (k Keeper) Voters(job uint64, stage uint16) (ops []types.Address, powers []int64, total int64) {
	pfx := voterPrefix(job, stage)
	store.IteratePrefix(k.kv, pfx, func(key, value []byte) bool {
		p := int64(binary.BigEndian.Uint64(value))
		ops, powers, total = append(ops, types.BytesToAddress(key[len(pfx):])), append(powers, p), total+p
		return false
	})
	return ops, powers, total
}

// VoterPower is validator's power in a vote's voter set (0: not in it).
func (k Keeper) VoterPower(job uint64, stage uint16, validator types.Address) int64 {
	bz := k.kv.Get(VoterKey(job, stage, validator))
	if len(bz) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(bz))
}

// ClearVotes removes a task's voter set and its sealed and opened votes.
func (k Keeper) ClearVotes(job uint64, stage uint16) {
	var keys [][]byte
	for _, pfx := range [][]byte{votePrefix(job, stage), voteCommitPrefix(job, stage), voterPrefix(job, stage)} {
		store.IteratePrefix(k.kv, pfx, func(key, _ []byte) bool {
			keys = append(keys, append([]byte(nil), key...))
			return false
		})
	}
	for _, key := range keys {
		k.kv.Delete(key)
	}
}

// Tally sums the current power behind each voted hash and returns the hash
// holding more than two thirds of total power, if any.
func (k Keeper) Tally(job uint64, stage uint16, power func(types.Address) int64, total int64) (types.Hash, bool) {
	if total <= 0 {
		return types.Hash{}, false
	}
	var hashes []types.Hash
	var sums []int64
	for _, v := range k.Votes(job, stage) {
		if v.Result == Abstain {
			continue
		}
		p := power(v.Validator)
		i := 0
		for i < len(hashes) && hashes[i] != v.Result {
			i++
		}
		if i == len(hashes) {
			hashes = append(hashes, v.Result)
			sums = append(sums, 0)
		}
		sums[i] += p
	}
	for i, s := range sums {
		// s > 2/3 total, in integers: 3s > 2 total.
		if 3*s > 2*total {
			return hashes[i], true
		}
	}
	return types.Hash{}, false
}
