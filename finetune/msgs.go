package finetune

import (
	"github.com/ogpu-network/ogpu/types"
)

// Opening is one checkpoint hash h_k opened against a group's root.
type Opening struct {
	Step  uint64
	Hash  types.Hash
	Proof []types.Hash
}

// MsgOpenCheckpoints opens, for the group of slots whose committed root
// is Root, the checkpoints a round of game (Job, Stage, Match) asks for
// (Game.Points). Anyone may send it (a provider, or a relayer holding the
// provider's hashes): only openings that verify against Root count, so a
// relayer can help a group and never hurt it (T7).
type MsgOpenCheckpoints struct {
	Job      uint64
	Stage    uint16
	Match    uint16
	Root     types.Hash
	Round    uint64
	Openings []Opening
}

// Raw encodes the message.
func (m *MsgOpenCheckpoints) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeOpenCheckpoints, m)
}

// Hashes is the number of sha256 computations verifying m costs at most:
// a leaf, each proof element and the root tag per opening. The fee
// charges it (gas proportional to proof length); the decoder bounds it.
func (m *MsgOpenCheckpoints) Hashes() uint64 {
	var n uint64
	for _, o := range m.Openings {
		n += uint64(len(o.Proof)) + 2
	}
	return n
}

// MaxOpenings bounds the openings of one message: the c−1 interior points
// at the largest arity, plus leaves 0 and N in the first round.
const MaxOpenings = MaxArity - 1 + 2

// DecodeMsgOpenCheckpoints parses a MsgOpenCheckpoints payload and checks
// its shape (the game's state checks are the keeper's).
func DecodeMsgOpenCheckpoints(data []byte) (*MsgOpenCheckpoints, error) {
	var m MsgOpenCheckpoints
	if err := types.DecodeMsgPayload("open checkpoints", data, &m); err != nil {
		return nil, err
	}
	if n := len(m.Openings); n == 0 || n > MaxOpenings {
		return nil, types.ErrInvalidMsg.Wrapf("open checkpoints: %d openings: a round opens 1 to %d checkpoints (Game.Points)", n, MaxOpenings)
	}
	if m.Round == 0 {
		return nil, types.ErrInvalidMsg.Wrapf("open checkpoints: round 0: rounds are numbered from 1")
	}
	for i, o := range m.Openings {
		if len(o.Proof) > MaxProofLen {
			return nil, types.ErrInvalidMsg.Wrapf("open checkpoints: opening %d has a proof of %d hashes, at most %d", i, len(o.Proof), MaxProofLen)
		}
		if i > 0 && o.Step <= m.Openings[i-1].Step {
			return nil, types.ErrInvalidMsg.Wrapf("open checkpoints: opening %d is step %d after step %d: give the steps in increasing order", i, o.Step, m.Openings[i-1].Step)
		}
	}
	return &m, nil
}
