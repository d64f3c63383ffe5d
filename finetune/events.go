package finetune

import (
	"github.com/ogpu-network/ogpu/types"
)

// Typed game events; decode with types.DecodeEvent.

// EventGameOpened: the market opened a game between groups of slots of
// one job stage whose committed roots differ. Roots lists the groups'
// roots (hex, comma list) in group order.
type EventGameOpened struct {
	Job      uint64   `event:"job,index"`
	Stage    uint16   `event:"stage"`
	Match    uint16   `event:"match"`
	Steps    uint64   `event:"steps"`
	Arity    uint64   `event:"arity"`
	Roots    []string `event:"roots"`
	Deadline uint64   `event:"deadline"`
}

func (EventGameOpened) EventType() string { return "finetune_game_opened" }

// EventCheckpointsOpened: a group's openings for a round verified; From
// sent them (the group's provider or a relayer).
type EventCheckpointsOpened struct {
	Job   uint64        `event:"job,index"`
	Stage uint16        `event:"stage"`
	Match uint16        `event:"match"`
	Round uint64        `event:"round"`
	Root  types.Hash    `event:"root"`
	From  types.Address `event:"from"`
	Steps []string      `event:"steps"`
}

func (EventCheckpointsOpened) EventType() string { return "finetune_checkpoints_opened" }

// EventGameNarrowed: every group opened the round's points; the disputed
// interval is now (Lo, Hi), the next round's openings are due by Deadline.
type EventGameNarrowed struct {
	Job      uint64     `event:"job,index"`
	Stage    uint16     `event:"stage"`
	Match    uint16     `event:"match"`
	Round    uint64     `event:"round"`
	Lo       uint64     `event:"lo"`
	Hi       uint64     `event:"hi"`
	HLo      types.Hash `event:"h_lo"`
	Deadline uint64     `event:"deadline"`
}

func (EventGameNarrowed) EventType() string { return "finetune_game_narrowed" }

// EventGameTimeout: the round's deadline passed; the groups in Silent
// (roots, comma list) did not open and lose (silence costs as much as
// losing, T6).
type EventGameTimeout struct {
	Job    uint64   `event:"job,index"`
	Stage  uint16   `event:"stage"`
	Match  uint16   `event:"match"`
	Round  uint64   `event:"round"`
	Silent []string `event:"silent"`
}

func (EventGameTimeout) EventType() string { return "finetune_game_timeout" }

// EventGameEnded: the interval is one step: validators re-execute step
// Step from the agreed checkpoint HLo (after step Step−1) and their
// verdict is due by Deadline.
type EventGameEnded struct {
	Job      uint64     `event:"job,index"`
	Stage    uint16     `event:"stage"`
	Match    uint16     `event:"match"`
	Step     uint64     `event:"step"`
	HLo      types.Hash `event:"h_lo"`
	Rounds   uint64     `event:"rounds"`
	Deadline uint64     `event:"deadline"`
}

func (EventGameEnded) EventType() string { return "finetune_game_ended" }

// EventGameDecided: how a game ended. Outcome is timeout, verdict or
// class_failure; Losers are the slots to slash (comma list of addresses).
type EventGameDecided struct {
	Job     uint64   `event:"job,index"`
	Stage   uint16   `event:"stage"`
	Match   uint16   `event:"match"`
	Outcome string   `event:"outcome"`
	Losers  []string `event:"losers"`
}

func (EventGameDecided) EventType() string { return "finetune_game_decided" }

// EventBracketDone: no game of the stage is left. Survivors are the roots
// of the groups no game convicted (one claim, or none); ClassFailure: a
// game ended in a class failure and stopped the bracket.
type EventBracketDone struct {
	Job          uint64   `event:"job,index"`
	Stage        uint16   `event:"stage"`
	Rounds       uint64   `event:"rounds"`
	Survivors    []string `event:"survivors"`
	ClassFailure bool     `event:"class_failure"`
}

func (EventBracketDone) EventType() string { return "finetune_bracket_done" }
