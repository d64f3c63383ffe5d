package console

import (
	"encoding/json"
	"fmt"

	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

var msgNames = map[types.MsgType]string{
	types.MsgTypeSend: "send", types.MsgTypeCreateValidator: "create-validator", types.MsgTypeUnjailValidator: "unjail-validator",
	types.MsgTypeBond: "bond", types.MsgTypeUnbond: "unbond", types.MsgTypeRegisterProvider: "register-provider",
	types.MsgTypeUpdateProvider: "update-provider", types.MsgTypeUnjailProvider: "unjail-provider", types.MsgTypePostJob: "post-job",
	types.MsgTypeCancelJob: "cancel-job", types.MsgTypeCommitBid: "commit-bid", types.MsgTypeRevealBid: "reveal-bid",
	types.MsgTypeClaimTask: "claim-task", types.MsgTypeCommitResult: "commit-result", types.MsgTypeRevealResult: "reveal-result",
	types.MsgTypeVoteDispute: "vote-dispute", types.MsgTypeRevealCanary: "reveal-canary", types.MsgTypeCommitVote: "commit-vote",
	types.MsgTypeReportInput: "report-input", types.MsgTypeRevealTranscript: "reveal-transcript", types.MsgTypeProveHandoff: "prove-handoff",
	types.MsgTypeReplaceStage: "replace-stage", types.MsgTypeSetBridgeKey: "set-bridge-key", types.MsgTypeBridgeWithdraw: "bridge-withdraw",
	types.MsgTypeRedeemVoucher: "redeem-voucher", types.MsgTypeCloseSession: "close-session", types.MsgTypeDisputeSession: "dispute-session",
	types.MsgTypeSealSessionVote: "seal-session-vote", types.MsgTypeOpenSessionVote: "open-session-vote",
	types.MsgTypeOpenCheckpoints: "open-checkpoints", types.MsgTypeSealGameVote: "seal-game-vote", types.MsgTypeOpenGameVote: "open-game-vote",
	types.MsgTypeRevealFinetune: "reveal-finetune",
}

// MsgName is a message type's name ("post-job"), or "type N" if unknown.
func MsgName(t types.MsgType) string {
	if n, ok := msgNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type %d", t)
}

// msgShapes are the messages whose fields the explorer shows.
var msgShapes = map[types.MsgType]func() any{
	types.MsgTypeSend:             func() any { return new(escrow.MsgSend) },
	types.MsgTypeBond:             func() any { return new(escrow.MsgBond) },
	types.MsgTypeUnbond:           func() any { return new(escrow.MsgUnbond) },
	types.MsgTypeRegisterProvider: func() any { return new(market.MsgRegisterProvider) },
	types.MsgTypeUpdateProvider:   func() any { return new(market.MsgUpdateProvider) },
	types.MsgTypePostJob:          func() any { return new(market.MsgPostJob) },
	types.MsgTypeCancelJob:        func() any { return new(market.MsgCancelJob) },
	types.MsgTypeCommitBid:        func() any { return new(market.MsgCommitBid) },
	types.MsgTypeRevealBid:        func() any { return new(market.MsgRevealBid) },
	types.MsgTypeClaimTask:        func() any { return new(market.MsgClaimTask) },
}

// maxMsgShown bounds a message's shown text.
const maxMsgShown = 4096

// decodeMsg is a message's fields as JSON, or its size when the explorer
// does not decode that type.
func decodeMsg(m types.RawMsg) string {
	mk, ok := msgShapes[m.Type]
	if !ok {
		return fmt.Sprintf("%d bytes", len(m.Data))
	}
	v := mk()
	if err := rlp.DecodeBytes(m.Data, v); err != nil {
		return fmt.Sprintf("%d bytes (does not decode: %v)", len(m.Data), err)
	}
	bz, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%d bytes", len(m.Data))
	}
	if len(bz) > maxMsgShown {
		return string(bz[:maxMsgShown]) + "…"
	}
	return string(bz)
}
