package verifier

import (
	"crypto/sha256"

	"github.com/ogpu-network/ogpu/types"
)

// MsgCommitResult commits an assigned provider to its result:
// Commitment = ResultCommitment(result_hash, salt, sender).
type MsgCommitResult struct {
	Job        uint64
	Stage      uint16
	Commitment types.Hash
}

// Raw encodes the message.
func (m *MsgCommitResult) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeCommitResult, m) }

// DecodeMsgCommitResult parses and checks a MsgCommitResult payload.
func DecodeMsgCommitResult(data []byte) (*MsgCommitResult, error) {
	var m MsgCommitResult
	if err := types.DecodeMsgPayload("commit-result", data, &m); err != nil {
		return nil, err
	}
	if m.Commitment == (types.Hash{}) {
		return nil, types.ErrInvalidMsg.Wrapf("commit-result: empty commitment")
	}
	return &m, nil
}

// MsgRevealResult opens a result commitment.
type MsgRevealResult struct {
	Job    uint64
	Stage  uint16
	Result types.Hash
	Salt   types.Hash
}

// Raw encodes the message.
func (m *MsgRevealResult) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeRevealResult, m) }

// DecodeMsgRevealResult parses a MsgRevealResult payload.
func DecodeMsgRevealResult(data []byte) (*MsgRevealResult, error) {
	var m MsgRevealResult
	return &m, types.DecodeMsgPayload("reveal-result", data, &m)
}

// MsgCommitVote seals a validator's vote on a voting task (a dispute or an
// input check): Commitment = VoteCommitment(job, stage, result, salt,
// sender).
type MsgCommitVote struct {
	Job        uint64
	Stage      uint16
	Commitment types.Hash
}

// Raw encodes the message.
func (m *MsgCommitVote) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeCommitVote, m) }

// DecodeMsgCommitVote parses and checks a MsgCommitVote payload.
func DecodeMsgCommitVote(data []byte) (*MsgCommitVote, error) {
	var m MsgCommitVote
	if err := types.DecodeMsgPayload("commit-vote", data, &m); err != nil {
		return nil, err
	}
	if m.Commitment == (types.Hash{}) {
		return nil, types.ErrInvalidMsg.Wrapf("commit-vote: empty commitment")
	}
	return &m, nil
}

// MsgVoteDispute opens a validator's sealed vote: the result it found by
// re-executing the task (or InputAvailable / InputBad for an input check,
// or Abstain).
type MsgVoteDispute struct {
	Job    uint64
	Stage  uint16
	Result types.Hash
	Salt   types.Hash
}

// Raw encodes the message.
func (m *MsgVoteDispute) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeVoteDispute, m) }

// DecodeMsgVoteDispute parses and checks a MsgVoteDispute payload.
func DecodeMsgVoteDispute(data []byte) (*MsgVoteDispute, error) {
	var m MsgVoteDispute
	if err := types.DecodeMsgPayload("vote-dispute", data, &m); err != nil {
		return nil, err
	}
	if m.Result == (types.Hash{}) {
		return nil, types.ErrInvalidMsg.Wrapf("vote-dispute: empty result hash")
	}
	return &m, nil
}

// MsgRevealCanary shows that a job was the sender's canary and claims its
// known answer for one stage. The job's seal must be CanarySeal(sender,
// StageHashes) and StageHashes[Stage] must be CanaryStageHash(Answer,
// Salt): the other stages' answers stay hidden.
type MsgRevealCanary struct {
	Job         uint64
	Stage       uint16
	Answer      types.Hash
	Salt        types.Hash
	StageHashes []types.Hash
}

// Raw encodes the message.
func (m *MsgRevealCanary) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeRevealCanary, m) }

// DecodeMsgRevealCanary parses and checks a MsgRevealCanary payload.
func DecodeMsgRevealCanary(data []byte) (*MsgRevealCanary, error) {
	var m MsgRevealCanary
	if err := types.DecodeMsgPayload("reveal-canary", data, &m); err != nil {
		return nil, err
	}
	switch {
	case m.Answer == (types.Hash{}):
		return nil, types.ErrInvalidMsg.Wrapf("reveal-canary: empty answer")
	case len(m.StageHashes) == 0 || len(m.StageHashes) > MaxCanaryStages:
		return nil, types.ErrInvalidMsg.Wrapf("reveal-canary: %d stage hashes, want 1..%d", len(m.StageHashes), MaxCanaryStages)
	case int(m.Stage) >= len(m.StageHashes):
		return nil, types.ErrInvalidMsg.Wrapf("reveal-canary: stage %d has no stage hash (%d given)", m.Stage, len(m.StageHashes))
	}
	return &m, nil
}

// MaxCanaryStages bounds a canary reveal (genesis bounds max_stages by it).
const MaxCanaryStages = 1024

// CanaryStageHash is sha256("ogpu/canary-stage/v1" | answer | salt).
func CanaryStageHash(answer, salt types.Hash) types.Hash {
	h := sha256.New()
	h.Write([]byte("ogpu/canary-stage/v1"))
	h.Write(answer[:])
	h.Write(salt[:])
	return types.Hash(h.Sum(nil))
}

// CanarySeal is sha256("ogpu/canary/v1" | validator | stage hashes...):
// the seal a validator puts on a canary job. Every job carries a seal, and
// a client's is 32 random bytes, so nothing tells a canary apart until its
// poster reveals it.
func CanarySeal(validator types.Address, stageHashes []types.Hash) types.Hash {
	h := sha256.New()
	h.Write([]byte("ogpu/canary/v1"))
	h.Write(validator[:])
	for _, s := range stageHashes {
		h.Write(s[:])
	}
	return types.Hash(h.Sum(nil))
}

// MsgReportInput is an assigned provider's report that it could not get or
// use its task's input (Reason: InputUnavailable, InputTooLong,
// InputInvalid), sent before the commit deadline instead of a result.
type MsgReportInput struct {
	Job    uint64
	Stage  uint16
	Reason uint8
}

// Raw encodes the message.
func (m *MsgReportInput) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeReportInput, m) }

// DecodeMsgReportInput parses and checks a MsgReportInput payload.
func DecodeMsgReportInput(data []byte) (*MsgReportInput, error) {
	var m MsgReportInput
	if err := types.DecodeMsgPayload("report-input", data, &m); err != nil {
		return nil, err
	}
	if m.Reason < InputUnavailable || m.Reason > InputInvalid {
		return nil, types.ErrInvalidMsg.Wrapf("report-input: reason %d: want 1 (unavailable), 2 (too long) or 3 (invalid)", m.Reason)
	}
	return &m, nil
}
