package verifier

import (
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

// MsgVoteDispute is a validator's vote for the correct result of a
// disputed task, after re-executing it.
type MsgVoteDispute struct {
	Job    uint64
	Stage  uint16
	Result types.Hash
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

// MsgRevealCanary opens the known answer a validator committed to when it
// posted a canary job.
type MsgRevealCanary struct {
	Job    uint64
	Stage  uint16
	Result types.Hash
	Salt   types.Hash
}

// Raw encodes the message.
func (m *MsgRevealCanary) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeRevealCanary, m) }

// DecodeMsgRevealCanary parses a MsgRevealCanary payload.
func DecodeMsgRevealCanary(data []byte) (*MsgRevealCanary, error) {
	var m MsgRevealCanary
	return &m, types.DecodeMsgPayload("reveal-canary", data, &m)
}
